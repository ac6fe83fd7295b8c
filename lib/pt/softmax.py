"""Softmax and its relatives on torch tensors: the contract of :mod:`lib.softmax`, built on torch's own
primitives (``torch.softmax``, ``torch.logsumexp``) so that the two backends are independent oracles for
each other. Differentiable by autograd; runs on the inputs' device.
"""

from __future__ import annotations

from typing import Any

import torch

from ..constants import MASKED_LOGIT
from ._validate import as_float_tensor, check_axis, check_no_nan_or_posinf, dtype_name

__all__ = [
    "softmax_naive",
    "softmax",
    "log_softmax",
    "logsumexp",
    "softmax_vjp",
    "masked_softmax",
    "online_softmax",
    "online_normalizer",
    "merge_normalizers",
]


def _prepare(x: Any, axis: int, name: str = "x") -> tuple[torch.Tensor, int]:
    t = as_float_tensor(x, name)
    ax = check_axis(t, axis, name)
    check_no_nan_or_posinf(t, name)
    return t, ax


def _check_rows_alive(t: torch.Tensor, ax: int, name: str = "x") -> None:
    if t.shape[ax] == 0:
        n_rows = 1
        for i, n in enumerate(t.shape):
            n_rows *= n if i != ax else 1
        if n_rows:
            raise ValueError(f"{name} has length 0 along axis {ax}; the softmax of an empty row is undefined")
        return
    dead = torch.isneginf(t).all(dim=ax)
    if bool(dead.any()):
        raise ValueError(
            f"{name} has a row with no finite entry (all -inf) at index {dead.nonzero()[0].tolist()}; its softmax"
            " is 0/0. Use masked_softmax, which returns zeros for a fully masked row."
        )


def _has_nan(probabilities: torch.Tensor) -> bool:
    """Whether a softmax output holds a NaN, in one fast reduction: its entries lie in [0, 1] (or are NaN, or
    for log-softmax are <= 0), so the total is finite unless some entry is NaN."""
    return bool(torch.isnan(probabilities.sum()))


def _diagnosed(out: torch.Tensor, t: torch.Tensor, ax: int) -> torch.Tensor:
    """Return the (log-)softmax ``out`` of ``t``, or raise the NumPy reference's error if it holds a NaN.

    NaN, ``+inf`` and rows with no finite entry are exactly the inputs that make ``torch.softmax`` and
    ``torch.log_softmax`` return NaN, so the slower diagnostics run only then."""
    if t.shape[ax] == 0 or _has_nan(out):
        check_no_nan_or_posinf(t, "x")
        _check_rows_alive(t, ax)
    return out


def softmax_naive(x: Any, axis: int = -1) -> torch.Tensor:
    """``exp(x) / sum(exp(x))`` with no max subtraction; overflows to inf, then nan. Teaching only."""
    t = as_float_tensor(x, "x")
    ax = check_axis(t, axis, "x")
    e = torch.exp(t)
    return e / e.sum(dim=ax, keepdim=True)


def softmax(x: Any, axis: int = -1) -> torch.Tensor:
    """Numerically stable softmax along ``axis``; see :func:`lib.softmax.softmax`.

    Fast path: ``torch.softmax`` first, then one check of its output. NaN, ``+inf`` and rows with no finite
    entry are exactly the inputs that make ``torch.softmax`` return NaN, so only then are the (slower)
    diagnostics run, to raise the same errors as the NumPy reference.
    """
    t = as_float_tensor(x, "x")
    ax = check_axis(t, axis, "x")
    return _diagnosed(torch.softmax(t, dim=ax), t, ax)


def logsumexp(x: Any, axis: int = -1, keepdims: bool = False) -> torch.Tensor:
    """Stable log-sum-exp; ``-inf`` for a row with no finite entry. See :func:`lib.softmax.logsumexp`."""
    t, ax = _prepare(x, axis)
    return torch.logsumexp(t, dim=ax, keepdim=keepdims)


