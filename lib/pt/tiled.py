r"""Exact attention in linear memory on torch tensors: the contract of :mod:`lib.tiled`.

Same names, signatures, tile schedule, mask convention and fully-masked-row behaviour (``out = 0``,
``lse = -inf``, zero gradients) as the NumPy reference; runs on the inputs' device (CUDA unchanged).

:func:`tiled_attention` goes through :class:`TiledAttentionFunction`, a ``torch.autograd.Function`` whose
backward is :func:`tiled_attention_backward` (eq. tiled-backward of :mod:`lib.tiled`): autograd through
the tiled forward never sees, and never stores, an ``n_q x n_k`` matrix. ``lse`` is returned as a
non-differentiable output.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any, NamedTuple

import torch

from ..attention import default_scale
from ..constants import MASKED_LOGIT
from ..tiled import Tile, tile_schedule
from ._validate import (
    as_float_tensor,
    check_attention_inputs,
    check_causal,
    check_finite,
    check_int,
    dtype_name,
    reduce_to,
)
from .softmax import merge_normalizers

__all__ = [
    "Tile",
    "Partial",
    "tile_schedule",
    "tile_partial",
    "merge_partials",
    "tiled_attention",
    "tiled_attention_backward",
    "TiledAttentionFunction",
]


class Partial(NamedTuple):
    """Partial result ``(m, l, o)`` over a subset of keys; see :class:`lib.tiled.Partial`."""

    m: torch.Tensor
    l: torch.Tensor
    o: torch.Tensor


def tile_partial(s: torch.Tensor, vb: torch.Tensor) -> Partial:
    """Partial result of one tile's scaled, masked logits; see :func:`lib.tiled.tile_partial`."""
    if s.shape[-1]:
        m = s.amax(dim=-1, keepdim=True)
    else:
        m = torch.full((*s.shape[:-1], 1), float("-inf"), dtype=s.dtype, device=s.device)
    safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    p = torch.exp(s - safe)  # (..., rows, cols), 0 where masked
    return Partial(m, p.sum(dim=-1, keepdim=True), p @ vb)


def merge_partials(a: Partial, b: Partial) -> Partial:
    """Associative merge of two partial results; see :func:`lib.tiled.merge_partials`."""
    m, l = merge_normalizers(a.m, a.l, b.m, b.l)
    safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    return Partial(m, l, a.o * torch.exp(a.m - safe) + b.o * torch.exp(b.m - safe))


def _tile_keep(tile: Tile, offset: int, mask: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
    keep = None
    if tile.diagonal:
        i = torch.arange(tile.q0, tile.q1, device=device)[:, None]
        j = torch.arange(tile.k0, tile.k1, device=device)[None, :]
        keep = j <= i + offset
    if mask is not None:
        m = mask[..., tile.q0 : tile.q1, tile.k0 : tile.k1]
        keep = m if keep is None else (m & keep)
    return keep


def _tile_scores(qb: torch.Tensor, kb: torch.Tensor, scale: float, keep: torch.Tensor | None) -> torch.Tensor:
    s = (qb @ kb.transpose(-1, -2)) * scale  # S' of the tile, (..., rows, cols)
    return s if keep is None else s.masked_fill(~keep, MASKED_LOGIT)


def _prepare(q: Any, k: Any, v: Any, mask: Any, scale: Any, block_size: Any, causal: Any):
    q, k, v, mask = check_attention_inputs(q, k, v, mask)
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        check_finite(t, name)
    b = check_int(block_size, "block_size")
    n_q, n_k = q.shape[-2], k.shape[-2]
    causal = check_causal(causal, n_q, n_k)
    sc = default_scale(q.shape[-1]) if scale is None else float(scale)
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:
        mask = mask.to(q.device).broadcast_to((*lead, n_q, n_k))
    return q, k, v, mask, sc, b, causal, tuple(lead)


@torch.no_grad()
def _forward(q, k, v, mask, sc, b, causal, lead):
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    qb, kb, vb = (t.broadcast_to((*lead, *t.shape[-2:])) for t in (q, k, v))  # views
    kw = {"dtype": q.dtype, "device": q.device}
    out = torch.zeros((*lead, n_q, d_v), **kw)
    lse = torch.full((*lead, n_q), float("-inf"), **kw)
    for q0, row in groupby(tile_schedule(n_q, n_k, b, causal=causal), key=lambda t: t.q0):
        q1 = min(q0 + b, n_q)
        acc = Partial(
            torch.full((*lead, q1 - q0, 1), float("-inf"), **kw),
            torch.zeros((*lead, q1 - q0, 1), **kw),
            torch.zeros((*lead, q1 - q0, d_v), **kw),
        )
        for t in row:
            s = _tile_scores(qb[..., q0:q1, :], kb[..., t.k0 : t.k1, :], sc, _tile_keep(t, n_k - n_q, mask, q.device))
            acc = merge_partials(acc, tile_partial(s, vb[..., t.k0 : t.k1, :]))
        out[..., q0:q1, :] = acc.o / torch.where(acc.l == 0, torch.ones_like(acc.l), acc.l)
        lse[..., q0:q1] = (acc.m + torch.log(acc.l))[..., 0]
    return out, lse


@torch.no_grad()
def _backward(q, k, v, out, lse, d_out, mask, sc, b, causal, lead):
    n_q, n_k = q.shape[-2], k.shape[-2]
    qb, kb, vb = (t.broadcast_to((*lead, *t.shape[-2:])) for t in (q, k, v))
    row_dot = (d_out * out).sum(dim=-1, keepdim=True)  # D (..., n_q, 1)
    lse_safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)[..., None]
    kw = {"dtype": q.dtype, "device": q.device}
    dq = torch.zeros((*lead, n_q, q.shape[-1]), **kw)
    dk = torch.zeros((*lead, n_k, k.shape[-1]), **kw)
    dv = torch.zeros((*lead, n_k, v.shape[-1]), **kw)
    for t in tile_schedule(n_q, n_k, b, causal=causal):
        qt, kt, vt = qb[..., t.q0 : t.q1, :], kb[..., t.k0 : t.k1, :], vb[..., t.k0 : t.k1, :]
        dot = d_out[..., t.q0 : t.q1, :]
        s = _tile_scores(qt, kt, sc, _tile_keep(t, n_k - n_q, mask, q.device))
        p = torch.exp(s - lse_safe[..., t.q0 : t.q1, :])  # A of the tile, recomputed
        dv[..., t.k0 : t.k1, :] += p.transpose(-1, -2) @ dot
        dp = dot @ vt.transpose(-1, -2)  # dA of the tile
        ds = p * (dp - row_dot[..., t.q0 : t.q1, :]) * sc  # dS (raw logits Q Kᵀ)
        dq[..., t.q0 : t.q1, :] += ds @ kt
        dk[..., t.k0 : t.k1, :] += ds.transpose(-1, -2) @ qt
    return reduce_to(dq, q.shape), reduce_to(dk, k.shape), reduce_to(dv, v.shape)


