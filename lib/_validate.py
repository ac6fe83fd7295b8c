"""Argument checks shared by the NumPy reference, so every public function fails the same clear way.

Each check names the argument and shows what it got, e.g.
``ValueError: q has width 64 but k has width 32 (q.shape=(2, 5, 64), k.shape=(2, 5, 32))``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def as_float_array(x: Any, name: str) -> np.ndarray:
    """Return ``x`` as a floating NumPy array, keeping a floating dtype as it is.

    Python numbers and (nested) lists of numbers become float64. A NumPy array (or anything with a
    ``dtype``) of integer, boolean or complex type is refused with a ``TypeError``: silently turning
    token ids or a mask into logits is a classic bug, so the caller must convert on purpose.
    """
    if hasattr(x, "dtype") and not isinstance(x, np.ndarray):
        # A torch tensor or another array type: say which backend to use instead of converting.
        raise TypeError(
            f"{name} must be a NumPy array for the NumPy reference, got {type(x).__module__}.{type(x).__name__}"
            " (use lib.pt for torch tensors)"
        )
    if isinstance(x, np.ndarray):
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"{name} must have a floating dtype, got {x.dtype} (shape {x.shape})")
        return x
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be an array of real numbers, got {type(x).__name__}: {err}") from None
    return arr


def check_axis(x: np.ndarray, axis: int, name: str) -> int:
    """Normalise ``axis`` for ``x`` (negative axes allowed), or raise naming both."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"axis must be an int, got {type(axis).__name__}")
    if x.ndim == 0:
        raise ValueError(f"{name} must have at least 1 dimension to take a softmax over, got a scalar")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for {name} with {x.ndim} dimensions ({name}.shape={x.shape})")
    return int(axis) % x.ndim


def check_no_nan_or_posinf(x: np.ndarray, name: str) -> None:
    """Refuse NaN and +inf: the softmax of either is undefined, and a NaN would spread silently."""
    if np.isnan(x).any():
        raise ValueError(f"{name} contains NaN at {np.argwhere(np.isnan(x))[0].tolist()} ({name}.shape={x.shape})")
    if np.isposinf(x).any():
        raise ValueError(
            f"{name} contains +inf at {np.argwhere(np.isposinf(x))[0].tolist()}; the softmax is undefined there"
            f" ({name}.shape={x.shape})"
        )


def check_min_rank(x: Any, name: str, rank: int, meaning: str) -> None:
    """Raise unless ``x`` has at least ``rank`` dimensions, saying what they mean."""
    if x.ndim < rank:
        raise ValueError(f"{name} must have at least {rank} dimensions {meaning}, got shape {tuple(x.shape)}")


def check_attention_shapes(q: Any, k: Any, v: Any, *, grad: Any = None) -> None:
    """Check the shapes of an attention call: q (..., n_q, d_k), k (..., n_k, d_k), v (..., n_k, d_v).

    Works for NumPy arrays and torch tensors alike (it reads only ``.ndim`` and ``.shape``).
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_min_rank(t, name, 2, "(..., length, width)")
    qs, ks, vs = tuple(q.shape), tuple(k.shape), tuple(v.shape)
    if qs[-1] != ks[-1]:
        raise ValueError(f"q has width {qs[-1]} but k has width {ks[-1]} (q.shape={qs}, k.shape={ks})")
    if ks[-2] != vs[-2]:
        raise ValueError(f"k has length {ks[-2]} but v has length {vs[-2]} (k.shape={ks}, v.shape={vs})")
    try:
        np.broadcast_shapes(qs[:-2], ks[:-2], vs[:-2])
    except ValueError:
        raise ValueError(
            f"the leading (batch/head) dimensions of q, k and v do not broadcast (q.shape={qs}, k.shape={ks},"
            f" v.shape={vs})"
        ) from None
    if grad is not None:
        lead = np.broadcast_shapes(qs[:-2], ks[:-2], vs[:-2])
        want = (*lead, qs[-2], vs[-1])
        if tuple(grad.shape) != want:
            raise ValueError(f"d_out must have the output's shape {want}, got {tuple(grad.shape)}")


def check_mask_shape(mask: Any, scores_shape: tuple[int, ...]) -> None:
    """A mask must be boolean and broadcast to the scores' shape (..., n_q, n_k)."""
    dtype = str(mask.dtype)
    if "bool" not in dtype:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {dtype}")
    try:
        out = np.broadcast_shapes(tuple(mask.shape), scores_shape)
    except ValueError:
        out = None
    if out != tuple(scores_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape {tuple(scores_shape)}"
            " (..., n_q, n_k)"
        )


def check_mha_inputs(x_q: Any, x_kv: Any) -> tuple[int, ...]:
    """Check the inputs of multi-head attention, ``x_q (..., n_q, d_model)`` and ``x_kv (..., n_k, d_model)``,
    and return their broadcast leading (batch) shape. Reads only ``.ndim`` and ``.shape``, so it serves the NumPy
    reference and the PyTorch path alike."""
    for name, x in (("x_q", x_q), ("x_kv", x_kv)):
        check_min_rank(x, name, 2, "(..., n, d_model)")
    qs, ks = tuple(x_q.shape), tuple(x_kv.shape)
    if qs[-1] != ks[-1]:
        raise ValueError(f"x_q has width {qs[-1]} but x_kv has width {ks[-1]} (x_q.shape={qs}, x_kv.shape={ks})")
    try:
        return np.broadcast_shapes(qs[:-2], ks[:-2])
    except ValueError:
        raise ValueError(
            f"the batch dimensions of x_q and x_kv do not broadcast (x_q.shape={qs}, x_kv.shape={ks})"
        ) from None
