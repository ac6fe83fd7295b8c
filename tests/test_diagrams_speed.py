"""Tests of lib.book.diagrams_speed: the roofline places each kernel at min(peak, intensity x bandwidth) and meets
its ridge at peak / bandwidth; the step diagram draws the rows it says (the prompt's n, the batch's b, one cache
per sequence), refuses a batch that is not smaller than the prompt, keeps every label inside the figure and
legible on a phone."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from lib.book import diagrams_speed as D  # noqa: E402
from lib.book import figures  # noqa: E402


def test_roofline_places_kernels_on_the_roof() -> None:
    fig, ax = plt.subplots()
    ridge, at = D.roofline(ax, 100.0, 4.0, {"low": 2.0, "high": 1e3})
    assert ridge == 25.0
    assert at == {"low": 8.0, "high": 100.0}
    with pytest.raises(ValueError, match="intensity must be positive"):
        D.roofline(ax, 100.0, 4.0, {"bad": 0.0})
    plt.close(fig)


@pytest.mark.parametrize(("n", "b"), [(8, 4), (6, 1), (10, 3)])
def test_step_reads_draws_its_rows(n: int, b: int) -> None:
    fig, ax = plt.subplots(figsize=(figures.PHONE_WIDTH, 4.6))
    drawn = D.step_reads(ax, n_prompt=n, batch=b)
    assert drawn == {"prefill_rows": n, "decode_rows": b, "weight_reads": 1, "caches": b}
    boxes = [p for p in ax.patches if isinstance(p, Rectangle)]
    # n + b token rows, two weight matrices, b caches
    assert len(boxes) == n + b + 2 + b
    assert figures.text_px_on_phone(fig) >= figures.MIN_TEXT_PX
    fig.draw_without_rendering()
    inside = ax.get_window_extent()
    for t in ax.texts:
        box = t.get_window_extent()
        assert inside.x0 - 1 <= box.x0 and box.x1 <= inside.x1 + 1, t.get_text()
        assert inside.y0 - 1 <= box.y0 and box.y1 <= inside.y1 + 1, t.get_text()
    plt.close(fig)


@pytest.mark.parametrize(("n", "b"), [(4, 4), (4, 0), (1, 1)])
def test_step_reads_refuses_a_batch_not_below_the_prompt(n: int, b: int) -> None:
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="batch"):
        D.step_reads(ax, n_prompt=n, batch=b)
    plt.close(fig)