class TiledAttentionFunction(torch.autograd.Function):
    """``(out, lse) = tiled forward``; its backward is the tiled backward (eq. tiled-backward).

    Saves ``q, k, v, out, lse`` (all :math:`O(n d)`), never the weights.
    """

    @staticmethod
    def forward(ctx, q, k, v, mask, sc, b, causal, lead):
        out, lse = _forward(q, k, v, mask, sc, b, causal, lead)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.mask, ctx.args = mask, (sc, b, causal, lead)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, _d_lse):
        q, k, v, out, lse = ctx.saved_tensors
        if d_out is None:
            d_out = torch.zeros_like(out)
        grads = _backward(q, k, v, out, lse, d_out, ctx.mask, *ctx.args)
        return (*grads, None, None, None, None, None)  # dq, dk, dv


def tiled_attention(
    q: Any,
    k: Any,
    v: Any,
    mask: Any | None = None,
    scale: float | None = None,
    *,
    block_size: int = 128,
    causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact attention without the ``n_q x n_k`` matrix; returns ``(out, lse)``.

    See :func:`lib.tiled.tiled_attention`. Differentiable: gradients flow through
    :class:`TiledAttentionFunction`, i.e. through :func:`tiled_attention_backward`.
    """
    q, k, v, mask, sc, b, causal, lead = _prepare(q, k, v, mask, scale, block_size, causal)
    return TiledAttentionFunction.apply(q, k, v, mask, sc, b, causal, lead)


def _as_same(x: Any, name: str, like: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    t = as_float_tensor(x, name)
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")
    if t.dtype != like.dtype:
        raise TypeError(f"{name} must have q's dtype {dtype_name(like.dtype)}, got {dtype_name(t.dtype)}")
    if t.device != like.device:
        raise ValueError(f"{name} must live on q's device {like.device}, got {t.device}")
    return t


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
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients ``(dq, dk, dv)`` from the saved ``lse``; see :func:`lib.tiled.tiled_attention_backward`."""
    q, k, v, mask, sc, b, causal, lead = _prepare(q, k, v, mask, scale, block_size, causal)
    want_out = (*lead, q.shape[-2], v.shape[-1])
    out = _as_same(out, "out", q, want_out)
    d_out = _as_same(d_out, "d_out", q, want_out)
    lse = _as_same(lse, "lse", q, (*lead, q.shape[-2]))
    if bool(torch.isnan(lse).any()) or bool(torch.isposinf(lse).any()):
        raise ValueError("lse must be finite or -inf (a row with nothing to attend to), got NaN or +inf")
    return _backward(q.detach(), k.detach(), v.detach(), out.detach(), lse.detach(), d_out.detach(), mask, sc, b,
                     causal, lead)
