r"""Softmax and its relatives: the NumPy reference.

All functions work along one ``axis`` (default: the last) of an array of any shape, keep a floating
input's dtype, and turn Python numbers into float64.

.. math::

    \operatorname{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}
                                = \frac{e^{x_i - m}}{\sum_j e^{x_j - m}}, \qquad m = \max_j x_j
    \qquad\text{(eq. softmax-shift)}

Numerical notes, the same for every function here and in :mod:`lib.pt.softmax`:

* ``-inf`` is allowed and gets weight 0 (that is how a mask enters), as long as the row has at least one
  finite entry. A row with no finite entry raises ``ValueError`` in :func:`softmax` and
  :func:`log_softmax`; :func:`logsumexp` returns ``-inf`` for it (the log of an empty sum), and
  :func:`masked_softmax` returns zeros for a fully masked row.
* NaN and ``+inf`` raise ``ValueError``: the softmax is undefined there and a NaN would spread silently.
* :func:`softmax_naive` is kept for teaching only: it overflows to ``inf`` and then ``nan``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validate import as_float_array, check_axis, check_no_nan_or_posinf
from .constants import MASKED_LOGIT

__all__ = [
    "softmax_naive",
    "softmax",
    "log_softmax",
    "logsumexp",
    "softmax_vjp",
    "softmax_jacobian_norm",
    "masked_softmax",
    "online_softmax",
    "online_normalizer",
    "merge_normalizers",
]


def _prepare(x: Any, axis: int, name: str = "x") -> tuple[np.ndarray, int]:
    arr = as_float_array(x, name)
    ax = check_axis(arr, axis, name)
    check_no_nan_or_posinf(arr, name)
    return arr, ax


def _row_max(x: np.ndarray, axis: int, *, allow_empty_rows: bool, name: str = "x") -> np.ndarray:
    """Max along ``axis`` with keepdims; rows with no finite entry get 0 (or raise)."""
    if x.shape[axis] == 0:
        m = np.zeros(x.shape[:axis] + (1,) + x.shape[axis + 1 :], dtype=x.dtype)
        if not allow_empty_rows and m.size:
            raise ValueError(f"{name} has length 0 along axis {axis}; the softmax of an empty row is undefined")
        return m
    m = np.max(x, axis=axis, keepdims=True)
    dead = np.isneginf(m)
    if dead.any():
        if not allow_empty_rows:
            where = np.argwhere(np.squeeze(dead, axis))[0].tolist()
            raise ValueError(
                f"{name} has a row with no finite entry (all -inf) at index {where}; its softmax is 0/0."
                " Use masked_softmax, which returns zeros for a fully masked row."
            )
        m = np.where(dead, 0, m)
    return m


def softmax_naive(x: Any, axis: int = -1) -> np.ndarray:
    r"""The textbook formula :math:`e^{x_i} / \sum_j e^{x_j}`, with no max subtraction.

    For teaching only: ``exp`` overflows to ``inf`` once an entry passes ``log(finfo.max)`` (about 88.7 in
    float32, 11.09 in float16) and the quotient ``inf/inf`` is ``nan``. No input checks beyond the dtype,
    so the failure can be shown.
    """
    arr = as_float_array(x, "x")
    ax = check_axis(arr, axis, "x")
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(arr)
        return e / np.sum(e, axis=ax, keepdims=True)


def softmax(x: Any, axis: int = -1) -> np.ndarray:
    r"""Numerically stable softmax along ``axis`` (eq. softmax-shift).

    Args:
        x: logits of any shape, floating (Python numbers become float64).
        axis: the axis to normalise over.

    Returns:
        An array of ``x``'s shape and dtype whose slices along ``axis`` are non-negative and sum to 1.

    Subtracting the row max ``m`` makes every exponent ``<= 0``, so nothing overflows and at least one
    term of the sum is exactly 1, so the denominator is never 0.
    """
    arr, ax = _prepare(x, axis)
    m = _row_max(arr, ax, allow_empty_rows=False)
    e = np.exp(arr - m)
    return e / np.sum(e, axis=ax, keepdims=True)


def logsumexp(x: Any, axis: int = -1, keepdims: bool = False) -> np.ndarray:
    r""":math:`\log \sum_j e^{x_j} = m + \log \sum_j e^{x_j - m}` along ``axis``, without overflow.

    A row with no finite entry (all ``-inf``, or empty) gives ``-inf``: the log of an empty sum.
    """
    arr, ax = _prepare(x, axis)
    m = _row_max(arr, ax, allow_empty_rows=True)
    with np.errstate(divide="ignore"):  # log(0) = -inf is the documented answer for an empty row
        out = m + np.log(np.sum(np.exp(arr - m), axis=ax, keepdims=True))
    return out if keepdims else np.squeeze(out, axis=ax)


def log_softmax(x: Any, axis: int = -1) -> np.ndarray:
    r""":math:`x_i - \operatorname{logsumexp}(x)`, stable; ``-inf`` inputs give ``-inf``."""
    arr, ax = _prepare(x, axis)
    m = _row_max(arr, ax, allow_empty_rows=False)
    shifted = arr - m
    return shifted - np.log(np.sum(np.exp(shifted), axis=ax, keepdims=True))


def softmax_vjp(y: Any, dy: Any, axis: int = -1) -> np.ndarray:
    r"""Vector-Jacobian product of the softmax: given ``y = softmax(x)`` and ``dy = dL/dy``, return ``dL/dx``.

    .. math::
        \frac{\partial L}{\partial x_i} = y_i \Big(\frac{\partial L}{\partial y_i}
            - \sum_j y_j \frac{\partial L}{\partial y_j}\Big)
        \qquad\text{(eq. softmax-vjp)}

    The Jacobian :math:`\operatorname{diag}(y) - y y^\top` is never formed: :math:`O(n)` instead of
    :math:`O(n^2)`. Each slice of the result sums to 0 along ``axis`` (softmax is shift invariant).
    """
    y_arr = as_float_array(y, "y")
    dy_arr = as_float_array(dy, "dy")
    if y_arr.shape != dy_arr.shape:
        raise ValueError(f"y and dy must have the same shape, got y.shape={y_arr.shape}, dy.shape={dy_arr.shape}")
    ax = check_axis(y_arr, axis, "y")
    return y_arr * (dy_arr - np.sum(y_arr * dy_arr, axis=ax, keepdims=True))


def softmax_jacobian_norm(y: Any, axis: int = -1) -> np.ndarray:
    r"""Frobenius norm of the softmax Jacobian :math:`J = \operatorname{diag}(y) - y y^\top` of each slice of
    ``y = softmax(x)`` along ``axis``, without forming it (chapter "Why divide by √d_k?", eq. scale-jacobian):

    .. math::
        \|J\|_F^2 = \sum_i y_i^2 - 2 \sum_i y_i^3 + \Big(\sum_i y_i^2\Big)^2 .

    The size of the gradient a softmax passes back: 0 for a one-hot slice, √(n−1)/n for a uniform slice of
    n entries, and at most 1/2 over all slices, reached by two entries of weight 1/2 each. For a nearly
    one-hot slice the difference cancels to round-off (about 1e-8 after the square root), which is clipped
    at 0 before the root.
    """
    y_arr = as_float_array(y, "y")
    ax = check_axis(y_arr, axis, "y")
    s2 = np.sum(y_arr**2, axis=ax)
    return np.sqrt(np.maximum(s2 - 2 * np.sum(y_arr**3, axis=ax) + s2**2, 0.0))


def masked_softmax(x: Any, mask: Any | None, axis: int = -1) -> np.ndarray:
    """Softmax over the positions where ``mask`` is True (see :mod:`lib.constants`).

    Masked positions get weight exactly 0 whatever ``x`` holds there (even NaN). A row whose positions are
    all masked gets all-zero weights, the choice of FlashAttention and of this book: a query with nothing
    to attend to contributes nothing, and its gradient is 0 rather than NaN.

    Args:
        x: logits, floating.
        mask: boolean, broadcastable to ``x.shape``; ``None`` means nothing is masked (an empty or
            all ``-inf`` row still gives zeros).
        axis: the axis to normalise over.
    """
    arr = as_float_array(x, "x")
    ax = check_axis(arr, axis, "x")
    if mask is None:
        mask = np.ones((), dtype=bool)
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    try:
        keep = np.broadcast_to(mask, arr.shape)
    except ValueError:
        raise ValueError(f"mask of shape {mask.shape} does not broadcast to x.shape={arr.shape}") from None
    check_no_nan_or_posinf(np.where(keep, arr, 0), "x (at unmasked positions)")
    logits = np.where(keep, arr, MASKED_LOGIT).astype(arr.dtype, copy=False)
    m = _row_max(logits, ax, allow_empty_rows=True)
    e = np.exp(logits - m)  # exactly 0 where masked
    total = np.sum(e, axis=ax, keepdims=True)
    return e / np.where(total == 0, 1, total)


def online_normalizer(x: Any, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    r"""One pass over ``x`` along ``axis`` computing the max ``m`` and the sum ``l = Σ e^{x_j - m}``.

    The recurrence of Milakov & Gimelshein (2018), reading each element once:

    .. math::
        m_j = \max(m_{j-1}, x_j), \qquad
        l_j = l_{j-1}\, e^{m_{j-1} - m_j} + e^{x_j - m_j}
        \qquad\text{(eq. online-softmax)}

    Returns ``(m, l)`` with ``axis`` kept as length 1. ``softmax(x) = exp(x - m) / l``.
    """
    arr, ax = _prepare(x, axis)
    moved = np.moveaxis(arr, ax, -1)
    m = np.full(moved.shape[:-1], -np.inf, dtype=arr.dtype)
    l = np.zeros(moved.shape[:-1], dtype=arr.dtype)
    for j in range(moved.shape[-1]):
        xj = moved[..., j]
        m_new = np.maximum(m, xj)
        safe = np.where(np.isneginf(m_new), 0, m_new)  # rows still all -inf: keep l = 0
        l = l * np.exp(m - safe) + np.exp(xj - safe)
        m = m_new
    return np.expand_dims(m, ax), np.expand_dims(l, ax)


def merge_normalizers(
    m1: np.ndarray, l1: np.ndarray, m2: np.ndarray, l2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    r"""Combine the ``(m, l)`` of two disjoint blocks of a row into the ``(m, l)`` of their union.

    :math:`m = \max(m_1, m_2)`, :math:`l = l_1 e^{m_1 - m} + l_2 e^{m_2 - m}`. The operation is associative
    and commutative, which is what lets tiled attention visit key blocks in any grouping.
    """
    m = np.maximum(m1, m2)
    safe = np.where(np.isneginf(m), 0, m)
    return m, l1 * np.exp(m1 - safe) + l2 * np.exp(m2 - safe)


def online_softmax(x: Any, axis: int = -1) -> np.ndarray:
    """Softmax whose normaliser is computed in one pass (eq. online-softmax); equals :func:`softmax`."""
    arr, ax = _prepare(x, axis)
    _row_max(arr, ax, allow_empty_rows=False)  # raises for an empty row or one with no finite entry
    m, l = online_normalizer(arr, axis=ax)
    return np.exp(arr - m) / l
