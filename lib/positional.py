r"""Positional encodings, the NumPy reference: sinusoidal (Vaswani et al. 2017, sec. 3.5) and rotary
(Su et al. 2021).

Sinusoidal, for position ``pos`` and pair index ``i = 0, ..., ceil(d/2) - 1``, with frequencies
:math:`\omega_i = \text{base}^{-2i/d}`:

.. math::
    PE_{pos,\,2i} = \sin(pos\,\omega_i),\qquad PE_{pos,\,2i+1} = \cos(pos\,\omega_i)
    \qquad\text{(eq. sinusoidal)}

Shift as a linear map (row vectors): :math:`PE_{pos+k} = PE_{pos}\,M_k` with :math:`M_k` block diagonal,
one ``2x2`` block per frequency,

.. math::
    M_k^{(i)} = \begin{pmatrix}\cos k\omega_i & -\sin k\omega_i\\ \sin k\omega_i & \cos k\omega_i\end{pmatrix}
    \qquad\text{(eq. sinusoid-shift)}

independent of ``pos``. Rotary (RoFormer, eq. 34, interleaved pairs): feature pair
``(x_{2i}, x_{2i+1})`` of the vector at position ``m`` is rotated by the angle :math:`m\theta_i`, with
:math:`\theta_i = \text{base}^{-2i/d}`:

.. math::
    \begin{pmatrix} y_{2i} \\ y_{2i+1}\end{pmatrix} =
    \begin{pmatrix}\cos m\theta_i & -\sin m\theta_i\\ \sin m\theta_i & \cos m\theta_i\end{pmatrix}
    \begin{pmatrix} x_{2i} \\ x_{2i+1}\end{pmatrix}
    \qquad\text{(eq. rope)}

so that :math:`\langle R_m q, R_n k\rangle = \langle q, R_{n-m} k\rangle` depends on ``m - n`` only.
(Meta's reference LLaMA code rotates the same adjacent pairs, as complex numbers. GPT-NeoX and the Hugging
Face port of LLaMA pair feature ``i`` with ``i + d/2`` instead, the "rotate half" form: the same map up to a
fixed permutation of features, see :func:`apply_rope_halves`.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validate import as_float_array, check_finite, check_int, check_real

__all__ = [
    "sinusoid_frequencies",
    "sinusoidal_encoding",
    "sinusoid_shift_matrix",
    "rope_angles",
    "rope_rotation_matrix",
    "apply_rope",
    "apply_rope_halves",
    "check_width",
    "check_base",
]


def check_width(value: Any, name: str, *, even: bool = False) -> int:
    """A positive width; ``even`` where features are rotated in pairs."""
    return check_int(value, name, even=even, why=" (features are rotated in pairs)")


def check_base(base: Any) -> float:
    r"""The ``base`` of the frequencies :math:`\text{base}^{-2i/d}`: a finite real number > 1."""
    return check_real(base, "base", above=1)


def sinusoid_frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    r"""The ``ceil(d_model/2)`` angular frequencies :math:`\omega_i = \text{base}^{-2i/d}`, from 1 down to
    nearly ``1/base`` (wavelengths :math:`2\pi/\omega_i` from :math:`2\pi` to nearly
    :math:`2\pi\,\text{base}`)."""
    d = check_width(d_model, "d_model")
    base = check_base(base)
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (ceil(d/2),)


def sinusoidal_encoding(
    n_positions: int, d_model: int, base: float = 10000.0, dtype: Any = np.float64
) -> np.ndarray:
    """The table ``PE`` of eq. sinusoidal, shape ``(n_positions, d_model)``, for positions
    ``0..n_positions-1``.

    Column ``2i`` is the sine and column ``2i+1`` the cosine of frequency ``i`` (interleaved, as in the
    paper; some code concatenates all sines, then all cosines, which is a permutation of the columns).
    An odd ``d_model`` keeps the last sine and drops its cosine. The angles are computed in float64 and
    cast to ``dtype`` at the end: ``pos * omega`` in float32 loses digits for large ``pos``.
    """
    n = check_int(n_positions, "n_positions", minimum=0)
    d = check_width(d_model, "d_model")
    angles = (
        np.arange(n, dtype=np.float64)[:, None] * sinusoid_frequencies(d, base)[None, :]
    )  # (n, ceil(d/2))
    pe = np.empty((n, d), dtype=np.float64)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles[:, : d // 2])
    return pe.astype(dtype, copy=False)


def _pair_rotations(angles: np.ndarray) -> np.ndarray:
    """Block-diagonal ``(..., 2m, 2m)`` from ``angles (..., m)``: block ``i`` is ``[[c, -s], [s, c]]``."""
    *lead, m = angles.shape
    c, s = np.cos(angles), np.sin(angles)
    r = np.zeros((*lead, 2 * m, 2 * m), dtype=np.float64)
    idx = np.arange(m)
    r[..., 2 * idx, 2 * idx] = c
    r[..., 2 * idx, 2 * idx + 1] = -s
    r[..., 2 * idx + 1, 2 * idx] = s
    r[..., 2 * idx + 1, 2 * idx + 1] = c
    return r


def sinusoid_shift_matrix(k: float, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The ``(d_model, d_model)`` matrix ``M_k`` of eq. sinusoid-shift, with ``PE[pos + k] = PE[pos] @ M_k``.

    Block-diagonal with one ``2x2`` rotation per frequency; it depends on the offset ``k`` but not on
    ``pos``. ``d_model`` must be even (an odd last column has no partner to rotate with).
    """
    d = check_width(d_model, "d_model", even=True)
    return _pair_rotations(check_real(k, "k") * sinusoid_frequencies(d, base))


