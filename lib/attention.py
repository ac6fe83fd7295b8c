r"""Scaled dot-product attention, forward and backward: the NumPy reference.

Shapes (named once, used everywhere; see the Notation chapter):

* ``q``: ``(..., n_q, d_k)``, ``k``: ``(..., n_k, d_k)``, ``v``: ``(..., n_k, d_v)``;
  the leading ``...`` (batch, heads) broadcast.
* ``mask``: boolean, broadcastable to ``(..., n_q, n_k)``; ``True`` = may attend (:mod:`lib.constants`).
* ``bias`` (optional): a finite floating array of ``q``'s dtype, broadcastable to ``(..., n_q, n_k)``, added to
  the scaled logits (positions as biases: ALiBi, T5; :mod:`lib.position_bias`). ALiBi's is ``(h, n_q, n_k)``.
* output ``o``: ``(..., n_q, d_v)``; weights ``a``: ``(..., n_q, n_k)``.

Forward (Vaswani et al. 2017, eq. 1), with scale :math:`s = 1/\sqrt{d_k}` unless given:

.. math::
    S = Q K^\top, \qquad S' = s\,S, \qquad A = \operatorname{softmax}_{\text{rows}}(S'), \qquad O = A V
    \qquad\text{(eq. attention)}

With an additive bias :math:`B` (the form of eq. alibi) the scaled logits become :math:`S' = s\,S + B`; with
``bias=None`` nothing is added (the same operations, bit for bit, as before the bias existed), and a zero bias
gives the same bits as none. Pairs that may not attend belong in the boolean mask, not in the bias as
``-inf``: a non-finite bias is refused.

Backward, for an upstream gradient :math:`dO = \partial L / \partial O`:

.. math::
    dV = A^\top dO, \quad dA = dO\,V^\top, \quad
    dS' = A \odot \big(dA - \operatorname{rowsum}(dA \odot A)\big), \quad
    dS = s\,dS', \quad dQ = dS\,K, \quad dK = dS^\top Q
    \qquad\text{(eq. attention-backward)}

and, with a bias, :math:`dB = dS'` (summed over the axes the bias was broadcast along); the gradients of
``q, k, v`` keep their form, only :math:`A` is the biased one.

A fully masked row (a query with no key to attend to, including ``n_k = 0``) has zero weights, a zero
output row and zero gradients: see :func:`lib.softmax.masked_softmax`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ._validate import (
    as_float_array,
    check_attention_bias,
    check_attention_inputs,
    check_attention_shapes,
    check_causal,
    check_int,
    reduce_to,
)
from .softmax import masked_softmax

__all__ = [
    "attention",
    "attention_backward",
    "attention_backward_steps",
    "AttentionGradSteps",
    "causal_mask",
    "padding_mask",
    "default_scale",
]


def default_scale(d_k: int) -> float:
    r"""The scale :math:`1/\sqrt{d_k}` that keeps the logits at unit variance (chapter "Why divide by √d_k?")."""
    return 1.0 / math.sqrt(check_int(d_k, "d_k"))


def attention(
    q: Any, k: Any, v: Any, mask: Any | None = None, scale: float | None = None, bias: Any | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention (eq. attention). Returns ``(o, a)``: the output and the weights.

    Args:
        q, k, v: floating arrays ``(..., n_q, d_k)``, ``(..., n_k, d_k)``, ``(..., n_k, d_v)`` of one dtype.
        mask: optional boolean mask broadcastable to ``(..., n_q, n_k)``, True = may attend.
        scale: multiplies the logits; default ``1/sqrt(d_k)``.
        bias: optional finite floating array of ``q``'s dtype, broadcastable to ``(..., n_q, n_k)``, added to the
            scaled logits before the masked softmax: ``softmax_mask(scale * Q Kᵀ + bias)``.
    """
    q, k, v, mask = check_attention_inputs(q, k, v, mask)
    if bias is not None:
        bias = check_attention_bias(bias, q, k, v)
    s = default_scale(q.shape[-1]) if scale is None else scale
    scores = (q @ np.swapaxes(k, -1, -2)) * q.dtype.type(s)  # (..., n_q, n_k)
    if bias is not None:
        scores = scores + bias  # S' = s S + B
    a = masked_softmax(scores, mask, axis=-1)  # (..., n_q, n_k)
    return a @ v, a  # (..., n_q, d_v), (..., n_q, n_k)


