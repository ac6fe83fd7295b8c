"""lib.book.widgets: static figure when headless, a working slider when interactive, clear errors on bad input."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lib.softmax import softmax  # noqa: E402
from lib.book.widgets import explore, widget_mode  # noqa: E402

LOGITS = np.array([2.0, 1.0, 0.5, -1.0])


def draw(ax, t: float) -> None:
    ax.bar(range(LOGITS.size), softmax(LOGITS / t))
    ax.set_title(f"T = {t:g}")


def test_mode_from_environment(monkeypatch) -> None:
    monkeypatch.delenv("BOOK_WIDGETS", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert widget_mode() == "static"
    monkeypatch.setenv("JPY_SESSION_NAME", "chapters/softmax.ipynb")
    assert widget_mode() == "interactive"
    monkeypatch.setenv("BOOK_WIDGETS", "static")  # the book build forces the static figure
    assert widget_mode() == "static"
    monkeypatch.setenv("BOOK_WIDGETS", "slider")
    with pytest.raises(ValueError, match="BOOK_WIDGETS must be one of"):
        widget_mode()


def test_static_figure_has_one_panel_per_value() -> None:
    fig = explore(draw, "T", [0.25, 1.0, 4.0], mode="static")
    axes = fig.get_axes()
    assert [ax.get_title() for ax in axes] == ["T = 0.25", "T = 1", "T = 4"]
    heights = [np.array([p.get_height() for p in ax.patches]) for ax in axes]
    for h, t in zip(heights, [0.25, 1.0, 4.0], strict=True):
        np.testing.assert_allclose(h, softmax(LOGITS / t), rtol=1e-12)
    assert heights[0].max() > heights[1].max() > heights[2].max()  # colder is peakier


def test_interactive_slider_redraws() -> None:
    seen: list[float] = []

    def record(ax, t: float) -> None:
        seen.append(t)
        draw(ax, t)

    ui = explore(record, "T", [0.25, 4.0], interactive_values=[0.25, 0.5, 1.0, 2.0, 4.0], default=1.0,
                 mode="interactive")
    slider = ui.children[0]
    assert seen == [1.0] and slider.value == 1.0
    slider.value = 4.0
    assert seen == [1.0, 4.0]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"draw": 3}, TypeError, "draw must be a function"),
        ({"name": ""}, ValueError, "name must be a non-empty str"),
        ({"values": []}, ValueError, "must not be empty"),
        ({"values": [1.0, float("nan")]}, ValueError, "finite numbers"),
        ({"values": [2.0, 1.0]}, ValueError, "strictly increasing"),
        ({"values": "abc"}, TypeError, "sequence of numbers"),
        ({"default": 10.0}, ValueError, "outside the slider's range"),
        ({"mode": "html"}, ValueError, "mode must be one of"),
    ],
)
def test_bad_input(kwargs, error, match) -> None:
    args = {"draw": draw, "name": "T", "values": [0.5, 1.0], "mode": "static"} | kwargs
    with pytest.raises(error, match=match):
        explore(**args)
