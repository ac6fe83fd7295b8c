"""Tests of lib.pt.model and lib.pt.train: the reversal data, the masks, the full model's causal and padding
invariances, greedy decoding against teacher forcing, a short training run that must lower the loss, errors."""

from __future__ import annotations

import pytest
import torch

from lib.pt.model import Seq2SeqTransformer, padding_only_mask, source_mask, target_mask
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
    with pytest.raises(ValueError, match="exceeds max_len=32"):
        model.encode(torch.ones(1, 40, dtype=torch.long), None)
    with pytest.raises(ValueError, match="norm must be 'post' or 'pre'"):
        Seq2SeqTransformer(VOCAB_SIZE, 16, 2, 32, 1, norm="middle")
    with pytest.raises(ValueError, match="positional must be"):
        Seq2SeqTransformer(VOCAB_SIZE, 16, 2, 32, 1, positional="learned")
    with pytest.raises(ValueError, match="pad_id must lie in"):
        Seq2SeqTransformer(VOCAB_SIZE, 16, 2, 32, 1, pad_id=VOCAB_SIZE)
    with pytest.raises(ValueError, match="need 1 <= min_len <= max_len"):
        reversal_batch(4, 5, 3, torch.Generator())
    with pytest.raises(ValueError, match="steps must be a positive int"):
        train(model, 0)
