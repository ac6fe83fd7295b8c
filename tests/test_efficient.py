"""Tests of lib.efficient (sliding-window and linear attention), lib.recurrence (the RNN's Jacobian chain and
cost) and lib.position_bias (ALiBi, T5 buckets): each against an independent oracle, edge cases and errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib.attention as npa
import lib.efficient as eff
import lib.position_bias as pb
import lib.recurrence as rec
from lib.flops import attention_score_flops

# ---------------------------------------------------------------- sliding window

@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 20), window=st.integers(1, 25), d=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_sliding_window_equals_masked_attention(n, window, d, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(2, n, d)) * 3 for _ in range(3))
    got = eff.sliding_window_attention(q, k, v, window)
    want, _ = npa.attention(q, k, v, eff.sliding_window_mask(n, window))
    np.testing.assert_allclose(got, want, atol=1e-12, rtol=0)


def test_window_at_least_n_is_causal_attention():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(9, 4)) for _ in range(3))
    want, _ = npa.attention(q, k, v, npa.causal_mask(9))
    np.testing.assert_allclose(eff.sliding_window_attention(q, k, v, 9), want, atol=1e-12, rtol=0)
    np.testing.assert_allclose(eff.sliding_window_attention(q, k, v, 50), want, atol=1e-12, rtol=0)


def test_window_one_copies_own_value():
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(6, 3)) for _ in range(3))
    np.testing.assert_array_equal(eff.sliding_window_attention(q, k, v, 1), v)


@pytest.mark.parametrize("n", range(0, 30))
@pytest.mark.parametrize("window", [1, 2, 7, 29, 40])
def test_sliding_window_pairs_counts_the_mask(n, window):
    assert eff.sliding_window_pairs(n, window) == int(eff.sliding_window_mask(n, window).sum())


def test_sliding_window_flops_full_window_is_causal_count():
    n, d = 64, 16
    assert eff.sliding_window_flops(n, d, d, n) == attention_score_flops(n, d, causal=True)


def test_sliding_window_errors():
    x = np.zeros((4, 2))
    with pytest.raises(ValueError, match="window must be a positive int"):
        eff.sliding_window_attention(x, x, x, 0)
    with pytest.raises(ValueError, match="one length n"):
        eff.sliding_window_attention(x, np.zeros((5, 2)), np.zeros((5, 2)), 2)
    with pytest.raises(ValueError, match="q has width 2 but k has width 3"):
        eff.sliding_window_attention(x, np.zeros((4, 3)), x, 2)


# ---------------------------------------------------------------- linear attention

def test_elu_feature_map_against_torch():
    x = np.linspace(-30, 30, 121)
    want = torch.nn.functional.elu(torch.from_numpy(x)).numpy() + 1
    np.testing.assert_allclose(eff.elu_feature_map(x), want, rtol=0, atol=1e-15)  # elu(x) + 1 cancels for x << 0
    assert (eff.elu_feature_map(x) > 0).all()


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 15), d_k=st.integers(1, 5), d_v=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_linear_orders_agree_with_quadratic_form(n, d_k, d_v, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, n, d_k)), rng.normal(size=(2, n, d_k))
    v = rng.normal(size=(2, n, d_v))
    for causal, fn in ((False, eff.linear_attention), (True, eff.causal_linear_attention)):
        w = eff.linear_attention_weights(q, k, causal=causal)
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-12)
        np.testing.assert_allclose(fn(q, k, v), w @ v, atol=1e-12, rtol=0)


def test_causal_linear_attention_is_prefix_of_noncausal():
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(8, 3)) for _ in range(3))
    out = eff.causal_linear_attention(q, k, v)
    for i in range(8):
        np.testing.assert_allclose(out[i], eff.linear_attention(q[: i + 1], k[: i + 1], v[: i + 1])[i], atol=1e-12)


def test_linear_attention_flops_linear_in_n():
    f = [eff.linear_attention_flops(n, 16, 16) for n in (10, 20, 40)]
    assert f[1] == 2 * f[0] and f[2] == 2 * f[1]
    assert f[0] == 2 * (2 * 10 * 16 * 16 + 10 * 16)


# ---------------------------------------------------------------- recurrence

def test_rnn_jacobians_against_autograd():
    rng = np.random.default_rng(3)
    n, d_in, d = 6, 3, 4
    x, w_xh = rng.normal(size=(n, d_in)), rng.normal(size=(d_in, d))
    w_hh = rec.random_recurrent_weight(d, 1.5, rng)
    h = rec.rnn_forward(x, w_xh, w_hh)
    jac = rec.rnn_jacobians(h, w_hh)
    for t in range(1, n):
        def step(prev, t=t):
            return torch.tanh(prev @ torch.from_numpy(w_hh) + torch.from_numpy(x[t] @ w_xh))
        want = torch.autograd.functional.jacobian(step, torch.from_numpy(h[t - 1])).numpy()
        np.testing.assert_allclose(jac[t - 1], want, atol=1e-12)


def test_chain_norms_of_a_linear_scaling():
    jac = np.stack([0.5 * np.eye(3)] * 5)
    np.testing.assert_allclose(rec.jacobian_chain_norms(jac), 0.5 ** np.arange(1, 6), rtol=1e-15)


def test_random_recurrent_weight_radius():
    w = rec.random_recurrent_weight(16, 0.9, np.random.default_rng(4))
    assert math.isclose(np.max(np.abs(np.linalg.eigvals(w))), 0.9, rel_tol=1e-10)


def test_rnn_flops_and_crossover():
    assert rec.rnn_layer_flops(10, 8) == 4 * 10 * 8 * 8
    assert rec.rnn_layer_flops(10, 8, d_in=2) == 2 * 10 * 8 * 8 + 2 * 10 * 2 * 8
    d = 64
    assert attention_score_flops(d, d) == rec.rnn_layer_flops(d, d)  # 4 n^2 d = 4 n d^2 at n = d


def test_rnn_errors():
    with pytest.raises(ValueError, match="w_hh must be"):
        rec.rnn_forward(np.zeros((3, 2)), np.zeros((2, 4)), np.zeros((4, 3)))
    with pytest.raises(ValueError, match="spectral_radius"):
        rec.random_recurrent_weight(4, 0.0, np.random.default_rng(0))


# ---------------------------------------------------------------- position biases

def test_alibi_slopes_paper_values():
    np.testing.assert_array_equal(pb.alibi_slopes(8), [2.0**-i for i in range(1, 9)])
    np.testing.assert_allclose(pb.alibi_slopes(4), [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8])
    six = pb.alibi_slopes(6)  # 4 from H=4, then slopes 1, 3 of H=8
    np.testing.assert_allclose(six, [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3])


def test_alibi_bias_shape_and_values():
    b = pb.alibi_bias(3, 5, 2)
    assert b.shape == (2, 3, 5)
    # query 0 sits at position 2: offsets j - i = -2, -1, 0, 1, 2
    np.testing.assert_array_equal(b[0, 0], 2.0**-4 * np.array([-2, -1, 0, 1, 2]))
    assert (b[:, np.arange(3), np.arange(2, 5)] == 0).all()


def _t5_float(rel, bidirectional=True, num_buckets=32, max_distance=128):
    # transcription of the reference (float) formula, for offsets away from its exact ties
    buckets = 0
    if bidirectional:
        num_buckets //= 2
        buckets += (rel > 0) * num_buckets
        rel = abs(rel)
    else:
        rel = -min(rel, 0)
    max_exact = num_buckets // 2
    if rel < max_exact:
        return buckets + rel
    large = max_exact + int(math.log(rel / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return buckets + min(large, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bucket_matches_float_formula(bidirectional):
    rel = np.arange(-300, 301)
    got = pb.t5_relative_bucket(rel, bidirectional=bidirectional)
    want = np.array([_t5_float(int(r), bidirectional) for r in rel])
    assert (got == want).all()


def test_t5_bucket_saturates_beyond_max_distance():
    b = pb.t5_relative_bucket(np.array([-128, -1000, -10**6]), bidirectional=False)
    assert (b == 31).all()


def test_t5_bucket_errors():
    with pytest.raises(TypeError, match="integer array"):
        pb.t5_relative_bucket(np.array([1.0]))