def log_softmax(x: Any, axis: int = -1) -> torch.Tensor:
    """Stable log-softmax; see :func:`lib.softmax.log_softmax`. Same fast path as :func:`softmax`."""
    t = as_float_tensor(x, "x")
    ax = check_axis(t, axis, "x")
    return _diagnosed(torch.log_softmax(t, dim=ax), t, ax)


def softmax_vjp(y: Any, dy: Any, axis: int = -1) -> torch.Tensor:
    """``y * (dy - sum(y * dy))``: the softmax vector-Jacobian product; see :func:`lib.softmax.softmax_vjp`."""
    y_t = as_float_tensor(y, "y")
    dy_t = as_float_tensor(dy, "dy")
    if y_t.shape != dy_t.shape:
        raise ValueError(
            f"y and dy must have the same shape, got y.shape={tuple(y_t.shape)}, dy.shape={tuple(dy_t.shape)}"
        )
    ax = check_axis(y_t, axis, "y")
    return y_t * (dy_t - (y_t * dy_t).sum(dim=ax, keepdim=True))


def masked_softmax(x: Any, mask: Any | None, axis: int = -1) -> torch.Tensor:
    """Softmax over positions where ``mask`` is True; a fully masked row gives zeros (and zero gradient).

    See :func:`lib.softmax.masked_softmax`. Fast path: fill the masked logits with ``-inf`` and call
    ``torch.softmax``; its output has a NaN exactly when an unmasked logit is NaN or ``+inf`` (an error) or a
    row has nothing to attend to (zeros, recomputed so that the gradient is 0 rather than NaN). Only then is
    the slow path taken, so attention costs about what ``torch.softmax`` costs.
    """
    t = as_float_tensor(x, "x")
    ax = check_axis(t, axis, "x")
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a torch.Tensor of dtype bool, got {type(mask).__name__}")
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be boolean (True = may attend), got dtype {dtype_name(mask.dtype)}")
        try:
            fits = torch.broadcast_shapes(mask.shape, t.shape) == t.shape
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to x.shape={tuple(t.shape)}")
        mask = mask.to(t.device)
    if t.shape[ax] == 0:
        return torch.zeros_like(t)
    logits = t if mask is None else t.masked_fill(~mask, MASKED_LOGIT)
    out = torch.softmax(logits, dim=ax)
    if not _has_nan(out):
        return out
    # Slow path: report bad logits, then give rows with nothing to attend to a harmless 0 logit and zero weights.
    keep = torch.ones_like(t, dtype=torch.bool) if mask is None else torch.broadcast_to(mask, t.shape)
    check_no_nan_or_posinf(logits.detach().masked_fill(~keep, 0.0), "x (at unmasked positions)")
    alive = (keep & ~torch.isneginf(logits.detach())).any(dim=ax, keepdim=True)
    logits = logits.masked_fill(~alive, 0.0)
    return torch.softmax(logits, dim=ax) * alive


def online_normalizer(x: Any, axis: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """One-pass running max and rescaled running sum; see :func:`lib.softmax.online_normalizer`."""
    t, ax = _prepare(x, axis)
    moved = t.movedim(ax, -1)
    m = torch.full(moved.shape[:-1], float("-inf"), dtype=t.dtype, device=t.device)
    l = torch.zeros(moved.shape[:-1], dtype=t.dtype, device=t.device)
    for j in range(moved.shape[-1]):
        m, l = merge_normalizers(m, l, moved[..., j], torch.ones_like(l))
    return m.unsqueeze(ax), l.unsqueeze(ax)


def merge_normalizers(
    m1: torch.Tensor, l1: torch.Tensor, m2: torch.Tensor, l2: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Combine the ``(m, l)`` of two disjoint blocks; see :func:`lib.softmax.merge_normalizers`."""
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def online_softmax(x: Any, axis: int = -1) -> torch.Tensor:
    """Softmax with a one-pass normaliser; equals :func:`softmax`."""
    t, ax = _prepare(x, axis)
    _check_rows_alive(t, ax)
    m, l = online_normalizer(t, axis=ax)
    return torch.exp(t - m) / l
