"""Tests of lib.multihead (NumPy) and lib.pt.multihead (PyTorch): the backends against each other,
against torch.nn.MultiheadAttention and torch's SDPA (grouped-query), against an explicit per-head loop,
parameter and FLOP counts (vs torch's own counters), masks, gradients and bad-input errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from tolerances import to_torch, tol
from torch.utils.flop_counter import FlopCounterMode

import lib.multihead as npm
import lib.pt.multihead as ptm
from lib.attention import attention, causal_mask, padding_mask


@st.composite
def mha_case(draw):
    """Random inputs and weights for one multi-head call: batch dims, lengths, head layout, bias, mask."""
    h_kv = draw(st.sampled_from([1, 2, 3]))
    h = h_kv * draw(st.integers(1, 3))
    d_k = draw(st.integers(1, 4))
    d_model = h * d_k
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=1)))
    n_q, n_k = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    cross = draw(st.booleans())
    bias = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    x_q = rng.normal(size=(*lead, n_q, d_model))
    x_kv = rng.normal(size=(*lead, n_k, d_model)) if cross else None
    n_k = n_k if cross else n_q
    params = npm.init_params(d_model, h, n_kv_heads=h_kv, bias=bias, rng=rng)
    mask = None
    if draw(st.booleans()):
        mshape = draw(st.sampled_from([(n_q, n_k), (h, n_q, n_k), (*lead, 1, n_q, n_k), (*lead, h, n_q, n_k)]))
        mask = rng.random(size=mshape) < 0.7
    return x_q, x_kv, params, h, mask


def _t(a):
    return to_torch(a)[0]


def _t_params(p: npm.MultiHeadParams) -> npm.MultiHeadParams:
    return npm.MultiHeadParams(*(_t(a) for a in p))


def _loop_over_heads(x_q, x_kv, p: npm.MultiHeadParams, h: int, mask=None, bias=None):
    """Eq. mha written the long way: per-head weights are column blocks, one attention call per head (with
    head ``i``'s slice of the logit bias, if any)."""
    x_kv = x_q if x_kv is None else x_kv
    d_k = p.w_q.shape[1] // h
    h_kv = p.w_k.shape[1] // d_k

    def b(v, cols):
        return 0.0 if v is None else v[cols]

    heads, weights = [], []
    for i in range(h):
        g = i // (h // h_kv)  # the key/value head that query head i shares
        qc, kc = slice(i * d_k, (i + 1) * d_k), slice(g * d_k, (g + 1) * d_k)
        q = x_q @ p.w_q[:, qc] + b(p.b_q, qc)
        k = x_kv @ p.w_k[:, kc] + b(p.b_k, kc)
        v = x_kv @ p.w_v[:, kc] + b(p.b_v, kc)
        m = None
        if mask is not None:
            lead = np.broadcast_shapes(x_q.shape[:-2], x_kv.shape[:-2])
            m = np.broadcast_to(mask, (*lead, h, x_q.shape[-2], x_kv.shape[-2]))[..., i, :, :]
        bi = None
        if bias is not None:
            lead = np.broadcast_shapes(x_q.shape[:-2], x_kv.shape[:-2])
            bi = np.ascontiguousarray(np.broadcast_to(bias, (*lead, h, x_q.shape[-2], x_kv.shape[-2]))[..., i, :, :])
        o, a = attention(q, k, v, m, bias=bi)
        heads.append(o)
        weights.append(a)
    out = np.concatenate(heads, axis=-1) @ p.w_o + (0.0 if p.b_o is None else p.b_o)
    return out, np.stack(weights, axis=-3)


# ---------------------------------------------------------------- forward, three ways


@given(mha_case())
def test_numpy_matches_an_explicit_loop_over_heads(case):
    x_q, x_kv, p, h, mask = case
    out, a = npm.multi_head_attention(x_q, x_kv, p, h, mask)
    ref_out, ref_a = _loop_over_heads(x_q, x_kv, p, h, mask)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a, np.broadcast_to(ref_a, a.shape), rtol=0, atol=1e-12)


