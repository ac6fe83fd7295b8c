r"""Layer normalisation on torch tensors: the contract of :mod:`lib.norms`.

Same formula and convention (biased variance, ``eps`` inside the square root, eq. layernorm), same names
and argument checks; differentiable by autograd, which the tests use as the oracle for
:func:`layer_norm_backward`, and checked against ``torch.nn.LayerNorm``. :class:`LayerNorm` is a thin
``nn.Module`` wrapper holding ``weight`` (gamma) and ``bias`` (beta), named as in ``torch.nn.LayerNorm`` so
state dicts are interchangeable.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..norms import DEFAULT_EPS, check_eps
from ._validate import as_float_tensor, check_finite, check_int

__all__ = ["layer_norm", "layer_norm_backward", "LayerNorm", "DEFAULT_EPS"]


def _check_x(x: Any, name: str = "x") -> torch.Tensor:
    x = as_float_tensor(x, name)
    if x.ndim == 0:
        raise ValueError(f"{name} must have at least 1 dimension (..., d) to normalise over, got a scalar")
    if x.shape[-1] == 0:
        raise ValueError(
            f"{name} has no features to normalise over (last axis has size 0, {name}.shape={tuple(x.shape)})"
        )
    check_finite(x, name, why="; its row would normalise to NaN")
    return x


def _work_dtype(x: torch.Tensor) -> torch.dtype:
    """float32 for float16/bfloat16 input (as ``torch.nn.LayerNorm`` computes its statistics), else x's dtype.

    In float16 the squares of centred activations above 256 overflow (256² > 65504) and a mean of
    activations near 1000 keeps no digit of their spread, so both passes upcast."""
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype


def _check_param(p: Any, name: str, d: int) -> torch.Tensor | None:
    if p is None:
        return None
    p = as_float_tensor(p, name)
    if tuple(p.shape) != (d,):
        raise ValueError(f"{name} must have shape (d,) = ({d},) to match x's last axis, got {tuple(p.shape)}")
    return p


def layer_norm(
    x: Any, gamma: Any | None = None, beta: Any | None = None, eps: float = DEFAULT_EPS
) -> torch.Tensor:
    """Layer normalisation over the last axis (eq. layernorm); see :func:`lib.norms.layer_norm`."""
    check_eps(eps)
    x = _check_x(x)
    d = x.shape[-1]
    gamma, beta = _check_param(gamma, "gamma", d), _check_param(beta, "beta", d)
    out_dtype = x.dtype
    x = x.to(_work_dtype(x))  # statistics in float32 for float16/bfloat16 input
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1)
    xc = x - mu  # (..., d)
    var = (xc * xc).mean(dim=-1, keepdim=True)  # (..., 1), biased
    y = (xc * torch.rsqrt(var + eps)).to(out_dtype)  # (..., d): x_hat, eps inside the square root
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


@torch.no_grad()
def layer_norm_backward(
    x: Any, dy: Any, gamma: Any | None = None, eps: float = DEFAULT_EPS
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Closed-form ``(dx, dgamma, dbeta)`` (eq. layernorm-backward); see
    :func:`lib.norms.layer_norm_backward`."""
    check_eps(eps)
    x = _check_x(x)
    dy = as_float_tensor(dy, "dy")
    if dy.shape != x.shape:
        raise ValueError(f"dy must have x's shape {tuple(x.shape)}, got {tuple(dy.shape)}")
    d = x.shape[-1]
    gamma = _check_param(gamma, "gamma", d)
    out_dtype, work = x.dtype, _work_dtype(x)
    x, dy = x.to(work), dy.to(work)  # the forward's statistics, in the forward's precision
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1)
    xc = x - mu  # (..., d)
    rstd = torch.rsqrt((xc * xc).mean(dim=-1, keepdim=True) + eps)  # (..., 1)
    x_hat = xc * rstd  # (..., d)
    lead = tuple(range(x.ndim - 1))
    dgamma = (dy * x_hat).sum(dim=lead) if lead else dy * x_hat  # (d,)
    dbeta = dy.sum(dim=lead) if lead else dy.clone()  # (d,)
    g = dy if gamma is None else dy * gamma.to(work)  # (..., d): gradient w.r.t. x_hat
    dx = rstd * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    return dx.to(out_dtype), dgamma.to(out_dtype), dbeta.to(out_dtype)


class LayerNorm(nn.Module):
    """``nn.Module`` wrapper of :func:`layer_norm`: learned ``weight`` (gamma, ones), ``bias`` (beta, zeros).

    ``d`` parameters each, ``2 d`` in all; parameter names and initial values as in ``torch.nn.LayerNorm``.
    """

    def __init__(
        self, d: int, eps: float = DEFAULT_EPS, *, device: Any = None, dtype: torch.dtype | None = None
    ):
        super().__init__()
        d = check_int(d, "d")
        check_eps(eps)
        self.d, self.eps = d, eps
        self.weight = nn.Parameter(torch.ones(d, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(d, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1:] != (self.d,):
            raise ValueError(f"x must have width d={self.d} in its last axis, got shape {tuple(x.shape)}")
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}"