class AttentionGradSteps(NamedTuple):
    """Every intermediate of the forward and backward pass, named as in eq. attention-backward."""

    s: np.ndarray  #: raw logits Q Kᵀ (..., n_q, n_k)
    s_scaled: np.ndarray  #: S' = scale · S (+ bias) (..., n_q, n_k)
    a: np.ndarray  #: weights softmax(S') (..., n_q, n_k)
    o: np.ndarray  #: output A V (..., n_q, d_v)
    da: np.ndarray  #: dA = dO Vᵀ (..., n_q, n_k)
    dv: np.ndarray  #: dV = Aᵀ dO (..., n_k, d_v)
    row_dot: np.ndarray  #: Σ_j a_ij da_ij, one per row (..., n_q, 1)
    ds_scaled: np.ndarray  #: dS' = A ⊙ (dA − row_dot) (..., n_q, n_k); also the bias's gradient
    ds: np.ndarray  #: dS = scale · dS' (..., n_q, n_k)
    dq: np.ndarray  #: dQ = dS K (..., n_q, d_k)
    dk: np.ndarray  #: dK = dSᵀ Q (..., n_k, d_k)


def attention_backward_steps(
    q: Any, k: Any, v: Any, d_out: Any, mask: Any | None = None, scale: float | None = None,
    bias: Any | None = None,
) -> AttentionGradSteps:
    """Forward and closed-form backward pass, returning every intermediate (for the worked example)."""
    q, k, v, mask = check_attention_inputs(q, k, v, mask)
    if bias is not None:
        bias = check_attention_bias(bias, q, k, v)
    d_out = as_float_array(d_out, "d_out")
    check_attention_shapes(q, k, v, grad=d_out)
    sc = default_scale(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2)
    s_scaled = s * q.dtype.type(sc)
    if bias is not None:
        s_scaled = s_scaled + bias
    a = masked_softmax(s_scaled, mask, axis=-1)
    o = a @ v
    da = d_out @ np.swapaxes(v, -1, -2)
    dv = np.swapaxes(a, -1, -2) @ d_out
    row_dot = np.sum(a * da, axis=-1, keepdims=True)  # (..., n_q, 1): the row term of eq. softmax-vjp
    ds_scaled = a * (da - row_dot)  # eq. softmax-vjp; 0 wherever a is 0 (masked)
    ds = ds_scaled * q.dtype.type(sc)
    dq = ds @ k
    dk = np.swapaxes(ds, -1, -2) @ q
    return AttentionGradSteps(
        s=s, s_scaled=s_scaled, a=a, o=o, da=da, dv=reduce_to(dv, v.shape), row_dot=row_dot,
        ds_scaled=ds_scaled, ds=ds, dq=reduce_to(dq, q.shape), dk=reduce_to(dk, k.shape),
    )


def attention_backward(
    q: Any, k: Any, v: Any, d_out: Any, mask: Any | None = None, scale: float | None = None,
    bias: Any | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients ``(dq, dk, dv)`` of a loss ``L`` given ``d_out = dL/do`` (eq. attention-backward).

    Recomputes the forward pass (a pure function: nothing is cached between calls). The mask, scale and
    bias must be those of the forward pass. Gradients are reduced to the inputs' shapes when the leading
    dimensions were broadcast. (The bias's own gradient is ``attention_backward_steps(...).ds_scaled``,
    summed to the bias's shape with :func:`lib._validate.reduce_to`.)
    """
    st = attention_backward_steps(q, k, v, d_out, mask=mask, scale=scale, bias=bias)
    return st.dq, st.dk, st.dv


def causal_mask(n_q: int, n_k: int | None = None) -> np.ndarray:
    """Boolean ``(n_q, n_k)`` mask, True where key ``j`` is not in the future of query ``i``.

    With ``n_k > n_q`` the queries are the *last* ``n_q`` positions (decoding with a KV cache): query ``i``
    sits at position ``i + n_k - n_q`` and sees keys ``j <= i + n_k - n_q``.
    """
    n_q = check_int(n_q, "n_q", minimum=0)
    n_k = n_q if n_k is None else check_int(n_k, "n_k", minimum=0)
    check_causal(True, n_q, n_k)
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def padding_mask(lengths: Any, n: int) -> np.ndarray:
    """Key-padding mask of shape ``(batch, 1, n)``: True for the first ``lengths[b]`` keys of sequence ``b``.

    The middle axis broadcasts over queries; for multi-head scores ``(batch, h, n_q, n_k)`` add a head axis:
    ``padding_mask(lengths, n)[:, None]``.
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise TypeError(f"lengths must be a 1-D array of ints, got dtype {lengths.dtype} and shape {lengths.shape}")
    n = check_int(n, "n", minimum=0)
    if (lengths < 0).any() or (lengths > n).any():
        raise ValueError(f"every length must lie in [0, n={n}], got {lengths.tolist()}")
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, :]