@given(mha_case())
def test_numpy_and_torch_agree_float64(case):
    x_q, x_kv, p, h, mask = case
    out, a = npm.multi_head_attention(x_q, x_kv, p, h, mask)
    out_t, a_t = ptm.multi_head_attention(_t(x_q), _t(x_kv), _t_params(p), h, _t(mask))
    np.testing.assert_allclose(out_t.numpy(), out, rtol=0, atol=tol(torch.float64))
    np.testing.assert_allclose(a_t.numpy(), a, rtol=0, atol=tol(torch.float64))


@given(mha_case())
def test_numpy_and_torch_agree_float32(case):
    x_q, x_kv, p, h, mask = case
    out, _ = npm.multi_head_attention(x_q, x_kv, p, h, mask)  # float64 reference
    p32 = npm.MultiHeadParams(*(None if t is None else _t(t).float() for t in p))
    x32 = None if x_kv is None else _t(x_kv).float()
    out_t, _ = ptm.multi_head_attention(_t(x_q).float(), x32, p32, h, _t(mask))
    assert out_t.dtype == torch.float32
    np.testing.assert_allclose(out_t.double().numpy(), out, rtol=0, atol=tol(torch.float32))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_against_the_float64_reference(dtype):
    """Half precision: error relative to the largest output entry, over several seeds (fp16 has 11 bits of
    mantissa, bf16 8, so their unit roundoffs are 4.9e-4 and 3.9e-3)."""
    for seed in range(5):
        rng = np.random.default_rng(seed)
        p = npm.init_params(32, 4, n_kv_heads=2, rng=rng)
        x = rng.normal(size=(2, 7, 32))
        out, _ = npm.multi_head_attention(x, None, p, 4)
        p_low = npm.MultiHeadParams(*(_t(t).to(dtype) for t in p))
        out_t, a_t = ptm.multi_head_attention(_t(x).to(dtype), None, p_low, 4)
        assert out_t.dtype == dtype and torch.isfinite(out_t).all()
        assert np.abs(out_t.double().numpy() - out).max() <= tol(dtype) * np.abs(out).max()


def test_empty_sequences():
    p = npm.init_params(16, 4)
    x = np.zeros((2, 0, 16))
    out, a = npm.multi_head_attention(x, None, p, 4)
    assert out.shape == (2, 0, 16) and a.shape == (2, 4, 0, 0)
    out_t, a_t = ptm.MultiHeadAttention(16, 4)(torch.zeros(2, 0, 16))
    assert out_t.shape == (2, 0, 16) and a_t.shape == (2, 4, 0, 0)
    # queries but no keys: every row is fully masked, so the output is the output bias
    out, a = npm.multi_head_attention(np.ones((3, 16)), np.zeros((0, 16)), p, 4)
    assert a.shape == (4, 3, 0)
    np.testing.assert_allclose(out, np.broadcast_to(p.b_o, (3, 16)))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("cross", [False, True])
def test_module_matches_torch_nn_multiheadattention(bias, cross):
    torch.manual_seed(0)
    d_model, h, B, n_q, n_k = 24, 4, 3, 5, 7
    ref = torch.nn.MultiheadAttention(d_model, h, bias=bias, batch_first=True, dtype=torch.float64)
    with torch.no_grad():  # torch initialises in_proj_bias to zero; make the biases count
        for p in ref.parameters():
            p.uniform_(-0.5, 0.5)
    mine = ptm.load_from_torch_mha(ptm.MultiHeadAttention(d_model, h, bias=bias, dtype=torch.float64), ref)
    x_q = torch.randn(B, n_q, d_model, dtype=torch.float64)
    x_kv = torch.randn(B, n_k, d_model, dtype=torch.float64) if cross else x_q
    keep = torch.rand(B, h, n_q, x_kv.shape[1]) < 0.7
    keep[..., 0] = True  # torch's MHA gives NaN for a fully masked row; the book gives zeros (tested below)
    for m in (None, keep):
        # torch's boolean attn_mask means the opposite of the book's: True = may NOT attend.
        attn_mask = None if m is None else (~m).reshape(B * h, n_q, -1)
        o_ref, a_ref = ref(x_q, x_kv, x_kv, attn_mask=attn_mask, need_weights=True, average_attn_weights=False)
        o, a = mine(x_q, None if not cross else x_kv, m)
        torch.testing.assert_close(o, o_ref, rtol=0, atol=1e-12)
        torch.testing.assert_close(a, a_ref, rtol=0, atol=1e-12)


