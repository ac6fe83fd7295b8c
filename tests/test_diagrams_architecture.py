"""Tests of lib.book.diagrams_architecture: every diagram draws, in the book's style, into a new figure or a
given Axes; the RoPE picture's arrows are the rotations lib.positional computes; text stays legible."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lib.book import diagrams_architecture as D  # noqa: E402
from lib.book import figures  # noqa: E402
from lib.positional import apply_rope  # noqa: E402

DIAGRAMS = ["multihead_split_concat", "rope_rotations", "layernorm_placement", "encoder_decoder_blocks",
            "transformer_overview"]


@pytest.mark.parametrize("name", DIAGRAMS)
def test_each_diagram_draws_a_figure_of_the_column_width_with_legible_text(name):
    figures.use()
    fig = getattr(D, name)()
    try:
        assert fig.get_figwidth() == pytest.approx(figures.TEXT_WIDTH)
        texts = [t for ax in fig.axes for t in ax.texts + [ax.title] if t.get_text()]
        assert texts, "a diagram without any label"
        assert min(t.get_fontsize() for t in texts) >= 9
        fig.canvas.draw()  # renders (mathtext included) without error
    finally:
        plt.close(fig)


def test_transformer_overview_draws_into_a_given_axes():
    fig, ax = plt.subplots()
    try:
        out = D.transformer_overview(ax=ax)
        assert out is fig
        labels = {t.get_text() for t in ax.texts}
        assert {"feed-forward", "softmax", "next-token probabilities"} <= labels
        assert not ax.axison
    finally:
        plt.close(fig)


def test_rope_arrows_are_the_rotations_of_lib_positional():
    fig = D.rope_rotations(d=8, positions=(0, 1, 2, 3), base=10.0)
    try:
        want = apply_rope(np.tile([1.0, 0.0], (4, 4)), np.arange(4), 10.0)
        for r, ax in enumerate(fig.axes):
            tips = np.array([a.xy for a in ax.texts if hasattr(a, "arrow_patch") and a.arrow_patch is not None])
            np.testing.assert_allclose(tips, want[:, 2 * r:2 * r + 2], atol=1e-12)
    finally:
        plt.close(fig)
