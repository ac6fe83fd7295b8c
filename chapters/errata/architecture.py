"""Pitfalls of the architecture around attention: positions, LayerNorm and the FFN, encoder and decoder blocks."""

from __future__ import annotations

import numpy as np
import sympy as sp
import torch

import lib.attention as att
import lib.multihead as mh
import lib.positional as pos
from lib.blocks import decoder_layer_param_count, encoder_layer_param_count
from lib.book.fmt import agree, count, fixed, percent
from lib.ffn import feed_forward, ffn_param_count
from lib.norms import layer_norm, layer_norm_param_count
from lib.pt.blocks import PostLNDecoderBlock, PostLNEncoderBlock
from lib.pt.ffn import FeedForward
from lib.pt.multihead import MultiHeadAttention

from . import TOL, pitfall

# Positional encodings


@pitfall("positional")
def equivariant_not_invariant() -> dict[str, str]:
    """Without positions, unmasked self-attention is permutation-equivariant (not invariant); a causal mask breaks
    even that."""
    g = np.random.default_rng(0)
    params = mh.init_params(16, 4, rng=g)
    x = g.standard_normal((6, 16))
    perm = g.permutation(6)
    out, out_p = (mh.multi_head_attention(inp, None, params, 4)[0] for inp in (x, x[perm]))
    agree(out_p, out[perm], TOL)
    moved = np.abs(out_p - out).max()
    rng = np.random.default_rng(38)
    params, x = mh.init_params(32, 4, rng=rng), rng.standard_normal((7, 32))
    perm, causal = rng.permutation(7), att.causal_mask(7)
    out, out_p = (mh.multi_head_attention(inp, None, params, 4, causal)[0] for inp in (x, x[perm]))
    causal_gap, sd = np.abs(out_p - out[perm]).max(), out.std()
    assert moved > 0.1 and causal_gap > 5 * sd > 0.5
    return {"causal": fixed(causal_gap, 2), "sd": fixed(sd, 2)}


@pitfall("positional")
def distance_not_monotone() -> dict[str, str]:
    """The distance from position 0 grows only up to offset 43; many later unit steps bring the codes closer."""
    table = pos.sinusoidal_encoding(1001, 512)
    dist = np.linalg.norm(table - table[0], axis=1)
    steps = np.diff(dist)
    assert np.abs(steps).min() > 1e-8  # no step within round-off of zero: the count holds on any machine
    first_dip = int(np.argmax(steps < 0))
    assert first_dip == 43 and dist[912] < dist[901] and dist[:11].max() < dist[20:].min()
    return {"grows_to": count(first_dip), "closer": count(int((steps < 0).sum())), "steps": count(len(steps))}


def diagonal_spread(s: np.ndarray) -> float:
    """Largest (max - min) along any diagonal of ``s``: 0 for a matrix that depends on ``j - i`` alone."""
    return max(float(np.ptp(np.diagonal(s, offset=o))) for o in range(-s.shape[0] + 1, s.shape[1]))


@pitfall("positional")
def offset_after_projection() -> dict[str, str]:
    """PE_p . PE_{p+k} depends on k alone; the scaled scores of random query and key projections do not: for one
    offset they vary with the position by several times their own standard deviation."""
    table = pos.sinusoidal_encoding(600, 512)
    raw = table @ table.T
    by_formula = np.cos(np.arange(600)[:, None] * pos.sinusoid_frequencies(512)).sum(axis=1)  # sum_i cos(k w_i)
    agree(raw[0], by_formula, 1e-10)
    assert diagonal_spread(raw) < 1e-10
    w_q, w_k = np.random.default_rng(5).standard_normal((2, 512, 64)) / np.sqrt(512)
    scores = (table @ w_q) @ (table @ w_k).T / np.sqrt(64)
    spread, sd = diagonal_spread(scores), float(scores.std())
    assert spread > 5 * sd
    return {"spread": fixed(spread, 1), "sd": fixed(sd, 1)}


# LayerNorm, residuals and the FFN


@pitfall("layernorm-ffn")
def gamma_beta_vectors() -> dict[str, str]:
    """gamma and beta have one entry per feature; no scalar gain reproduces a per-feature one."""
    g = np.random.default_rng(0)
    x, gamma = g.standard_normal((3, 512)), g.standard_normal(512)
    per_feature, plain = layer_norm(x, gamma=gamma), layer_norm(x)
    best = (per_feature * plain).sum() / (plain**2).sum()  # the least-squares scalar gain
    assert layer_norm_param_count(512) == 2 * 512 and np.abs(per_feature - best * plain).max() > 1
    return {"params": count(layer_norm_param_count(512))}