def test_module_weights_are_the_transposed_linear_weights():
    m = ptm.MultiHeadAttention(8, 2)
    p = m.params()
    assert p.w_q.shape == (8, 8) and torch.equal(p.w_q, m.w_q.weight.T) and p.b_o is m.w_o.bias


@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (4, 1), (6, 3)])
def test_grouped_query_matches_torch_sdpa_enable_gqa(h, h_kv):
    torch.manual_seed(1)
    d_k, B, n = 3, 2, 6
    m = ptm.MultiHeadAttention(h * d_k, h, n_kv_heads=h_kv, dtype=torch.float64)
    x = torch.randn(B, n, h * d_k, dtype=torch.float64)
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
    out, a = m(x, mask=mask)
    q = ptm.split_heads(m.w_q(x), h)
    k, v = ptm.split_heads(m.w_k(x), h_kv), ptm.split_heads(m.w_v(x), h_kv)
    o_ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(out, m.w_o(ptm.merge_heads(o_ref)), rtol=0, atol=1e-12)
    assert a.shape == (B, h, n, n)


def test_kv_heads_equal_heads_is_plain_multi_head():
    p = npm.init_params(12, 4, rng=np.random.default_rng(3))
    assert p.w_k.shape == (12, 12)
    x = np.random.default_rng(4).normal(size=(5, 12))
    out, _ = npm.multi_head_attention(x, None, p, 4)
    ref, _ = _loop_over_heads(x, None, p, 4)
    np.testing.assert_allclose(out, ref, atol=1e-12)


def test_one_head_is_single_head_attention_between_projections():
    p = npm.init_params(6, 1, rng=np.random.default_rng(5))
    x = np.random.default_rng(6).normal(size=(4, 6))
    o, _ = attention(x @ p.w_q + p.b_q, x @ p.w_k + p.b_k, x @ p.w_v + p.b_v)
    np.testing.assert_allclose(npm.multi_head_attention(x, None, p, 1)[0], o @ p.w_o + p.b_o, atol=1e-13)


# ---------------------------------------------------------------- split / merge


@given(st.integers(1, 4), st.integers(0, 4), st.integers(1, 3), st.lists(st.integers(1, 3), max_size=2))
def test_split_then_merge_is_the_identity_and_split_takes_column_blocks(h, n, d, lead):
    x = np.random.default_rng(0).normal(size=(*lead, n, h * d))
    s = npm.split_heads(x, h)
    assert s.shape == (*lead, h, n, d)
    for i in range(h):
        np.testing.assert_array_equal(s[..., i, :, :], x[..., i * d:(i + 1) * d])
    np.testing.assert_array_equal(npm.merge_heads(s), x)
    st_ = ptm.split_heads(torch.from_numpy(x), h)
    np.testing.assert_array_equal(st_.numpy(), s)
    np.testing.assert_array_equal(ptm.merge_heads(st_).numpy(), x)


