"""A slider in live Jupyter, a static figure everywhere else: the book's one mechanism for interactive cells.

Why: a slider teaches by being dragged, which needs a running kernel. In the static HTML an ipywidgets
slider cannot recompute anything, and rendering one would load require.js and the widget bundle from a CDN
(myst-nb's default), which the offline book forbids. So a chapter calls :func:`explore` once, and

* in JupyterLab / Notebook (a kernel started by a Jupyter server) the reader gets an ipywidgets slider that
  redraws the figure for each value;
* when the notebook is executed headless (the book build, nbval, ``nbconvert --execute``) the same drawing
  function is called once per value in ``values`` and the panels are shown as one ordinary matplotlib figure,
  two panels per row at the width of the text (:func:`lib.book.figures.panels`): a PNG that the HTML serves
  locally, whose text output nbval can compare.

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

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["explore", "widget_mode"]

MODES = ("static", "interactive")


def widget_mode() -> str:
    """``"interactive"`` or ``"static"``, from ``$BOOK_WIDGETS`` or, unset, from whether a Jupyter server runs us."""
    forced = os.environ.get("BOOK_WIDGETS", "").strip().lower()
    if forced:
        if forced not in MODES:
            raise ValueError(f"BOOK_WIDGETS must be one of {MODES} or unset, got {forced!r}")
        return forced
    return "interactive" if os.environ.get("JPY_SESSION_NAME") else "static"


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
        panel_size: inches per panel in the live slider; static panels are half the text width each, and
            ``panel_size[1]`` inches high.
        mode: ``"static"`` or ``"interactive"``; None chooses with :func:`widget_mode`.

    Returns:
        Static: the matplotlib ``Figure``. Interactive: an ipywidgets ``VBox`` holding the slider and its
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

    if mode == "static":
        from .figures import panels

        fig, axes = panels(len(vals), height=panel_size[1])
        for ax, v in zip(axes, vals, strict=True):
            draw(ax, v)
        plt.close(fig)  # returned, not also drawn by the inline backend: shown exactly once
        return fig

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
