"""Tests for lib.flops: every count is checked against FLOPs counted from the shapes of the matrix products
that an actual forward pass through lib performs (NumPy, via a counting array; PyTorch, via
torch.utils.flop_counter), the crossover against sympy, and bad inputs against clear errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

import lib.pt.attention as pta
import lib.pt.ffn as ptf
from lib import flops as F
from lib.attention import attention
from lib.constants import FLOPS_PER_MAC
from lib.ffn import feed_forward, relu
from lib.multihead import MultiHeadParams, init_params, multi_head_attention, multi_head_flops


# ---------------------------------------------------------------- a FLOP counter for NumPy
class Counting(np.ndarray):
    """An ndarray that adds ``FLOPS_PER_MAC * batch * m * k * p`` to a tally for every matmul it enters.

    ``np.matmul`` (and so ``@``) is a ufunc, so it reaches ``__array_ufunc__`` even inside lib's functions;
    everything else runs unchanged on plain arrays and the results are viewed as ``Counting`` again.
    """

    tally = [0]

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raw = [np.asarray(t) if isinstance(t, Counting) else t for t in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(o) if isinstance(o, Counting) else o for o in kwargs["out"])
        if ufunc is np.matmul and method == "__call__":
            a, b = (np.asarray(t) for t in raw)
            a2 = a[None, :] if a.ndim == 1 else a
            b2 = b[:, None] if b.ndim == 1 else b
            batch = int(np.prod(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])))
            Counting.tally[0] += FLOPS_PER_MAC * batch * a2.shape[-2] * a2.shape[-1] * b2.shape[-1]
        out = getattr(ufunc, method)(*raw, **kwargs)
        if isinstance(out, tuple):
            return tuple(o.view(Counting) if isinstance(o, np.ndarray) else o for o in out)
        return out.view(Counting) if isinstance(out, np.ndarray) else out


def counted(fn, *args, **kwargs) -> int:
    """Run ``fn`` and return the matmul FLOPs it performed on ``Counting`` arrays."""
    Counting.tally[0] = 0
    fn(*args, **kwargs)
    return Counting.tally[0]


def c(x: np.ndarray) -> Counting:
    return np.asarray(x, dtype=np.float64).view(Counting)


def test_the_counter_counts_and_can_fail():
    a, b = c(np.ones((3, 4))), c(np.ones((4, 5)))
    assert counted(lambda: a @ b) == 2 * 3 * 4 * 5
    assert counted(lambda: np.ones((2, 3, 4)).view(Counting) @ b) == 2 * 2 * 3 * 4 * 5
    assert counted(lambda: a + 1.0) == 0  # elementwise work is not a matmul


# ---------------------------------------------------------------- counts vs an actual forward pass
def _layer_forward(x, params, n_heads, w1, b1, w2, b2, gated_v=None):
    """One layer's sub-layers through lib (residuals and norms add no matmuls)."""
    o, _ = multi_head_attention(x, None, params, n_heads)
    if gated_v is None:
        return feed_forward(o, w1, b1, w2, b2)
    return _gated_ffn(o, w1, gated_v, w2)


def _gated_ffn(x, w, v, w2):
    """SwiGLU (Shazeer 2020): (silu(x W) * (x V)) W2; written here because lib has no gated block."""
    g = x @ w
    return (g / (1.0 + np.exp(-g)) * (x @ v)) @ w2


@given(
    n=st.integers(1, 9),
    d_k=st.integers(1, 4),
    h_kv=st.integers(1, 3),
    group=st.integers(1, 3),
    d_ff=st.integers(1, 12),
)
def test_layer_flops_match_the_matmuls_of_a_numpy_forward_pass(n, d_k, h_kv, group, d_ff):
    h = h_kv * group
    d_model = h * d_k
    rng = np.random.default_rng(0)
    params = MultiHeadParams(*[None if t is None else c(t) for t in init_params(d_model, h, h_kv, rng=rng)])
    x = c(rng.standard_normal((n, d_model)))
    w1, w2 = c(rng.standard_normal((d_model, d_ff))), c(rng.standard_normal((d_ff, d_model)))
    b1, b2 = c(np.zeros(d_ff)), c(np.zeros(d_model))
    want = F.layer_flops(n, d_model, h, d_ff, n_kv_heads=h_kv)
    assert counted(_layer_forward, x, params, h, w1, b1, w2, b2) == want.total
    assert counted(feed_forward, x, w1, b1, w2, b2, relu) == want.ffn
    q = c(rng.standard_normal((h, n, d_k)))
    assert counted(attention, q, q, q) == want.scores