def test_repeat_kv_groups_are_contiguous():
    x = np.arange(2 * 1 * 1, dtype=float).reshape(2, 1, 1)  # h_kv = 2 heads
    np.testing.assert_array_equal(npm.repeat_kv(x, 3)[:, 0, 0], [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(ptm.repeat_kv(torch.from_numpy(x), 3)[:, 0, 0].numpy(), [0, 0, 0, 1, 1, 1])


# ---------------------------------------------------------------- masks


def test_causal_mask_output_row_ignores_later_tokens():
    rng = np.random.default_rng(7)
    p = npm.init_params(8, 2, rng=rng)
    x = rng.normal(size=(2, 6, 8))
    out, a = npm.multi_head_attention(x, None, p, 2, causal_mask(6))
    x2 = x.copy()
    x2[:, 4:] += 10.0 * rng.normal(size=(2, 2, 8))
    out2, _ = npm.multi_head_attention(x2, None, p, 2, causal_mask(6))
    np.testing.assert_allclose(out2[:, :4], out[:, :4], atol=1e-12)
    assert not np.allclose(out2[:, 4:], out[:, 4:])
    assert (a[..., ~causal_mask(6)] == 0).all()


def test_padding_mask_with_head_axis_zeroes_padded_keys():
    rng = np.random.default_rng(8)
    p = npm.init_params(8, 4, rng=rng)
    x = rng.normal(size=(2, 5, 8))
    mask = padding_mask(np.array([3, 5]), 5)[:, None]  # (B, 1, 1, n_k)
    _, a = npm.multi_head_attention(x, None, p, 4, mask)
    assert (a[0, :, :, 3:] == 0).all() and (a[0, :, :, :3] > 0).all()
    np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-12)


def test_fully_masked_query_row_outputs_the_output_bias():
    rng = np.random.default_rng(9)
    p = npm.init_params(6, 3, rng=rng)
    mask = np.ones((4, 4), dtype=bool)
    mask[2] = False
    out, a = npm.multi_head_attention(rng.normal(size=(4, 6)), None, p, 3, mask)
    assert (a[:, 2] == 0).all()
    np.testing.assert_allclose(out[2], p.b_o, atol=1e-15)


# ---------------------------------------------------------------- gradients


def test_gradcheck_through_the_module_with_a_mask():
    torch.manual_seed(2)
    m = ptm.MultiHeadAttention(6, 3, n_kv_heads=1, dtype=torch.float64)
    x = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    mask = torch.from_numpy(causal_mask(4))
    assert torch.autograd.gradcheck(lambda t: m(t, mask=mask)[0], (x,))
    m(x, mask=mask)[0].sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in m.parameters())


# ---------------------------------------------------------------- parameters and FLOPs


@pytest.mark.parametrize("d_model,h", [(8, 1), (8, 2), (8, 8), (512, 8), (768, 12)])
@pytest.mark.parametrize("bias", [True, False])
def test_param_count_formula_matches_both_modules(d_model, h, bias):
    want = 4 * d_model**2 + (4 * d_model if bias else 0)
    assert npm.param_count(d_model, h, bias=bias) == want
    ref = torch.nn.MultiheadAttention(d_model, h, bias=bias, batch_first=True)
    assert sum(p.numel() for p in ref.parameters()) == want
    assert sum(p.numel() for p in ptm.MultiHeadAttention(d_model, h, bias=bias).parameters()) == want


@pytest.mark.parametrize("h,h_kv", [(8, 8), (8, 4), (8, 1)])
def test_grouped_query_param_count(h, h_kv):
    d = 64
    d_kv = h_kv * d // h
    want = 2 * d * d + 2 * d * d_kv + 2 * d + 2 * d_kv
    assert npm.param_count(d, h, n_kv_heads=h_kv) == want
    assert sum(p.numel() for p in ptm.MultiHeadAttention(d, h, n_kv_heads=h_kv).parameters()) == want


@pytest.mark.parametrize("h", [1, 2, 4, 8, 16])
def test_flops_do_not_depend_on_the_number_of_heads(h):
    n, d = 10, 64
    f = npm.multi_head_flops(n, n, d, h)
    assert f["total"] == 2 * (4 * n * d * d + 2 * n * n * d)  # FLOPS_PER_MAC = 2
    assert f["scores"] == f["weighted_sum"] == 2 * n * n * d


@pytest.mark.parametrize("h,h_kv,n_q,n_k", [(4, 4, 5, 5), (4, 2, 3, 7), (8, 1, 6, 6)])
def test_flop_count_matches_torch_flop_counter(h, h_kv, n_q, n_k):
    d = 32
    m = ptm.MultiHeadAttention(d, h, n_kv_heads=h_kv, bias=False)
    x_q, x_kv = torch.randn(1, n_q, d), torch.randn(1, n_k, d)
    with FlopCounterMode(display=False) as counter:
        m(x_q, x_kv)
    assert counter.get_total_flops() == npm.multi_head_flops(n_q, n_k, d, h, h_kv)["total"]


