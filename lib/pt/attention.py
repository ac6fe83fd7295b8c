"""Scaled dot-product attention on torch tensors: the contract of :mod:`lib.attention`.

Same names, signatures, shapes, mask convention and fully-masked-row behaviour as the NumPy reference;
runs on the inputs' device and is differentiable by autograd, which the tests use as the oracle for
:func:`attention_backward`. The optional additive ``bias`` on the scaled logits (ALiBi,
:func:`lib.pt.positional.alibi_bias`) is that of :func:`lib.attention.attention`: a finite floating tensor of
``q``'s dtype and device, broadcastable to ``(..., n_q, n_k)``, added before the masked softmax; ``bias=None``
adds nothing, and it is differentiable (a learned bias gets its gradient from autograd).
"""

from __future__ import annotations

from typing import Any

import torch

from ..attention import default_scale
from ._validate import (
    as_float_tensor,
    check_attention_bias,
    check_attention_inputs,
    check_attention_shapes,
    check_int,
    dtype_name,
    reduce_to,
)
from .softmax import masked_softmax, softmax_vjp

__all__ = ["attention", "attention_backward", "causal_mask", "padding_mask", "default_scale"]


def attention(
    q: Any, k: Any, v: Any, mask: Any | None = None, scale: float | None = None, bias: Any | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention; returns ``(o, a)``. See :func:`lib.attention.attention`.

    ``bias``: optional finite floating tensor of ``q``'s dtype and device, broadcastable to ``(..., n_q, n_k)``,
    added to the scaled logits before the masked softmax.
    """
    q, k, v, mask = check_attention_inputs(q, k, v, mask)
    if bias is not None:
        bias = check_attention_bias(bias, q, k, v)
    s = default_scale(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-1, -2)) * s  # (..., n_q, n_k)
    if bias is not None:
        scores = scores + bias  # S' = s S + B
    a = masked_softmax(scores, mask, axis=-1)  # (..., n_q, n_k)
    return a @ v, a  # (..., n_q, d_v), (..., n_q, n_k)


@torch.no_grad()
def attention_backward(
    q: Any, k: Any, v: Any, d_out: Any, mask: Any | None = None, scale: float | None = None,
    bias: Any | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Closed-form gradients ``(dq, dk, dv)``; see :func:`lib.attention.attention_backward`."""
    q, k, v, mask = check_attention_inputs(q, k, v, mask)
    if bias is not None:
        bias = check_attention_bias(bias, q, k, v)
    d_out = as_float_tensor(d_out, "d_out")
    check_attention_shapes(q, k, v, grad=d_out)
    sc = default_scale(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-1, -2)) * sc
    if bias is not None:
        scores = scores + bias
    a = masked_softmax(scores, mask, axis=-1)
    da = d_out @ v.transpose(-1, -2)  # (..., n_q, n_k)
    dv = a.transpose(-1, -2) @ d_out  # (..., n_k, d_v)
    ds = softmax_vjp(a, da, axis=-1) * sc  # (..., n_q, n_k), gradient of the raw logits Q Kᵀ
    dq = ds @ k  # (..., n_q, d_k)
    dk = ds.transpose(-1, -2) @ q  # (..., n_k, d_k)
    return reduce_to(dq, q.shape), reduce_to(dk, k.shape), reduce_to(dv, v.shape)


def causal_mask(n_q: int, n_k: int | None = None, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean ``(n_q, n_k)`` causal mask on ``device``; see :func:`lib.attention.causal_mask`."""
    from ..attention import causal_mask as np_causal_mask

    return torch.from_numpy(np_causal_mask(n_q, n_k)).to(device)


def padding_mask(lengths: Any, n: int) -> torch.Tensor:
    """Key-padding mask ``(batch, 1, n)`` on ``lengths``' device; see :func:`lib.attention.padding_mask`."""
    if not isinstance(lengths, torch.Tensor):
        lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise TypeError(
            f"lengths must be a 1-D array of ints, got dtype {dtype_name(lengths.dtype)}"
            f" and shape {tuple(lengths.shape)}"
        )
    n = check_int(n, "n", minimum=0)
    if bool((lengths < 0).any()) or bool((lengths > n).any()):
        raise ValueError(f"every length must lie in [0, n={n}], got {lengths.tolist()}")
    return (torch.arange(n, device=lengths.device)[None, :] < lengths[:, None])[:, None, :]
