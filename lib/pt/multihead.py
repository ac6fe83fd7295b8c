"""Multi-head attention on torch tensors: the contract of :mod:`lib.multihead`, plus an ``nn.Module``.

The pure function :func:`multi_head_attention` has the NumPy reference's signature and weights in the
row-vector convention ``y = x @ W + b``. :class:`MultiHeadAttention` is a thin module around it whose
``nn.Linear`` layers store the transpose, ``(out, in)``; it builds the row-vector weights as views
(``linear.weight.T``) and calls the same function, so there is one implementation of eq. mha and it calls
:func:`lib.pt.attention.attention` (no second attention implementation).

Both take an optional additive ``bias`` on the scaled logits, per head, for positions that enter as biases
rather than as vectors (ALiBi, :func:`lib.pt.positional.alibi_bias`), as the NumPy reference does. The bias
lives in :func:`lib.pt.attention.attention` (twin of :func:`lib.attention.attention`), which adds it between
the scaling and the masked softmax; with ``bias=None`` nothing is added, and a zero bias gives the same bits.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..flops import matmul_flops, multi_head_flops
from ..multihead import (  # check_params reads only .ndim and .shape, so it serves tensors too
    MultiHeadParams,
    check_head_config,
    check_params,
    param_count,
)
from ._validate import as_float_tensor, check_bias, check_finite, check_int, check_mask_shape, check_mha_inputs
from .attention import attention

__all__ = [
    "MultiHeadAttention",
    "MultiHeadParams",
    "check_head_config",
    "check_params",
    "split_heads",
    "merge_heads",
    "repeat_kv",
    "multi_head_attention",
    "params_from_torch",
    "load_from_torch_mha",
    "param_count",
    "matmul_flops",
    "multi_head_flops",
]


def split_heads(x: Any, h: int) -> torch.Tensor:
    """``(..., n, h*d) -> (..., h, n, d)``; see :func:`lib.multihead.split_heads`."""
    x = as_float_tensor(x, "x")
    h = check_int(h, "h")
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., n, width), got shape {tuple(x.shape)}")
    *lead, n, width = x.shape
    if width % h:
        raise ValueError(
            f"x has width {width}, which is not divisible by h={h} heads (x.shape={tuple(x.shape)})"
        )
    return x.reshape(*lead, n, h, width // h).transpose(-3, -2)  # (..., h, n, d)


def merge_heads(x: Any) -> torch.Tensor:
    """``(..., h, n, d) -> (..., n, h*d)``; see :func:`lib.multihead.merge_heads`."""
    x = as_float_tensor(x, "x")
    if x.ndim < 3:
        raise ValueError(f"x must have at least 3 dimensions (..., h, n, d), got shape {tuple(x.shape)}")
    *lead, h, n, d = x.shape
    return x.transpose(-3, -2).reshape(*lead, n, h * d)  # (..., n, h*d)


def repeat_kv(x: Any, n_rep: int) -> torch.Tensor:
    """``(..., h_kv, n, d) -> (..., h_kv*n_rep, n, d)``; see :func:`lib.multihead.repeat_kv`."""
    x = as_float_tensor(x, "x")
    n_rep = check_int(n_rep, "n_rep")
    if x.ndim < 3:
        raise ValueError(f"x must have at least 3 dimensions (..., h_kv, n, d), got shape {tuple(x.shape)}")
    return x if n_rep == 1 else torch.repeat_interleave(x, n_rep, dim=-3)


def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return x @ w if b is None else x @ w + b


def multi_head_attention(
    x_q: Any, x_kv: Any | None, params: MultiHeadParams, n_heads: int, mask: Any | None = None,
    bias: Any | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head (or grouped-query) attention, eq. mha; see :func:`lib.multihead.multi_head_attention`.

    ``x_q (..., n_q, d_model)``, ``x_kv (..., n_k, d_model)`` or ``None``; ``mask`` boolean, broadcastable to
    ``(..., h, n_q, n_k)``, True = may attend. Returns ``out (..., n_q, d_model)`` and
    ``weights (..., h, n_q, n_k)``. ``bias``: a finite floating tensor of ``x_q``'s dtype and device added to
    every head's scaled logits before the softmax, broadcastable to ``(..., h, n_q, n_k)``, e.g. ALiBi's
    ``(h, n_q, n_k)``; passed to :func:`lib.pt.attention.attention`.
    """
    x_q = as_float_tensor(x_q, "x_q")
    x_kv = x_q if x_kv is None else as_float_tensor(x_kv, "x_kv")
    lead = check_mha_inputs(x_q, x_kv)
    for name, x in (("x_q", x_q), ("x_kv", x_kv)):
        check_finite(x, name)
    d_k, h, h_kv = check_params(params, x_q.shape[-1], n_heads)
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a torch.Tensor of dtype bool, got {type(mask).__name__}")
        check_mask_shape(mask, (*lead, h, x_q.shape[-2], x_kv.shape[-2]))
    if bias is not None:
        check_bias(bias, (*lead, h, x_q.shape[-2], x_kv.shape[-2]), x_q, "x_q", "(..., h, n_q, n_k)")
    q = split_heads(_linear(x_q, params.w_q, params.b_q), h)  # (..., h, n_q, d_k)
    k = split_heads(_linear(x_kv, params.w_k, params.b_k), h_kv)  # (..., h_kv, n_k, d_k)
    v = split_heads(_linear(x_kv, params.w_v, params.b_v), h_kv)  # (..., h_kv, n_k, d_v)
    k, v = repeat_kv(k, h // h_kv), repeat_kv(v, h // h_kv)  # (..., h, n_k, d_k), (..., h, n_k, d_v)
    o, a = attention(q, k, v, mask, bias=bias)  # (..., h, n_q, d_v), (..., h, n_q, n_k)
    return _linear(merge_heads(o), params.w_o, params.b_o), a  # (..., n_q, d_model), (..., h, n_q, n_k)


def params_from_torch(w_q: nn.Linear, w_k: nn.Linear, w_v: nn.Linear, w_o: nn.Linear) -> MultiHeadParams:
    """Row-vector weights from four ``nn.Linear`` layers (which store ``(out, in)``): ``W = linear.weight.T``.

    The result holds views, so gradients flow back into the layers.
    """
    lin = (w_q, w_k, w_v, w_o)
    return MultiHeadParams(*(m.weight.T for m in lin), *(m.bias for m in lin))


class MultiHeadAttention(nn.Module):
    """Multi-head attention (eq. mha) as an ``nn.Module``; grouped-query attention when
    ``n_kv_heads < n_heads``.

    Args:
        d_model: model width; must be divisible by ``n_heads``.
        n_heads: number of query heads ``h``; each has width ``d_k = d_model / h``.
        bias: whether the four projections have biases.
        n_kv_heads: number of key/value heads ``h_kv`` (default ``h``); must divide ``n_heads``.

    ``forward(x_q, x_kv=None, mask=None, bias=None) -> (out, weights)`` with ``x_q (B, n_q, d_model)``,
    ``x_kv (B, n_k, d_model)`` (default ``x_q``: self-attention), ``mask`` boolean broadcastable to
    ``(B, h, n_q, n_k)`` (True = may attend), ``bias`` a float tensor broadcastable to ``(B, h, n_q, n_k)`` added
    to the scaled logits (e.g. ALiBi), ``out (B, n_q, d_model)``, ``weights (B, h, n_q, n_k)``.
    No dropout: the book's chapters add it where they need it.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        bias: bool = True,
        n_kv_heads: int | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        d_k, h, h_kv = check_head_config(d_model, n_heads, n_kv_heads)
        self.d_model, self.n_heads, self.n_kv_heads, self.d_k = d_model, h, h_kv, d_k
        kw = {"bias": bias, "device": device, "dtype": dtype}
        self.w_q = nn.Linear(d_model, h * d_k, **kw)
        self.w_k = nn.Linear(d_model, h_kv * d_k, **kw)
        self.w_v = nn.Linear(d_model, h_kv * d_k, **kw)
        self.w_o = nn.Linear(h * d_k, d_model, **kw)

    def params(self) -> MultiHeadParams:
        """The layer's weights in the row-vector convention (views of the ``nn.Linear`` weights)."""
        return params_from_torch(self.w_q, self.w_k, self.w_v, self.w_o)

    def forward(
        self, x_q: torch.Tensor, x_kv: torch.Tensor | None = None, mask: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return multi_head_attention(x_q, x_kv, self.params(), self.n_heads, mask, bias)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, d_k={self.d_k}"


@torch.no_grad()
def load_from_torch_mha(module: MultiHeadAttention, mha: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy the weights of a ``torch.nn.MultiheadAttention`` into ``module`` (in place) and return it.

    torch packs ``W_Q, W_K, W_V`` as the rows of ``in_proj_weight (3 d_model, d_model)``, each in the
    ``(out, in)`` layout of ``nn.Linear``, and the output projection as ``out_proj``. Only the plain layout
    (same ``embed_dim`` for queries, keys and values, no ``bias_k``/``bias_v``) is supported.
    """
    d = module.d_model
    if mha.embed_dim != d or mha.num_heads != module.n_heads or module.n_kv_heads != module.n_heads:
        raise ValueError(
            f"cannot load nn.MultiheadAttention(embed_dim={mha.embed_dim}, num_heads={mha.num_heads})"
            f" into MultiHeadAttention({module.extra_repr()})"
        )
    if not mha._qkv_same_embed_dim or mha.bias_k is not None:
        raise ValueError(
            "only nn.MultiheadAttention with kdim = vdim = embed_dim and add_bias_kv=False is supported"
        )
    has_bias = mha.in_proj_bias is not None
    if has_bias != (module.w_q.bias is not None):
        raise ValueError(
            f"bias mismatch: nn.MultiheadAttention has bias={has_bias}, module has"
            f" bias={module.w_q.bias is not None}"
        )
    for i, lin in enumerate((module.w_q, module.w_k, module.w_v)):
        lin.weight.copy_(mha.in_proj_weight[i * d : (i + 1) * d])
        if has_bias:
            lin.bias.copy_(mha.in_proj_bias[i * d : (i + 1) * d])
    module.w_o.weight.copy_(mha.out_proj.weight)
    if has_bias:
        module.w_o.bias.copy_(mha.out_proj.bias)
    return module
