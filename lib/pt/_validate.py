"""Argument checks for the PyTorch path; the messages match :mod:`lib._validate` word for word."""

from __future__ import annotations

from typing import Any

import torch

from .._validate import check_attention_shapes, check_mask_shape, check_mha_inputs, check_min_rank

__all__ = ["as_float_tensor", "check_axis", "check_no_nan_or_posinf", "check_attention_shapes",
           "check_mask_shape", "check_mha_inputs", "check_min_rank"]


def as_float_tensor(x: Any, name: str) -> torch.Tensor:
    """Return ``x`` as a floating tensor; Python numbers and lists become float64 on the CPU.

    Integer, boolean and complex tensors are refused with a ``TypeError``, as are NumPy arrays (use the
    NumPy reference, or ``torch.from_numpy`` on purpose).
    """
    if isinstance(x, torch.Tensor):
        if not x.is_floating_point():
            raise TypeError(f"{name} must have a floating dtype, got {x.dtype} (shape {tuple(x.shape)})")
        return x
    if hasattr(x, "dtype"):
        raise TypeError(
            f"{name} must be a torch.Tensor for lib.pt, got {type(x).__module__}.{type(x).__name__}"
            " (use the NumPy reference, or torch.from_numpy)"
        )
    try:
        return torch.as_tensor(x, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(f"{name} must be an array of real numbers, got {type(x).__name__}: {err}") from None


def check_axis(x: torch.Tensor, axis: int, name: str) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"axis must be an int, got {type(axis).__name__}")
    if x.ndim == 0:
        raise ValueError(f"{name} must have at least 1 dimension to take a softmax over, got a scalar")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(
            f"axis {axis} is out of range for {name} with {x.ndim} dimensions ({name}.shape={tuple(x.shape)})"
        )
    return axis % x.ndim


def check_no_nan_or_posinf(x: torch.Tensor, name: str) -> None:
    bad = torch.isnan(x)
    if bool(bad.any()):
        raise ValueError(f"{name} contains NaN at {bad.nonzero()[0].tolist()} ({name}.shape={tuple(x.shape)})")
    bad = torch.isposinf(x)
    if bool(bad.any()):
        raise ValueError(
            f"{name} contains +inf at {bad.nonzero()[0].tolist()}; the softmax is undefined there"
            f" ({name}.shape={tuple(x.shape)})"
        )
