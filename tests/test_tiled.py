"""Tests of lib.tiled (NumPy) and lib.pt.tiled (PyTorch): tiled attention against the naive reference
(forward, lse and gradients, float64 to 1e-12) over random shapes, block sizes that do and do not divide n,
masks and causal offsets; the associative merge; the tile schedule against lib.flops; torch.autograd and
gradcheck through the autograd.Function; the backends against each other per dtype; edge cases; errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from tolerances import TOL, to_torch, tol

import lib.attention as npa
import lib.pt.attention as pta
import lib.pt.tiled as ptt
import lib.tiled as nt
from lib.flops import causal_block_pairs
from lib.softmax import logsumexp


@st.composite
def tiled_case(draw):
    """Random (q, k, v, mask, block_size, causal) with broadcasting leading dims and any block size."""
    lead = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    causal = draw(st.booleans())
    n_q = draw(st.integers(1, 17))
    n_k = draw(st.integers(n_q if causal else 1, 19))
    d_k, d_v = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    block = draw(st.integers(1, 20))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    k_lead = lead if draw(st.booleans()) else tuple(1 for _ in lead)  # k, v broadcast over q's batch
    q = rng.normal(size=(*lead, n_q, d_k)) * draw(st.sampled_from([1.0, 10.0]))
    k = rng.normal(size=(*k_lead, n_k, d_k))
    v = rng.normal(size=(*k_lead, n_k, d_v))
    mask = rng.random(size=(*lead, n_q, n_k)) < draw(st.sampled_from([0.2, 0.7])) if draw(st.booleans()) else None
    return q, k, v, mask, block, causal


def _full_mask(mask, n_q, n_k, causal):
    if not causal:
        return mask
    c = npa.causal_mask(n_q, n_k)
    return c if mask is None else (mask & c)




# ---------------------------------------------------------------- forward and backward equal the naive


@given(tiled_case())
def test_numpy_tiled_forward_and_lse_equal_naive(case):
    q, k, v, mask, block, causal = case
    full = _full_mask(mask, q.shape[-2], k.shape[-2], causal)
    out, lse = nt.tiled_attention(q, k, v, mask, block_size=block, causal=causal)
    ref, _ = npa.attention(q, k, v, full)
    np.testing.assert_allclose(out, ref, rtol=0, atol=TOL["float64"])
    s = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    s = s if full is None else np.where(full, s, -np.inf)
    np.testing.assert_allclose(lse, logsumexp(s, axis=-1), rtol=0, atol=TOL["float64"])  # -inf rows match too


@given(tiled_case())
def test_numpy_tiled_backward_equals_naive_backward(case):
    q, k, v, mask, block, causal = case
    full = _full_mask(mask, q.shape[-2], k.shape[-2], causal)
    out, lse = nt.tiled_attention(q, k, v, mask, block_size=block, causal=causal)
    d_out = np.random.default_rng(1).normal(size=out.shape)
    # a different block size in the backward: only (out, lse) carry over from the forward
    grads = nt.tiled_attention_backward(q, k, v, out, lse, d_out, mask=mask, block_size=block + 3, causal=causal)
    refs = npa.attention_backward(q, k, v, d_out, full)
    for name, g, r in zip("qkv", grads, refs, strict=True):
        assert g.shape == r.shape, name
        np.testing.assert_allclose(g, r, rtol=0, atol=TOL["float64"], err_msg=f"d{name}")


@given(tiled_case())
def test_torch_tiled_autograd_equals_autograd_through_naive(case):
    q, k, v, mask, block, causal = case
    full = _full_mask(mask, q.shape[-2], k.shape[-2], causal)
    qt, kt, vt = to_torch(q, k, v, grad=True)
    (mt,) = to_torch(mask)
    out, lse = ptt.tiled_attention(qt, kt, vt, mt, block_size=block, causal=causal)
    assert not lse.requires_grad
    (ft,) = to_torch(full)
    ref, _ = pta.attention(qt, kt, vt, ft)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=0, atol=TOL["float64"])
    d_out = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    g = torch.autograd.grad(out, (qt, kt, vt), d_out)
    r = torch.autograd.grad(ref, (qt, kt, vt), d_out, allow_unused=True, materialize_grads=True)
    for name, a, b in zip("qkv", g, r, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=TOL["float64"], err_msg=f"d{name}")


@given(tiled_case())
def test_numpy_and_torch_tiled_agree(case):
    q, k, v, mask, block, causal = case
    out, lse = nt.tiled_attention(q, k, v, mask, block_size=block, causal=causal)
    qt, kt, vt, mt = to_torch(q, k, v, mask)
    out_t, lse_t = ptt.tiled_attention(qt, kt, vt, mt, block_size=block, causal=causal)
    np.testing.assert_allclose(out, out_t.numpy(), rtol=0, atol=TOL["float64"])
    np.testing.assert_allclose(lse, lse_t.numpy(), rtol=0, atol=TOL["float64"])
    d_out = np.random.default_rng(3).normal(size=out.shape)
    g = nt.tiled_attention_backward(q, k, v, out, lse, d_out, mask=mask, block_size=block, causal=causal)
    g_t = ptt.tiled_attention_backward(qt, kt, vt, out_t, lse_t, *to_torch(d_out), mask=mt, block_size=block,
                                       causal=causal)
    for a, b in zip(g, g_t, strict=True):
        np.testing.assert_allclose(a, b.numpy(), rtol=0, atol=TOL["float64"])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block", [1, 3, 4, 16])
def test_gradcheck_through_the_autograd_function(block, causal):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 6, 3, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(3))
    mask = torch.rand(2, 6, 6, generator=g) < 0.8

    def f(q, k, v):
        return ptt.tiled_attention(q, k, v, mask, block_size=block, causal=causal)[0]

    # autograd goes through the hand-written backward, not through the forward's operations
    assert type(f(q, k, v).grad_fn).__name__ == "TiledAttentionFunctionBackward"
    assert torch.autograd.gradcheck(f, (q, k, v))


def test_numpy_backward_against_central_finite_differences():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(5, 3)), rng.normal(size=(7, 3)), rng.normal(size=(7, 2))
    w = rng.normal(size=(5, 2))  # loss = sum(w * out)

    def loss(q, k, v):
        return float(np.sum(w * nt.tiled_attention(q, k, v, block_size=3, causal=True)[0]))

    out, lse = nt.tiled_attention(q, k, v, block_size=3, causal=True)
    grads = nt.tiled_attention_backward(q, k, v, out, lse, w, block_size=2, causal=True)
    h = 1e-6
    for x, g in zip((q, k, v), grads, strict=True):
        fd = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            xp, xm = x.copy(), x.copy()
            xp[idx] += h
            xm[idx] -= h
            args_p = [xp if y is x else y for y in (q, k, v)]
            args_m = [xm if y is x else y for y in (q, k, v)]
            fd[idx] = (loss(*args_p) - loss(*args_m)) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=0, atol=1e-8)


@pytest.mark.parametrize("n", [128, 200, 257])
@pytest.mark.parametrize("block", [32, 64, 100])
def test_larger_lengths_with_blocks_that_do_and_do_not_divide_n(n, block):
    rng = np.random.default_rng(n + block)
    q, k, v = (rng.normal(size=(2, n, 16)) for _ in range(3))
    for causal in (False, True):
        full = npa.causal_mask(n) if causal else None
        out, lse = nt.tiled_attention(q, k, v, block_size=block, causal=causal)
        np.testing.assert_allclose(out, npa.attention(q, k, v, full)[0], rtol=0, atol=TOL["float64"])
        d_out = rng.normal(size=out.shape)
        grads = nt.tiled_attention_backward(q, k, v, out, lse, d_out, block_size=block, causal=causal)
        for g, r in zip(grads, npa.attention_backward(q, k, v, d_out, full), strict=True):
            np.testing.assert_allclose(g, r, rtol=0, atol=TOL["float64"])


# ---------------------------------------------------------------- dtypes


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_torch_low_precision_against_float64(dtype):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 40, 8, dtype=torch.float64, generator=g) for _ in range(3))
    ref, _ = pta.attention(q, k, v, pta.causal_mask(40))
    out, lse = ptt.tiled_attention(q.to(dtype), k.to(dtype), v.to(dtype), block_size=16, causal=True)
    assert out.dtype == dtype and lse.dtype == dtype
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=tol(dtype))


def test_numpy_float32_keeps_dtype_and_matches_float64():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(30, 8)) for _ in range(3))
    out32, lse32 = nt.tiled_attention(*(x.astype(np.float32) for x in (q, k, v)), block_size=7)
    assert out32.dtype == np.float32 and lse32.dtype == np.float32
    np.testing.assert_allclose(out32, npa.attention(q, k, v)[0], rtol=0, atol=tol(np.float32))


def test_large_logits_do_not_overflow():
    q = np.full((4, 2), 300.0)  # scaled logits of order 1e5: exp would overflow without the running max
    k = np.array([[300.0, 300.0], [-300.0, 0.0], [299.0, 300.0], [0.0, 0.0]])
    v = np.eye(4)
    out, lse = nt.tiled_attention(q, k, v, block_size=1)
    np.testing.assert_allclose(out, npa.attention(q, k, v)[0], rtol=0, atol=TOL["float64"])
    assert np.isfinite(lse).all()


# ---------------------------------------------------------------- the merge, the schedule


def _random_partial(rng, dead=False):
    s = rng.normal(size=(3, 4)) * 5
    if dead:
        s[:] = -np.inf
    s[1, :] = -np.inf  # one row of this block sees nothing
    return nt.tile_partial(s, rng.normal(size=(4, 2)))


def test_merge_is_associative_commutative_with_identity():
    rng = np.random.default_rng(0)
    parts = [_random_partial(rng, dead=(i == 2)) for i in range(4)]
    identity = nt.Partial(np.full((3, 1), -np.inf), np.zeros((3, 1)), np.zeros((3, 2)))
    a, b, c, _ = parts
    left = nt.merge_partials(nt.merge_partials(a, b), c)
    right = nt.merge_partials(a, nt.merge_partials(b, c))
    for x, y in zip(left, right, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-14, atol=0)
    for x, y in zip(nt.merge_partials(a, b), nt.merge_partials(b, a), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-14, atol=0)
    for x, y in zip(nt.merge_partials(identity, a), a, strict=True):
        np.testing.assert_array_equal(x, y)
    # every order of folding the four gives the same result
    results = []
    for perm in itertools.permutations(parts):
        acc = identity
        for p in perm:
            acc = nt.merge_partials(acc, p)
        results.append(acc)
    for r in results[1:]:
        for x, y in zip(r, results[0], strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-13, atol=0)


def test_merged_partials_equal_the_partial_of_the_union():
    rng = np.random.default_rng(1)
    s, v = rng.normal(size=(3, 10)), rng.normal(size=(10, 2))
    whole = nt.tile_partial(s, v)
    merged = nt.merge_partials(nt.tile_partial(s[:, :4], v[:4]), nt.tile_partial(s[:, 4:], v[4:]))
    for x, y in zip(whole, merged, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-14, atol=0)


@pytest.mark.parametrize("n,block", [(1, 1), (7, 3), (64, 16), (100, 32), (257, 64), (1000, 128)])
def test_causal_schedule_computes_the_pairs_lib_flops_counts(n, block):
    tiles = nt.tile_schedule(n, n, block, causal=True)
    pairs = sum((t.q1 - t.q0) * (t.k1 - t.k0) for t in tiles)
    assert pairs == causal_block_pairs(n, block)
    nb = -(-n // block)
    assert len(tiles) == nb * (nb + 1) // 2  # square tiles: the lower triangle with its diagonal
    # a diagonal tile needs a mask inside unless it is 1 x 1 (the last tile when n % block == 1)
    assert sum(t.diagonal for t in tiles) == sum(min(block, n - q0) > 1 for q0 in range(0, n, block))
    assert len(nt.tile_schedule(n, n, block)) == nb * nb


@pytest.mark.parametrize("n_q,n_k,block", [(3, 10, 4), (5, 5, 2), (8, 20, 3), (1, 9, 2)])
def test_schedule_skips_only_fully_masked_tiles_and_marks_diagonals(n_q, n_k, block):
    keep = npa.causal_mask(n_q, n_k)
    visited = {(t.q0, t.k0): t for t in nt.tile_schedule(n_q, n_k, block, causal=True)}
    for q0 in range(0, n_q, block):
        for k0 in range(0, n_k, block):
            sub = keep[q0 : q0 + block, k0 : k0 + block]
            assert ((q0, k0) in visited) == bool(sub.any()), (q0, k0)
            if (q0, k0) in visited:
                assert visited[q0, k0].diagonal == (not sub.all()), (q0, k0)


@pytest.mark.parametrize("n,block", [(256, 64), (1000, 128), (4096, 128), (100, 7)])
def test_io_counts_closed_forms_and_the_causal_saving(n, block):
    d = 64
    io = nt.io_elements(n, n, d, d, block)
    assert io["naive"] == 4 * n * d + 4 * n * n
    assert io["tiled"] == n * d + -(-n // block) * n * 2 * d + n * (d + 1)
    causal = nt.io_elements(n, n, d, d, block, causal=True)
    assert causal["naive"] == io["naive"]
    assert causal["tiled"] < io["tiled"]
    if n % block == 0:  # every tile has `block` rows, so the keys read are the computed pairs / block
        assert causal["tiled"] - n * d - n * (d + 1) == causal_block_pairs(n, block) // block * 2 * d
    with pytest.raises(ValueError, match="d_k must be a positive int"):
        nt.io_elements(n, n, 0, d, block)


# ---------------------------------------------------------------- edge cases


def test_fully_masked_rows_give_zero_output_minus_inf_lse_and_zero_gradients():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    mask = np.ones((4, 6), dtype=bool)
    mask[2] = False
    out, lse = nt.tiled_attention(q, k, v, mask, block_size=4)
    assert (out[2] == 0).all() and np.isneginf(lse[2]) and np.isfinite(np.delete(lse, 2)).all()
    d_out = rng.normal(size=out.shape)
    dq, dk, dv = nt.tiled_attention_backward(q, k, v, out, lse, d_out, mask=mask, block_size=4)
    assert (dq[2] == 0).all() and np.isfinite(dk).all() and np.isfinite(dv).all()
    qt, kt, vt = to_torch(q, k, v, grad=True)
    out_t, lse_t = ptt.tiled_attention(qt, kt, vt, torch.from_numpy(mask), block_size=4)
    out_t.backward(torch.from_numpy(d_out))
    assert (qt.grad[2] == 0).all() and torch.isneginf(lse_t[2])
    np.testing.assert_allclose(qt.grad.numpy(), dq, rtol=0, atol=TOL["float64"])


def test_no_keys_and_no_queries():
    q, k, v = np.ones((3, 2)), np.ones((0, 2)), np.ones((0, 4))
    out, lse = nt.tiled_attention(q, k, v)
    assert out.shape == (3, 4) and (out == 0).all() and np.isneginf(lse).all()
    out, lse = nt.tiled_attention(np.ones((0, 2)), np.ones((5, 2)), np.ones((5, 4)))
    assert out.shape == (0, 4) and lse.shape == (0,)
    dq, dk, dv = nt.tiled_attention_backward(np.ones((0, 2)), np.ones((5, 2)), np.ones((5, 4)), out, lse,
                                             np.ones((0, 4)))
    assert dq.shape == (0, 2) and (dk == 0).all() and (dv == 0).all()


def test_explicit_scale_is_used():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(9, 4)) for _ in range(3))
    out, _ = nt.tiled_attention(q, k, v, scale=0.9, block_size=4)
    np.testing.assert_allclose(out, npa.attention(q, k, v, scale=0.9)[0], rtol=0, atol=TOL["float64"])
    assert not np.allclose(out, npa.attention(q, k, v)[0])


# ---------------------------------------------------------------- bad input


def test_bad_inputs_raise_clear_errors():
    q, k, v = np.ones((4, 3)), np.ones((5, 3)), np.ones((5, 2))
    with pytest.raises(ValueError, match="block_size must be a positive int, got 0"):
        nt.tiled_attention(q, k, v, block_size=0)
    with pytest.raises(TypeError, match="block_size must be an int, got float 2.5"):
        nt.tiled_attention(q, k, v, block_size=2.5)
    with pytest.raises(TypeError, match="causal must be a bool"):
        nt.tiled_attention(q, k, v, causal=1)
    with pytest.raises(ValueError, match="causal mask needs n_k >= n_q"):
        nt.tiled_attention(np.ones((6, 3)), k, v, causal=True)
    with pytest.raises(ValueError, match="q has width 3 but k has width 2"):
        nt.tiled_attention(q, np.ones((5, 2)), v)
    bad = q.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"q contains a non-finite value \(nan\) at \[1, 2\]"):
        nt.tiled_attention(bad, k, v)
    with pytest.raises(TypeError, match="mask must be boolean"):
        nt.tiled_attention(q, k, v, mask=np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"mask of shape \(3, 5\) does not broadcast"):
        nt.tiled_attention(q, k, v, mask=np.ones((3, 5), dtype=bool))
    out, lse = nt.tiled_attention(q, k, v)
    with pytest.raises(ValueError, match=r"lse must have shape \(4,\), got \(4, 1\)"):
        nt.tiled_attention_backward(q, k, v, out, lse[:, None], out)
    with pytest.raises(ValueError, match=r"d_out must have shape \(4, 2\), got \(2, 4\)"):
        nt.tiled_attention_backward(q, k, v, out, lse, out.T)
    with pytest.raises(TypeError, match="out must have q's dtype float64, got float32"):
        nt.tiled_attention_backward(q, k, v, out.astype(np.float32), lse, out)
    with pytest.raises(ValueError, match="lse must be finite or -inf"):
        nt.tiled_attention_backward(q, k, v, out, np.full(4, np.nan), out)
    with pytest.raises(ValueError, match="n_q must be a non-negative int"):
        nt.tile_schedule(-1, 3, 2)


def test_torch_bad_inputs_raise_clear_errors():
    q, k, v = torch.ones(4, 3), torch.ones(5, 3), torch.ones(5, 2)
    with pytest.raises(ValueError, match="block_size must be a positive int, got -1"):
        ptt.tiled_attention(q, k, v, block_size=-1)
    with pytest.raises(TypeError, match="mask must be a torch.Tensor"):
        ptt.tiled_attention(q, k, v, mask=np.ones((4, 5), dtype=bool))
    bad = k.clone()
    bad[0, 0] = float("inf")
    with pytest.raises(ValueError, match=r"k contains a non-finite value \(inf\) at \[0, 0\]"):
        ptt.tiled_attention(q, bad, v)
    with pytest.raises(TypeError, match="q must be a torch.Tensor for lib.pt"):
        ptt.tiled_attention(np.ones((4, 3)), k, v)
    out, lse = ptt.tiled_attention(q, k, v)
    with pytest.raises(TypeError, match="lse must have q's dtype float32, got float64"):
        ptt.tiled_attention_backward(q, k, v, out, lse.double(), out)
    with pytest.raises(ValueError, match="causal mask needs n_k >= n_q"):
        ptt.tiled_attention(torch.ones(6, 3), k, v, causal=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 300, 16, dtype=torch.float64, generator=g) for _ in range(3))
    ref, _ = ptt.tiled_attention(q, k, v, block_size=64, causal=True)
    qc, kc, vc = (t.cuda().requires_grad_() for t in (q, k, v))
    out, lse = ptt.tiled_attention(qc, kc, vc, block_size=64, causal=True)
    assert out.device.type == "cuda" and lse.device.type == "cuda"
    torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=1e-12)
    out.sum().backward()
    assert qc.grad is not None and qc.grad.device.type == "cuda"


# ---------------------------------------------------------------- the chapter's diagrams


def test_tiled_forward_diagram_draws_one_value_per_tile():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lib.book import diagrams_tiled

    s = np.array([0.5, -1.0, 2.0, 0.0, 3.0, 1.0, -2.0, 4.0, 0.1, 0.2])  # 3 tiles of 4 keys (the last has 2)
    m, ell = [2.0, 3.0, 4.0], [1.5, 1.4, 1.2]
    fig = diagrams_tiled.tiled_forward(s, 4, m, ell)
    assert len(fig.axes) == 3
    plt.close(fig)
    with pytest.raises(ValueError, match="one value per tile"):
        diagrams_tiled.tiled_forward(s, 4, m[:2], ell[:2])


def test_layer_flops_diagram_stacks_shares():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lib.book import diagrams_tiled

    steps = [("A", "$1$", "a"), ("x", "", ""), ("B", "$2$", "b")]
    shares = {"1": {"a": 0.25, "b": 0.75}, "2": {"a": 0.5, "b": 0.5}}
    fig = diagrams_tiled.layer_flops(steps, shares, {"a": "group a", "b": "group b"})
    bars = fig.axes[1].patches
    assert len(bars) == 4 and max(p.get_x() + p.get_width() for p in bars) == 1.0
    plt.close(fig)


def test_chapter_listing_of_the_function_shows_its_two_methods():
    """The tiled chapter lists ``TiledAttentionFunction`` with ``:lines: 1,7-21`` (the docstring left out):
    line 1 must be the class line, lines 7-21 exactly the two static methods."""
    import inspect

    lines = inspect.getsource(ptt.TiledAttentionFunction).splitlines()
    assert lines[0].startswith("class TiledAttentionFunction(")
    shown = lines[6:21]
    assert shown[0].strip() == "@staticmethod" and shown[1].strip().startswith("def forward(")
    assert shown[-1].strip().startswith("return (*grads, None") and len(lines) == 21
    assert all(len(line) <= 76 for line in [lines[0], *shown])
