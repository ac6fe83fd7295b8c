r"""Layer normalisation, forward and backward: the NumPy reference.

Shapes: ``x`` is ``(..., d)`` (for a Transformer, ``(B, n, d_model)``); the statistics are taken over the
last axis only, one mean and one variance per token. ``gamma`` and ``beta`` are ``(d,)``.

Forward (Ba et al. 2016; the Transformer's ``LayerNorm``). The book uses one convention everywhere: the
**biased** variance (divide by ``d``) and ``eps`` added to the variance **inside** the square root, as
``torch.nn.LayerNorm`` does:

.. math::
    \mu = \tfrac1d \textstyle\sum_j x_j, \qquad
    \sigma^2 = \tfrac1d \textstyle\sum_j (x_j - \mu)^2, \qquad
    r = \frac{1}{\sqrt{\sigma^2 + \varepsilon}}, \qquad
    \hat x = (x - \mu)\,r, \qquad
    y = \gamma \odot \hat x + \beta
    \qquad\text{(eq. layernorm)}

Backward, for an upstream gradient :math:`dy = \partial L/\partial y` and :math:`g = \gamma \odot dy`:

.. math::
    d\gamma = \textstyle\sum_{\text{tokens}} dy \odot \hat x, \qquad
    d\beta = \textstyle\sum_{\text{tokens}} dy, \qquad
    dx = r\,\big(g - \overline{g} - \hat x\,\overline{g \odot \hat x}\big)
    \qquad\text{(eq. layernorm-backward)}

where the bar is the mean over the ``d`` features of one token. Numerical notes: a constant row has
``sigma^2 = 0``, so ``x_hat = 0`` and ``r = 1/sqrt(eps)``; ``eps`` must be positive for that row to be
finite. Non-finite inputs are refused (a single ``inf`` would make the whole row NaN). float16 input is
normalised with float32 statistics and the result cast back, in the forward and in the backward pass
(``torch.nn.LayerNorm`` does the same): in float16 the squares of activations above 256 overflow
(:math:`256^2 = 65536 > 65504`), the variance becomes ``inf`` and every output of the row silently becomes
``beta``; in the backward pass of activations near 1000 the mean keeps no digit of their spread and every
gradient comes back as an exact zero.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._validate import as_float_array, check_finite, check_int, check_real

__all__ = [
    "layer_norm",
    "layer_norm_backward",
    "layer_norm_steps",
    "LayerNormSteps",
    "DEFAULT_EPS",
    "check_eps",
    "layer_norm_param_count",
]

#: The default ``eps`` (that of ``torch.nn.LayerNorm`` and of most Transformer code).
DEFAULT_EPS = 1e-5


class LayerNormSteps(NamedTuple):
    """The intermediates of eq. layernorm, named as there (each keeps the token axes of ``x``)."""

    mu: np.ndarray  #: mean over features (..., 1)
    var: np.ndarray  #: biased variance over features (..., 1)
    rstd: np.ndarray  #: r = 1 / sqrt(var + eps) (..., 1)
    x_hat: np.ndarray  #: (x - mu) * r (..., d)
    y: np.ndarray  #: gamma * x_hat + beta (..., d)


def check_eps(eps: Any) -> float:
    """``eps`` must be a positive finite real (it keeps a constant row finite); shared with :mod:`lib.pt.norms`."""
    return check_real(eps, "eps", above=0, why=" (it is added to the variance)")


def _check_x(x: Any, name: str = "x") -> np.ndarray:
    x = as_float_array(x, name)
    if x.ndim == 0:
        raise ValueError(f"{name} must have at least 1 dimension (..., d) to normalise over, got a scalar")
    if x.shape[-1] == 0:
        raise ValueError(
            f"{name} has no features to normalise over (last axis has size 0, {name}.shape={x.shape})"
        )
    check_finite(x, name, why="; its row would normalise to NaN")
    return x


def _check_param(p: Any, name: str, d: int, dtype: np.dtype, fill: float) -> np.ndarray:
    if p is None:
        return np.full(d, fill, dtype=dtype)
    p = as_float_array(p, name)
    if p.shape != (d,):
        raise ValueError(f"{name} must have shape (d,) = ({d},) to match x's last axis, got {p.shape}")
    return p


def layer_norm_steps(
    x: Any, gamma: Any | None = None, beta: Any | None = None, eps: float = DEFAULT_EPS
) -> LayerNormSteps:
    """Forward pass of eq. layernorm, returning every intermediate (for the chapter's worked example)."""
    check_eps(eps)
    x = _check_x(x)
    d = x.shape[-1]
    gamma = _check_param(gamma, "gamma", d, x.dtype, 1.0)
    beta = _check_param(beta, "beta", d, x.dtype, 0.0)
    out_dtype = x.dtype
    x = x.astype(np.promote_types(x.dtype, np.float32), copy=False)  # float16: statistics in float32
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    xc = x - mu  # (..., d)
    var = (xc * xc).mean(axis=-1, keepdims=True)  # (..., 1), biased: divide by d
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))  # (..., 1); eps inside the square root
    x_hat = xc * rstd  # (..., d)
    y = gamma * x_hat + beta  # (..., d)
    return LayerNormSteps(mu=mu, var=var, rstd=rstd, x_hat=x_hat, y=y.astype(out_dtype, copy=False))


