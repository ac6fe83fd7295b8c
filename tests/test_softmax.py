"""Tests of lib.softmax (NumPy) and lib.pt.softmax (PyTorch): invariants, edge cases, errors, and each
backend as the other's oracle."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays
from tolerances import tol

import lib.pt.softmax as pts
import lib.softmax as nps

finite = st.floats(-50, 50, allow_nan=False, allow_infinity=False)
logits = arrays(np.float64, array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=7), elements=finite)

VARIANTS = [nps.softmax, nps.online_softmax, pts.softmax, pts.online_softmax]


def _np(f, x):
    """Run a NumPy or torch variant on a NumPy array and return NumPy."""
    if f.__module__.startswith("lib.pt"):
        return f(torch.from_numpy(x)).numpy()
    return f(x)


# ---------------------------------------------------------------- invariants (hypothesis)


@pytest.mark.parametrize("f", VARIANTS, ids=lambda f: f"{f.__module__}.{f.__name__}")
@given(x=logits)
def test_rows_sum_to_one_and_are_nonnegative(f, x):
    y = _np(f, x)
    assert y.shape == x.shape
    assert (y >= 0).all()
    np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@given(x=logits, c=st.floats(-1e3, 1e3))
def test_shift_invariance(x, c):
    np.testing.assert_allclose(nps.softmax(x + c), nps.softmax(x), rtol=0, atol=1e-10)


@given(x=logits)
def test_online_equals_two_pass(x):
    np.testing.assert_allclose(nps.online_softmax(x), nps.softmax(x), rtol=0, atol=1e-14)
    m, l = nps.online_normalizer(x)
    np.testing.assert_allclose(m, x.max(axis=-1, keepdims=True), rtol=0, atol=0)
    np.testing.assert_allclose(l, np.exp(x - m).sum(axis=-1, keepdims=True), rtol=1e-13)


@given(x=logits)
def test_log_softmax_and_logsumexp_agree(x):
    np.testing.assert_allclose(nps.log_softmax(x), np.log(nps.softmax(x)), rtol=0, atol=1e-10)
    np.testing.assert_allclose(nps.log_softmax(x), x - nps.logsumexp(x, keepdims=True), rtol=0, atol=1e-12)


@given(x=logits, dy=st.data())
def test_vjp_rows_sum_to_zero(x, dy):
    y = nps.softmax(x)
    g = dy.draw(arrays(np.float64, x.shape, elements=finite))
    dx = nps.softmax_vjp(y, g)
    np.testing.assert_allclose(dx.sum(axis=-1), 0.0, rtol=0, atol=1e-10)


@given(x=logits, axis=st.integers(-3, 2))
def test_axis_argument(x, axis):
    if not -x.ndim <= axis < x.ndim:
        with pytest.raises(ValueError, match="axis"):
            nps.softmax(x, axis=axis)
        return
    np.testing.assert_allclose(nps.softmax(x, axis=axis).sum(axis=axis), 1.0, atol=1e-12)
    np.testing.assert_allclose(
        nps.softmax(x, axis=axis), pts.softmax(torch.from_numpy(x), axis=axis).numpy(), atol=1e-12
    )


@given(x=logits, data=st.data())
def test_merge_normalizers_is_the_normalizer_of_the_union(x, data):
    cut = data.draw(st.integers(0, x.shape[-1]))
    a, b = x[..., :cut], x[..., cut:]
    empty = (np.full(x.shape[:-1] + (1,), -np.inf), np.zeros(x.shape[:-1] + (1,)))  # the state of no elements
    m_a, l_a = nps.online_normalizer(a) if cut else empty
    m_b, l_b = nps.online_normalizer(b) if cut < x.shape[-1] else empty
    m, l = nps.merge_normalizers(m_a, l_a, m_b, l_b)
    m_all, l_all = nps.online_normalizer(x)
    np.testing.assert_allclose(m, m_all, atol=0)
    np.testing.assert_allclose(l, l_all, rtol=1e-13)


# ---------------------------------------------------------------- gradients


def test_vjp_matches_autograd_and_finite_differences():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5))
    dy = rng.normal(size=(3, 5))
    dx = nps.softmax_vjp(nps.softmax(x), dy)
    xt = torch.from_numpy(x).requires_grad_()
    torch.softmax(xt, -1).backward(torch.from_numpy(dy))
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=0, atol=1e-14)
    eps = 1e-6
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        fd[idx] = ((nps.softmax(x + e) - nps.softmax(x - e)) * dy).sum() / (2 * eps)
    np.testing.assert_allclose(dx, fd, rtol=0, atol=1e-9)


def test_pt_functions_pass_gradcheck():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, False, True, True]] * 2 + [[False] * 4])
    assert torch.autograd.gradcheck(lambda t: pts.softmax(t), (x,))
    assert torch.autograd.gradcheck(lambda t: pts.log_softmax(t), (x,))
    assert torch.autograd.gradcheck(lambda t: pts.logsumexp(t), (x,))
    assert torch.autograd.gradcheck(lambda t: pts.online_softmax(t), (x,))
    assert torch.autograd.gradcheck(lambda t: pts.masked_softmax(t, mask), (x,))


def test_pt_softmax_vjp_matches_autograd():
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(4, 6, dtype=torch.float64)
    y = pts.softmax(x)
    (g,) = torch.autograd.grad(y, x, dy)
    torch.testing.assert_close(pts.softmax_vjp(y.detach(), dy), g, rtol=0, atol=1e-14)


# ---------------------------------------------------------------- the backends agree, per dtype


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(
    "name", ["softmax", "log_softmax", "logsumexp", "online_softmax", "softmax_naive"]
)
def test_numpy_and_torch_agree(name, dtype):
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(4, 9)) * 3).astype(dtype)
    a = getattr(nps, name)(x)
    b = getattr(pts, name)(torch.from_numpy(x)).numpy()
    assert a.dtype == dtype and b.dtype == dtype
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol(dtype), atol=tol(dtype))


def test_bfloat16_torch_close_to_numpy_float64():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 8)) * 3
    b = pts.softmax(torch.from_numpy(x).to(torch.bfloat16))
    assert b.dtype == torch.bfloat16
    np.testing.assert_allclose(b.double().numpy(), nps.softmax(x), rtol=0, atol=8e-3)  # bf16 has 8 bits


# ---------------------------------------------------------------- edge cases


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("mod", [nps, pts], ids=["numpy", "torch"])
def test_large_logits_stable_naive_overflows(mod, dtype):
    x = np.array([1e4, -1e4, 0.0], dtype=dtype)
    arg = torch.from_numpy(x) if mod is pts else x
    y = np.asarray(mod.softmax(arg), dtype=np.float64)
    np.testing.assert_array_equal(y, [1.0, 0.0, 0.0])
    with np.errstate(all="ignore"):
        naive = np.asarray(mod.softmax_naive(arg), dtype=np.float64)
    assert np.isnan(naive).any()  # inf / inf
    ls = np.asarray(mod.log_softmax(arg), dtype=np.float64)
    assert ls[0] == 0.0 and np.isfinite(ls).all()


def test_negative_infinity_gets_zero_weight():
    y = nps.softmax(np.array([0.0, -np.inf, 0.0]))
    np.testing.assert_array_equal(y, [0.5, 0.0, 0.5])


@pytest.mark.parametrize("mod", [nps, pts], ids=["numpy", "torch"])
def test_fully_masked_row(mod):
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    mask = np.array([[True, False], [False, False]])
    if mod is pts:
        x, mask = torch.from_numpy(x), torch.from_numpy(mask)
    y = np.asarray(mod.masked_softmax(x, mask))
    np.testing.assert_array_equal(y, [[1.0, 0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match="no finite entry"):
        mod.softmax(np.array([[-np.inf, -np.inf]]) if mod is nps else torch.full((1, 2), -torch.inf))
    lse = np.asarray(mod.logsumexp(np.array([-np.inf, -np.inf]) if mod is nps else torch.full((2,), -torch.inf)))
    assert lse == -np.inf


def test_masked_positions_ignore_whatever_they_hold():
    x = np.array([1.0, np.nan, np.inf, 2.0])
    mask = np.array([True, False, False, True])
    np.testing.assert_allclose(nps.masked_softmax(x, mask), nps.softmax(np.array([1.0, -np.inf, -np.inf, 2.0])))


@pytest.mark.parametrize("mod", [nps, pts], ids=["numpy", "torch"])
def test_empty_rows(mod):
    empty = np.zeros((3, 0)) if mod is nps else torch.zeros(3, 0, dtype=torch.float64)
    with pytest.raises(ValueError, match="length 0"):
        mod.softmax(empty)
    assert np.asarray(mod.masked_softmax(empty, None)).shape == (3, 0)
    no_rows = np.zeros((0, 4)) if mod is nps else torch.zeros(0, 4, dtype=torch.float64)
    assert np.asarray(mod.softmax(no_rows)).shape == (0, 4)
    np.testing.assert_array_equal(np.asarray(mod.logsumexp(empty)), np.full(3, -np.inf))


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("mod", [nps, pts], ids=["numpy", "torch"])
def test_bad_inputs_name_the_argument(mod):
    as_arr = (lambda a: a) if mod is nps else torch.from_numpy
    with pytest.raises(TypeError, match=r"x must have a floating dtype, got (torch\.)?int64"):
        mod.softmax(as_arr(np.array([1, 2, 3])))
    with pytest.raises(ValueError, match="x contains NaN"):
        mod.softmax(as_arr(np.array([1.0, np.nan])))
    with pytest.raises(ValueError, match=r"x contains \+inf"):
        mod.log_softmax(as_arr(np.array([1.0, np.inf])))
    with pytest.raises(ValueError, match="at least 1 dimension"):
        mod.softmax(as_arr(np.array(1.0)))
    with pytest.raises(ValueError, match="y and dy must have the same shape"):
        mod.softmax_vjp(as_arr(np.ones((2, 3))), as_arr(np.ones((3, 2))))
    with pytest.raises(TypeError, match="mask must be boolean"):
        mod.masked_softmax(as_arr(np.ones((2, 3))), as_arr(np.ones((2, 3))))
    with pytest.raises(ValueError, match="does not broadcast"):
        mod.masked_softmax(as_arr(np.ones((2, 3))), as_arr(np.ones((2, 2), dtype=bool)))


def test_wrong_backend_is_named():
    with pytest.raises(TypeError, match="use lib.pt"):
        nps.softmax(torch.ones(3))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        pts.softmax(np.ones(3))


def test_python_lists_become_float64():
    y = nps.softmax([1000, 1002])
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, [1 / (1 + np.e**2), 1 / (1 + np.e**-2)], rtol=1e-15)


def test_softmax_jacobian_norm_matches_the_explicit_matrix():
    """||diag(y) - y y^T||_F from the closed form equals the norm of the matrix itself, along either axis."""
    x = np.random.default_rng(3).normal(size=(5, 7))  # moderate rows: no one-hot cancellation
    y = nps.softmax(x, axis=1)
    explicit = [np.linalg.norm(np.diag(r) - np.outer(r, r)) for r in y]
    np.testing.assert_allclose(nps.softmax_jacobian_norm(y, axis=1), explicit, rtol=0, atol=1e-14)
    np.testing.assert_allclose(nps.softmax_jacobian_norm(y.T, axis=0), explicit, rtol=0, atol=1e-14)
    flat, one_hot = nps.softmax(np.zeros(4)), np.eye(4)[0]
    # flat over 4 keys: diagonal 1/4 - 1/16, off-diagonal -1/16
    assert abs(nps.softmax_jacobian_norm(flat) - np.sqrt(4 * 0.1875**2 + 12 * 0.0625**2)) < 1e-15
    assert nps.softmax_jacobian_norm(one_hot) == 0
    with pytest.raises(ValueError, match="axis"):
        nps.softmax_jacobian_norm(y, axis=2)


@given(logits=arrays(np.float64, st.integers(2, 40), elements=st.floats(-30, 30)))
def test_softmax_jacobian_norm_lies_between_zero_and_one_half(logits):
    """||diag(a) - a aᵀ||_F is 0 for a one-hot row and at most 1/2 (two keys at 1/2 each): a uniform row,
    at sqrt(n - 1)/n, is not the smallest (the scaling chapter's correction)."""
    norm = float(nps.softmax_jacobian_norm(nps.softmax(logits)))
    assert 0.0 <= norm <= 0.5 + 1e-12


@pytest.mark.parametrize("n", [2, 3, 16, 1024])
def test_softmax_jacobian_norm_of_one_hot_uniform_and_two_hot_rows(n):
    one_hot, uniform, two_hot = np.eye(n)[0], np.full(n, 1 / n), np.eye(n)[:2].sum(0) / 2
    assert nps.softmax_jacobian_norm(one_hot) == 0
    assert abs(nps.softmax_jacobian_norm(uniform) - np.sqrt(n - 1) / n) < 1e-15
    assert abs(nps.softmax_jacobian_norm(two_hot) - 0.5) < 1e-15
    if n > 2:  # the uniform row's norm lies strictly between the one-hot row's and the maximum
        assert 0 < nps.softmax_jacobian_norm(uniform) < 0.5