def rope_angles(positions: Any, d: int, base: float = 10000.0) -> np.ndarray:
    r"""Angles :math:`m\theta_i` of eq. rope, shape ``(*positions.shape, d/2)``, in float64."""
    d = check_width(d, "d", even=True)
    pos = np.asarray(positions)
    if pos.dtype == bool or not (
        np.issubdtype(pos.dtype, np.integer) or np.issubdtype(pos.dtype, np.floating)
    ):
        raise TypeError(f"positions must be an array of integers or reals, got dtype {pos.dtype}")
    check_finite(pos, "positions")
    return pos.astype(np.float64)[..., None] * sinusoid_frequencies(d, base)  # (..., d/2)


def rope_rotation_matrix(position: float, d: int, base: float = 10000.0) -> np.ndarray:
    """The ``(d, d)`` block-diagonal rotation ``R_m`` of eq. rope, acting on column vectors: ``y = R_m x``.

    (With the book's row vectors, ``apply_rope(x)[m] == x[m] @ R_m.T``.)
    """
    return _pair_rotations(rope_angles(position, d, base))


def _rope_inputs(x: Any, positions: Any | None, base: float) -> tuple[np.ndarray, np.ndarray]:
    x = as_float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., n, d), got shape {x.shape}")
    d = x.shape[-1]
    if d % 2:
        raise ValueError(
            f"x must have an even width d (features are rotated in pairs), got d={d} (x.shape={x.shape})"
        )
    pos = np.arange(x.shape[-2]) if positions is None else np.asarray(positions)
    ang = rope_angles(pos, d, base)  # (*pos.shape, d/2)
    try:
        np.broadcast_shapes(ang.shape[:-1], x.shape[:-1])
    except ValueError:
        raise ValueError(
            f"positions of shape {pos.shape} do not broadcast to x's positions x.shape[:-1]={x.shape[:-1]}"
            f" (x.shape={x.shape})"
        ) from None
    if np.broadcast_shapes(ang.shape[:-1], x.shape[:-1]) != x.shape[:-1]:
        raise ValueError(
            f"positions of shape {pos.shape} would broadcast x.shape={x.shape} to a larger shape"
        )
    return x, ang


def apply_rope(x: Any, positions: Any | None = None, base: float = 10000.0) -> np.ndarray:
    """Rotary position embedding, eq. rope, on interleaved pairs ``(x[..., 2i], x[..., 2i+1])``.

    Args:
        x: ``(..., n, d)`` with ``d`` even (queries or keys of one head, or of all heads ``(..., h, n, d)``).
        positions: positions of the ``n`` rows, broadcastable to ``x.shape[:-1]``; default ``0..n-1``.
            Integers or reals (a KV cache passes ``offset + arange(n)``).
        base: the ``base`` of :math:`\\theta_i = \\text{base}^{-2i/d}`.

    Returns an array of ``x``'s shape and dtype. Norms are preserved exactly (each pair is rotated); the
    angles are computed in float64.
    """
    x, ang = _rope_inputs(x, positions, base)
    c, s = np.cos(ang).astype(x.dtype), np.sin(ang).astype(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def apply_rope_halves(x: Any, positions: Any | None = None, base: float = 10000.0) -> np.ndarray:
    """Rotary embedding with the "rotate half" pairing of GPT-NeoX and of the Hugging Face port of LLaMA
    (Meta's reference code rotates adjacent pairs, as :func:`apply_rope` does): feature ``i`` pairs with
    ``i + d/2`` (instead of ``2i`` with ``2i+1``), with the same angles.

    Equal to :func:`apply_rope` conjugated by the permutation that interleaves the two halves; it has the
    same relative-position property. Weights trained with one pairing do not work with the other.
    """
    x, ang = _rope_inputs(x, positions, base)
    c, s = np.cos(ang).astype(x.dtype), np.sin(ang).astype(x.dtype)
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half], x[..., half:]
    return np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)
