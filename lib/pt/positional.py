"""Positional encodings on torch tensors: the contract of :mod:`lib.positional`.

Same formulas (eq. sinusoidal, eq. rope), same interleaved pairing, same argument checks. Angles are
computed in float64 on the target device (float32 where the device has no float64, e.g. Apple MPS) and
cast to the result's dtype at the end.

Also the torch twins of ALiBi's biases (:mod:`lib.position_bias`, eq. alibi): :func:`alibi_slopes`,
:func:`alibi_bias` (causal) and :func:`alibi_bias_symmetric` (no causal mask), which
:class:`lib.pt.model.Seq2SeqTransformer` adds to its attention logits with ``positional="alibi"``.
"""

from __future__ import annotations

from typing import Any

import torch

from ..position_bias import alibi_slopes as np_alibi_slopes
from ..positional import check_base, check_width
from ._validate import as_float_tensor, check_finite, check_int, dtype_name

__all__ = ["sinusoid_frequencies", "sinusoidal_encoding", "rope_angles", "apply_rope", "apply_rope_halves",
           "alibi_slopes", "alibi_bias", "alibi_bias_symmetric"]


def _angle_dtype(device: torch.device | str | None) -> torch.dtype:
    dev = torch.device("cpu") if device is None else torch.device(device)
    return torch.float32 if dev.type == "mps" else torch.float64


def sinusoid_frequencies(
    d_model: int, base: float = 10000.0, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """``base ** (-2i/d)`` for ``i = 0..ceil(d/2)-1``; see :func:`lib.positional.sinusoid_frequencies`."""
    d = check_width(d_model, "d_model")
    base = check_base(base)
    dt = _angle_dtype(device)
    return base ** (-torch.arange(0, d, 2, dtype=dt, device=device) / d)


def sinusoidal_encoding(
    n_positions: int,
    d_model: int,
    base: float = 10000.0,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The table ``PE (n_positions, d_model)`` of eq. sinusoidal.

    See :func:`lib.positional.sinusoidal_encoding`.
    """
    n = check_int(n_positions, "n_positions", minimum=0)
    d = check_width(d_model, "d_model")
    freqs = sinusoid_frequencies(d, base, device=device)
    angles = torch.arange(n, dtype=freqs.dtype, device=device)[:, None] * freqs[None, :]  # (n, ceil(d/2))
    pe = torch.empty((n, d), dtype=freqs.dtype, device=device)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d // 2])
    return pe.to(dtype)


def rope_angles(positions: Any, d: int, base: float = 10000.0) -> torch.Tensor:
    """Angles ``m * theta_i`` of eq. rope, shape ``(*positions.shape, d/2)``, on ``positions``' device."""
    d = check_width(d, "d", even=True)
    pos = positions if isinstance(positions, torch.Tensor) else torch.as_tensor(positions)
    if pos.dtype == torch.bool or pos.is_complex():
        raise TypeError(f"positions must be an array of integers or reals, got dtype {dtype_name(pos.dtype)}")
    freqs = sinusoid_frequencies(d, base, device=pos.device)
    check_finite(pos, "positions")
    pos = pos.to(freqs.dtype)
    return pos[..., None] * freqs  # (..., d/2)


def _rope_inputs(x: Any, positions: Any | None, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    x = as_float_tensor(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., n, d), got shape {tuple(x.shape)}")
    d = x.shape[-1]
    if d % 2:
        raise ValueError(
            f"x must have an even width d (features are rotated in pairs), got d={d}"
            f" (x.shape={tuple(x.shape)})"
        )
    pos = torch.arange(x.shape[-2], device=x.device) if positions is None else positions
    if isinstance(pos, torch.Tensor) and pos.device != x.device:
        raise ValueError(f"positions live on {pos.device} but x lives on {x.device}")
    ang = rope_angles(pos, d, base)
    if not isinstance(pos, torch.Tensor):
        ang = ang.to(x.device)
    try:
        full = torch.broadcast_shapes(ang.shape[:-1], x.shape[:-1])
    except RuntimeError:
        raise ValueError(
            f"positions of shape {tuple(ang.shape[:-1])} do not broadcast to x's positions"
            f" x.shape[:-1]={tuple(x.shape[:-1])} (x.shape={tuple(x.shape)})"
        ) from None
    if full != x.shape[:-1]:
        raise ValueError(
            f"positions of shape {tuple(ang.shape[:-1])} would broadcast x.shape={tuple(x.shape)}"
            " to a larger shape"
        )
    return x, ang


def apply_rope(x: Any, positions: Any | None = None, base: float = 10000.0) -> torch.Tensor:
    """Rotary embedding on interleaved pairs, eq. rope; ``x (..., n, d)``, ``d`` even; positions default
    ``0..n-1`` and broadcast to ``x.shape[:-1]``. See :func:`lib.positional.apply_rope`. Differentiable."""
    x, ang = _rope_inputs(x, positions, base)
    c, s = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)  # re-interleave the pairs


def apply_rope_halves(x: Any, positions: Any | None = None, base: float = 10000.0) -> torch.Tensor:
    """Rotary embedding with the "rotate half" pairing (``i`` with ``i + d/2``); see
    :func:`lib.positional.apply_rope_halves`."""
    x, ang = _rope_inputs(x, positions, base)
    c, s = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half], x[..., half:]
    return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)


