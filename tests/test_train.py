"""Tests of lib.pt.train's options for the training chapter's failure cases."""

import pytest
import torch

from lib.pt.model import Seq2SeqTransformer
from lib.pt.train import VOCAB_SIZE, train


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
