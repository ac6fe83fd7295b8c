r"""Multi-head attention: the NumPy reference.

Shapes (named once, used everywhere; see the Notation chapter):

* ``x_q``: ``(..., n_q, d_model)`` (the queries' inputs), ``x_kv``: ``(..., n_k, d_model)`` (the keys' and
  values' inputs; ``x_kv = x_q`` for self-attention). The leading ``...`` is the batch ``B`` (or nothing).
* ``h = n_heads`` query heads of width ``d_k = d_v = d_model / h``; ``h_kv = n_kv_heads`` key/value heads
  (``h_kv = h``: multi-head attention; ``h_kv = 1``: multi-query; in between: grouped-query attention).
* Weights in the book's row-vector convention ``y = x @ W + b``: ``w_q, w_k (d_model, h d_k)`` and
  ``(d_model, h_kv d_k)``, ``w_v (d_model, h_kv d_v)``, ``w_o (h d_v, d_model)``; :func:`init_params` and the
  modules build ``d_v = d_k``, and the function accepts any ``d_v``.
* ``mask``: boolean, broadcastable to ``(..., h, n_q, n_k)``, True = may attend (:mod:`lib.constants`).
  A key-padding mask from :func:`lib.attention.padding_mask` has shape ``(B, 1, n_k)``: give it a head
  axis first, ``padding_mask(lengths, n)[:, None]`` -> ``(B, 1, 1, n_k)``.
* ``bias`` (optional): a finite floating array of ``x_q``'s dtype, broadcastable to ``(..., h, n_q, n_k)``,
  added to every head's scaled logits before the masked softmax (positions as biases, e.g. ALiBi's
  ``(h, n_q, n_k)`` from :func:`lib.position_bias.alibi_bias`); it is passed to :func:`lib.attention.attention`,
  the one home of the bias. :func:`lib.pt.multihead.multi_head_attention` is its torch twin.

Forward (Vaswani et al. 2017, sec. 3.2.2):

.. math::
    Q = X_q W_Q + b_Q,\quad K = X_{kv} W_K + b_K,\quad V = X_{kv} W_V + b_V
    \qquad\text{(eq. mha-projections)}

.. math::
    \operatorname{head}_i = \operatorname{Attention}(Q_i, K_{g(i)}, V_{g(i)}),\qquad
    \operatorname{MHA} = \operatorname{Concat}(\operatorname{head}_1,\dots,\operatorname{head}_h)\,W_O + b_O
    \qquad\text{(eq. mha)}

where :math:`Q_i` is the ``i``-th block of ``d_k`` columns of :math:`Q` and :math:`g(i) = \lfloor i\,h_{kv}/h
\rfloor` is the key/value head that query head ``i`` shares (``g(i) = i`` when ``h_kv = h``).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ._validate import (
    as_float_array,
    check_bias,
    check_finite,
    check_heads,
    check_int,
    check_mask_shape,
    check_mha_inputs,
)
from .attention import attention
from .flops import matmul_flops, multi_head_flops  # re-exported: their home is lib.flops

__all__ = [
    "MultiHeadParams",
    "check_head_config",
    "check_params",
    "init_params",
    "split_heads",
    "merge_heads",
    "repeat_kv",
    "multi_head_attention",
    "param_count",
    "matmul_flops",
    "multi_head_flops",
]


class MultiHeadParams(NamedTuple):
    """The weights of one multi-head attention layer, in the row-vector convention ``y = x @ W + b``.

    ``w_q (d_model, h d_k)``, ``w_k (d_model, h_kv d_k)``, ``w_v (d_model, h_kv d_v)``,
    ``w_o (h d_v, d_model)``;
    each bias is a vector of its weight's output width, or ``None`` for a layer without biases.
    (``torch.nn.Linear`` stores the transpose, ``(out, in)``: see :func:`lib.pt.multihead.params_from_torch`.)
    """

    w_q: Any
    w_k: Any
    w_v: Any
    w_o: Any
    b_q: Any = None
    b_k: Any = None
    b_v: Any = None
    b_o: Any = None


def check_head_config(d_model: int, n_heads: int, n_kv_heads: int | None = None) -> tuple[int, int, int]:
    """Check a head layout and return ``(d_k, h, h_kv)``.

    ``d_model`` must be divisible by ``n_heads`` (each head gets ``d_k = d_model / h`` columns) and
    ``n_heads`` by ``n_kv_heads`` (each key/value head serves ``h / h_kv`` query heads).
    """
    return check_heads(d_model, n_heads, n_kv_heads)


def init_params(
    d_model: int,
    n_heads: int,
    n_kv_heads: int | None = None,
    bias: bool = True,
    rng: np.random.Generator | None = None,
    dtype: Any = np.float64,
) -> MultiHeadParams:
    r"""Random weights drawn as ``torch.nn.Linear`` draws them:
    :math:`\mathcal U(-1/\sqrt{d_{in}}, 1/\sqrt{d_{in}})`.

    Biases are drawn from the same distribution (``bias=True``) or are ``None``.
    """
    d_k, h, h_kv = check_head_config(d_model, n_heads, n_kv_heads)
    rng = np.random.default_rng(0) if rng is None else rng
    bound = 1.0 / math.sqrt(d_model)

    def u(*shape: int) -> np.ndarray:
        return rng.uniform(-bound, bound, size=shape).astype(dtype)

    shapes = {
        "q": (d_model, h * d_k),
        "k": (d_model, h_kv * d_k),
        "v": (d_model, h_kv * d_k),
        "o": (h * d_k, d_model),
    }
    ws = {name: u(*shape) for name, shape in shapes.items()}
    bs = {name: (u(shape[1]) if bias else None) for name, shape in shapes.items()}
    return MultiHeadParams(ws["q"], ws["k"], ws["v"], ws["o"], bs["q"], bs["k"], bs["v"], bs["o"])


def split_heads(x: Any, h: int) -> np.ndarray:
    """``(..., n, h*d) -> (..., h, n, d)``: column block ``i`` becomes head ``i``.

    The inverse of :func:`merge_heads`. Refuses a width not divisible by ``h``.
    """
    x = as_float_array(x, "x")
    h = check_int(h, "h")
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., n, width), got shape {x.shape}")
    *lead, n, width = x.shape
    if width % h:
        raise ValueError(f"x has width {width}, which is not divisible by h={h} heads (x.shape={x.shape})")
    return np.swapaxes(x.reshape(*lead, n, h, width // h), -3, -2)  # (..., h, n, d)


def merge_heads(x: Any) -> np.ndarray:
    """``(..., h, n, d) -> (..., n, h*d)``: concatenate the heads' outputs along the width (eq. mha)."""
    x = as_float_array(x, "x")
    if x.ndim < 3:
        raise ValueError(f"x must have at least 3 dimensions (..., h, n, d), got shape {x.shape}")
    *lead, h, n, d = x.shape
    return np.swapaxes(x, -3, -2).reshape(*lead, n, h * d)  # (..., n, h*d)