def alibi_slopes(
    n_heads: int, *, dtype: torch.dtype = torch.float32, device: torch.device | str | None = None
) -> torch.Tensor:
    """ALiBi's ``n_heads`` slopes, steepest first; see :func:`lib.position_bias.alibi_slopes`.

    The slopes are constants (powers of two, or the paper's interleaving), taken from the NumPy reference in
    float64 and cast to ``dtype`` on ``device``, as :func:`lib.pt.attention.causal_mask` takes its mask.
    """
    return torch.from_numpy(np_alibi_slopes(n_heads)).to(device=device, dtype=dtype)


def _alibi_offsets(n_q: int, n_k: int | None, n_heads: int, query_shift: bool,
                   device: torch.device | str | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The slopes ``(n_heads,)`` and the offsets ``j - i`` ``(n_q, n_k)``, in the angle dtype of ``device``."""
    n_q = check_int(n_q, "n_q", minimum=0)
    n_k = n_q if n_k is None else check_int(n_k, "n_k", minimum=0)
    slopes = alibi_slopes(n_heads, dtype=_angle_dtype(device), device=device)  # checks n_heads
    query_pos = torch.arange(n_q, dtype=slopes.dtype, device=device)[:, None] + (n_k - n_q if query_shift else 0)
    offset = torch.arange(n_k, dtype=slopes.dtype, device=device)[None, :] - query_pos  # (n_q, n_k): j - i
    return slopes, offset


def alibi_bias(
    n_q: int, n_k: int | None, n_heads: int, *, dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """ALiBi's causal bias ``m_h * (j - i)``, shape ``(n_heads, n_q, n_k)``, query ``i`` at position
    ``i + n_k - n_q``; entries above the diagonal are positive and must be masked. See
    :func:`lib.position_bias.alibi_bias`. Computed in float64 (float32 on MPS), cast to ``dtype``."""
    slopes, offset = _alibi_offsets(n_q, n_k, n_heads, True, device)
    return (slopes[:, None, None] * offset[None]).to(dtype)


def alibi_bias_symmetric(
    n_q: int, n_k: int | None, n_heads: int, *, dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """ALiBi's bias without a causal mask, ``-m_h * |j - i|``, shape ``(n_heads, n_q, n_k)``, both sequences
    starting at position 0. See :func:`lib.position_bias.alibi_bias_symmetric`."""
    slopes, offset = _alibi_offsets(n_q, n_k, n_heads, False, device)
    return (-slopes[:, None, None] * offset.abs()[None]).to(dtype)