def test_matmul_flops():
    assert npm.matmul_flops(2, 3, 4, batch=5) == 2 * 2 * 3 * 4 * 5
    with pytest.raises(ValueError, match="k must be a non-negative int"):
        npm.matmul_flops(2, -1, 3)


# ---------------------------------------------------------------- bad inputs


def test_d_model_not_divisible_by_heads():
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by n_heads=3"):
        ptm.MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by n_heads=4"):
        npm.init_params(10, 4)
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by n_heads=3"):
        npm.param_count(10, 3)


def test_heads_not_divisible_by_kv_heads():
    with pytest.raises(ValueError, match=r"n_heads=6 is not divisible by n_kv_heads=4"):
        ptm.MultiHeadAttention(12, 6, n_kv_heads=4)
    with pytest.raises(ValueError, match=r"n_heads=6 is not divisible by n_kv_heads=4"):
        npm.check_head_config(12, 6, 4)


@pytest.mark.parametrize("bad", [0, -2])
def test_bad_head_counts(bad):
    with pytest.raises(ValueError, match="n_heads must be a positive int"):
        npm.check_head_config(8, bad)


@pytest.mark.parametrize("bad", [2.0, True, None])
def test_non_int_head_counts_are_type_errors(bad):
    with pytest.raises(TypeError, match="n_heads must be an int"):
        npm.check_head_config(8, bad)
    assert npm.check_head_config(np.int64(8), np.int32(2)) == (4, 2, 2)


def test_wrong_input_width_and_rank():
    m = ptm.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"params.w_q has 8 input rows but the inputs have width d_model=6"):
        m(torch.randn(1, 3, 6))
    with pytest.raises(ValueError, match=r"x_q has width 8 but x_kv has width 4"):
        m(torch.randn(1, 3, 8), torch.randn(1, 3, 4))
    with pytest.raises(ValueError, match=r"x_q must have at least 2 dimensions"):
        m(torch.randn(8))
    with pytest.raises(ValueError, match=r"batch dimensions of x_q and x_kv do not broadcast"):
        m(torch.randn(2, 3, 8), torch.randn(3, 3, 8))
    with pytest.raises(TypeError, match=r"x_q must have a floating dtype"):
        m(torch.ones(1, 3, 8, dtype=torch.long))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_inputs_are_refused_naming_the_argument(bad):
    p = npm.init_params(8, 2)
    x = np.zeros((2, 3, 8))
    x[1, 2, 5] = bad
    with pytest.raises(ValueError, match=r"x_kv contains a non-finite value \((nan|inf|-inf)\) at \[1, 2, 5\]"):
        npm.multi_head_attention(np.zeros((2, 3, 8)), x, p, 2)
    with pytest.raises(ValueError, match=r"x_q contains a non-finite value \((nan|inf|-inf)\) at \[1, 2, 5\]"):
        ptm.MultiHeadAttention(8, 2)(torch.from_numpy(x).float())


def test_bad_masks():
    p = npm.init_params(8, 2)
    x = np.zeros((3, 8))
    with pytest.raises(ValueError, match=r"mask of shape \(3, 4\) does not broadcast to the scores' shape \(2, 3, 3\)"):
        npm.multi_head_attention(x, None, p, 2, np.ones((3, 4), dtype=bool))
    with pytest.raises(TypeError, match="mask must be boolean"):
        npm.multi_head_attention(x, None, p, 2, np.ones((3, 3)))
    m = ptm.MultiHeadAttention(8, 2)
    with pytest.raises(TypeError, match="mask must be a torch.Tensor"):
        m(torch.zeros(1, 3, 8), mask=np.ones((3, 3), dtype=bool))


