"""Tests of lib.pt.model and lib.pt.train: the reversal data, the masks, the full model's causal and padding
invariances, greedy decoding against teacher forcing, a short training run that must lower the loss, errors;
the position variants (learned table, ALiBi biases against the NumPy reference, the additive logit bias of
lib.pt.attention / lib.pt.multihead that carries them, against its NumPy twin)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import lib.attention as npa
import lib.multihead as npm
import lib.position_bias as pb
import lib.pt.attention as pta
import lib.softmax as nps
from lib.pt.blocks import PreLNEncoderBlock
from lib.pt.model import POSITIONAL, Seq2SeqTransformer, padding_only_mask, source_mask, target_mask
from lib.pt.multihead import MultiHeadAttention
from lib.pt.train import (
    BOS,
    EOS,
    PAD,
    VOCAB_SIZE,
    evaluate,
    loss_fn,
    reversal_batch,
    set_determinism,
    train,
)


def _model(**kw):
    torch.manual_seed(0)
    return Seq2SeqTransformer(VOCAB_SIZE, 16, 2, 32, 2, max_len=32, **kw).double().eval()


def test_reversal_batch_is_the_reversal():
    b = reversal_batch(50, 1, 7, torch.Generator().manual_seed(0))
    assert b.src.shape == (50, 7) and b.tgt_in.shape == b.tgt_out.shape == (50, 8)
    for i in range(50):
        L = int(b.lengths[i])
        digits = b.src[i, :L].tolist()
        assert all(3 <= t < VOCAB_SIZE for t in digits) and (b.src[i, L:] == PAD).all()
        assert b.tgt_out[i, :L].tolist() == digits[::-1] and b.tgt_out[i, L] == EOS
        assert (b.tgt_out[i, L + 1:] == PAD).all()
        assert b.tgt_in[i, 0] == BOS and b.tgt_in[i, 1:L + 1].tolist() == digits[::-1]
    assert set(b.lengths.tolist()) == set(range(1, 8))  # every length drawn in 50 samples


def test_masks_shapes_and_meaning():
    tgt = torch.tensor([[BOS, 5, 6, PAD]])
    m = target_mask(tgt, PAD)
    assert m.shape == (1, 1, 4, 4)
    want = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]], dtype=torch.bool)
    assert torch.equal(m[0, 0], want)
    assert torch.equal(padding_only_mask(tgt, PAD)[0, 0, 0], torch.tensor([True, True, True, False]))
    assert source_mask(torch.tensor([[4, PAD]]), PAD).shape == (1, 1, 1, 2)


def test_causal_model_logits_at_t_do_not_depend_on_later_targets():
    model = _model()
    b = reversal_batch(4, 5, 5, torch.Generator().manual_seed(1))
    tgt2 = b.tgt_in.clone()
    tgt2[:, 3:] = 7
    with torch.no_grad():
        y1 = model(b.src, b.tgt_in, source_mask(b.src, PAD), target_mask(b.tgt_in, PAD))
        y2 = model(b.src, tgt2, source_mask(b.src, PAD), target_mask(tgt2, PAD))
        z1 = model(b.src, b.tgt_in, source_mask(b.src, PAD), padding_only_mask(b.tgt_in, PAD))
        z2 = model(b.src, tgt2, source_mask(b.src, PAD), padding_only_mask(tgt2, PAD))
    torch.testing.assert_close(y1[:, :3], y2[:, :3], rtol=0, atol=0)
    assert (z1[:, :3] - z2[:, :3]).abs().max() > 1e-4  # the leak the causal mask prevents


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_padding_mask_makes_the_model_blind_to_padding(norm):
    model = _model(norm=norm)
    src = torch.tensor([[5, 9, 4]])
    tgt = torch.tensor([[BOS, 4, 9]])
    outs = {}
    for extra in (0, 3, 9):
        s = torch.cat([src, torch.full((1, extra), PAD)], dim=1)
        with torch.no_grad():
            outs[extra] = (model(s, tgt, source_mask(s, PAD), target_mask(tgt, PAD)),
                           model(s, tgt, None, target_mask(tgt, PAD)))
    for extra in (3, 9):
        torch.testing.assert_close(outs[extra][0], outs[0][0], rtol=0, atol=1e-12)
        assert (outs[extra][1] - outs[0][1]).abs().max() > 1e-3


def test_without_positions_the_model_cannot_see_source_order():
    model = _model(positional="none")
    src = torch.tensor([[5, 9, 4, 7]])
    perm = torch.tensor([[7, 4, 5, 9]])  # same multiset
    tgt = torch.tensor([[BOS, 7, 4]])
    with torch.no_grad():
        a = model(src, tgt, source_mask(src, PAD), target_mask(tgt, PAD))
        b = model(perm, tgt, source_mask(perm, PAD), target_mask(tgt, PAD))
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    with torch.no_grad():
        c = _model()(src, tgt, source_mask(src, PAD), target_mask(tgt, PAD))
        d = _model()(perm, tgt, source_mask(perm, PAD), target_mask(tgt, PAD))
    assert (c - d).abs().max() > 1e-3


def test_greedy_decode_agrees_with_teacher_forcing_on_its_own_output():
    model = _model()
    b = reversal_batch(6, 2, 6, torch.Generator().manual_seed(2))
    sm = source_mask(b.src, PAD)
    gen = model.greedy_decode(b.src, sm, 5, BOS)
    tgt_in = torch.cat([torch.full((6, 1), BOS), gen[:, :-1]], dim=1)
    with torch.no_grad():
        tf = model(b.src, tgt_in, sm, target_mask(tgt_in, PAD)).argmax(-1)
    assert torch.equal(tf, gen)


def test_short_training_run_lowers_the_loss_and_is_deterministic():
    def run():
        set_determinism(0, 1)
        m = Seq2SeqTransformer(VOCAB_SIZE, 32, 2, 64, 1, max_len=16)
        return m, train(m, 80, batch_size=32, min_len=2, max_len=4, lr=3e-3, warmup=5, log_every=20)

    threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    try:  # set_determinism changes global torch state: restore it for the other tests
        m, hist = run()
        _, hist2 = run()
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(det)
    assert hist == hist2
    assert hist[-1][1] < 0.6 * hist[0][1]
    ev = evaluate(m, reversal_batch(64, 2, 4, torch.Generator().manual_seed(9)))
    assert 0.0 <= ev.generated_sequence_acc <= ev.generated_token_acc + 1e-9 <= 1.0 + 1e-9
    b = reversal_batch(8, 2, 4, torch.Generator().manual_seed(3))
    uniform = torch.zeros(8, b.tgt_out.shape[1], VOCAB_SIZE)
    assert abs(float(loss_fn(uniform, b.tgt_out)) - float(torch.log(torch.tensor(VOCAB_SIZE)))) < 1e-6


def test_bad_inputs_raise_clear_errors():
    model = _model()
    with pytest.raises(ValueError, match=r"src must be an int64 tensor of token ids \(B, n\)"):
        model(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="src has sequence length 40, which exceeds max_len=32"):
        model.encode(torch.ones(1, 40, dtype=torch.long), None)
    with pytest.raises(ValueError, match="norm must be 'post' or 'pre'"):
        Seq2SeqTransformer(VOCAB_SIZE, 16, 2, 32, 1, norm="middle")
    with pytest.raises(ValueError, match="positional must be one of 'sinusoidal', 'learned', 'alibi', 'none',"
                                         " got 'rope'"):
        Seq2SeqTransformer(VOCAB_SIZE, 16, 2, 32, 1, positional="rope")
    with pytest.raises(ValueError, match="pad_id must lie in"):
        Seq2SeqTransformer(VOCAB_SIZE, 16, 2, 32, 1, pad_id=VOCAB_SIZE)
    with pytest.raises(ValueError, match="need 1 <= min_len <= max_len"):
        reversal_batch(4, 5, 3, torch.Generator())
    with pytest.raises(ValueError, match="steps must be a positive int"):
        train(model, 0)


# ---------------------------------------------------------------- position variants


def _variant(positional, **kw):
    torch.manual_seed(0)
    kw = {"max_len": 32, **kw}
    return Seq2SeqTransformer(VOCAB_SIZE, 16, 4, 32, 2, positional=positional, **kw).double().eval()


def test_the_position_variants_are_the_ones_documented():
    assert POSITIONAL == ("sinusoidal", "learned", "alibi", "none")
    p = {v: sum(t.numel() for t in _variant(v).parameters()) for v in POSITIONAL}
    assert p["learned"] == p["sinusoidal"] + 32 * 16  # one trainable row of d_model per position
    assert p["alibi"] == p["none"] == p["sinusoidal"]  # ALiBi has no parameters
    assert isinstance(_variant("learned").pe, torch.nn.Parameter) and _variant("alibi").pe is None


def test_learned_table_refuses_a_longer_input_naming_the_argument():
    model = _variant("learned", max_len=8)
    tgt = torch.tensor([[BOS, 4, 5]])
    long_src = torch.full((1, 9), 5)
    with pytest.raises(ValueError, match=r"src has 9 positions but the learned position table has max_len=8 rows"):
        model(long_src, tgt, source_mask(long_src, PAD), target_mask(tgt, PAD))
    long_tgt = torch.full((1, 10), 5)
    with pytest.raises(ValueError, match=r"tgt_in has 10 positions .* positions 8\.\.9 have no embedding"):
        model(tgt, long_tgt, source_mask(tgt, PAD), target_mask(long_tgt, PAD))
    with torch.no_grad():  # length max_len itself is fine
        assert model(long_src[:, :8], tgt, None, None).shape == (1, 3, VOCAB_SIZE)


def test_alibi_has_no_length_limit():
    model = _variant("alibi", max_len=8)
    src = torch.full((2, 40), 5)
    tgt = torch.full((2, 41), 6)
    with torch.no_grad():
        assert model(src, tgt, source_mask(src, PAD), target_mask(tgt, PAD)).shape == (2, 41, VOCAB_SIZE)


def _np_softmax_weights(bias, mask):
    full = np.broadcast_shapes(bias.shape, mask.shape)
    return nps.masked_softmax(np.broadcast_to(bias, full), mask, axis=-1)


def test_alibi_model_biases_are_the_numpy_reference():
    # With W_Q = 0 and b_Q = 0 every content logit is 0, so each attention's weights are the masked softmax of its
    # bias alone: captured from the running model, they must be those of lib.position_bias's biases.
    model = _variant("alibi")
    for block in (*model.encoder, *model.decoder):
        attns = [block.self_attn] + ([block.cross_attn] if hasattr(block, "cross_attn") else [])
        for attn in attns:
            torch.nn.init.zeros_(attn.w_q.weight)
            torch.nn.init.zeros_(attn.w_q.bias)
    caught = {}
    hooks = [m.register_forward_hook(lambda mod, inp, out, key=key: caught.__setitem__(key, out[1]))
             for key, m in (("enc", model.encoder[1].self_attn), ("dec", model.decoder[0].self_attn),
                            ("cross", model.decoder[1].cross_attn))]
    src = torch.tensor([[4, 5, 6, 7, 8, PAD], [9, 4, 5, PAD, PAD, PAD]])
    tgt = torch.tensor([[BOS, 4, 5, 6], [BOS, 9, 4, PAD]])
    with torch.no_grad():
        model(src, tgt, source_mask(src, PAD), target_mask(tgt, PAD))
    for hk in hooks:
        hk.remove()
    h, sm, tm = 4, source_mask(src, PAD).numpy(), target_mask(tgt, PAD).numpy()
    want = {
        "enc": _np_softmax_weights(pb.alibi_bias_symmetric(6, 6, h)[None], sm),
        "dec": _np_softmax_weights(pb.alibi_bias(4, 4, h)[None], tm),
        "cross": _np_softmax_weights(pb.alibi_bias_symmetric(4, 6, h)[None], sm),
    }
    for key, w in want.items():
        np.testing.assert_allclose(caught[key].numpy(), np.broadcast_to(w, caught[key].shape), rtol=0, atol=1e-12,
                                   err_msg=key)
    # the decoder's bias is causal ALiBi: below the diagonal it is the symmetric one, and it is no bias at all
    assert not np.allclose(want["dec"], _np_softmax_weights(np.zeros((h, 4, 4))[None], tm))


def test_symmetric_encoder_bias_cannot_see_direction_so_cross_attention_gets_one():
    # |j - i| is unchanged when both positions are mirrored: the ALiBi encoder maps a reversed source to its
    # reversed output. Cross-attention without a bias would then see the same set either way; its diagonal bias
    # makes the model's outputs depend on the direction.
    model = _variant("alibi")
    src = torch.tensor([[4, 9, 5, 5, 7, 3]])
    flipped = src.flip(1)
    with torch.no_grad():
        mem, mem_f = model.encode(src, None), model.encode(flipped, None)
        torch.testing.assert_close(mem_f, mem.flip(1), rtol=0, atol=1e-12)
        tgt = torch.tensor([[BOS, 4, 9]])
        a = model(src, tgt, None, target_mask(tgt, PAD))
        b = model(flipped, tgt, None, target_mask(tgt, PAD))
    assert (a - b).abs().max() > 1e-3
    sin = _variant("sinusoidal")  # an absolute encoding is not mirror-symmetric at all
    with torch.no_grad():
        assert (sin.encode(flipped, None) - sin.encode(src, None).flip(1)).abs().max() > 1e-2


def test_alibi_encoder_is_shift_invariant_where_sinusoids_are_not():
    # ALiBi depends on offsets only: the same tokens after k padding tokens (masked out) give the same outputs.
    # (Padding in front is not a realistic input; it isolates the one property.)
    src = torch.tensor([[5, 8, 4, 6]])
    shifted = torch.cat([torch.full((1, 3), PAD), src], dim=1)
    for positional, same in (("alibi", True), ("sinusoidal", False)):
        model = _variant(positional)
        with torch.no_grad():
            a = model.encode(src, source_mask(src, PAD))
            b = model.encode(shifted, source_mask(shifted, PAD))[:, 3:]
        assert torch.allclose(a, b, rtol=0, atol=1e-12) == same, positional


@pytest.mark.parametrize("positional", ["learned", "alibi"])
def test_variant_overfits_a_tiny_batch_and_every_parameter_gets_a_gradient(positional):
    torch.manual_seed(0)
    model = Seq2SeqTransformer(VOCAB_SIZE, 32, 2, 64, 1, positional=positional, max_len=12)
    b = reversal_batch(8, 3, 5, torch.Generator().manual_seed(4))
    sm, tm = source_mask(b.src, PAD), target_mask(b.tgt_in, PAD)
    loss = loss_fn(model(b.src, b.tgt_in, sm, tm), b.tgt_out)
    loss.backward()
    for name, p in model.named_parameters():
        if name == "pe":  # rows 0 .. n_tgt - 1 are used, the rest of the table gets exactly no gradient
            n_used = b.tgt_in.shape[1]
            assert (p.grad[:n_used].abs().sum(dim=1) > 0).all() and (p.grad[n_used:] == 0).all()
        else:
            assert p.grad is not None and p.grad.abs().sum() > 0, name
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = float(loss.detach())
    for _ in range(100):
        opt.zero_grad()
        loss = loss_fn(model(b.src, b.tgt_in, sm, tm), b.tgt_out)
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.02 * first, (first, float(loss.detach()))
    assert evaluate(model, b).generated_sequence_acc == 1.0


# ---------------------------------------------------------------- the additive logit bias (lib.pt.multihead)


def test_a_zero_bias_changes_nothing_bit_for_bit():
    torch.manual_seed(1)
    mha = MultiHeadAttention(16, 4).double()
    x, mem = torch.randn(2, 5, 16, dtype=torch.float64), torch.randn(2, 7, 16, dtype=torch.float64)
    mask = torch.rand(2, 1, 5, 7) < 0.7
    mask[..., 0] = True
    plain = mha(x, mem, mask)
    zero = mha(x, mem, mask, torch.zeros(4, 5, 7, dtype=torch.float64))
    assert torch.equal(plain[0], zero[0]) and torch.equal(plain[1], zero[1])
    block = PreLNEncoderBlock(16, 4, 32).double()
    assert torch.equal(block(x), block(x, None, torch.zeros(4, 5, 5, dtype=torch.float64)))


def test_attention_with_bias_against_its_numpy_twin():
    """The bias path the model uses (lib.pt.attention.attention(..., bias=...), called by lib.pt.multihead)
    against the NumPy reference's, and both against the formula softmax_mask(Q Kᵀ / sqrt(d_k) + B) V."""
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 3, 4, 8)), rng.normal(size=(2, 3, 6, 8)), rng.normal(size=(2, 3, 6, 5))
    bias = pb.alibi_bias_symmetric(4, 6, 3)  # (h, n_q, n_k)
    mask = npa.causal_mask(4, 6)
    want_a = nps.masked_softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(8) + bias, mask, axis=-1)
    o_np, a_np = npa.attention(q, k, v, mask, bias=bias)
    o, a = pta.attention(*(torch.from_numpy(t) for t in (q, k, v, mask)), bias=torch.from_numpy(bias))
    for got_o, got_a in ((o_np, a_np), (o.numpy(), a.numpy())):
        np.testing.assert_allclose(got_a, want_a, rtol=0, atol=1e-12)
        np.testing.assert_allclose(got_o, want_a @ v, rtol=0, atol=1e-12)
    # and the bias matters: without it the weights differ
    assert np.abs(nps.masked_softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(8), mask, axis=-1) - want_a).max() > 1e-2
    # the module the model is built from, against lib.multihead with the same weights and bias
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3).double()
    x = rng.normal(size=(2, 4, 12))
    p = npm.MultiHeadParams(*(None if t is None else t.detach().numpy() for t in mha.params()))
    want_out, want_w = npm.multi_head_attention(x, None, p, 3, None, pb.alibi_bias_symmetric(4, 4, 3))
    got_out, got_w = mha(torch.from_numpy(x), None, None, torch.from_numpy(pb.alibi_bias_symmetric(4, 4, 3)))
    np.testing.assert_allclose(got_out.detach().numpy(), want_out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_w.detach().numpy(), want_w, rtol=0, atol=1e-12)


