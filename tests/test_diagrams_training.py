"""Tests of lib.book.diagrams_training: the training-step figure draws one sequence of the reversal task as
lib.pt.train.reversal_batch makes it (the target is the source reversed, the decoder input is <bos> and the
target shifted right, padding is not scored), its decoder mask is lib.pt.model.target_mask, generation feeds
each output back, an example that breaks the task's rules is refused, and every label is legible and inside
the figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from lib.book import diagrams_training as D  # noqa: E402
from lib.book import figures  # noqa: E402
from lib.pt.model import target_mask  # noqa: E402
from lib.pt.train import BOS, EOS, PAD, reversal_batch  # noqa: E402


def _rows(seed: int, min_len: int = 2, max_len: int = 4) -> list[list[str]]:
    b = reversal_batch(1, min_len, max_len, torch.Generator().manual_seed(seed))
    return [[D.token_label(t) for t in r[0].tolist()] for r in (b.src, b.tgt_in, b.tgt_out)]


@pytest.fixture
def drawn_figure():
    figures.use()
    fig, drawn = D.reversal_step_figure(*_rows(4))
    yield fig, drawn
    plt.close(fig)


def test_token_labels_are_the_chapters_names():
    assert [D.token_label(t) for t in (PAD, BOS, EOS, 3, 12)] == ["PAD", "<bos>", "<eos>", "0", "9"]
    with pytest.raises(ValueError, match="digit"):
        D.token_label(13)


@pytest.mark.parametrize("seed", range(6))
def test_drawn_rows_are_a_reversal_batch_row(seed):
    rows = _rows(seed)
    fig, drawn = D.reversal_step_figure(*rows)
    try:
        source, dec_in, target = drawn["source"], drawn["decoder input"], drawn["target"]
        assert [source, dec_in, target] == rows
        digits = [t for t in source if t != "PAD"]
        m = len(digits)
        assert target[:m] == digits[::-1] and target[m] == "<eos>"
        assert dec_in[0] == "<bos>" and dec_in[1:m + 1] == target[:m]  # the target shifted right
        assert drawn["scored"] == [t != "PAD" for t in target] and sum(drawn["scored"]) == m + 1
        ids = torch.tensor([[{"PAD": PAD, "<bos>": BOS}.get(t, 3 + int(t) if t.isdigit() else EOS)
                             for t in dec_in]])
        np.testing.assert_array_equal(drawn["mask"], target_mask(ids, PAD)[0, 0].numpy())
        # generation: step k reads <bos> and the k - 1 outputs before it; the last step emits <eos>
        gen = drawn["generation"]
        assert [s[-1] for s in gen] == digits[::-1] + ["<eos>"]
        for k, step in enumerate(gen):
            assert step[:-1] == ["<bos>"] + [s[-1] for s in gen[:k]]
    finally:
        plt.close(fig)


def test_the_figure_has_both_panels_and_the_chapters_names(drawn_figure):
    fig, _ = drawn_figure
    labels = {t.get_text() for t in fig.axes[0].texts}
    assert {"training step (teacher forcing)", "generation (greedy)"} <= labels
    assert {"source", "decoder\ninput", "target", "encoder", "decoder", "memory", "ignored", "<bos>", "<eos>",
            "PAD"} <= labels


def test_text_is_legible_and_inside_the_narrow_figure(drawn_figure):
    fig, _ = drawn_figure
    assert fig.get_figwidth() < 0.7 * figures.TEXT_WIDTH  # shown near its own size on a phone
    texts = [t for t in fig.axes[0].texts if t.get_text()]
    assert min(t.get_fontsize() for t in texts) >= 9
    fig.canvas.draw()
    box = fig.bbox
    for t in texts:
        ext = t.get_window_extent()
        assert box.x0 <= ext.x0 and ext.x1 <= box.x1 and box.y0 <= ext.y0 and ext.y1 <= box.y1, t.get_text()


@pytest.mark.parametrize("broken", ["not reversed", "not shifted", "source padding inside"])
def test_an_example_that_breaks_the_task_is_refused(broken):
    source, dec_in, target = _rows(4)
    if broken == "not reversed":
        target = source[:3] + target[3:]
    elif broken == "not shifted":
        dec_in = ["<bos>"] + dec_in[2:] + ["PAD"]
    else:
        source = ["PAD"] + source[:-1]
    with pytest.raises(ValueError):
        D.reversal_step_figure(source, dec_in, target)
    plt.close("all")