def repeat_kv(x: Any, n_rep: int) -> np.ndarray:
    """``(..., h_kv, n, d) -> (..., h_kv*n_rep, n, d)``: key/value head ``j`` serves query heads
    ``j*n_rep, ..., j*n_rep + n_rep - 1`` (grouped-query attention, Ainslie et al. 2023)."""
    x = as_float_array(x, "x")
    n_rep = check_int(n_rep, "n_rep")
    if x.ndim < 3:
        raise ValueError(f"x must have at least 3 dimensions (..., h_kv, n, d), got shape {x.shape}")
    return x if n_rep == 1 else np.repeat(x, n_rep, axis=-3)


def check_params(params: Any, d_model: int, n_heads: int) -> tuple[int, int, int]:
    """Infer ``(d_k, h, h_kv)`` from the weights' shapes and check them against each other and against the
    inputs' width ``d_model``. Reads only ``.ndim`` and ``.shape``, so it serves torch tensors too.

    The value width may differ from the key width: ``w_v (d_model, h_kv d_v)`` and ``w_o (h d_v, d_model)``
    with any ``d_v >= 1`` (``d_v = d_k`` in every layer the library builds)."""
    if not isinstance(params, MultiHeadParams):
        raise TypeError(f"params must be a MultiHeadParams, got {type(params).__name__}")
    for name in ("w_q", "w_k", "w_v", "w_o"):
        w = getattr(params, name)
        if getattr(w, "ndim", None) != 2:
            raise ValueError(
                f"params.{name} must be a 2-D matrix (d_in, d_out), got shape {getattr(w, 'shape', None)}"
            )
    if params.w_q.shape[0] != d_model:
        raise ValueError(
            f"params.w_q has {params.w_q.shape[0]} input rows but the inputs have width d_model={d_model}"
            f" (w_q.shape={tuple(params.w_q.shape)})"
        )
    for name in ("w_k", "w_v"):
        w = getattr(params, name)
        if w.shape[0] != d_model:
            raise ValueError(
                f"params.{name} has {w.shape[0]} input rows but the inputs have width d_model={d_model}"
                f" ({name}.shape={tuple(w.shape)})"
            )
    h = check_int(n_heads, "n_heads")
    hd = params.w_q.shape[1]
    if hd % h:
        raise ValueError(
            f"params.w_q has {hd} output columns, not divisible by n_heads={h} (w_q.shape={tuple(params.w_q.shape)})"
        )
    d_k = hd // h
    if params.w_k.shape[1] % d_k:
        raise ValueError(
            f"params.w_k has {params.w_k.shape[1]} output columns, not a multiple of the head width"
            f" d_k={d_k} (w_k.shape={tuple(params.w_k.shape)})"
        )
    h_kv = params.w_k.shape[1] // d_k
    check_head_config(hd, h, h_kv)
    if params.w_v.shape[1] % h_kv:
        raise ValueError(
            f"params.w_v has {params.w_v.shape[1]} output columns, not divisible by the h_kv={h_kv} key/value"
            f" heads that w_k implies (w_v.shape={tuple(params.w_v.shape)}, w_k.shape={tuple(params.w_k.shape)})"
        )
    d_v = params.w_v.shape[1] // h_kv
    if params.w_o.shape[0] != h * d_v:
        raise ValueError(
            f"params.w_o must have h*d_v={h * d_v} input rows (h={h}, d_v={d_v} from w_v), got"
            f" w_o.shape={tuple(params.w_o.shape)}"
        )
    for b_name, w_name in (("b_q", "w_q"), ("b_k", "w_k"), ("b_v", "w_v"), ("b_o", "w_o")):
        b, w = getattr(params, b_name), getattr(params, w_name)
        if b is not None and tuple(b.shape) != (w.shape[1],):
            raise ValueError(
                f"params.{b_name} must have shape ({w.shape[1]},) to match {w_name}.shape={tuple(w.shape)},"
                f" got {tuple(b.shape)}"
            )
    return d_k, h, h_kv