def test_bad_biases_raise_clear_errors():
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(1, 3, 8, dtype=torch.float64)
    with pytest.raises(TypeError, match="bias must be a torch.Tensor for lib.pt, got numpy.ndarray"):
        mha(x, None, None, np.zeros((2, 3, 3)))
    with pytest.raises(TypeError, match=r"bias must have a floating dtype, got int64 \(shape \(2, 3, 3\)\)"):
        mha(x, None, None, torch.zeros(2, 3, 3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"bias must have x_q's dtype float64, got float32 \(shape \(2, 3, 3\)\)"):
        mha(x, None, None, torch.zeros(2, 3, 3))
    with pytest.raises(ValueError, match=r"bias of shape \(3, 3, 3\) does not broadcast to the scores' shape"
                                         r" \(1, 2, 3, 3\) \(\.\.\., h, n_q, n_k\)"):
        mha(x, None, None, torch.zeros(3, 3, 3, dtype=torch.float64))
    bad = torch.zeros(2, 3, 3, dtype=torch.float64)
    bad[1, 2, 0] = -float("inf")
    with pytest.raises(ValueError, match=r"bias contains a non-finite value \(-inf\) at \[1, 2, 0\].*with the boolean"
                                         " mask, not with -inf"):
        mha(x, None, None, bad)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_check_finite_refuses_every_non_finite_entry_and_passes_finite_ones(dtype):
    """lib.pt._validate.check_finite decides most calls from one sum: a NaN, +inf or -inf anywhere is still
    found and named (its index and value), two infinities whose sum is NaN too, and finite entries whose sum
    overflows pass."""
    from lib.pt._validate import check_finite

    huge = torch.full((4, 3), torch.finfo(dtype).max, dtype=dtype)
    check_finite(huge, "x")  # the sum is inf; every entry is finite
    check_finite(torch.zeros(0, 3, dtype=dtype), "x")
    for bad, idx in [(float("nan"), [1, 2]), (float("inf"), [0, 0]), (float("-inf"), [3, 1])]:
        x = torch.randn(4, 3).to(dtype)
        x[tuple(idx)] = bad
        with pytest.raises(ValueError, match=re.escape(f"x contains a non-finite value ({bad}) at {idx}")):
            check_finite(x, "x")
    both = torch.tensor([1.0, float("inf"), float("-inf")], dtype=dtype)
    with pytest.raises(ValueError, match=r"non-finite value \(inf\) at \[1\]"):
        check_finite(both, "x")