def layer_norm(
    x: Any, gamma: Any | None = None, beta: Any | None = None, eps: float = DEFAULT_EPS
) -> np.ndarray:
    r"""Layer normalisation over the last axis (eq. layernorm); returns ``y`` with ``x``'s shape.

    Args:
        x: floating array ``(..., d)``, every entry finite.
        gamma: scale ``(d,)``; default ones. beta: shift ``(d,)``; default zeros.
        eps: positive, added to the biased variance inside the square root (``torch.nn.LayerNorm``'s
            convention; adding it to the standard deviation instead is a different function).
    """
    return layer_norm_steps(x, gamma, beta, eps).y


def layer_norm_backward(
    x: Any, dy: Any, gamma: Any | None = None, eps: float = DEFAULT_EPS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Gradients ``(dx, dgamma, dbeta)`` of a loss given ``dy = dL/dy`` (eq. layernorm-backward).

    ``dx`` has ``x``'s shape; ``dgamma`` and ``dbeta`` are ``(d,)``, summed over every token (all leading
    axes). ``beta`` does not enter the backward pass. Recomputes the forward statistics.
    """
    st = layer_norm_steps(x, gamma, None, eps)
    x = np.asarray(x)
    dy = as_float_array(dy, "dy")
    if dy.shape != x.shape:
        raise ValueError(f"dy must have x's shape {x.shape}, got {dy.shape}")
    d = x.shape[-1]
    gamma = _check_param(gamma, "gamma", d, x.dtype, 1.0)
    lead = tuple(range(x.ndim - 1))
    work = st.x_hat.dtype  # float32 for float16 input, as in the forward
    dy_w, gamma_w = dy.astype(work, copy=False), gamma.astype(work, copy=False)
    dgamma = (dy_w * st.x_hat).sum(axis=lead)  # (d,)
    dbeta = dy_w.sum(axis=lead)  # (d,)
    g = dy_w * gamma_w  # (..., d): gradient w.r.t. x_hat
    g_mean = g.mean(axis=-1, keepdims=True)  # (..., 1)
    gx_mean = (g * st.x_hat).mean(axis=-1, keepdims=True)  # (..., 1)
    dx = st.rstd * (g - g_mean - st.x_hat * gx_mean)  # (..., d)
    return tuple(t.astype(x.dtype, copy=False) for t in (dx, dgamma, dbeta))  # type: ignore[return-value]


def layer_norm_param_count(d_model: int) -> int:
    """A LayerNorm has a scale and a shift per feature: ``2 d_model`` parameters (``gamma`` and ``beta``)."""
    return 2 * check_int(d_model, "d_model")