@pytest.mark.parametrize("n, d_model, d_ff", [(1, 1, 1), (5, 8, 24), (13, 6, 16)])
def test_gated_ffn_counts_three_matrices(n, d_model, d_ff):
    rng = np.random.default_rng(1)
    x = c(rng.standard_normal((n, d_model)))
    w, v = c(rng.standard_normal((d_model, d_ff))), c(rng.standard_normal((d_model, d_ff)))
    w2 = c(rng.standard_normal((d_ff, d_model)))
    assert counted(_gated_ffn, x, w, v, w2) == F.ffn_flops(n, d_model, d_ff, gated=True)
    assert F.ffn_flops(n, d_model, d_ff, gated=True) * 2 == F.ffn_flops(n, d_model, d_ff) * 3


@pytest.mark.parametrize("n, h, d_k", [(1, 1, 3), (6, 2, 4), (11, 3, 2)])
def test_causal_count_is_what_a_kernel_skipping_every_masked_pair_does(n, h, d_k):
    """Query i attends to keys 0..i only: run exactly those products and count them."""
    rng = np.random.default_rng(2)
    q, k, v = (c(rng.standard_normal((h, n, d_k))) for _ in range(3))

    def skipping_kernel():
        for i in range(n):
            attention(q[:, i : i + 1], k[:, : i + 1], v[:, : i + 1])

    assert counted(skipping_kernel) == F.attention_score_flops(n, h * d_k, causal=True)
    assert F.attention_score_flops(n, h * d_k, causal=True) == 2 * n * (n + 1) * h * d_k


def test_flops_agree_with_multi_head_flops_and_do_not_depend_on_heads():
    for h, h_kv in [(1, 1), (4, 4), (8, 2), (8, 1)]:
        lf = F.layer_flops(10, 64, h, 256, n_kv_heads=h_kv)
        assert lf.attention == multi_head_flops(10, 10, 64, h, h_kv)["total"]
    assert len({F.layer_flops(10, 64, h, 256).total for h in (1, 2, 4, 8, 64)}) == 1


