r"""Positions as a bias on the logits: ALiBi's linear penalty and T5's bucketed relative positions.

Both add a term to the scaled logits before the softmax, :math:`S'_{ij} + b_{ij}`, that depends only on the
offset :math:`j - i`, never on the absolute positions, and they add nothing to the token representations.

**ALiBi** (Press, Smith and Lewis 2022): head :math:`h` of :math:`H` adds :math:`b_{ij} = m_h (j - i)` for
:math:`j \le i` (a causal model masks :math:`j > i`), with slopes a geometric sequence
:math:`m_h = 2^{-8h/H}`, :math:`h = 1, \dots, H` (for :math:`H` a power of two; otherwise the paper takes the
slopes of the nearest smaller power of two and every other slope of the next larger one). No parameters.
The paper defines ALiBi for causal attention only; without a causal mask (an encoder) the library uses the
symmetric penalty :math:`b_{ij} = -m_h |j - i|` (:func:`alibi_bias_symmetric`).

**T5 relative buckets** (Raffel et al. 2020): the offset is mapped to one of ``num_buckets`` buckets, exact for
small offsets, logarithmically spaced up to ``max_distance``, and one bucket for every offset beyond it; each
bucket holds one learned scalar per head.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._validate import check_bool, check_int

__all__ = ["alibi_slopes", "alibi_bias", "alibi_bias_symmetric", "t5_relative_bucket"]


def alibi_slopes(n_heads: int) -> np.ndarray:
    """ALiBi's ``n_heads`` slopes, steepest first: ``2**(-8 h / H)`` for ``H`` a power of two (exact powers of
    two when ``H`` divides 8), otherwise the paper's interleaving."""
    n_heads = check_int(n_heads, "n_heads")

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    if n_heads & (n_heads - 1) == 0:
        return np.array(power_of_two(n_heads))
    closest = 2 ** int(math.floor(math.log2(n_heads)))
    extra = alibi_slopes(2 * closest)[0::2][: n_heads - closest]
    return np.array(power_of_two(closest) + list(extra))


def alibi_bias(n_q: int, n_k: int | None, n_heads: int) -> np.ndarray:
    """ALiBi's bias ``m_h * (j - i)``, shape ``(n_heads, n_q, n_k)``.

    Query ``i`` sits at position ``i + n_k - n_q`` (the last ``n_q`` positions,
    as in ``lib.attention.causal_mask``). Entries with ``j > i`` are positive
    and must be masked: ALiBi is defined for causal attention.
    """
    n_q = check_int(n_q, "n_q", minimum=0)
    n_k = n_q if n_k is None else check_int(n_k, "n_k", minimum=0)
    query_pos = np.arange(n_q)[:, None] + n_k - n_q
    offset = np.arange(n_k)[None, :] - query_pos  # (n_q, n_k): j - i
    return alibi_slopes(n_heads)[:, None, None] * offset[None]


def alibi_bias_symmetric(n_q: int, n_k: int | None, n_heads: int) -> np.ndarray:
    """ALiBi's bias for attention without a causal mask, ``-m_h * |j - i|``, shape ``(n_heads, n_q, n_k)``.

    Query ``i`` sits at position ``i`` and key ``j`` at position ``j``: both sequences start at position 0
    (unlike :func:`alibi_bias`, whose queries are the last ``n_q`` of the keys' positions). For an encoder's
    self-attention ``n_q = n_k`` and the bias is ``-|alibi_bias(n, n, H)|``: the causal bias mirrored above the
    diagonal. Between two sequences (an encoder-decoder's cross-attention) it lays query position ``i`` beside
    key position ``i``, a diagonal alignment. Every entry is ``<= 0``: nothing needs masking.
    """
    n_q = check_int(n_q, "n_q", minimum=0)
    n_k = n_q if n_k is None else check_int(n_k, "n_k", minimum=0)
    distance = np.abs(np.arange(n_k)[None, :] - np.arange(n_q)[:, None])  # (n_q, n_k): |j - i|
    return -alibi_slopes(n_heads)[:, None, None] * distance[None]


def _large_bucket(r: int, max_exact: int, n_log: int, max_distance: int) -> int:
    # the largest b with (max_distance / max_exact)**b <= (r / max_exact)**n_log, in exact integer arithmetic:
    # T5's float formula floor(log(r / max_exact) / log(max_distance / max_exact) * n_log) without its rounding
    b = 0
    while b + 1 <= n_log and max_distance ** (b + 1) * max_exact ** (n_log - b - 1) <= r**n_log:
        b += 1
    return min(max_exact + b, max_exact + n_log - 1)


def t5_relative_bucket(relative_position: Any, bidirectional: bool = True, num_buckets: int = 32,
                       max_distance: int = 128) -> np.ndarray:
    """T5's bucket of each offset ``relative_position = j - i`` (integer array), as in the reference
    implementation, with the logarithmic part computed exactly in integers (the float formula truncates, so
    at offsets where the logarithm is an exact integer its result depends on the last bit of ``log``).

    Bidirectional: half the buckets for ``j > i``; each half has ``max_exact = half // 2`` exact buckets for
    offsets ``0 .. max_exact - 1`` and logarithmic ones up to ``max_distance``; every offset at or beyond
    ``max_distance`` shares the last bucket of its half. Causal (``bidirectional=False``): offsets ``j > i``
    share bucket 0 with offset 0.
    """
    rel = np.asarray(relative_position)
    if not np.issubdtype(rel.dtype, np.integer):
        raise TypeError(f"relative_position must be an integer array, got dtype {rel.dtype}")
    bidirectional = check_bool(bidirectional, "bidirectional")
    num_buckets = check_int(num_buckets, "num_buckets", minimum=4, even=True)
    max_distance = check_int(max_distance, "max_distance")
    half = num_buckets // 2 if bidirectional else num_buckets
    max_exact = half // 2
    if max_distance <= max_exact:
        raise ValueError(f"max_distance must exceed the {max_exact} exact buckets, got {max_distance}")
    if bidirectional:
        base = np.where(rel > 0, half, 0)
        r = np.abs(rel)
    else:
        base = np.zeros_like(rel)
        r = -np.minimum(rel, 0)
    large = {int(x): _large_bucket(int(x), max_exact, half - max_exact, max_distance)
             for x in np.unique(r[r >= max_exact])}
    bucket = np.array([x if x < max_exact else large[x] for x in r.ravel().tolist()], dtype=np.int64)
    return base + bucket.reshape(r.shape)
