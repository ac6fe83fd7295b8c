r"""Exact attention in linear memory: tiled forward and backward passes (the NumPy reference).

The forward pass walks over tiles of ``block_size`` queries by ``block_size`` keys. For each tile it forms
the scores of that tile only, summarises them as a *partial result* ``(m, l, o)`` (eq. tile-partial) and
folds it into the running result of its query rows with the associative merge (eq. partial-merge), the
online softmax of Milakov & Gimelshein (2018) lifted from the normaliser to the output. Memory beyond the
inputs and outputs is :math:`O(\text{block\_size}^2 + n\,d)` per leading index, never :math:`O(n_q n_k)`.

Partial result of a set :math:`J` of keys, for one query row with scaled logits :math:`s'_j`:

.. math::
    m_J = \max_{j\in J} s'_j, \qquad l_J = \sum_{j\in J} e^{s'_j - m_J}, \qquad
    o_J = \sum_{j\in J} e^{s'_j - m_J}\, v_j \qquad\text{(eq. tile-partial)}

Merge of two disjoint sets (associative and commutative):

.. math::
    m = \max(m_1, m_2), \quad l = e^{m_1-m} l_1 + e^{m_2-m} l_2, \quad
    o = e^{m_1-m} o_1 + e^{m_2-m} o_2 \qquad\text{(eq. partial-merge)}

At the end, ``out = o / l`` and the log-sum-exp ``lse = m + log l`` is saved for the backward pass, which
recomputes each tile's weights as :math:`P = e^{S' - \mathrm{lse}}` instead of storing the
:math:`n_q\times n_k` matrix (Dao et al. 2022, Algorithm 4; Dao 2023):

.. math::
    D_i = \sum_c dO_{ic}\, O_{ic}, \quad dV_J \mathrel{+}= P^\top dO, \quad dP = dO\, V_J^\top, \quad
    dS' = P \odot (dP - D), \quad dQ \mathrel{+}= s\, dS' K_J, \quad dK_J \mathrel{+}= s\, dS'^\top Q
    \qquad\text{(eq. tiled-backward)}

:math:`D_i = \sum_j A_{ij}\,dA_{ij}` of eq. attention-backward, computed from ``out`` in :math:`O(n d)`.

Masks follow :mod:`lib.constants` (True = may attend). ``causal=True`` applies the mask of
:func:`lib.attention.causal_mask` without building it: tiles wholly above the diagonal are skipped, tiles
wholly below it are computed without a mask, and only the diagonal tiles are masked inside
(:func:`tile_schedule`). A query row with no key to attend to has ``out = 0``, ``lse = -inf`` (the log of
an empty sum, as :func:`lib.softmax.logsumexp` gives) and zero gradients.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any, NamedTuple

import numpy as np

from ._validate import (
    as_float_array,
    check_attention_inputs,
    check_causal,
    check_finite,
    check_int,
    reduce_to,
)
from .attention import default_scale
from .constants import MASKED_LOGIT
from .softmax import merge_normalizers

__all__ = [
    "Tile",
    "Partial",
    "tile_schedule",
    "tile_partial",
    "merge_partials",
    "tiled_attention",
    "tiled_attention_backward",
    "io_elements",
]


class Tile(NamedTuple):
    """One tile of the score matrix: queries ``q0:q1`` by keys ``k0:k1``."""

    q0: int
    q1: int
    k0: int
    k1: int
    #: True when the causal mask cuts through the tile (a diagonal tile), so it must be masked inside.
    diagonal: bool


class Partial(NamedTuple):
    """Partial result of attention over a subset of keys (eq. tile-partial), for a block of query rows.

    ``m`` and ``l`` have shape ``(..., rows, 1)``; ``o`` (unnormalised) has shape ``(..., rows, d_v)``.
    A row with no key in the subset has ``m = -inf``, ``l = 0``, ``o = 0``: the identity of the merge.
    """

    m: np.ndarray
    l: np.ndarray
    o: np.ndarray


def tile_schedule(n_q: int, n_k: int, block_size: int, *, causal: bool = False) -> list[Tile]:
    """The tiles the tiled kernels visit, in order (query blocks outer, key blocks inner).

    With ``causal=True``, query ``i`` sees keys ``j <= i + n_k - n_q`` (as :func:`lib.attention.causal_mask`),
    and a tile whose first key lies after its last query's last visible key is skipped: it holds no kept
    pair. The number of tiles visited is therefore known before any arithmetic, which is what the chapter
    asserts. Without ``causal`` every one of the ``ceil(n_q/b) * ceil(n_k/b)`` tiles is visited.
    """
    n_q, n_k = check_int(n_q, "n_q", minimum=0), check_int(n_k, "n_k", minimum=0)
    b = check_int(block_size, "block_size")
    causal = check_causal(causal, n_q, n_k)
    offset = n_k - n_q
    tiles = []
    for q0 in range(0, n_q, b):
        q1 = min(q0 + b, n_q)
        for k0 in range(0, n_k, b):
            k1 = min(k0 + b, n_k)
            if causal and k0 > q1 - 1 + offset:
                break  # this tile and every later one in the row lie wholly above the diagonal
            tiles.append(Tile(q0, q1, k0, k1, diagonal=causal and k1 - 1 > q0 + offset))
    return tiles


def _tile_keep(tile: Tile, offset: int, mask: np.ndarray | None) -> np.ndarray | None:
    """The boolean keep-mask of one tile, or None when every pair in it is kept."""
    keep = None
    if tile.diagonal:
        i = np.arange(tile.q0, tile.q1)[:, None]
        j = np.arange(tile.k0, tile.k1)[None, :]
        keep = j <= i + offset  # (rows, cols)
    if mask is not None:
        m = mask[..., tile.q0 : tile.q1, tile.k0 : tile.k1]
        keep = m if keep is None else (m & keep)
    return keep


def _tile_scores(qb: np.ndarray, kb: np.ndarray, scale: Any, keep: np.ndarray | None) -> np.ndarray:
    s = (qb @ np.swapaxes(kb, -1, -2)) * scale  # S' of the tile, (..., rows, cols)
    return s if keep is None else np.where(keep, s, MASKED_LOGIT)


def tile_partial(s: np.ndarray, vb: np.ndarray) -> Partial:
    """The partial result (eq. tile-partial) of one tile's scaled, masked logits ``s`` (..., rows, cols).

    Masked logits are ``-inf`` and contribute exactly 0; a row masked throughout gives the merge identity.
    """
    m = np.max(s, axis=-1, keepdims=True) if s.shape[-1] else np.full((*s.shape[:-1], 1), -np.inf, s.dtype)
    safe = np.where(np.isneginf(m), 0, m)
    p = np.exp(s - safe)  # (..., rows, cols), 0 where masked
    return Partial(m, p.sum(axis=-1, keepdims=True), p @ vb)


def merge_partials(a: Partial, b: Partial) -> Partial:
    """Merge the partial results of two disjoint key sets (eq. partial-merge).

    ``(m, l)`` come from :func:`lib.softmax.merge_normalizers`; the unnormalised outputs are rescaled by the
    same factors. Associative and commutative, with identity ``(-inf, 0, 0)``.
    """
    m, l = merge_normalizers(a.m, a.l, b.m, b.l)
    safe = np.where(np.isneginf(m), 0, m)
    return Partial(m, l, a.o * np.exp(a.m - safe) + b.o * np.exp(b.m - safe))


def _prepare(q: Any, k: Any, v: Any, mask: Any, scale: Any, block_size: Any, causal: Any):
    q, k, v, mask = check_attention_inputs(q, k, v, mask)
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        check_finite(t, name)
    b = check_int(block_size, "block_size")
    n_q, n_k = q.shape[-2], k.shape[-2]
    causal = check_causal(causal, n_q, n_k)
    sc = default_scale(q.shape[-1]) if scale is None else scale
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    qb = np.broadcast_to(q, (*lead, *q.shape[-2:]))  # views: nothing is copied
    kb = np.broadcast_to(k, (*lead, *k.shape[-2:]))
    vb = np.broadcast_to(v, (*lead, *v.shape[-2:]))
    if mask is not None:
        mask = np.broadcast_to(mask, (*lead, n_q, n_k))
    return q, k, v, qb, kb, vb, mask, q.dtype.type(sc), b, causal, lead


def tiled_attention(
    q: Any,
    k: Any,
    v: Any,
    mask: Any | None = None,
    scale: float | None = None,
    *,
    block_size: int = 128,
    causal: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact attention without the ``n_q x n_k`` matrix; returns ``(out, lse)``.

    Args:
        q, k, v: floating arrays ``(..., n_q, d_k)``, ``(..., n_k, d_k)``, ``(..., n_k, d_v)`` of one dtype,
            all finite; leading dimensions broadcast.
        mask: optional boolean mask broadcastable to ``(..., n_q, n_k)``, True = may attend; read tile by tile.
        scale: multiplies the logits; default ``1/sqrt(d_k)``.
        block_size: tile side (queries and keys); need not divide ``n``.
        causal: apply :func:`lib.attention.causal_mask` (combined with ``mask`` if both are given), skipping
            tiles wholly above the diagonal.

    Returns:
        ``out`` ``(..., n_q, d_v)``, equal to :func:`lib.attention.attention`'s output, and
        ``lse`` ``(..., n_q)``, the log-sum-exp of each row's scaled, masked logits (``-inf`` for a row with
        nothing to attend to, whose ``out`` row is 0).
    """
    q, k, v, qb, kb, vb, mask, sc, b, causal, lead = _prepare(q, k, v, mask, scale, block_size, causal)
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    offset = n_k - n_q
    out = np.zeros((*lead, n_q, d_v), dtype=q.dtype)
    lse = np.full((*lead, n_q), -np.inf, dtype=q.dtype)
    for q0, row in groupby(tile_schedule(n_q, n_k, b, causal=causal), key=lambda t: t.q0):
        q1 = min(q0 + b, n_q)
        acc = Partial(  # the merge identity: nothing seen yet
            np.full((*lead, q1 - q0, 1), -np.inf, dtype=q.dtype),
            np.zeros((*lead, q1 - q0, 1), dtype=q.dtype),
            np.zeros((*lead, q1 - q0, d_v), dtype=q.dtype),
        )
        for t in row:
            s = _tile_scores(qb[..., q0:q1, :], kb[..., t.k0 : t.k1, :], sc, _tile_keep(t, offset, mask))
            acc = merge_partials(acc, tile_partial(s, vb[..., t.k0 : t.k1, :]))
        out[..., q0:q1, :] = acc.o / np.where(acc.l == 0, 1, acc.l)
        with np.errstate(divide="ignore"):  # log 0 = -inf for a row with nothing to attend to
            lse[..., q0:q1] = (acc.m + np.log(acc.l))[..., 0]
    return out, lse


