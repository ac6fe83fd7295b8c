"""Tests of lib.pt.train's options for the training chapter's failure cases, and of the copy task and the
per-length evaluation of the extrapolation experiment (chapter beyond)."""

import pytest
import torch

from lib.pt.model import Seq2SeqTransformer
from lib.pt.train import (
    BOS,
    EOS,
    PAD,
    TASKS,
    VOCAB_SIZE,
    TaskBatch,
    copy_batch,
    evaluate,
    evaluate_by_length,
    reversal_batch,
    train,
)


def _run(**kw):
    torch.manual_seed(0)
    model = Seq2SeqTransformer(VOCAB_SIZE, 16, 2, 32, 1, max_len=16)
    return model, train(model, 3, batch_size=8, min_len=2, max_len=6, warmup=2, log_every=1, **kw)


def test_src_padding_false_lets_the_padding_into_the_loss():
    # Same weights, same batches: only the source padding mask differs, and the padded batch's first loss with it.
    _, masked = _run()
    _, unmasked = _run(src_padding=False)
    assert len(masked) == len(unmasked) == 3
    assert masked[0][1] != unmasked[0][1]


def test_the_default_keeps_the_source_padding_mask():
    assert _run()[1] == _run(src_padding=True)[1]


@pytest.mark.parametrize("causal", [True, False])
def test_both_masks_off_still_trains(causal):
    _, hist = _run(causal=causal, src_padding=False)
    assert all(torch.isfinite(torch.tensor(loss)) for _, loss in hist)


# ---------------------------------------------------------------- the copy task and per-length evaluation


def test_copy_batch_copies_the_sources_of_reversal_batch():
    rev = reversal_batch(40, 1, 6, torch.Generator().manual_seed(5))
    cp = copy_batch(40, 1, 6, torch.Generator().manual_seed(5))
    assert torch.equal(cp.src, rev.src) and torch.equal(cp.lengths, rev.lengths)  # the same draws
    for i in range(40):
        L = int(cp.lengths[i])
        digits = cp.src[i, :L].tolist()
        assert cp.tgt_out[i, :L].tolist() == digits and cp.tgt_out[i, L] == EOS and (cp.tgt_out[i, L + 1:] == PAD).all()
        assert cp.tgt_in[i, 0] == BOS and cp.tgt_in[i, 1:L + 1].tolist() == digits
        assert rev.tgt_out[i, :L].tolist() == digits[::-1]
    assert TASKS == {"reverse": reversal_batch, "copy": copy_batch}


def test_train_takes_the_task_by_name():
    _, rev = _run()
    _, cp = _run(task="copy")
    assert rev == _run(task="reverse")[1]  # the default is reversal
    assert rev[0][1] != cp[0][1]  # same weights, same sources, other targets
    with pytest.raises(ValueError, match="task must be one of 'reverse', 'copy', got 'sort'"):
        _run(task="sort")


def test_evaluate_by_length_is_greedy_sequence_accuracy_from_one_pass():
    # A model trained just long enough to be right on some sequences and wrong on others: per length, the
    # teacher-forced exact-sequence accuracy must equal the greedy one of evaluate().
    torch.manual_seed(0)
    model = Seq2SeqTransformer(VOCAB_SIZE, 32, 2, 64, 1, max_len=16)
    train(model, 150, batch_size=32, min_len=2, max_len=6, lr=3e-3, warmup=5, log_every=50, task="copy")
    b = copy_batch(300, 2, 8, torch.Generator().manual_seed(6))
    by_len = evaluate_by_length(model, b)
    assert list(by_len) == list(range(2, 9)) and sum(a.n_sequences for a in by_len.values()) == 300
    seq = []
    for length, acc in by_len.items():
        rows = b.lengths == length
        sub = TaskBatch(b.src[rows], b.tgt_in[rows], b.tgt_out[rows], b.lengths[rows])
        greedy = evaluate(model, sub)
        assert acc.sequence_acc == pytest.approx(greedy.generated_sequence_acc, abs=1e-12), length
        assert acc.token_acc == pytest.approx(greedy.teacher_forced_token_acc, abs=1e-12), length
        seq.append(acc.sequence_acc)
    assert max(seq) > 0.2 and min(seq) < 0.9  # the comparison is not between all-right or all-wrong models