@pitfall("layernorm-ffn")
def ffn_shapes() -> dict[str, str]:
    """With W_1 of shape (d, d_ff) the FFN is x W_1 (row vectors); W_1 x is a shape error."""
    g = np.random.default_rng(0)
    w1, w2, x = 0.02 * g.standard_normal((512, 2048)), 0.02 * g.standard_normal((2048, 512)), g.standard_normal(512)
    try:
        w1 @ x
        raised = False
    except ValueError:
        raised = True
    assert raised and feed_forward(x[None], w1, np.zeros(2048), w2, np.zeros(512)).shape == (1, 512)
    return {"shape": "{} × {}".format(*w1.shape)}


@pitfall("layernorm-ffn")
def post_ln_rescales() -> dict[str, str]:
    """Post-LN keeps the input with coefficient 1/sqrt(2) per sub-layer (for an uncorrelated output of the same
    size), (1/sqrt(2))^6 = 1/8 after six; only Pre-LN adds an increment. The simulation checks both."""
    rng = np.random.default_rng(27)
    x = layer_norm(rng.standard_normal((2000, 512)))
    one = layer_norm(x + layer_norm(rng.standard_normal((2000, 512))))
    six = x
    for _ in range(6):
        six = layer_norm(six + layer_norm(rng.standard_normal((2000, 512))))
    c1, c6 = ((y * x).sum() / (x * x).sum() for y in (one, six))
    assert abs(c1 - 1 / np.sqrt(2)) < 0.005 and abs(c6 - 1 / 8) < 0.005 and sp.sqrt(2) ** -6 == sp.Rational(1, 8)
    return {"one": "1/√2", "six": "1/8"}


@pitfall("layernorm-ffn")
def zero_sublayer_post_ln() -> dict[str, str]:
    """A zero sub-layer passes its input in Pre-LN; in Post-LN the LayerNorm still acts on it."""
    d = 512
    rng = np.random.default_rng(32)
    x = np.sqrt(d) * rng.normal(0.0, d**-0.5, size=(10, d)) + pos.sinusoidal_encoding(10, d)  # a first block's input
    moved, sd = np.abs(layer_norm(x + 0) - x).max(), x.std()
    assert moved > 0.5 and 0.75 < moved / sd < 0.9  # an entry moves by most of the input's standard deviation
    return {"moved": fixed(moved, 1), "sd": fixed(sd, 1)}


# Encoder and decoder blocks


@pitfall("blocks")
def block_parameters() -> dict[str, str]:
    """An encoder block at d = 512, d_ff = 2048 has 3,152,384 parameters: the FFN's 2,099,712, attention's
    1,050,624 and two LayerNorms' 2,048."""
    p_enc, p_ffn, p_att = encoder_layer_param_count(512, 8, 2048), ffn_param_count(512, 2048), mh.param_count(512, 8)
    p_ln = 2 * layer_norm_param_count(512)
    assert p_enc == p_att + p_ffn + p_ln and p_ffn > p_enc / 2
    return {"block": count(p_enc), "ffn": count(p_ffn), "attention": count(p_att), "norms": count(p_ln)}


@pitfall("blocks")
def decoder_layer() -> dict[str, str]:
    """The original decoder layer has two attention sub-layers (masked self-, then cross-attention) per FFN."""

    def modules(block: torch.nn.Module, kind: type) -> int:
        return sum(isinstance(m, kind) for m in block.modules())

    enc, dec = PostLNEncoderBlock(16, 4, 32), PostLNDecoderBlock(16, 4, 32)
    assert [modules(b, MultiHeadAttention) for b in (enc, dec)] == [1, 2]
    assert [modules(b, FeedForward) for b in (enc, dec)] == [1, 1]
    p_enc, p_dec = encoder_layer_param_count(512, 8, 2048), decoder_layer_param_count(512, 8, 2048)
    assert p_dec - p_enc == mh.param_count(512, 8) + layer_norm_param_count(512)
    return {"dec": count(p_dec), "enc": count(p_enc)}


@pitfall("blocks")
def not_only_attention() -> dict[str, str]:
    """No recurrence, and the FFN is a pair of kernel-1 convolutions; but it holds two thirds of a layer's
    parameters."""
    d, d_ff = 512, 2048
    rng = np.random.default_rng(27)
    w1, b1 = rng.standard_normal((d, d_ff)) / np.sqrt(d), rng.standard_normal(d_ff) / np.sqrt(d)
    w2, b2 = rng.standard_normal((d_ff, d)) / np.sqrt(d_ff), rng.standard_normal(d) / np.sqrt(d_ff)
    x = rng.standard_normal((6, d))
    conv = torch.nn.functional.conv1d
    hidden = torch.relu(conv(torch.from_numpy(x.T[None]), torch.from_numpy(w1.T[:, :, None]), torch.from_numpy(b1)))
    agree(conv(hidden, torch.from_numpy(w2.T[:, :, None]), torch.from_numpy(b2))[0].T,
          feed_forward(x, w1, b1, w2, b2), TOL)
    share = ffn_param_count(d, d_ff) / encoder_layer_param_count(d, 8, d_ff)
    assert 0.6 < share < 0.7
    return {"share": percent(share, 0)}
