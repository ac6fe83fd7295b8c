"""Tests of lib.ffn (NumPy) and lib.pt.ffn (PyTorch): activations against torch.nn.functional, the block
against an explicit per-token loop and nn.Linear, parameter counts, position-wise independence, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import lib.ffn as npf
import lib.pt.ffn as ptf

xs = arrays(np.float64, st.integers(1, 30), elements=st.floats(-10, 10, allow_nan=False))


@given(xs)
def test_activations_match_torch(x):
    t = torch.from_numpy(x)
    np.testing.assert_array_equal(npf.relu(x), torch.relu(t).numpy())
    np.testing.assert_allclose(npf.gelu(x), torch.nn.functional.gelu(t).numpy(), rtol=1e-12, atol=1e-14)
    want_tanh = torch.nn.functional.gelu(t, approximate="tanh").numpy()
    np.testing.assert_allclose(npf.gelu_tanh(x), want_tanh, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ptf.gelu(t).numpy(), npf.gelu(x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ptf.gelu_tanh(t).numpy(), want_tanh, rtol=1e-12, atol=1e-14)


def test_gelu_tanh_error_is_small_but_not_zero():
    x = np.linspace(-6, 6, 20001)
    err = np.abs(npf.gelu_tanh(x) - npf.gelu(x)).max()
    assert 1e-5 < err < 5e-4


def test_gelu_limits_and_symmetry():
    x = np.array([-30.0, 0.0, 30.0])
    np.testing.assert_allclose(npf.gelu(x), [0.0, 0.0, 30.0], atol=1e-12)
    z = np.linspace(-5, 5, 11)
    # x Phi(x) - (-x) Phi(-x) = x  since Phi(x) + Phi(-x) = 1
    np.testing.assert_allclose(npf.gelu(z) - npf.gelu(-z), z, atol=1e-14)
    assert npf.gelu(np.ones(2, dtype=np.float32)).dtype == np.float32


def _weights(rng, d_model, d_ff):
    return (rng.normal(size=(d_model, d_ff)), rng.normal(size=d_ff), rng.normal(size=(d_ff, d_model)),
            rng.normal(size=d_model))


@pytest.mark.parametrize("act", ["relu", "gelu"])
@given(lead=st.lists(st.integers(1, 4), min_size=1, max_size=2), d_model=st.integers(1, 6),
       d_ff=st.integers(1, 9), seed=st.integers(0, 2**31 - 1))
def test_feed_forward_is_position_wise_and_matches_torch(act, lead, d_model, d_ff, seed):
    rng = np.random.default_rng(seed)
    w1, b1, w2, b2 = _weights(rng, d_model, d_ff)
    x = rng.normal(size=(*lead, d_model))
    f_np, f_pt = getattr(npf, act), getattr(ptf, act)
    y = npf.feed_forward(x, w1, b1, w2, b2, f_np)
    assert y.shape == x.shape
    # Each token alone, by the formula written out: the block never mixes positions.
    flat = x.reshape(-1, d_model)
    for i, row in enumerate(flat):
        want = f_np(row @ w1 + b1) @ w2 + b2
        np.testing.assert_allclose(y.reshape(-1, d_model)[i], want, rtol=1e-12, atol=1e-12)
    # The pure torch function and the module with nn.Linear (weight stored as (d_out, d_in)).
    t = [torch.from_numpy(a) for a in (x, w1, b1, w2, b2)]
    np.testing.assert_allclose(ptf.feed_forward(*t, f_pt).numpy(), y, rtol=1e-12, atol=1e-12)
    m = ptf.FeedForward(d_model, d_ff, f_pt).double()
    with torch.no_grad():
        m.linear1.weight.copy_(t[1].T)
        m.linear1.bias.copy_(t[2])
        m.linear2.weight.copy_(t[3].T)
        m.linear2.bias.copy_(t[4])
        np.testing.assert_allclose(m(t[0]).numpy(), y, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("d_model,d_ff", [(512, 2048), (64, 256), (3, 5)])
@pytest.mark.parametrize("bias", [True, False])
def test_param_count_matches_the_module(d_model, d_ff, bias):
    m = ptf.FeedForward(d_model, d_ff, bias=bias)
    assert sum(p.numel() for p in m.parameters()) == npf.ffn_param_count(d_model, d_ff, bias)
    ref = torch.nn.TransformerEncoderLayer(d_model, 1, d_ff, bias=bias)
    assert npf.ffn_param_count(d_model, d_ff, bias) == sum(
        p.numel() for name, p in ref.named_parameters() if name.startswith(("linear1", "linear2")))


def test_base_model_ffn_count():
    assert npf.ffn_param_count(512, 2048) == 2_099_712


def test_bad_inputs_raise_clear_errors():
    rng = np.random.default_rng(0)
    w1, b1, w2, b2 = _weights(rng, 4, 8)
    x = rng.normal(size=(2, 4))
    with pytest.raises(ValueError, match=r"x has width 3 but w1 expects d_model=4"):
        npf.feed_forward(x[:, :3], w1, b1, w2, b2)
    with pytest.raises(ValueError, match=r"w2 must have shape \(d_ff, d_model\) = \(8, 4\)"):
        npf.feed_forward(x, w1, b1, w2.T, b2)
    with pytest.raises(ValueError, match=r"b1 must have shape \(d_ff,\) = \(8,\)"):
        npf.feed_forward(x, w1, b2, w2, b2)
    with pytest.raises(ValueError, match=r"b2 must have shape \(d_model,\) = \(4,\)"):
        npf.feed_forward(x, w1, b1, w2, b1)
    with pytest.raises(ValueError, match="x contains a non-finite value"):
        npf.feed_forward(np.full((1, 4), np.nan), w1, b1, w2, b2)
    with pytest.raises(ValueError, match="w1 and w2 must be matrices"):
        npf.feed_forward(x, w1[0], b1, w2, b2)
    t = [torch.from_numpy(a) for a in (x, w1, b1, w2, b2)]
    with pytest.raises(ValueError, match=r"x has width 3 but w1 expects d_model=4"):
        ptf.feed_forward(t[0][:, :3], *t[1:])
    with pytest.raises(ValueError, match=r"w2 must have shape \(d_ff, d_model\)"):
        ptf.feed_forward(t[0], t[1], t[2], t[3].T, t[4])
    with pytest.raises(ValueError, match="d_ff must be a positive int"):
        npf.ffn_param_count(512, 0)
    with pytest.raises(TypeError, match="d_ff must be an int, got float"):
        npf.ffn_param_count(512, 2048.0)
    assert npf.ffn_param_count(np.int64(512), np.int32(2048)) == 2_099_712
    with pytest.raises(ValueError, match=r"dropout must be a finite number >= 0 and < 1, got 1.0"):
        ptf.FeedForward(4, 8, dropout=1.0)
    with pytest.raises(ValueError, match="x must have width d_model=4"):
        ptf.FeedForward(4, 8)(torch.ones(2, 3))
    with pytest.raises(TypeError, match="x must have a floating dtype"):
        npf.relu(np.ones(3, dtype=int))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("which", range(5), ids=["x", "w1", "b1", "w2", "b2"])
def test_torch_feed_forward_refuses_non_finite_like_numpy(bad, which):
    """lib.pt.ffn let NaN through where lib.ffn refused it (issue 14): both must raise the same error."""
    rng = np.random.default_rng(0)
    args = [rng.normal(size=(2, 4)), *_weights(rng, 4, 8)]
    args[which] = args[which].copy()
    args[which].flat[0] = bad
    with pytest.raises(ValueError) as np_err:
        npf.feed_forward(*args)
    with pytest.raises(ValueError) as pt_err:
        ptf.feed_forward(*(torch.from_numpy(a) for a in args))
    assert str(pt_err.value) == str(np_err.value)
