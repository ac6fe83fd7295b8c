"""The claims the chapters "Why divide by √d_k?" and "Backpropagation through attention" rest on, checked
on lib.attention: the logit variance with and without the default scale, the mean of correlated logits, and
the structural identities of the backward pass (rows of dS' sum to zero, key gradients sum to zero over keys,
the row term equals Σ dO·O, and dV is A's column sums when dO is all ones)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lib import attention as att

N_PAIRS = 20_000


def _logits(d_k: int, rng: np.random.Generator, scale: float | None = None, rho: float = 0.0):
    q = rng.standard_normal((N_PAIRS, 1, d_k))
    k = rho * q + np.sqrt(1 - rho**2) * rng.standard_normal((N_PAIRS, 1, d_k))
    zeros = np.zeros((N_PAIRS, 1, 1))
    st_ = att.attention_backward_steps(q, k, zeros, zeros, scale=scale)
    return st_.s.ravel(), st_.s_scaled.ravel()


@pytest.mark.parametrize("d_k", [16, 64, 256])
def test_logit_variance_is_d_k_and_the_default_scale_makes_it_one(d_k):
    raw, scaled = _logits(d_k, np.random.default_rng(d_k))
    rel_se = np.sqrt((2 + 6 / d_k) / N_PAIRS)  # standard error of a sample variance, normal components
    assert abs(raw.var() / d_k - 1) < 4 * rel_se
    assert abs(scaled.var() - 1) < 4 * rel_se
    assert abs(scaled.mean()) < 4 / np.sqrt(N_PAIRS)


def test_scaling_by_d_k_instead_of_its_root_shrinks_the_variance_to_one_over_d_k():
    d_k = 64
    _, scaled = _logits(d_k, np.random.default_rng(1), scale=1 / d_k)
    assert abs(scaled.var() * d_k - 1) < 0.05


@pytest.mark.parametrize("rho", [0.1, 0.3])
def test_correlated_logits_have_mean_rho_sqrt_d_k_after_scaling(rho):
    d_k = 256
    _, scaled = _logits(d_k, np.random.default_rng(2), rho=rho)
    assert abs(scaled.mean() - rho * np.sqrt(d_k)) < 4 * np.sqrt((1 + rho**2) / N_PAIRS)
    assert abs(scaled.var() - (1 + rho**2)) < 0.05


shapes = st.tuples(st.integers(1, 7), st.integers(1, 7), st.integers(1, 5), st.integers(1, 4))


@given(shape=shapes, seed=st.integers(0, 2**16))
def test_backward_identities(shape, seed):
    n_q, n_k, d_k, d_v = shape
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(n_q, d_k)), rng.normal(size=(n_k, d_k))
    v, d_out = rng.normal(size=(n_k, d_v)), rng.normal(size=(n_q, d_v))
    s = att.attention_backward_steps(q, k, v, d_out)
    np.testing.assert_allclose(s.ds_scaled.sum(axis=-1), 0.0, atol=1e-12)  # rows of dS' sum to zero
    np.testing.assert_allclose(s.dk.sum(axis=0), 0.0, atol=1e-11)  # shifting every key changes nothing
    np.testing.assert_allclose(s.row_dot[:, 0], (d_out * s.o).sum(axis=1), atol=1e-12)
    ones = att.attention_backward_steps(q, k, v, np.ones((n_q, d_v)))
    np.testing.assert_allclose(ones.dv, np.repeat(ones.a.sum(axis=0)[:, None], d_v, axis=1), atol=1e-12)
    np.testing.assert_allclose(ones.da, np.repeat(v.sum(axis=1)[None, :], n_q, axis=0), atol=1e-12)


def test_the_symmetric_example_hides_a_transposed_a_in_dv():
    eye, v = np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]])
    sym = att.attention_backward_steps(eye, eye, v, np.ones((2, 2)))
    np.testing.assert_allclose(sym.a @ np.ones((2, 2)), sym.dv, atol=1e-15)  # the bug passes here ...
    q = np.array([[1.0, 0.0], [0.5, 2.0], [-1.0, 1.0]])
    k = np.array([[2.0, 1.0], [0.0, -1.0], [1.0, 1.0]])
    gen = att.attention_backward_steps(q, k, np.ones((3, 2)), np.ones((3, 2)))
    assert np.abs(gen.a @ np.ones((3, 2)) - gen.dv).max() > 0.1  # ... and not here
