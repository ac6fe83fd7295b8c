"""A slider in live Jupyter, a static figure everywhere else: the book's one mechanism for interactive cells.

Why: a slider teaches by being dragged, which needs a running kernel. In the static HTML an ipywidgets
slider cannot recompute anything, and rendering one would load require.js and the widget bundle from a CDN
(myst-nb's default), which the offline book forbids. So a chapter calls :func:`explore` once, and

* in JupyterLab / Notebook (a kernel started by a Jupyter server) the reader gets an ipywidgets slider that
  redraws the figure for each value;
* when the notebook is executed headless (the book build, nbval, ``nbconvert --execute``) the same drawing
  function is called once per value in ``values`` and the panels are shown as one ordinary matplotlib figure,
  one panel per row, :data:`lib.book.figures.PHONE_WIDTH` inches wide with the fonts of
  :data:`lib.book.figures.PHONE_TEXT` (legible where a phone shows it 342 px wide; the whole grid at most
  :data:`GRID_MAX_HEIGHT` inches high, so that it fits a printed page): the figure the PDF, JupyterLab (before
  the reader runs the cell) and nbval see. The same execution also draws one **frame** per slider stop
  (``interactive_values``, at most :data:`MAX_FRAMES`) and stores them, as PNGs, in the output's metadata under
  :data:`METADATA_KEY`. The HTML build (``_ext/book_explore.py``) turns those frames into a slider that
  ``_static/explore.js`` drives without a kernel: it only shows the frame of the chosen stop, it computes
  nothing. nbval compares neither images nor metadata, so the frames need not be identical across machines.
  Frames are drawn with the same fonts; the metadata also records ``text_px``, the smallest text of the frames
  where a phone shows them (:func:`lib.book.figures.text_px_on_phone`), and each PNG carries its smallest font
  size and saved width (text chunks :data:`PNG_TEXT_PT` and :data:`PNG_WIDTH_IN`), so the book's tests can
  check a frame's text at the width the browser shows it.
  With ``$BOOK_SLIDER_FRAMES=unrendered`` (set by the nbval runs, which compare neither) each frame is still
  drawn, so a drawing function that fails at some stop fails there too, but it is not rasterised or stored:
  the PNGs are most of such a cell's time.

The drawing function runs with a snapshot of the notebook's global names taken when :func:`explore` is called:
a later cell that rebinds a name the function reads (``x = ...`` for another example) cannot change what the
slider draws.

The mode is chosen by ``$BOOK_WIDGETS``: ``static`` or ``interactive`` force it (``tools/build_book.py``
sets ``static``); unset, it is ``interactive`` when the kernel was started by a Jupyter server (which sets
``$JPY_SESSION_NAME``) and ``static`` otherwise. Stored outputs are therefore always the static figure.

Usage in a chapter::

    from lib.book.widgets import explore

    def draw(ax, temperature):
        ax.bar(range(5), softmax(logits / temperature))
        ax.set_title(f"T = {temperature:g}")

    explore(draw, "temperature", [0.25, 1.0, 4.0], default=1.0)  # the cell's last expression
"""

from __future__ import annotations

import base64
import io
import os
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["METADATA_KEY", "PNG_TEXT_PT", "PNG_WIDTH_IN", "Explored", "explore", "frame_mode", "widget_mode"]

MODES = ("static", "interactive")
#: Key of the output metadata that carries the HTML slider's frames (read by ``_ext/book_explore.py``).
METADATA_KEY = "book_explore"
#: At most this many frames are stored for the HTML slider (finer ``interactive_values`` are thinned evenly).
MAX_FRAMES = 25
#: A frame is a single panel this many times the size of one panel of the static grid, drawn at 2x resolution.
FRAME_SCALE = 1.25
FRAME_DPI_FACTOR = 2
#: Colours of a frame's PNG (quantised: the slider's frames are stored in the notebook).
FRAME_COLORS = 64
#: The static grid's height, in inches, at most (its panels are made lower to fit): a printed page's text.
GRID_MAX_HEIGHT = 9.0
#: PNG text chunks of a frame: its smallest font size (points) and its width as saved (inches).
PNG_TEXT_PT = "book-smallest-text-pt"
PNG_WIDTH_IN = "book-width-in"
#: ``$BOOK_SLIDER_FRAMES``: ``png`` (unset: the default) stores the frames, ``unrendered`` draws them only.
FRAME_MODES = ("png", "unrendered")


def widget_mode() -> str:
    """``"interactive"`` or ``"static"``, from ``$BOOK_WIDGETS`` or, unset, from whether a Jupyter server runs us."""
    forced = os.environ.get("BOOK_WIDGETS", "").strip().lower()
    if forced:
        if forced not in MODES:
            raise ValueError(f"BOOK_WIDGETS must be one of {MODES} or unset, got {forced!r}")
        return forced
    return "interactive" if os.environ.get("JPY_SESSION_NAME") else "static"