# ---------------------------------------------------------------- torch's counter as a second oracle
@pytest.mark.parametrize("n, h, d_k, d_ff", [(4, 2, 3, 10), (16, 4, 8, 64)])
def test_counts_match_torch_flop_counter_on_the_pt_path(n, h, d_k, d_ff):
    torch.manual_seed(0)
    q, k, v = (torch.randn(h, n, d_k, dtype=torch.float64) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        pta.attention(q, k, v)
    assert counter.get_total_flops() == F.attention_score_flops(n, h * d_k)
    x = torch.randn(n, h * d_k, dtype=torch.float64)
    w1, w2 = torch.randn(h * d_k, d_ff, dtype=torch.float64), torch.randn(d_ff, h * d_k, dtype=torch.float64)
    with FlopCounterMode(display=False) as counter:
        ptf.feed_forward(x, w1, torch.zeros(d_ff, dtype=torch.float64), w2, torch.zeros(h * d_k, dtype=torch.float64))
    assert counter.get_total_flops() == F.ffn_flops(n, h * d_k, d_ff)


# ---------------------------------------------------------------- closed forms
def test_the_worked_numbers():
    assert F.attention_score_flops(1, 1) == 4
    assert F.attention_score_flops(3, 2) == 4 * 9 * 2
    assert F.projection_flops(5, 8, 2) == 8 * 5 * 8 * 8
    assert F.projection_flops(5, 8, 4, n_kv_heads=1) == 2 * 5 * 8 * (2 * 8 + 2 * 2)
    assert F.ffn_flops(5, 8, 32) == 16 * 5 * 8 * 8
    assert F.crossover_length(4096) == 16384.0  # the seed's number, n = 4 d_model


@given(n=st.integers(1, 60))
def test_causal_pairs_is_the_count_of_the_mask(n):
    from lib.attention import causal_mask

    assert F.causal_pairs(n) == int(causal_mask(n).sum())
    assert F.attention_score_flops(n, 3, causal=True) < F.attention_score_flops(n, 3) or n == 1


def _brute_block_pairs(n, bq, bk):
    keep = np.tril(np.ones((n, n), dtype=bool))
    total = 0
    for i0 in range(0, n, bq):
        for j0 in range(0, n, bk):
            tile = keep[i0 : i0 + bq, j0 : j0 + bk]
            total += tile.size if tile.any() else 0
    return total


@given(n=st.integers(1, 70), bq=st.integers(1, 20), bk=st.integers(1, 20))
def test_causal_block_pairs_matches_tiles_counted_by_brute_force(n, bq, bk):
    got = F.causal_block_pairs(n, bq, bk)
    assert got == _brute_block_pairs(n, bq, bk)
    assert F.causal_pairs(n) <= got <= n * n


def test_causal_block_pairs_limits():
    assert F.causal_block_pairs(50, 1) == F.causal_pairs(50)
    assert F.causal_block_pairs(50, 64) == 50 * 50
    assert abs(F.causal_block_pairs(8192, 128) / 8192**2 - 0.5) < 0.01


def _sympy_crossover(d, d_ff, *, proj, causal, gated, w, w_kv):
    n = sp.symbols("n", positive=True)
    m = 3 if gated else 2
    scores = 2 * n * (n + 1) * w if causal else 4 * n**2 * w
    att = scores + (2 * n * d * (2 * w + 2 * w_kv) if proj else 0)
    sol = sp.solve(sp.Eq(att, 2 * m * n * d * d_ff), n)
    return float(sol[0]) if sol else 0.0


@pytest.mark.parametrize("proj", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("d, h, h_kv, d_ff", [(4096, 32, 32, 16384), (4096, 32, 8, 11008), (512, 8, 1, 1365)])
def test_crossover_matches_sympy(proj, causal, gated, d, h, h_kv, d_ff):
    d_k = d // h
    got = F.crossover_length(d, d_ff, include_projections=proj, causal=causal, gated=gated, n_heads=h,
                             n_kv_heads=h_kv)
    want = _sympy_crossover(d, d_ff, proj=proj, causal=causal, gated=gated, w=h * d_k, w_kv=h_kv * d_k)
    assert got == pytest.approx(want, rel=1e-12)
    # and the counts really cross there: below, the FFN costs more; above, attention does
    lo, hi = math.floor(got), math.ceil(got) + 1
    if lo >= 1:
        lf = F.layer_flops(lo, d, h, d_ff, n_kv_heads=h_kv, gated=gated, causal=causal)
        assert (lf.attention if proj else lf.scores) <= lf.ffn
    lf = F.layer_flops(hi, d, h, d_ff, n_kv_heads=h_kv, gated=gated, causal=causal)
    assert (lf.attention if proj else lf.scores) > lf.ffn


def test_crossover_symbolic_plain_case_is_four_d_model():
    n, d = sp.symbols("n d_model", positive=True)
    sol = sp.solve(sp.Eq(4 * n**2 * d, 2 * 2 * n * d * (4 * d)), n)
    assert sol == [4 * d]
    for dm in (64, 512, 4096):
        assert F.crossover_length(dm) == 4 * dm
        assert F.crossover_length(dm, causal=True) == 2 * 4 * dm - 1
        assert F.crossover_length(dm, 3 * dm, gated=True) == 1.5 * 3 * dm


def test_gqa_changes_only_the_projections():
    a = F.layer_flops(1000, 4096, 32, 11008, gated=True)
    b = F.layer_flops(1000, 4096, 32, 11008, gated=True, n_kv_heads=8)
    assert a.scores == b.scores and a.ffn == b.ffn and b.projections < a.projections
    assert F.crossover_length(4096, n_heads=32, n_kv_heads=8) == F.crossover_length(4096, n_heads=32)
    assert F.crossover_length(4096, n_heads=32, n_kv_heads=8, include_projections=True) > F.crossover_length(
        4096, n_heads=32, include_projections=True
    )


def test_crossover_is_zero_when_projections_outweigh_the_ffn():
    assert F.crossover_length(64, 16, include_projections=True) == 0.0


# ---------------------------------------------------------------- per token
@pytest.mark.parametrize("gated, h_kv, vocab", [(False, 4, None), (True, 2, 100), (True, 1, 7)])
def test_per_token_sums_to_the_causal_layer_count(gated, h_kv, vocab):
    n, d, L, h, d_ff = 37, 32, 3, 4, 80
    total = sum(F.forward_flops_per_token(t, d, L, h, h_kv, None, d_ff, gated, vocab).total for t in range(1, n + 1))
    layer = F.layer_flops(n, d, h, d_ff, n_kv_heads=h_kv, gated=gated, causal=True).total
    assert total == L * layer + n * (0 if vocab is None else 2 * d * vocab)


def test_per_token_parts():
    p = F.forward_flops_per_token(1000, 4096, 32, 32, 8, 128, 14336, True, 32000)
    assert p.attention == 32 * 4 * 1000 * 4096
    assert p.projections == 32 * 2 * 4096 * (2 * 4096 + 2 * 1024)
    assert p.ffn == 32 * 6 * 4096 * 14336
    assert p.lm_head == 2 * 4096 * 32000
    assert p.total == p.attention + p.projections + p.ffn + p.lm_head
    assert F.forward_flops_per_token(1, 8, 1, 2, None, None, 8, False).lm_head == 0
    # head_dim set on its own (h * head_dim != d_model) is allowed
    assert F.forward_flops_per_token(10, 10, 1, 4, 2, 4, 8, False).attention == 4 * 10 * 16


# ---------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("bad", [0, -3])
def test_non_positive_lengths_are_refused(bad):
    with pytest.raises(ValueError, match=f"n must be a positive int, got {bad}"):
        F.attention_score_flops(bad, 8)
    with pytest.raises(ValueError, match="d_ff must be a positive int"):
        F.ffn_flops(4, 8, bad)
    with pytest.raises(ValueError, match="n_context must be a positive int"):
        F.forward_flops_per_token(bad, 8, 1, 2, None, None, 8, False)


@pytest.mark.parametrize("bad", [2.5, True, "8", None])
def test_non_int_lengths_are_type_errors(bad):
    with pytest.raises(TypeError, match=f"n must be an int, got {type(bad).__name__}"):
        F.attention_score_flops(bad, 8)
    with pytest.raises(TypeError, match="d_ff must be an int"):
        F.ffn_flops(4, 8, bad)
    with pytest.raises(TypeError, match="n_context must be an int"):
        F.forward_flops_per_token(bad, 8, 1, 2, None, None, 8, False)


def test_numpy_integers_are_ints():
    assert F.attention_score_flops(np.int64(8), np.int32(16)) == F.attention_score_flops(8, 16)
    assert F.matmul_flops(np.int64(2), 3, np.uint8(4)) == 48


def test_head_layouts_are_checked():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by n_heads=4"):
        F.projection_flops(3, 10, 4)
    with pytest.raises(ValueError, match="n_heads=8 is not divisible by n_kv_heads=3"):
        F.layer_flops(3, 64, 8, 256, n_kv_heads=3)
    with pytest.raises(ValueError, match="n_heads=2 is not divisible by n_kv_heads=4"):
        F.crossover_length(64, n_heads=2, n_kv_heads=4)
    with pytest.raises(ValueError, match="head_dim must be a positive int"):
        F.projection_flops(3, 10, 4, head_dim=0)
    with pytest.raises(ValueError, match="vocab_size must be a positive int"):
        F.forward_flops_per_token(3, 8, 1, 2, None, None, 8, False, vocab_size=0)
    with pytest.raises(ValueError, match="block_q must be a positive int"):
        F.causal_block_pairs(8, 0)


def test_flags_must_be_bools():
    with pytest.raises(TypeError, match="causal must be a bool"):
        F.attention_score_flops(4, 8, causal="yes")
    with pytest.raises(TypeError, match="gated must be a bool"):
        F.ffn_flops(4, 8, 8, gated=1)
    with pytest.raises(TypeError, match="include_projections must be a bool"):
        F.crossover_length(8, include_projections=None)
