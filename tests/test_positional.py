"""Tests of lib.positional (NumPy) and lib.pt.positional (PyTorch): sinusoidal encodings against the
paper's formula written element by element, the shift-is-a-rotation property, RoPE against a complex-number
oracle and a GPT-NeoX-style rotate-half oracle, its relative-position property (hypothesis), permutation
equivariance of attention without positions, the backends against each other, bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import lib.multihead as npm
import lib.positional as npp
import lib.pt.multihead as ptm
import lib.pt.positional as ptp

# ---------------------------------------------------------------- sinusoidal


@pytest.mark.parametrize("n,d,base", [(7, 8, 10000.0), (5, 7, 10000.0), (4, 6, 100.0), (0, 4, 10000.0)])
def test_sinusoidal_matches_the_formula_entry_by_entry(n, d, base):
    pe = npp.sinusoidal_encoding(n, d, base)
    assert pe.shape == (n, d) and pe.dtype == np.float64
    for pos in range(n):
        for j in range(d):
            i = j // 2
            angle = pos / base ** (2 * i / d)
            assert pe[pos, j] == pytest.approx(math.sin(angle) if j % 2 == 0 else math.cos(angle), abs=1e-14)


@pytest.mark.parametrize("dtype,atol", [(torch.float64, 0.0), (torch.float32, 1e-7)])
def test_sinusoidal_numpy_and_torch_agree(dtype, atol):
    pe = npp.sinusoidal_encoding(50, 16)
    pt = ptp.sinusoidal_encoding(50, 16, dtype=dtype)
    assert pt.dtype == dtype and pt.shape == (50, 16)
    np.testing.assert_allclose(pt.double().numpy(), pe, rtol=0, atol=atol)


def test_sinusoidal_float32_keeps_large_positions_accurate():
    """Angles are formed in float64: position 10**6 is right to float32 rounding, not to float32 angle error."""
    pe32 = npp.sinusoidal_encoding(10**6 + 1, 4, dtype=np.float32)[-1]
    pe64 = npp.sinusoidal_encoding(10**6 + 1, 4)[-1]
    np.testing.assert_allclose(pe32, pe64, rtol=0, atol=1e-7)
    pt32 = ptp.sinusoidal_encoding(10**6 + 1, 4)[-1]
    np.testing.assert_allclose(pt32.double().numpy(), pe64, rtol=0, atol=1e-7)


@given(st.integers(0, 300), st.integers(-50, 300), st.integers(1, 16), st.sampled_from([100.0, 10000.0]))
def test_shift_is_a_fixed_linear_map(pos, k, half_d, base):
    d = 2 * half_d
    pe = npp.sinusoidal_encoding(max(pos, pos + k) + 1, d, base)
    m = npp.sinusoid_shift_matrix(k, d, base)
    if pos + k >= 0:
        np.testing.assert_allclose(pe[pos] @ m, pe[pos + k], rtol=0, atol=1e-11)
    np.testing.assert_allclose(m @ m.T, np.eye(d), atol=1e-13)  # a rotation: orthogonal
    assert np.linalg.det(m) == pytest.approx(1.0)


def test_shift_matrices_compose():
    np.testing.assert_allclose(npp.sinusoid_shift_matrix(3, 8) @ npp.sinusoid_shift_matrix(5, 8),
                               npp.sinusoid_shift_matrix(8, 8), atol=1e-13)


@given(st.integers(0, 200), st.integers(0, 100))
def test_distance_between_encodings_depends_only_on_the_offset(p, k):
    d, base = 16, 10000.0
    pe = npp.sinusoidal_encoding(p + k + 1, d, base)
    w = npp.sinusoid_frequencies(d, base)
    want = 2 * np.sum(1 - np.cos(k * w))  # |PE(p+k) - PE(p)|^2, a sum over the frequency pairs
    assert np.sum((pe[p + k] - pe[p]) ** 2) == pytest.approx(want, abs=1e-10)


def test_frequencies():
    w = npp.sinusoid_frequencies(8, 10000.0)
    np.testing.assert_allclose(w, [1.0, 0.1, 0.01, 0.001])
    np.testing.assert_allclose(ptp.sinusoid_frequencies(8).numpy(), w)


# ---------------------------------------------------------------- RoPE


def _rope_complex(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """Oracle: RoFormer as complex multiplication, z_i = x_{2i} + i x_{2i+1} -> z_i * exp(i m theta_i)."""
    d = x.shape[-1]
    theta = base ** (-np.arange(d // 2) * 2.0 / d)
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * positions[..., None] * theta)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


def _rope_rotate_half(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """Oracle: the GPT-NeoX / Hugging Face formulation, x * cos + rotate_half(x) * sin with duplicated angles."""
    d = x.shape[-1]
    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * inv_freq[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos() + torch.cat([-x2, x1], dim=-1) * emb.sin()


@st.composite
def rope_case(draw):
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    n, d = draw(st.integers(1, 6)), 2 * draw(st.integers(1, 6))
    base = draw(st.sampled_from([10.0, 10000.0, 500000.0]))
    x = np.random.default_rng(draw(st.integers(0, 2**31 - 1))).normal(size=(*lead, n, d))
    return x, base


@given(rope_case(), st.integers(0, 10**5))
def test_rope_matches_complex_multiplication_and_torch(case, offset):
    x, base = case
    pos = offset + np.arange(x.shape[-2])
    y = npp.apply_rope(x, pos, base)
    np.testing.assert_allclose(y, _rope_complex(x, pos.astype(float), base), rtol=0, atol=1e-9)
    yt = ptp.apply_rope(torch.from_numpy(x), torch.from_numpy(pos), base)
    np.testing.assert_allclose(yt.numpy(), y, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)


@given(rope_case())
def test_rope_rotate_half_matches_the_neox_formulation(case):
    x, base = case
    pos = torch.arange(x.shape[-2])
    want = _rope_rotate_half(torch.from_numpy(x), pos, base)
    np.testing.assert_allclose(npp.apply_rope_halves(x, None, base), want.numpy(), atol=1e-12)
    np.testing.assert_allclose(ptp.apply_rope_halves(torch.from_numpy(x), None, base).numpy(), want.numpy(),
                               atol=1e-12)
    # same map up to a fixed permutation of the features: (0, d/2, 1, d/2+1, ...) are the interleaved pairs
    d = x.shape[-1]
    perm = np.stack([np.arange(d // 2), np.arange(d // 2) + d // 2], axis=-1).reshape(-1)
    np.testing.assert_allclose(npp.apply_rope_halves(x, None, base)[..., perm],
                               npp.apply_rope(x[..., perm], None, base), atol=1e-12)


@given(st.integers(1, 8), st.floats(-1e3, 1e3), st.floats(-1e3, 1e3), st.floats(-1e3, 1e3),
       st.integers(0, 2**31 - 1))
def test_rope_scores_depend_only_on_the_relative_position(half_d, m, n, shift, seed):
    d = 2 * half_d
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 1, d))
    score = np.sum(npp.apply_rope(q, [m]) * npp.apply_rope(k, [n]))
    shifted = np.sum(npp.apply_rope(q, [m + shift]) * npp.apply_rope(k, [n + shift]))
    relative = np.sum(q * npp.apply_rope(k, [n - m]))  # <R_m q, R_n k> = <q, R_{n-m} k>
    assert shifted == pytest.approx(score, abs=1e-8)
    assert relative == pytest.approx(score, abs=1e-8)


def test_rope_is_not_shift_invariant_without_rotation_of_both():
    """The property needs q and k rotated alike; rotating only k leaves an absolute dependence."""
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 1, 8))
    s1 = np.sum(q * npp.apply_rope(k, [3]))
    s2 = np.sum(q * npp.apply_rope(k, [13]))
    assert abs(s1 - s2) > 1e-3


def test_rope_matrix_and_identity_at_position_zero():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(5, 6))
    y = npp.apply_rope(x)
    np.testing.assert_array_equal(y[0], x[0])
    for m in range(5):
        np.testing.assert_allclose(y[m], npp.rope_rotation_matrix(m, 6) @ x[m], atol=1e-14)


def test_rope_cache_offset_matches_the_full_sequence():
    x = np.random.default_rng(3).normal(size=(2, 9, 8))
    full = npp.apply_rope(x)
    np.testing.assert_allclose(npp.apply_rope(x[:, 6:], positions=6 + np.arange(3)), full[:, 6:], atol=1e-14)


def test_rope_per_batch_positions_broadcast():
    x = np.random.default_rng(4).normal(size=(2, 3, 4))
    pos = np.array([[0, 1, 2], [5, 6, 7]])
    y = npp.apply_rope(x, pos)
    np.testing.assert_allclose(y[1], npp.apply_rope(x[1], 5 + np.arange(3)), atol=1e-14)
    yt = ptp.apply_rope(torch.from_numpy(x), torch.from_numpy(pos))
    np.testing.assert_allclose(yt.numpy(), y, atol=1e-14)


def test_torch_rope_gradient_is_the_transposed_rotation():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: ptp.apply_rope(t, base=100.0), (x,))
    g = torch.randn(3, 4, dtype=torch.float64)
    ptp.apply_rope(x).backward(g)
    want = np.stack([npp.rope_rotation_matrix(m, 4).T @ g[m].numpy() for m in range(3)])
    np.testing.assert_allclose(x.grad.numpy(), want, atol=1e-14)


def test_torch_rope_float32_and_dtype_kept():
    x = torch.randn(2, 5, 8)
    y = ptp.apply_rope(x, torch.arange(5) + 1000)
    assert y.dtype == torch.float32
    ref = npp.apply_rope(x.double().numpy(), np.arange(5) + 1000)
    np.testing.assert_allclose(y.double().numpy(), ref, rtol=0, atol=2e-6)


# ---------------------------------------------------------------- permutation equivariance


@given(st.integers(2, 7), st.integers(0, 2**31 - 1))
def test_self_attention_without_positions_is_permutation_equivariant(n, seed):
    rng = np.random.default_rng(seed)
    p = npm.init_params(8, 2, rng=rng)
    x = rng.normal(size=(n, 8))
    perm = rng.permutation(n)
    out, a = npm.multi_head_attention(x, None, p, 2)
    out_p, a_p = npm.multi_head_attention(x[perm], None, p, 2)
    np.testing.assert_allclose(out_p, out[perm], atol=1e-12)  # f(P x) = P f(x)
    np.testing.assert_allclose(a_p, a[:, perm][:, :, perm], atol=1e-12)  # A(P x) = P A(x) P^T


def test_positions_break_permutation_equivariance():
    rng = np.random.default_rng(5)
    p = npm.init_params(8, 2, rng=rng)
    x = rng.normal(size=(5, 8))
    perm = np.array([1, 0, 2, 3, 4])
    pe = npp.sinusoidal_encoding(5, 8)
    out = npm.multi_head_attention(x + pe, None, p, 2)[0]
    out_p = npm.multi_head_attention(x[perm] + pe, None, p, 2)[0]
    assert np.abs(out_p - out[perm]).max() > 1e-3


def test_torch_module_is_permutation_equivariant():
    torch.manual_seed(0)
    m = ptm.MultiHeadAttention(12, 3, dtype=torch.float64)
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    perm = torch.randperm(6)
    torch.testing.assert_close(m(x[:, perm])[0], m(x)[0][:, perm], rtol=0, atol=1e-12)


# ---------------------------------------------------------------- bad inputs


def test_empty_inputs():
    assert npp.sinusoidal_encoding(0, 6).shape == (0, 6)
    assert ptp.sinusoidal_encoding(0, 6).shape == (0, 6)
    assert npp.apply_rope(np.zeros((2, 0, 4))).shape == (2, 0, 4)
    assert ptp.apply_rope(torch.zeros(2, 0, 4)).shape == (2, 0, 4)


def test_bad_sizes():
    with pytest.raises(ValueError, match="n_positions must be a non-negative int, got -1"):
        npp.sinusoidal_encoding(-1, 8)
    with pytest.raises(ValueError, match="d_model must be a positive int, got 0"):
        ptp.sinusoidal_encoding(4, 0)
    with pytest.raises(TypeError, match="d_model must be an int, got float 4.5"):
        npp.sinusoidal_encoding(4, 4.5)
    with pytest.raises(ValueError, match=r"base must be a finite number > 1, got 1.0"):
        npp.sinusoidal_encoding(4, 8, base=1.0)
    with pytest.raises(ValueError, match=r"base must be a finite number > 1, got inf"):
        ptp.sinusoidal_encoding(4, 8, base=float("inf"))
    with pytest.raises(TypeError, match=r"base must be a real number, got str"):
        ptp.sinusoidal_encoding(4, 8, base="10000")
    with pytest.raises(ValueError, match=r"d_model must be even \(features are rotated in pairs\), got 7"):
        npp.sinusoid_shift_matrix(1, 7)
    with pytest.raises(ValueError, match="k must be a finite number, got nan"):
        npp.sinusoid_shift_matrix(float("nan"), 8)
    np.testing.assert_array_equal(npp.sinusoidal_encoding(np.int64(3), np.int32(4)), npp.sinusoidal_encoding(3, 4))


def test_bad_rope_inputs():
    with pytest.raises(ValueError, match=r"x must have an even width d .* got d=5"):
        npp.apply_rope(np.zeros((3, 5)))
    with pytest.raises(ValueError, match=r"x must have an even width d .* got d=5"):
        ptp.apply_rope(torch.zeros(3, 5))
    with pytest.raises(ValueError, match=r"x must have at least 2 dimensions"):
        npp.apply_rope(np.zeros(4))
    with pytest.raises(ValueError, match=r"positions of shape \(4,\) do not broadcast"):
        npp.apply_rope(np.zeros((3, 4)), positions=np.arange(4))
    with pytest.raises(ValueError, match=r"positions of shape \(4,\) do not broadcast"):
        ptp.apply_rope(torch.zeros(3, 4), positions=torch.arange(4))
    with pytest.raises(ValueError, match=r"would broadcast x.shape=\(3, 4\) to a larger shape"):
        npp.apply_rope(np.zeros((3, 4)), positions=np.zeros((2, 3)))
    with pytest.raises(TypeError, match="positions must be an array of integers or reals, got dtype bool"):
        npp.apply_rope(np.zeros((3, 4)), positions=np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match=r"positions contains a non-finite value \(nan\) at \[2\]"):
        ptp.apply_rope(torch.zeros(3, 4), positions=torch.tensor([0.0, 1.0, float("nan")]))
    with pytest.raises(TypeError, match="x must have a floating dtype"):
        npp.apply_rope(np.zeros((3, 4), dtype=int))
    with pytest.raises(TypeError, match="x must have a floating dtype"):
        ptp.apply_rope(torch.zeros(3, 4, dtype=torch.long))
