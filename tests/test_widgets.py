"""lib.book.widgets: static figure when headless, a working slider when interactive, clear errors on bad input."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lib.book.widgets import MAX_FRAMES, METADATA_KEY, PNG_TEXT_PT, PNG_WIDTH_IN, explore, widget_mode  # noqa: E402
from lib.softmax import softmax  # noqa: E402

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


def test_static_output_carries_the_html_sliders_frames() -> None:
    import base64
    import io

    from PIL import Image

    with matplotlib.rc_context({"figure.dpi": 110}):  # the book's (figures.use()), whatever ran before
        out = explore(draw, "T", [0.25, 4.0], interactive_values=[0.25, 0.5, 1.0, 2.0, 4.0], default=1.0,
                      mode="static")
    data, md = out._repr_mimebundle_()
    # Jupyter shows the grid with the figure's own text, so nbval compares what it compared before the frames
    assert data["text/plain"] == repr(out.figure) and "image/png" in data
    meta = md[METADATA_KEY]
    assert meta["name"] == "T" and meta["labels"] == ["0.25", "0.5", "1", "2", "4"] and meta["default"] == 2
    frames = [base64.b64decode(f) for f in meta["frames"]]
    assert len(frames) == 5 and len(set(frames)) == 5  # one distinct picture per stop
    for f in frames:
        image = Image.open(io.BytesIO(f))
        assert image.format == "PNG" and image.width > 600  # drawn at twice the screen resolution
        # its smallest font and saved width, for the browser test; 2 x 110 dpi
        assert float(image.text[PNG_TEXT_PT]) >= 10 and float(image.text[PNG_WIDTH_IN]) == pytest.approx(
            image.width / 220, abs=0.02)
    assert meta["text_px"] >= 9  # the frames where a phone shows them (342 px)
    json_safe = __import__("json").dumps(md)  # stored in the notebook as JSON
    assert len(json_safe) < 400_000


def test_many_stops_are_thinned_keeping_values_and_default() -> None:
    stops = [float(x) for x in np.linspace(0.25, 8.25, 33)]
    out = explore(draw, "T", [0.25, 2.0, 8.25], interactive_values=stops, default=1.25, mode="static")
    assert len(out.values) <= MAX_FRAMES + 4
    assert {0.25, 2.0, 8.25, 1.25} <= set(out.values) and out.values == sorted(out.values)
    assert out.values[out.default] == 1.25


def test_drawing_function_ignores_later_rebinding() -> None:
    """A later cell that rebinds a global the drawing function reads does not change what the slider draws."""
    namespace = {"LOGITS": LOGITS, "softmax": softmax, "sizes": []}
    exec("def draw_g(ax, t):\n    sizes.append(LOGITS.size)\n    ax.bar(range(LOGITS.size), softmax(LOGITS / t))\n",  # noqa: S102
         namespace)
    ui = explore(namespace["draw_g"], "T", [0.5, 1.0, 2.0], mode="interactive")
    namespace["LOGITS"] = np.zeros(7)  # what a later cell of the chapter might do
    ui.children[0].value = 2.0  # with the live globals this would draw 7 bars
    assert namespace["sizes"] == [LOGITS.size, LOGITS.size]


def test_frozen_drawing_function_reads_the_snapshot() -> None:
    from lib.book.widgets import _frozen

    namespace = {"K": 3}
    exec("def f(ax, v):\n    return K * v\n", namespace)  # noqa: S102
    g = _frozen(namespace["f"])
    namespace["K"] = 100
    assert g(None, 2.0) == 6.0 and namespace["f"](None, 2.0) == 200.0


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


def test_unrendered_frames_are_drawn_but_not_stored(monkeypatch) -> None:
    seen: list[float] = []

    def record(ax, t: float) -> None:
        seen.append(t)
        draw(ax, t)

    stops = [0.25, 0.5, 1.0, 2.0, 4.0]
    monkeypatch.setenv("BOOK_SLIDER_FRAMES", "unrendered")  # what the nbval runs set
    fig = explore(record, "T", [0.25, 4.0], interactive_values=stops, mode="static")
    assert seen == [0.25, 4.0, *stops]  # the grid's panels, then every frame: a stop that fails still fails
    assert fig.frames == [] and fig.values == stops
    monkeypatch.delenv("BOOK_SLIDER_FRAMES")
    assert len(explore(draw, "T", [0.25, 4.0], interactive_values=stops, mode="static").frames) == len(stops)
    monkeypatch.setenv("BOOK_SLIDER_FRAMES", "none")
    with pytest.raises(ValueError, match="BOOK_SLIDER_FRAMES must be one of"):
        explore(draw, "T", [0.25, 4.0], mode="static")
