"""Argument checks for the PyTorch path; the messages match :mod:`lib._validate` word for word."""

from __future__ import annotations

from typing import Any

import torch

from .._validate import (
    BIAS_FINITE_WHY,
    check_attention_shapes,
    check_axis,
    check_bias_layout,
    check_bool,
    check_causal,
    check_int,
    check_mask_shape,
    check_mha_inputs,
    check_min_rank,
    check_real,
    dtype_name,
    reduce_to,
)

__all__ = ["as_float_tensor", "check_axis", "check_no_nan_or_posinf", "check_finite", "check_attention_shapes",
           "check_attention_inputs", "check_bias", "check_attention_bias",
           "check_mask_shape", "check_mha_inputs", "check_min_rank", "check_int",
           "check_real", "check_bool", "check_causal", "dtype_name", "reduce_to"]


def as_float_tensor(x: Any, name: str) -> torch.Tensor:
    """Return ``x`` as a floating tensor; Python numbers and lists become float64 on the CPU.

    Integer, boolean and complex tensors are refused with a ``TypeError``, as are NumPy arrays (use the
    NumPy reference, or ``torch.from_numpy`` on purpose).
    """
    if isinstance(x, torch.Tensor):
        if not x.is_floating_point():
            raise TypeError(f"{name} must have a floating dtype, got {dtype_name(x.dtype)} (shape {tuple(x.shape)})")
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


def check_finite(x: torch.Tensor, name: str, why: str = "") -> None:
    """Refuse NaN and ``±inf``; the message of :func:`lib._validate.check_finite`, word for word.

    One reduction decides the common case: a finite sum means every entry is finite (a NaN or an infinity
    makes the sum NaN or infinite). Only a sum that is not finite (a bad entry, or finite entries whose sum
    overflows) has every entry looked at, so the answer is exact either way, and cheaper than a boolean tensor
    the size of ``x`` on every call of every layer."""
    if bool(torch.isfinite(x.detach().sum())):
        return
    bad = ~torch.isfinite(x.detach())
    if bool(bad.any()):
        idx = bad.nonzero()[0].tolist()
        raise ValueError(f"{name} contains a non-finite value ({float(x[tuple(idx)])}) at {idx}"
                         f" ({name}.shape={tuple(x.shape)}){why}")


def check_attention_inputs(q: Any, k: Any, v: Any, mask: Any | None) -> tuple[Any, Any, Any, Any]:
    """The torch twin of :func:`lib._validate.check_attention_inputs`; also requires one device."""
    q, k, v = (as_float_tensor(t, name) for t, name in ((q, "q"), (k, "k"), (v, "v")))
    check_attention_shapes(q, k, v)
    if len({q.dtype, k.dtype, v.dtype}) > 1:
        raise TypeError(
            f"q, k and v must share a dtype, got {dtype_name(q.dtype)}, {dtype_name(k.dtype)}, {dtype_name(v.dtype)}"
        )
    if len({q.device, k.device, v.device}) > 1:
        raise ValueError(f"q, k and v must live on one device, got {q.device}, {k.device}, {v.device}")
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a torch.Tensor of dtype bool, got {type(mask).__name__}")
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        check_mask_shape(mask, (*lead, q.shape[-2], k.shape[-2]))
    return q, k, v, mask


def check_bias(
    bias: Any, scores_shape: tuple[int, ...], like: torch.Tensor, like_name: str = "q",
    axes: str = "(..., n_q, n_k)",
) -> torch.Tensor:
    """The torch twin of :func:`lib._validate.check_bias` (same messages); also requires ``like``'s device."""
    if not isinstance(bias, torch.Tensor):
        if hasattr(bias, "dtype"):
            raise TypeError(
                f"bias must be a torch.Tensor for lib.pt, got {type(bias).__module__}.{type(bias).__name__}"
                " (use the NumPy reference, or torch.from_numpy)"
            )
        raise TypeError(f"bias must be a floating array of {like_name}'s dtype, got {type(bias).__name__}")
    check_bias_layout(bias, bias.is_floating_point(), scores_shape, like, like_name, axes)
    if bias.device != like.device:
        raise ValueError(f"bias must live on {like_name}'s device {like.device}, got {bias.device}")
    check_finite(bias, "bias", BIAS_FINITE_WHY)
    return bias


def check_attention_bias(bias: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The torch twin of :func:`lib._validate.check_attention_bias`."""
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    return check_bias(bias, (*lead, q.shape[-2], k.shape[-2]), q)


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