def tiled_attention_backward(
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    lse: Any,
    d_out: Any,
    *,
    mask: Any | None = None,
    block_size: int = 128,
    causal: bool = False,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients ``(dq, dk, dv)`` (eq. tiled-backward), recomputing each tile from the saved ``lse``.

    ``out`` and ``lse`` are :func:`tiled_attention`'s results for the same ``q, k, v, mask, scale, causal``
    (``block_size`` may differ). Equals :func:`lib.attention.attention_backward`; gradients are reduced to
    the inputs' shapes when leading dimensions were broadcast. Memory: :math:`O(b^2 + n d)` per leading index
    beyond the gradients themselves.
    """
    q, k, v, qb, kb, vb, mask, sc, b, causal, lead = _prepare(q, k, v, mask, scale, block_size, causal)
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    want_out = (*lead, n_q, d_v)
    out = _as_same(out, "out", q.dtype, want_out)
    d_out = _as_same(d_out, "d_out", q.dtype, want_out)
    lse = _as_same(lse, "lse", q.dtype, (*lead, n_q))
    if np.isnan(lse).any() or np.isposinf(lse).any():
        raise ValueError("lse must be finite or -inf (a row with nothing to attend to), got NaN or +inf")
    offset = n_k - n_q
    row_dot = np.sum(d_out * out, axis=-1, keepdims=True)  # D (..., n_q, 1)
    lse_safe = np.where(np.isneginf(lse), 0, lse)[..., None]  # dead rows are all -inf logits: P = 0
    dq = np.zeros((*lead, n_q, q.shape[-1]), dtype=q.dtype)
    dk = np.zeros((*lead, n_k, k.shape[-1]), dtype=q.dtype)
    dv = np.zeros((*lead, n_k, d_v), dtype=q.dtype)
    for t in tile_schedule(n_q, n_k, b, causal=causal):
        qt, kt, vt = qb[..., t.q0 : t.q1, :], kb[..., t.k0 : t.k1, :], vb[..., t.k0 : t.k1, :]
        dot = d_out[..., t.q0 : t.q1, :]
        s = _tile_scores(qt, kt, sc, _tile_keep(t, offset, mask))
        p = np.exp(s - lse_safe[..., t.q0 : t.q1, :])  # A of the tile, recomputed (..., rows, cols)
        dv[..., t.k0 : t.k1, :] += np.swapaxes(p, -1, -2) @ dot
        dp = dot @ np.swapaxes(vt, -1, -2)  # dA of the tile
        ds = p * (dp - row_dot[..., t.q0 : t.q1, :]) * sc  # dS (raw logits Q Kᵀ)
        dq[..., t.q0 : t.q1, :] += ds @ kt
        dk[..., t.k0 : t.k1, :] += np.swapaxes(ds, -1, -2) @ qt
    return reduce_to(dq, q.shape), reduce_to(dk, k.shape), reduce_to(dv, v.shape)


def _as_same(x: Any, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    arr = as_float_array(x, name)
    if arr.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {arr.shape}")
    if arr.dtype != dtype:
        raise TypeError(f"{name} must have q's dtype {dtype}, got {arr.dtype}")
    return arr


def io_elements(n_q: int, n_k: int, d_k: int, d_v: int, block_size: int, *, causal: bool = False) -> dict[str, int]:
    r"""Elements moved between slow memory (a GPU's HBM, a CPU's RAM) and fast memory (SRAM, cache) by one
    forward pass for one leading index: ``{"naive": ..., "tiled": ...}``.

    ``naive`` is standard attention as Dao et al. (2022, Algorithm 0) write it: read Q, K; write S; read S,
    write P; read P and V; write O:

    .. math:: n_q d_k + n_k d_k + 4\, n_q n_k + n_k d_v + n_q d_v \qquad\text{(eq. io-naive)}

    (a causal mask changes nothing: the naive kernel masks, it does not skip). ``tiled`` is
    :func:`tiled_attention`: each query block is read once and its output and ``lse`` written once, and
    every visited tile (:func:`tile_schedule`) reads its keys and values:

    .. math:: n_q d_k + \sum_{\text{tiles}} (k_1 - k_0)(d_k + d_v) + n_q (d_v + 1)
              \;=\; n_q d_k + \lceil n_q / b \rceil\, n_k (d_k + d_v) + n_q (d_v + 1) \text{ without a mask}
              \qquad\text{(eq. io-tiled)}

    The fast memory must hold one query block's Q, running (m, l, o), one K/V tile and the b x b scores:
    :math:`b(2 d_k + 2 d_v + 2) + b^2` elements. The n² term of the naive count becomes
    :math:`n^2 (d_k + d_v) / b`: fewer elements moved whenever :math:`b > (d_k + d_v)/4`.
    """
    tiles = tile_schedule(n_q, n_k, block_size, causal=causal)
    d_k, d_v = check_int(d_k, "d_k"), check_int(d_v, "d_v")
    naive = n_q * d_k + n_k * d_k + 4 * n_q * n_k + n_k * d_v + n_q * d_v
    tiled = n_q * d_k + sum((t.k1 - t.k0) * (d_k + d_v) for t in tiles) + n_q * (d_v + 1)
    return {"naive": int(naive), "tiled": int(tiled)}