def test_bad_params():
    p = npm.init_params(8, 2)
    x = np.zeros((3, 8))
    with pytest.raises(TypeError, match="params must be a MultiHeadParams"):
        npm.multi_head_attention(x, None, tuple(p), 2)
    with pytest.raises(ValueError, match=r"params.w_q has 8 output columns, not divisible by n_heads=3"):
        npm.multi_head_attention(x, None, p, 3)
    with pytest.raises(ValueError, match=r"params.b_v must have shape \(8,\)"):
        npm.multi_head_attention(x, None, p._replace(b_v=np.zeros(7)), 2)
    with pytest.raises(ValueError, match=r"params.w_v has 7 input rows but the inputs have width d_model=8"):
        npm.multi_head_attention(x, None, p._replace(w_v=np.zeros((7, 8))), 2)
    with pytest.raises(ValueError, match=r"params.w_v has 5 output columns, not divisible by the h_kv=2"):
        npm.multi_head_attention(x, None, p._replace(w_v=np.zeros((8, 5)), b_v=None), 2)
    with pytest.raises(ValueError, match=r"params.w_o must have h\*d_v=4 input rows \(h=2, d_v=2 from w_v\)"):
        npm.multi_head_attention(x, None, p._replace(w_v=np.zeros((8, 4)), b_v=None), 2)
    with pytest.raises(ValueError, match=r"params.w_o must have h\*d_v=8 input rows"):
        npm.multi_head_attention(x, None, p._replace(w_o=np.zeros((4, 8))), 2)


def test_bad_split_and_merge():
    with pytest.raises(ValueError, match=r"x has width 7, which is not divisible by h=2 heads"):
        npm.split_heads(np.zeros((3, 7)), 2)
    with pytest.raises(ValueError, match=r"x has width 7, which is not divisible by h=2 heads"):
        ptm.split_heads(torch.zeros(3, 7), 2)
    with pytest.raises(ValueError, match=r"x must have at least 3 dimensions \(\.\.\., h, n, d\)"):
        npm.merge_heads(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="h must be a positive int"):
        ptm.split_heads(torch.zeros(3, 4), 0)


def test_load_from_torch_mha_refuses_a_mismatch():
    with pytest.raises(ValueError, match=r"cannot load nn.MultiheadAttention\(embed_dim=8, num_heads=4\)"):
        ptm.load_from_torch_mha(ptm.MultiHeadAttention(8, 2), torch.nn.MultiheadAttention(8, 4))
    with pytest.raises(ValueError, match="bias mismatch"):
        ptm.load_from_torch_mha(ptm.MultiHeadAttention(8, 2, bias=False), torch.nn.MultiheadAttention(8, 2))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_module_runs_on_cuda_and_matches_cpu():
    torch.manual_seed(0)
    m = ptm.MultiHeadAttention(16, 4, n_kv_heads=2, dtype=torch.float64)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    mask = torch.from_numpy(causal_mask(5))
    o_cpu, a_cpu = m(x, mask=mask)
    o_gpu, a_gpu = m.cuda()(x.cuda(), mask=mask.cuda())
    assert o_gpu.device.type == "cuda"
    torch.testing.assert_close(o_gpu.cpu(), o_cpu, rtol=0, atol=1e-12)
    torch.testing.assert_close(a_gpu.cpu(), a_cpu, rtol=0, atol=1e-12)


# ---------------------------------------------------------------- an additive bias on the logits (ALiBi)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_zero_bias_gives_the_bias_free_result_bit_for_bit(dtype):
    rng = np.random.default_rng(2)
    x_q, x_kv = rng.normal(size=(2, 5, 8)).astype(dtype), rng.normal(size=(2, 7, 8)).astype(dtype)
    p = npm.init_params(8, 4, n_kv_heads=2, rng=rng, dtype=dtype)
    mask = rng.random((2, 1, 5, 7)) < 0.7
    mask[..., 0] = True
    zero = np.zeros((4, 5, 7), dtype=dtype)
    for plain, biased in (
        (npm.multi_head_attention(x_q, x_kv, p, 4, mask), npm.multi_head_attention(x_q, x_kv, p, 4, mask, zero)),
        (ptm.multi_head_attention(_t(x_q), _t(x_kv), _t_params(p), 4, _t(mask)),
         ptm.multi_head_attention(_t(x_q), _t(x_kv), _t_params(p), 4, _t(mask), bias=_t(zero))),
    ):
        for x, y in zip(plain, biased, strict=True):
            x, y = np.asarray(x), np.asarray(y)
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes()