def frame_mode() -> str:
    """``"png"`` or ``"unrendered"``, from ``$BOOK_SLIDER_FRAMES`` (unset or empty: ``"png"``)."""
    mode = os.environ.get("BOOK_SLIDER_FRAMES", "").strip().lower() or "png"
    if mode not in FRAME_MODES:
        raise ValueError(f"BOOK_SLIDER_FRAMES must be one of {FRAME_MODES} or unset, got {mode!r}")
    return mode


def _check_values(values: Any, name: str) -> list[float]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | np.ndarray):
        raise TypeError(f"values must be a sequence of numbers for {name!r}, got {type(values).__name__}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v):
            raise ValueError(f"values for {name!r} must be finite numbers, got {v!r} in {list(values)!r}")
        out.append(float(v))
    if not out:
        raise ValueError(f"values for {name!r} must not be empty")
    if any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise ValueError(f"values for {name!r} must be strictly increasing, got {out}")
    return out


def _frozen(draw: Callable[[Any, float], None]) -> Callable[[Any, float], None]:
    """``draw`` reading a snapshot of its module's globals: later rebinding of a global name does not reach it.

    A notebook's cells share one namespace, so a drawing function defined in one cell and called by the slider
    after "Run All" would otherwise read whatever later cells bound to the same names. Objects are shared, not
    copied: only rebinding is cut off. Built-in and C functions, and callables that are not plain functions,
    are returned unchanged.
    """
    if not isinstance(draw, types.FunctionType):
        return draw
    frozen = types.FunctionType(draw.__code__, dict(draw.__globals__), draw.__name__, draw.__defaults__,
                                draw.__closure__)
    frozen.__kwdefaults__ = draw.__kwdefaults__
    frozen.__dict__.update(draw.__dict__)
    frozen.__doc__ = draw.__doc__
    frozen.__wrapped__ = draw  # type: ignore[attr-defined]
    return frozen


def _frame_stops(stops: list[float], values: list[float], default: float) -> list[float]:
    """The slider's stops, every k-th kept when there are more than MAX_FRAMES (plus the last, ``values`` and
    the default)."""
    if len(stops) <= MAX_FRAMES:
        return stops
    step = -(-len(stops) // MAX_FRAMES)
    keep = set(range(0, len(stops), step)) | {len(stops) - 1}
    keep |= {min(range(len(stops)), key=lambda i: abs(stops[i] - v)) for v in [*values, default]}
    return [stops[i] for i in sorted(keep)]


def _png(fig, dpi: float | None = None, colors: int | None = None, text: dict[str, str] | None = None) -> bytes:
    """``fig`` as PNG bytes; with ``colors``, reduced to that many colours (a plot needs few: ~2.5x smaller);
    ``text``: PNG text chunks to add (only with ``colors``)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    if colors is None:
        return buf.getvalue()
    from PIL import Image, PngImagePlugin

    buf.seek(0)
    image = Image.open(buf).convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT)
    info = PngImagePlugin.PngInfo()
    for key, value in (text or {}).items():
        info.add_text(key, value)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True, pnginfo=info)
    return out.getvalue()


def _smallest_font(fig) -> tuple[float, float]:
    """The smallest font size (points) of ``fig``'s visible texts and its width (inches) as saved with a tight
    bounding box (0.1 in of padding each side); ``inf`` points when it has no text."""
    from matplotlib.text import Text

    fig.draw_without_rendering()
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return (min(sizes) if sizes else float("inf")), fig.get_tightbbox().width + 0.2


def _figure_bundle(fig) -> tuple[dict[str, Any], dict[str, Any]]:
    """What Jupyter would show for ``fig`` (the inline backend's formats), else a PNG and the figure's repr."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:  # pragma: no cover - IPython is always there with Jupyter
        shell = None
    if shell is not None:
        data, md = shell.display_formatter.format(fig)
        if any(k.startswith("image/") for k in data):
            return dict(data), dict(md)
    return {"image/png": base64.b64encode(_png(fig)).decode("ascii"), "text/plain": repr(fig)}, {}


class Explored:
    """What :func:`explore` returns when static: the panel grid, and the slider's frames for the HTML build.

    Jupyter shows it as the grid figure (same ``text/plain`` as a matplotlib figure, so nbval compares the same
    text) with the frames in the output's metadata (key :data:`METADATA_KEY`: ``name``, ``labels``, ``values``,
    ``default`` (an index) and ``frames``, base64 PNGs). Attribute access goes to the grid ``figure``.
    """

    def __init__(self, figure, name: str, values: list[float], frames: list[bytes], default: int,
                 text_px: float | None = None) -> None:
        self.figure = figure
        self.name = name
        self.values = values
        self.labels = [f"{v:g}" for v in values]
        self.frames = frames
        self.default = default
        self.text_px = text_px

    def __getattr__(self, attr: str) -> Any:
        if attr == "figure":  # not set yet (unpickling): avoid recursing
            raise AttributeError(attr)
        return getattr(self.figure, attr)

    def __repr__(self) -> str:
        return repr(self.figure)

    def metadata(self) -> dict[str, Any]:
        meta = {"name": self.name, "labels": self.labels, "values": self.values, "default": self.default,
                "frames": [base64.b64encode(f).decode("ascii") for f in self.frames]}
        if self.text_px is not None:
            meta["text_px"] = round(self.text_px, 2)
        return meta

    def _repr_mimebundle_(self, include=None, exclude=None):  # noqa: ANN001 - IPython's protocol
        data, md = _figure_bundle(self.figure)
        md[METADATA_KEY] = self.metadata()
        return data, md


def explore(
    draw: Callable[[Any, float], None],
    name: str,
    values: Sequence[float],
    *,
    default: float | None = None,
    interactive_values: Sequence[float] | None = None,
    panel_size: tuple[float, float] = (3.2, 2.6),
    mode: str | None = None,
):
    """Show ``draw(ax, value)`` for a parameter ``name``: a slider over ``values`` or, static, one panel each.

    Args:
        draw: draws one panel onto a matplotlib ``Axes`` for one value of the parameter (it should set its
            own title, e.g. ``f"{name} = {value:g}"``, so the static panels are labelled).
        name: the parameter's name, shown on the slider.
        values: the values, strictly increasing: the slider's stops, and the static figure's panels (keep it
            to 2-6 values).
        default: the slider's starting value (the middle of ``values`` if None).
        interactive_values: finer stops for the slider (strictly increasing); ``values`` if None.
        panel_size: inches per panel in the live slider; static panels are one per row,
            :data:`lib.book.figures.PHONE_WIDTH` wide and ``panel_size[1]`` inches high (lower if the grid would
            exceed :data:`GRID_MAX_HEIGHT`).
        mode: ``"static"`` or ``"interactive"``; None chooses with :func:`widget_mode`.

    Returns:
        Static: an :class:`Explored` (the panel grid ``Figure`` as ``.figure``, attributes forwarded to it, plus
        the slider's frames for the HTML). Interactive: an ipywidgets ``VBox`` holding the slider and its
        plot. Either way, make the call the cell's last expression so Jupyter shows it (exactly once).
    """
    if not callable(draw):
        raise TypeError(f"draw must be a function draw(ax, value), got {type(draw).__name__}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty str, got {name!r}")
    vals = _check_values(values, name)
    if default is None:
        default = vals[len(vals) // 2]
    stops = vals if interactive_values is None else _check_values(interactive_values, name)
    if not stops[0] <= default <= stops[-1]:
        raise ValueError(f"default {default!r} for {name!r} is outside the slider's range [{stops[0]}, {stops[-1]}]")
    mode = widget_mode() if mode is None else mode
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} or None, got {mode!r}")

    import matplotlib.pyplot as plt

    draw = _frozen(draw)
    if mode == "static":
        from .figures import PHONE_FIGURE_PX, PHONE_TEXT, PHONE_WIDTH, TEXT_WIDTH, panels

        with plt.rc_context(PHONE_TEXT):
            fig, axes = panels(len(vals), ncols=1, width=PHONE_WIDTH,
                               height=min(panel_size[1], GRID_MAX_HEIGHT / len(vals)))
            for ax, v in zip(axes, vals, strict=True):
                draw(ax, v)
            fig.draw_without_rendering()  # tick labels are made at the first draw: with these fonts
            plt.close(fig)  # returned, not also drawn by the inline backend: shown exactly once
            frame_values = _frame_stops(stops, vals, default)
            frames = []
            rasterise = frame_mode() == "png"
            smallest = float("inf")
            size = (TEXT_WIDTH / 2 * FRAME_SCALE, panel_size[1] * FRAME_SCALE)
            for v in frame_values:
                frame, ax = plt.subplots(figsize=size, layout="constrained")
                draw(ax, v)
                if rasterise:
                    points, inches = _smallest_font(frame)
                    smallest = min(smallest, points * 96 / 72 * min(1.0, PHONE_FIGURE_PX / (96 * inches)))
                    frames.append(_png(frame, dpi=frame.dpi * FRAME_DPI_FACTOR, colors=FRAME_COLORS,
                                       text={PNG_TEXT_PT: f"{points:g}", PNG_WIDTH_IN: f"{inches:.4f}"}))
                plt.close(frame)
        start = min(range(len(frame_values)), key=lambda i: abs(frame_values[i] - default))
        return Explored(fig, name, frame_values, frames, start, smallest if rasterise else None)

    import ipywidgets as widgets

    out = widgets.Output()

    def update(value: float) -> None:
        with out:
            out.clear_output(wait=True)
            fig, ax = plt.subplots(figsize=panel_size, layout="constrained")
            draw(ax, value)
            plt.show()

    slider = widgets.SelectionSlider(
        options=[(f"{v:g}", v) for v in stops], value=min(stops, key=lambda v: abs(v - default)), description=name,
        continuous_update=False,
    )
    slider.observe(lambda change: update(change["new"]), names="value")
    ui = widgets.VBox([slider, out])
    update(slider.value)
    return ui
