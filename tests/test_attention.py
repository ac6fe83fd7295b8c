"""Tests of lib.attention (NumPy) and lib.pt.attention (PyTorch): the closed-form backward against
torch.autograd and central finite differences, the backends against each other, masks, edge cases, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from tolerances import to_torch, tol

import lib.attention as npa
import lib.pt.attention as pta


@st.composite
def qkv(draw, min_len=1):
    """Random (q, k, v, mask) with leading dims, lengths and widths drawn; mask may fully mask rows."""
    lead = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    n_q, n_k = draw(st.integers(min_len, 6)), draw(st.integers(min_len, 6))
    d_k, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(*lead, n_q, d_k))
    k = rng.normal(size=(*lead, n_k, d_k))
    v = rng.normal(size=(*lead, n_k, d_v))
    mask = rng.random(size=(*lead, n_q, n_k)) < 0.7 if draw(st.booleans()) else None
    return q, k, v, mask




# ---------------------------------------------------------------- forward


@given(qkv())
def test_numpy_and_torch_forward_agree(args):
    q, k, v, mask = args
    o, a = npa.attention(q, k, v, mask)
    ot, at = pta.attention(*to_torch(q, k, v, mask))
    np.testing.assert_allclose(o, ot.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(a, at.numpy(), rtol=0, atol=1e-12)


@given(qkv())
def test_weights_are_a_distribution_and_masked_weights_are_exactly_zero(args):
    q, k, v, mask = args
    _, a = npa.attention(q, k, v, mask)
    assert (a >= 0).all()
    sums = a.sum(axis=-1)
    if mask is None:
        np.testing.assert_allclose(sums, 1.0, atol=1e-12)
    else:
        alive = mask.any(axis=-1)
        np.testing.assert_allclose(sums[alive], 1.0, atol=1e-12)
        np.testing.assert_array_equal(sums[~alive], 0.0)  # fully masked row: zero weights
        assert (a[~mask] == 0).all()


def test_matches_torch_scaled_dot_product_attention():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    mask = torch.rand(2, 3, 5, 5, generator=g) < 0.8
    mask[..., 0] = True  # SDPA returns NaN for a fully masked row; the book returns zeros (tested above)
    for m in (None, mask):
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m)
        torch.testing.assert_close(pta.attention(q, k, v, m)[0], ref, rtol=0, atol=1e-12)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(pta.attention(q, k, v, pta.causal_mask(5))[0], ref, rtol=0, atol=1e-12)


@given(qkv(), st.data())
def test_causal_output_row_does_not_depend_on_later_inputs(args, data):
    q, k, v, _ = args
    n = min(q.shape[-2], k.shape[-2])
    q, k, v = q[..., :n, :], k[..., :n, :], v[..., :n, :]
    i = data.draw(st.integers(0, n - 1))
    mask = npa.causal_mask(n)
    o, _ = npa.attention(q, k, v, mask)
    rng = np.random.default_rng(i)
    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    for t in (q2, k2, v2):
        t[..., i + 1 :, :] = rng.normal(size=t[..., i + 1 :, :].shape) * 10
    o2, _ = npa.attention(q2, k2, v2, mask)
    np.testing.assert_allclose(o2[..., : i + 1, :], o[..., : i + 1, :], rtol=0, atol=1e-12)
    if i + 1 < n:
        assert not np.allclose(o2[..., i + 1 :, :], o[..., i + 1 :, :])  # the perturbation was real


def test_causal_mask_with_a_kv_cache_aligns_queries_to_the_end():
    np.testing.assert_array_equal(npa.causal_mask(2, 4), [[1, 1, 1, 0], [1, 1, 1, 1]])
    np.testing.assert_array_equal(pta.causal_mask(3).numpy(), np.tril(np.ones((3, 3), bool)))


def test_padding_mask():
    m = npa.padding_mask([2, 0, 3], 3)
    assert m.shape == (3, 1, 3)
    np.testing.assert_array_equal(m[:, 0], [[1, 1, 0], [0, 0, 0], [1, 1, 1]])
    np.testing.assert_array_equal(pta.padding_mask(torch.tensor([2, 0, 3]), 3).numpy(), m)
    with pytest.raises(ValueError, match=r"every length must lie in \[0, n=3\]"):
        npa.padding_mask([4], 3)
    with pytest.raises(TypeError, match="lengths must be a 1-D array of ints"):
        npa.padding_mask([1.5], 3)


# ---------------------------------------------------------------- backward


@given(qkv())
def test_closed_form_backward_matches_autograd(args):
    q, k, v, mask = args
    rng = np.random.default_rng(0)
    _, _ = npa.attention(q, k, v, mask)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    d_out = rng.normal(size=(*lead, q.shape[-2], v.shape[-1]))
    dq, dk, dv = npa.attention_backward(q, k, v, d_out, mask)
    qt, kt, vt = to_torch(q, k, v, grad=True)
    (mt,) = to_torch(mask)
    ot, _ = pta.attention(qt, kt, vt, mt)
    ot.backward(torch.from_numpy(d_out))
    for mine, ref in ((dq, qt.grad), (dk, kt.grad), (dv, vt.grad)):
        np.testing.assert_allclose(mine, ref.numpy(), rtol=0, atol=1e-11)
    for mine, ref in zip(pta.attention_backward(*to_torch(q, k, v, d_out, mask)), (dq, dk, dv), strict=True):
        np.testing.assert_allclose(mine.numpy(), ref, rtol=0, atol=1e-12)


def test_backward_reduces_broadcast_leading_dims():
    rng = np.random.default_rng(3)
    q = rng.normal(size=(2, 3, 4, 5))
    k = rng.normal(size=(1, 3, 6, 5))  # broadcast over the first axis (e.g. shared keys)
    v = rng.normal(size=(6, 2))  # no leading dims at all
    d_out = rng.normal(size=(2, 3, 4, 2))
    dq, dk, dv = npa.attention_backward(q, k, v, d_out)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    qt, kt, vt = to_torch(q, k, v, grad=True)
    pta.attention(qt, kt, vt)[0].backward(torch.from_numpy(d_out))
    np.testing.assert_allclose(dk, kt.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(dv, vt.grad.numpy(), atol=1e-12)


def test_closed_form_backward_matches_central_finite_differences():
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = npa.causal_mask(3, 5)
    d_out = rng.normal(size=(3, 2))
    grads = npa.attention_backward(q, k, v, d_out, mask)
    eps = 1e-6
    for which, g in enumerate(grads):
        fd = np.zeros_like(g)
        for idx in np.ndindex(g.shape):
            plus = [q.copy(), k.copy(), v.copy()]
            minus = [q.copy(), k.copy(), v.copy()]
            plus[which][idx] += eps
            minus[which][idx] -= eps
            fd[idx] = ((npa.attention(*plus, mask)[0] - npa.attention(*minus, mask)[0]) * d_out).sum() / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=0, atol=1e-8)


def test_gradcheck_through_the_torch_path():
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 3, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])
    assert torch.autograd.gradcheck(lambda a, b, c: pta.attention(a, b, c, mask)[0], (q, k, v))


def test_fully_masked_row_has_zero_output_and_zero_gradient():
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(2, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    mask = np.array([[True, True, False, False], [False] * 4])
    o, a = npa.attention(q, k, v, mask)
    np.testing.assert_array_equal(o[1], 0.0)
    np.testing.assert_array_equal(a[1], 0.0)
    dq, _, _ = npa.attention_backward(q, k, v, np.ones((2, 2)), mask)
    np.testing.assert_array_equal(dq[1], 0.0)
    qt, kt, vt = to_torch(q, k, v, grad=True)
    pta.attention(qt, kt, vt, torch.from_numpy(mask))[0].sum().backward()
    assert torch.isfinite(qt.grad).all() and (qt.grad[1] == 0).all()


def test_steps_of_the_worked_example():
    """Q = K = I₂, V = [[1, 2], [3, 4]], L = sum(O): the symmetric example of the backward chapter."""
    st_ = npa.attention_backward_steps(np.eye(2), np.eye(2), np.array([[1.0, 2], [3, 4]]), np.ones((2, 2)))
    p = 1 / (1 + np.exp(-1 / np.sqrt(2)))  # softmax([1/√2, 0])[0]
    np.testing.assert_allclose(st_.a, [[p, 1 - p], [1 - p, p]], rtol=1e-15)
    np.testing.assert_allclose(st_.dv, np.ones((2, 2)), rtol=1e-15)  # columns of A sum to 1 here
    np.testing.assert_allclose(st_.ds_scaled.sum(axis=-1), 0.0, atol=1e-15)
    np.testing.assert_allclose(st_.ds, st_.ds_scaled / np.sqrt(2), rtol=1e-15)


# ---------------------------------------------------------------- dtypes


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16], ids=lambda d: np.dtype(d).name)
def test_backends_agree_per_dtype(dtype):
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=(2, 6, 8)).astype(dtype) for _ in range(3))
    o, a = npa.attention(q, k, v, npa.causal_mask(6))
    ot, at = pta.attention(*to_torch(q, k, v), pta.causal_mask(6))
    assert o.dtype == dtype and ot.dtype == torch.from_numpy(q).dtype
    np.testing.assert_allclose(o.astype(float), ot.double().numpy(), rtol=tol(dtype), atol=tol(dtype))
    np.testing.assert_allclose(a.astype(float), at.double().numpy(), rtol=tol(dtype), atol=tol(dtype))


def test_bfloat16_close_to_float64():
    rng = np.random.default_rng(8)
    q, k, v = (rng.normal(size=(4, 8)) for _ in range(3))
    o64, _ = npa.attention(q, k, v)
    o16, _ = pta.attention(*(torch.from_numpy(t).to(torch.bfloat16) for t in (q, k, v)))
    assert o16.dtype == torch.bfloat16
    np.testing.assert_allclose(o16.double().numpy(), o64, atol=3e-2)


@pytest.mark.parametrize("mod", [npa, pta], ids=["numpy", "torch"])
def test_large_logits_in_float16_stay_finite(mod):
    q = np.full((2, 4), 30.0, dtype=np.float16)  # q·k/√d = 30·30·4/2 = 1800 > float16 exp limit
    k = np.stack([np.full(4, 30.0), np.full(4, -30.0)]).astype(np.float16)
    v = np.eye(2, dtype=np.float16)
    args = (q, k, v) if mod is npa else to_torch(q, k, v)
    with np.errstate(over="ignore"):
        o, a = mod.attention(*args)
    a = np.asarray(a, dtype=np.float64)
    np.testing.assert_array_equal(a, [[1, 0], [1, 0]])


# ---------------------------------------------------------------- edge cases and bad input


@pytest.mark.parametrize("mod", [npa, pta], ids=["numpy", "torch"])
def test_empty_sequences(mod):
    conv = (lambda *a: a) if mod is npa else to_torch
    o, a = mod.attention(*conv(np.zeros((0, 4)), np.zeros((3, 4)), np.zeros((3, 2))))
    assert tuple(o.shape) == (0, 2) and tuple(a.shape) == (0, 3)
    o, a = mod.attention(*conv(np.ones((2, 4)), np.zeros((0, 4)), np.zeros((0, 2))))
    assert tuple(a.shape) == (2, 0)
    np.testing.assert_array_equal(np.asarray(o), np.zeros((2, 2)))  # nothing to attend to: zeros


@pytest.mark.parametrize("mod", [npa, pta], ids=["numpy", "torch"])
def test_bad_inputs_get_clear_errors(mod):
    conv = (lambda *a: a) if mod is npa else (lambda *a: to_torch(*a))
    q, k, v = np.zeros((2, 5, 64)), np.zeros((2, 5, 32)), np.zeros((2, 5, 8))
    want = r"q has width 64 but k has width 32 \(q.shape=\(2, 5, 64\), k.shape=\(2, 5, 32\)\)"
    with pytest.raises(ValueError, match=want):
        mod.attention(*conv(q, k, v))
    with pytest.raises(ValueError, match="k has length 5 but v has length 4"):
        mod.attention(*conv(np.zeros((5, 4)), np.zeros((5, 4)), np.zeros((4, 4))))
    with pytest.raises(ValueError, match="q must have at least 2 dimensions"):
        mod.attention(*conv(np.zeros(4), np.zeros((5, 4)), np.zeros((5, 4))))
    with pytest.raises(ValueError, match="do not broadcast"):
        mod.attention(*conv(np.zeros((2, 5, 4)), np.zeros((3, 5, 4)), np.zeros((3, 5, 4))))
    with pytest.raises(TypeError, match="q must have a floating dtype"):
        mod.attention(*conv(np.zeros((5, 4), dtype=np.int64), np.zeros((5, 4)), np.zeros((5, 4))))
    with pytest.raises(TypeError, match="q, k and v must share a dtype"):
        mod.attention(*conv(np.zeros((5, 4), dtype=np.float32), np.zeros((5, 4)), np.zeros((5, 4))))
    good = conv(np.zeros((5, 4)), np.zeros((6, 4)), np.zeros((6, 4)))
    with pytest.raises(ValueError, match=r"mask of shape \(5, 5\) does not broadcast to the scores' shape \(5, 6\)"):
        mod.attention(*good, mask=conv(np.ones((5, 5), dtype=bool))[0])
    with pytest.raises(TypeError, match="mask must be boolean"):
        mod.attention(*good, mask=conv(np.ones((5, 6)))[0])
    with pytest.raises(ValueError, match=r"d_out must have the output's shape \(5, 4\)"):
        mod.attention_backward(*good, conv(np.zeros((5, 3)))[0])
    with pytest.raises(ValueError, match="a causal mask needs n_k >= n_q"):
        mod.causal_mask(4, 2)


# ---------------------------------------------------------------- an additive bias on the scaled logits


@pytest.mark.parametrize("mod", [npa, pta], ids=["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_a_zero_bias_gives_the_bias_free_result_bit_for_bit(mod, dtype):
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=s).astype(dtype) for s in ((2, 3, 4, 6), (2, 3, 7, 6), (2, 3, 7, 5)))
    mask = rng.random((4, 7)) < 0.6
    mask[:, 0], mask[1] = True, False  # row 1 has nothing to attend to
    d_out = rng.normal(size=(2, 3, 4, 5)).astype(dtype)
    zero = np.zeros((3, 4, 7), dtype=dtype)
    conv = (lambda *a: a) if mod is npa else (lambda *a: tuple(torch.from_numpy(t) for t in a))
    args = conv(q, k, v, mask)
    (zb,) = conv(zero)
    for plain, biased in (
        (mod.attention(*args), mod.attention(*args, bias=zb)),
        (mod.attention(*args, scale=0.3), mod.attention(*args, 0.3, zb)),
        (mod.attention_backward(*args[:3], *conv(d_out), args[3]),
         mod.attention_backward(*args[:3], *conv(d_out), args[3], bias=zb)),
    ):
        for x, y in zip(plain, biased, strict=True):
            x, y = np.asarray(x), np.asarray(y)
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes()


def test_alibi_bias_in_the_numpy_reference_matches_the_definition():
    """attention(..., bias=alibi_bias(n, n, h)) under a causal mask is eq. alibi written out with scalars:
    a_ij = exp(q_i.k_j / sqrt(d) + m_h (j - i)) / sum_{j' <= i} exp(...), j <= i."""
    import math

    import lib.position_bias as pb

    h, n, d = 4, 6, 3
    rng = np.random.default_rng(8)
    q, k, v = rng.normal(size=(h, n, d)), rng.normal(size=(h, n, d)), rng.normal(size=(h, n, 2))
    o, a = npa.attention(q, k, v, npa.causal_mask(n), bias=pb.alibi_bias(n, n, h))
    slopes = pb.alibi_slopes(h)
    want = np.zeros((h, n, n))
    for hh in range(h):
        for i in range(n):
            logits = [sum(q[hh, i, c] * k[hh, j, c] for c in range(d)) / math.sqrt(d) + slopes[hh] * (j - i)
                      for j in range(i + 1)]
            z = sum(math.exp(x) for x in logits)
            want[hh, i, : i + 1] = [math.exp(x) / z for x in logits]
    np.testing.assert_allclose(a, want, rtol=0, atol=1e-13)
    np.testing.assert_allclose(o, want @ v, rtol=0, atol=1e-13)
    _, plain = npa.attention(q, k, v, npa.causal_mask(n))
    assert np.abs(plain - want).max() > 1e-2  # the bias matters


@pytest.mark.parametrize("mod", [npa, pta], ids=["numpy", "torch"])
def test_bad_biases_get_clear_errors(mod):
    conv = (lambda *a: a) if mod is npa else (lambda *a: to_torch(*a))
    good = conv(np.zeros((5, 4)), np.zeros((6, 4)), np.zeros((6, 4)))
    with pytest.raises(ValueError, match=r"bias of shape \(5, 5\) does not broadcast to the scores' shape \(5, 6\)"):
        mod.attention(*good, bias=conv(np.zeros((5, 5)))[0])
    with pytest.raises(TypeError, match="bias must have q's dtype float64, got float32"):
        mod.attention(*good, bias=conv(np.zeros((5, 6), dtype=np.float32))[0])
    with pytest.raises(TypeError, match="bias must have a floating dtype, got int64"):
        mod.attention(*good, bias=conv(np.zeros((5, 6), dtype=np.int64))[0])
    with pytest.raises(TypeError, match="bias must be a floating array of q's dtype, got float"):
        mod.attention(*good, bias=1.0)
    with pytest.raises(ValueError, match=r"bias contains a non-finite value \(-inf\) at \[0, 5\].*not with -inf"):
        mod.attention(*good, bias=conv(np.where(np.arange(6) == 5, -np.inf, 0.0)[None, :])[0])
    with pytest.raises(ValueError, match=r"bias of shape \(5, 5\)"):
        mod.attention_backward(*good, conv(np.zeros((5, 4)))[0], bias=conv(np.zeros((5, 5)))[0])
    other = torch.zeros(5, 6) if mod is npa else np.zeros((5, 6))
    with pytest.raises(TypeError, match="bias must be a (NumPy array for the NumPy reference|torch.Tensor for lib.pt)"):
        mod.attention(*good, bias=other)


def test_the_attention_diagram_draws_the_steps_of_the_forward_pass():
    """lib.book.diagrams_attention draws Q, K, V -> S -> S' -> mask -> A -> O, the order of lib.attention."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lib.book import diagrams_attention as da

    fig, drawn = da.attention_dataflow_figure()
    assert [s.key for s in drawn] == ["q", "k", "v", "s", "scale", "mask", "softmax", "out"]
    plt.close(fig)
    fig, drawn = da.attention_dataflow_figure(masked=False)
    assert "mask" not in [s.key for s in drawn]
    plt.close(fig)
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="lacks the nodes"):
        da.computation_graph(ax, {})
    plt.close(fig)