@pytest.mark.parametrize("causal", [True, False])
def test_numpy_alibi_bias_matches_the_loop_over_heads_and_torch(causal):
    """lib.multihead with ALiBi's (h, n_q, n_k) bias from lib.position_bias: each head gets its own slope, as an
    explicit loop (one lib.attention call per head, head i's bias slice) computes it; and the torch twin with
    lib.pt.positional's bias agrees."""
    import lib.position_bias as pb
    import lib.pt.positional as ptp

    rng = np.random.default_rng(4)
    h, n = 4, 6
    x = rng.normal(size=(2, n, 8))
    p = npm.init_params(8, h, n_kv_heads=2, rng=rng)
    mask = causal_mask(n) if causal else None
    bias = pb.alibi_bias(n, n, h) if causal else pb.alibi_bias_symmetric(n, n, h)
    out, a = npm.multi_head_attention(x, None, p, h, mask, bias)
    ref_out, ref_a = _loop_over_heads(x, None, p, h, mask, bias)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a, ref_a, rtol=0, atol=1e-12)
    tb = (ptp.alibi_bias if causal else ptp.alibi_bias_symmetric)(n, n, h, dtype=torch.float64)
    out_t, a_t = ptm.multi_head_attention(_t(x), None, _t_params(p), h, _t(mask), tb)
    np.testing.assert_allclose(out_t.numpy(), out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a_t.numpy(), a, rtol=0, atol=1e-12)
    plain, _ = npm.multi_head_attention(x, None, p, h, mask)
    assert np.abs(plain - out).max() > 1e-3  # the bias matters
    if causal:  # the slopes differ per head: each head's weights decay with distance at its own rate
        assert all(np.abs(a[:, i] - a[:, j]).max() > 1e-3 for i in range(h) for j in range(i))


@pytest.mark.parametrize("h,h_kv,d_k,d_v", [(3, 3, 4, 6), (4, 2, 5, 2), (2, 1, 3, 7)])
def test_value_width_may_differ_from_key_width(h, h_kv, d_k, d_v):
    # W_V (d_model, h_kv d_v) and W_O (h d_v, d_model): the general shapes, checked head by head, on both paths
    rng = np.random.default_rng(11)
    d_model, n_q, n_k = 10, 4, 6
    p = npm.MultiHeadParams(rng.normal(size=(d_model, h * d_k)), rng.normal(size=(d_model, h_kv * d_k)),
                            rng.normal(size=(d_model, h_kv * d_v)), rng.normal(size=(h * d_v, d_model)),
                            rng.normal(size=h * d_k), rng.normal(size=h_kv * d_k), rng.normal(size=h_kv * d_v),
                            rng.normal(size=d_model))
    x_q, x_kv = rng.normal(size=(n_q, d_model)), rng.normal(size=(n_k, d_model))
    out, a = npm.multi_head_attention(x_q, x_kv, p, h)
    g = h // h_kv
    heads = []
    for i in range(h):
        qc, kc, vc = slice(i * d_k, (i + 1) * d_k), slice(i // g * d_k, (i // g + 1) * d_k), \
            slice(i // g * d_v, (i // g + 1) * d_v)
        o_i, _ = attention(x_q @ p.w_q[:, qc] + p.b_q[qc], x_kv @ p.w_k[:, kc] + p.b_k[kc],
                           x_kv @ p.w_v[:, vc] + p.b_v[vc])
        assert o_i.shape == (n_q, d_v)
        heads.append(o_i)
    np.testing.assert_allclose(out, np.concatenate(heads, axis=-1) @ p.w_o + p.b_o, atol=1e-12)
    out_t, a_t = ptm.multi_head_attention(torch.from_numpy(x_q), torch.from_numpy(x_kv), _t_params(p), h)
    np.testing.assert_allclose(out_t.numpy(), out, atol=1e-12)
    np.testing.assert_allclose(a_t.numpy(), a, atol=1e-12)