def _linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    return x @ w if b is None else x @ w + b


def multi_head_attention(
    x_q: Any, x_kv: Any | None, params: MultiHeadParams, n_heads: int, mask: Any | None = None,
    bias: Any | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head (or grouped-query) attention, eq. mha. Returns ``(out, weights)``.

    Args:
        x_q: ``(..., n_q, d_model)``; x_kv: ``(..., n_k, d_model)`` or ``None`` for self-attention.
        params: :class:`MultiHeadParams`; ``n_kv_heads`` is read off ``w_k``'s width.
        n_heads: the number of query heads ``h``.
        mask: boolean, broadcastable to ``(..., h, n_q, n_k)``, True = may attend.
        bias: optional finite floating array of ``x_q``'s dtype, broadcastable to ``(..., h, n_q, n_k)``, added
            to every head's scaled logits before the softmax (e.g. ALiBi's ``(h, n_q, n_k)``).

    Returns:
        ``out (..., n_q, d_model)`` and the per-head weights ``(..., h, n_q, n_k)``.

    Each head calls :func:`lib.attention.attention` with the scale ``1/sqrt(d_k)`` of its own width (and the
    bias, if any).
    A fully masked query row gives zero weights in every head and an output row equal to ``b_o``.
    A NaN or infinite input is refused with a ``ValueError`` naming the argument and the position.
    """
    x_q = as_float_array(x_q, "x_q")
    x_kv = x_q if x_kv is None else as_float_array(x_kv, "x_kv")
    lead = check_mha_inputs(x_q, x_kv)
    for name, x in (("x_q", x_q), ("x_kv", x_kv)):
        check_finite(x, name)
    d_model = x_q.shape[-1]
    d_k, h, h_kv = check_params(params, d_model, n_heads)
    if mask is not None:
        mask = np.asarray(mask)
        check_mask_shape(mask, (*lead, h, x_q.shape[-2], x_kv.shape[-2]))
    if bias is not None:
        check_bias(bias, (*lead, h, x_q.shape[-2], x_kv.shape[-2]), x_q, "x_q", "(..., h, n_q, n_k)")
    q = split_heads(_linear(x_q, params.w_q, params.b_q), h)  # (..., h, n_q, d_k)
    k = split_heads(_linear(x_kv, params.w_k, params.b_k), h_kv)  # (..., h_kv, n_k, d_k)
    v = split_heads(_linear(x_kv, params.w_v, params.b_v), h_kv)  # (..., h_kv, n_k, d_v)
    k, v = repeat_kv(k, h // h_kv), repeat_kv(v, h // h_kv)  # (..., h, n_k, d_k), (..., h, n_k, d_v)
    o, a = attention(q, k, v, mask, bias=bias)  # (..., h, n_q, d_v), (..., h, n_q, n_k)
    return _linear(merge_heads(o), params.w_o, params.b_o), a  # (..., n_q, d_model), (..., h, n_q, n_k)


def param_count(d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = True) -> int:
    r"""Parameters of one attention layer: :math:`2 d^2 + 2 d\,h_{kv} d_k` weights, plus biases.

    With ``h_kv = h`` this is the familiar :math:`4 d_{model}^2 + 4 d_{model}`; it does not depend on ``h``.
    """
    d_k, h, h_kv = check_head_config(d_model, n_heads, n_kv_heads)
    d_kv = h_kv * d_k
    weights = 2 * d_model * d_model + 2 * d_model * d_kv
    biases = 2 * d_model + 2 * d_kv if bias else 0
    return weights + biases
