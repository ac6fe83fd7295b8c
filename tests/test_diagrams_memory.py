"""Tests of lib.book.diagrams_memory: the two columns of one layer's backward add up to what the layer keeps
(lib.planner.training.llama_layer_bytes) and to what it holds at the softmax's backward, and every label of the
drawn figure lies inside the figure, clear of the axes' left edge."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from lib.book import diagrams_memory as D  # noqa: E402
from lib.book import figures  # noqa: E402
from lib.planner import training as T  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def llama7():
    return T.llama_shape(json.loads((FIXTURES / "Llama-2-7b-hf.config.json").read_text()))


def test_columns_add_up(llama7):
    n = 2048
    layer = T.llama_layer_bytes(llama7, 1, n, 2, "eager")
    kept, at_softmax = D.backward_columns(layer, 1, n, llama7.n_heads, llama7.d, llama7.head_dim)
    assert sum(v for _, v in kept) == layer["total"]
    # at the softmax's backward: the kept fp32 softmax output, two fp32 n x n gradients (8 b h n^2) and the
    # attention half's small tensors without V (one bf16 tensor of the width of all heads), plus the residual's
    # gradient (p b n d)
    h, dh, d = llama7.n_heads, llama7.head_dim, llama7.d
    small = (layer["attention norm"] + layer["Q/K/V input"] + layer["Q, K, V (K and V per query head)"]
             - 2 * n * h * dh + 2 * n * d)
    assert sum(v for _, v in at_softmax) == small + layer["softmax output (fp32)"] + 8 * h * n * n
    # the picture's point: the softmax's backward holds more than the whole layer keeps
    assert sum(v for _, v in at_softmax) > layer["total"]


def test_labels_clear_of_the_axis(llama7):
    figures.use()
    fig = D.draw_layer_backward(T.llama_layer_bytes(llama7, 1, 2048, 2, "eager"))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        left = ax.get_window_extent(renderer).x0
        fig_box = fig.bbox
        texts = [t for t in ax.texts if t.get_text()]
        assert len(texts) >= 8
        for t in texts:
            box = t.get_window_extent(renderer)
            assert box.x0 >= fig_box.x0 - 1 and box.x1 <= fig_box.x1 + 1, t.get_text()
        # no y axis for the left labels to run into: no ticks, no spine
        assert not ax.get_yticks().size and not ax.spines["left"].get_visible()
        assert min(t.get_window_extent(renderer).x0 for t in texts) >= left - 1
    finally:
        plt.close(fig)
