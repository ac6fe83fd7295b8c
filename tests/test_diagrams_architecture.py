"""Tests of lib.book.diagrams_architecture: every diagram draws, in the book's style, into a new figure or a
given Axes; the RoPE picture's arrows are the rotations lib.positional computes; text stays legible."""

from __future__ import annotations

import contextlib
import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lib.book import diagrams_architecture as D  # noqa: E402
from lib.book import figures  # noqa: E402
from lib.positional import apply_rope  # noqa: E402

DIAGRAMS = ["multihead_split_concat", "rope_rotations", "layernorm_placement", "transformer_overview"]


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


@contextlib.contextmanager
def _drawn(name: str):
    """Draw diagram ``name`` in the book's style; yield its Axes and the renderer, and close it after."""
    figures.use()
    fig = getattr(D, name)()
    try:
        fig.canvas.draw()
        yield fig.axes[0], fig.canvas.get_renderer()
    finally:
        plt.close(fig)


def test_transformer_overview_draws_the_mask_of_each_attention_beside_it():
    """The whole-model picture carries the masks (the chapter has no second, per-layer picture): a causal
    grid beside the decoder's self-attention, padding grids beside the encoder's self-attention and the
    cross-attention, each grid level with its box and no label touching another."""
    from matplotlib.patches import FancyBboxPatch, Rectangle

    with _drawn("transformer_overview") as (ax, renderer):
        texts = [t for t in ax.texts if t.get_text().strip()]
        names = [t.get_text() for t in texts]
        assert names.count("padding") == 2 and names.count("causal") == 1
        cells = [p for p in ax.patches if isinstance(p, Rectangle) and not isinstance(p, FancyBboxPatch)]
        assert len(cells) == 3 * 16  # three 4 x 4 grids
        may = np.array([c.get_facecolor()[:3] for c in cells]) == np.array(
            matplotlib.colors.to_rgb(figures.MAY_ATTEND_COLOR))
        assert may.all(axis=1).sum() == 12 + 12 + 10  # two padding grids (3 of 4 keys) and the causal triangle
        boxes = {t.get_text(): t.get_window_extent(renderer) for t in texts}
        grids = [cells[16 * k].get_window_extent(renderer) for k in range(3)]
        for grid, owner in zip(grids, ["multi-head\nself-attention", "masked multi-head\nself-attention",
                                       "cross-attention\n(keys, values: $E$)"], strict=True):
            assert boxes[owner].y0 - 20 < grid.y1 and grid.y0 < boxes[owner].y1 + 20  # level with its box
            assert grid.x0 > boxes[owner].x1  # beside it, on the right
        extents = [t.get_window_extent(renderer) for t in texts]
        for a, b in itertools.combinations(extents, 2):
            assert not a.overlaps(b), "two labels of the overview overlap"


def test_rope_arrows_are_the_rotations_of_lib_positional():
    fig = D.rope_rotations(d=8, positions=(0, 1, 2, 3), base=10.0)
    try:
        want = apply_rope(np.tile([1.0, 0.0], (4, 4)), np.arange(4), 10.0)
        for r, ax in enumerate(fig.axes):
            tips = np.array([a.xy for a in ax.texts if hasattr(a, "arrow_patch") and a.arrow_patch is not None])
            np.testing.assert_allclose(tips, want[:, 2 * r:2 * r + 2], atol=1e-12)
    finally:
        plt.close(fig)


def _contrast_on_white(color) -> float:
    """WCAG 2 contrast ratio of ``color`` against white."""
    from matplotlib.colors import to_rgb

    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(color)]
    return 1.05 / (0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2] + 0.05)


@pytest.mark.parametrize("layout", [(2, 2, (4.4, 4.2)), None])  # the chapter's 2 x 2 panels; the default row
def test_rope_position_numbers_are_legible_and_apart(layout):
    """Every number on the RoPE circles reads as text (contrast >= 4.5 on white) and touches neither another
    number (even on the slowest pair, whose arrows are a few degrees apart) nor the circle, its arrows or the
    panel's title; each circle of the book's picture numbers its first and last arrow."""
    figures.use()
    if layout is None:
        fig = D.rope_rotations()
    else:
        fig, axes = plt.subplots(layout[0], layout[1], figsize=layout[2])
        D.rope_rotations(axes.ravel())
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            numbers = [t for t in ax.texts if t.get_text() and getattr(t, "arrow_patch", None) is None]
            assert {"0", "3"} <= {t.get_text() for t in numbers}
            assert min(_contrast_on_white(t.get_color()) for t in numbers) >= 4.5
            boxes = [t.get_window_extent(renderer) for t in numbers]
            for a, b in itertools.combinations([*boxes, ax.title.get_window_extent(renderer)], 2):
                gap = max(b.x0 - a.x1, a.x0 - b.x1, b.y0 - a.y1, a.y0 - b.y1)
                assert gap >= 2, f"a position number {gap:.1f} px from another or the title in {ax.get_title()!r}"
            # the arrows end on the unit circle: every number's box stays outside it
            cx, cy = ax.transData.transform((0.0, 0.0))
            radius = ax.transData.transform((1.0, 0.0))[0] - cx
            for box in boxes:
                nearest = np.hypot(np.clip(cx, box.x0, box.x1) - cx, np.clip(cy, box.y0, box.y1) - cy)
                assert nearest >= radius + 2, f"a position number {nearest - radius:.1f} px from the circle"
    finally:
        plt.close(fig)


def test_no_line_or_arrow_runs_through_a_label_of_the_multihead_diagram():
    """The fan from Q, K, V to the heads and the arrows into Concat pass beside every label, never through it
    (the block-width note and the head formula once sat on the fan on white patches)."""
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path

    with _drawn("multihead_split_concat") as (ax, renderer):
        drawn = [p.get_path().transformed(ax.transData) for p in ax.patches if isinstance(p, FancyArrowPatch)]
        drawn += [ln.get_path().transformed(ln.get_transform()) for ln in ax.lines]
        # each as its polylines (an arrow's head closes a polygon, whose closing vertex is a placeholder)
        paths = [Path(poly) for d in drawn for poly in d.to_polygons(closed_only=False)]
        assert len(drawn) >= 4 * 3 + 4  # the fan (h x Q, K, V) and the arrows into Concat at least
        labels = [t for t in ax.texts if t.get_text().strip()]
        assert {"$h$ blocks,\n$d_k$ wide\n($V$: $d_v$)"} <= {t.get_text() for t in labels}
        assert any(t.get_text().startswith("head $i$:\nsoftmax") for t in labels)
        for t in labels:
            box = t.get_window_extent(renderer).padded(1)
            crossed = [k for k, p in enumerate(paths) if p.intersects_bbox(box, filled=False)]
            assert not crossed, f"{t.get_text()!r} is crossed by {len(crossed)} lines or arrows"
