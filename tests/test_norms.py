"""Tests of lib.norms (NumPy) and lib.pt.norms (PyTorch): invariants, the closed-form backward against
torch.autograd and float64 central finite differences, torch.nn.LayerNorm, edge cases and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from tolerances import to_torch, tol

import lib.norms as npn
import lib.pt.norms as ptn


@st.composite
def ln_inputs(draw):
    """Random (x, gamma, beta, dy) with 0-2 leading axes, width d in [1, 9], scale and offset drawn."""
    lead = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=2)))
    d = draw(st.integers(1, 9))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    scale = draw(st.sampled_from([1e-2, 1.0, 1e2]))
    offset = draw(st.floats(-100, 100))
    x = rng.normal(size=(*lead, d)) * scale + offset
    return x, rng.normal(size=d), rng.normal(size=d), rng.normal(size=(*lead, d))


def _t(a, grad=False):
    return to_torch(a, grad=grad)[0]


# ---------------------------------------------------------------- invariants


@given(ln_inputs())
def test_normalised_rows_have_zero_mean_and_unit_variance(inp):
    x = inp[0]
    st_ = npn.layer_norm_steps(x, eps=1e-12)
    np.testing.assert_allclose(st_.x_hat.mean(axis=-1), 0.0, atol=1e-10)
    # mean(x_hat^2) = var / (var + eps): 1 up to eps, exactly this with it.
    var = st_.var[..., 0]
    np.testing.assert_allclose((st_.x_hat**2).mean(axis=-1), var / (var + 1e-12), rtol=1e-9)


@given(ln_inputs(), st.floats(-1e3, 1e3), st.floats(0.1, 1e3))
def test_invariant_to_shift_and_positive_scale_of_the_row(inp, c, a):
    x, g, b, _ = inp
    # With eps tiny relative to the variance, y(a x + c) = y(x) for a > 0.
    if x.shape[-1] < 2 or (x.std(axis=-1) < 1e-3).any():
        return
    y1 = npn.layer_norm(x, g, b, eps=1e-14)
    y2 = npn.layer_norm(a * x + c, g, b, eps=1e-14)
    np.testing.assert_allclose(y2, y1, atol=1e-6)


def test_eps_is_added_to_the_variance_inside_the_square_root():
    x = np.array([[1.0, 2.0, 4.0, 7.0]])
    eps = 0.5
    var = x.var(axis=-1, keepdims=True)  # biased, as in the module
    want = (x - x.mean()) / np.sqrt(var + eps)
    np.testing.assert_allclose(npn.layer_norm(x, eps=eps), want, rtol=1e-15)
    # ... and NOT to the standard deviation: that is a different function, measurably.
    other = (x - x.mean()) / (np.sqrt(var) + eps)
    assert np.abs(npn.layer_norm(x, eps=eps) - other).max() > 0.05


def test_constant_row_gives_beta_and_finite_gradients():
    x = np.full((2, 5), 3.0)
    b = np.arange(5.0)
    np.testing.assert_array_equal(npn.layer_norm(x, np.ones(5), b), np.broadcast_to(b, (2, 5)))
    dx, dg, db = npn.layer_norm_backward(x, np.ones((2, 5)), np.ones(5))
    assert np.isfinite(dx).all()
    np.testing.assert_allclose(dx, 0.0, atol=1e-12)  # a uniform dy is removed by the mean subtraction


@given(ln_inputs())
def test_dx_rows_are_orthogonal_to_ones_and_to_x_hat_when_gamma_is_one(inp):
    x, _, _, dy = inp
    dx, _, _ = npn.layer_norm_backward(x, dy, eps=1e-5)
    x_hat = npn.layer_norm_steps(x, eps=1e-5).x_hat
    rstd = npn.layer_norm_steps(x, eps=1e-5).rstd
    scale = np.abs(dy).max() * rstd.max() * x.shape[-1] + 1
    np.testing.assert_allclose(dx.sum(axis=-1), 0.0, atol=1e-10 * scale)
    # The Jacobian is symmetric and kills x_hat up to eps: (dx . x_hat) = r * eps/(var+eps) * (dy . x_hat)
    var = npn.layer_norm_steps(x, eps=1e-5).var[..., 0]
    want = rstd[..., 0] * 1e-5 / (var + 1e-5) * (dy * x_hat).sum(axis=-1)
    np.testing.assert_allclose((dx * x_hat).sum(axis=-1), want, atol=1e-9 * scale)


# ---------------------------------------------------------------- against torch.nn.LayerNorm and autograd


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@given(inp=ln_inputs())
def test_forward_matches_torch_nn_layernorm(dtype, inp):
    x, g, b, _ = (a.astype(dtype) for a in inp)
    ref = torch.nn.LayerNorm(x.shape[-1], eps=1e-5, dtype=torch.from_numpy(x).dtype)
    with torch.no_grad():
        ref.weight.copy_(_t(g))
        ref.bias.copy_(_t(b))
        want = ref(_t(x)).numpy()
    # float32 loses digits to cancellation when |mean| >> std: scale the tolerance by that condition number.
    cond = 1.0 + np.abs(x.mean(axis=-1)).max() / max(float(x.std(axis=-1).min()), 1e-3)
    atol = tol(dtype) * max(1.0, np.abs(want).max()) * cond
    np.testing.assert_allclose(npn.layer_norm(x, g, b), want, rtol=0, atol=atol * 4)
    np.testing.assert_allclose(ptn.layer_norm(_t(x), _t(g), _t(b)).numpy(), want, rtol=0, atol=atol * 4)
    mod = ptn.LayerNorm(x.shape[-1], dtype=ref.weight.dtype)
    mod.load_state_dict(ref.state_dict())  # same parameter names
    np.testing.assert_allclose(mod(_t(x)).detach().numpy(), want, rtol=0, atol=atol * 4)


@given(inp=ln_inputs())
def test_backward_matches_autograd_numpy_and_torch(inp):
    x, g, b, dy = inp
    xt, gt, bt = _t(x, True), _t(g, True), _t(b, True)
    y = torch.nn.functional.layer_norm(xt, (x.shape[-1],), gt, bt, eps=1e-5)
    y.backward(_t(dy))
    dx, dg, db = npn.layer_norm_backward(x, dy, g, eps=1e-5)
    scale = max(1.0, float(xt.grad.abs().max()))
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(dg, gt.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(db, bt.grad.numpy(), rtol=1e-12, atol=1e-12)
    pdx, pdg, pdb = ptn.layer_norm_backward(_t(x), _t(dy), _t(g), eps=1e-5)
    np.testing.assert_allclose(pdx.numpy(), dx, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(pdg.numpy(), dg, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(pdb.numpy(), db, rtol=1e-12, atol=1e-12)


def test_backward_matches_central_finite_differences_float64():
    rng = np.random.default_rng(0)
    x, g, b, dy = rng.normal(size=(3, 6)), rng.normal(size=6), rng.normal(size=6), rng.normal(size=(3, 6))
    dx, dg, db = npn.layer_norm_backward(x, dy, g, eps=1e-3)

    def loss(x_, g_, b_):
        return float((npn.layer_norm(x_, g_, b_, eps=1e-3) * dy).sum())

    h = 1e-6
    for arr, grad, which in ((x, dx, 0), (g, dg, 1), (b, db, 2)):
        fd = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            e = np.zeros_like(arr)
            e[idx] = h
            args_p, args_m = [x, g, b], [x, g, b]
            args_p[which], args_m[which] = arr + e, arr - e
            fd[idx] = (loss(*args_p) - loss(*args_m)) / (2 * h)
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


def test_torch_layer_norm_passes_gradcheck():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    g = torch.randn(5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: ptn.layer_norm(*a, eps=1e-5), (x, g, b))


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("mod", [npn, ptn], ids=["numpy", "torch"])
def test_bad_inputs_raise_clear_errors(mod):
    arr = (lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))) if mod is ptn else np.asarray
    x = arr(np.ones((2, 4)))
    with pytest.raises(ValueError, match="eps must be a finite number > 0"):
        mod.layer_norm(x, eps=0.0)
    with pytest.raises(ValueError, match="eps must be a finite number > 0"):
        mod.layer_norm(x, eps=float("nan"))
    with pytest.raises(ValueError, match=r"gamma must have shape \(d,\) = \(4,\)"):
        mod.layer_norm(x, arr(np.ones(3)))
    with pytest.raises(ValueError, match=r"beta must have shape \(d,\) = \(4,\)"):
        mod.layer_norm(x, None, arr(np.ones(5)))
    with pytest.raises(ValueError, match=r"x contains a non-finite value \(inf\) at \[0, 1\]"):
        mod.layer_norm(arr([[1.0, np.inf]]))
    with pytest.raises(ValueError, match="no features to normalise over"):
        mod.layer_norm(arr(np.ones((3, 0))))
    with pytest.raises(ValueError, match="at least 1 dimension"):
        mod.layer_norm(arr(1.0))
    with pytest.raises(ValueError, match=r"dy must have x's shape"):
        mod.layer_norm_backward(x, arr(np.ones((2, 3))))


def test_type_errors_name_the_argument():
    with pytest.raises(TypeError, match="x must have a floating dtype"):
        npn.layer_norm(np.ones((2, 3), dtype=int))
    with pytest.raises(TypeError, match="use lib.pt for torch tensors"):
        npn.layer_norm(torch.ones(2, 3))
    with pytest.raises(ValueError, match="d must be a positive int"):
        ptn.LayerNorm(0)
    with pytest.raises(TypeError, match="d must be an int, got float"):
        ptn.LayerNorm(4.0)
    with pytest.raises(TypeError, match="eps must be a real number, got str"):
        npn.layer_norm(np.ones(3), eps="1e-5")
    with pytest.raises(ValueError, match="x must have width d=4"):
        ptn.LayerNorm(4)(torch.ones(2, 3))


def test_float16_uses_float32_statistics_instead_of_overflowing():
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(4, 64)) * 300).astype(np.float16)  # squares overflow float16 (max 65504)
    with np.errstate(over="ignore"):
        naive_var = ((x - x.mean(axis=-1, keepdims=True)) ** 2).mean(axis=-1)
    assert np.isinf(naive_var).all()
    y = npn.layer_norm(x)
    assert y.dtype == np.float16
    want = torch.nn.functional.layer_norm(torch.from_numpy(x), (64,)).numpy()
    np.testing.assert_allclose(y.astype(np.float64), want.astype(np.float64), atol=4e-3)
    np.testing.assert_allclose(ptn.layer_norm(torch.from_numpy(x)).numpy().astype(np.float64),
                               want.astype(np.float64), atol=4e-3)
    assert np.abs(y.astype(np.float64)).max() > 1.0  # not collapsed to beta = 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_low_precision_backward_upcasts_like_the_forward(dtype):
    """Activations ~1000 ± 300: in float16 the centred squares overflow and the mean loses every digit, so a
    backward that takes its statistics in the input dtype returns exact zeros (issue 14)."""
    rng = np.random.default_rng(0)
    x = 1000 + 300 * rng.normal(size=(4, 64))
    dy, g = rng.normal(size=(4, 64)), rng.normal(size=64)
    dx64, dg64, db64 = npn.layer_norm_backward(x, dy, g)  # the float64 reference
    x_lo, dy_lo, g_lo = (torch.from_numpy(a).to(dtype) for a in (x, dy, g))
    dx, dg, db = ptn.layer_norm_backward(x_lo, dy_lo, g_lo)
    assert (dx.dtype, dg.dtype, db.dtype) == (dtype, dtype, dtype)
    # the low-precision inputs are themselves rounded, so compare with the float64 backward of those inputs
    ref = npn.layer_norm_backward(*(t.double().numpy() for t in (x_lo, dy_lo, g_lo)))
    for got, want, name in zip((dx, dg, db), ref, ("dx", "dgamma", "dbeta"), strict=True):
        assert np.abs(got.double().numpy()).max() > 0, f"{name} collapsed to zero"
        np.testing.assert_allclose(got.double().numpy(), want, rtol=1e-2, atol=1e-2 * np.abs(want).max(),
                                   err_msg=name)
    assert abs(np.abs(dx64).max() - 0.0188) < 1e-3 and abs(np.abs(dg64).max() - 5.97) < 1e-2
