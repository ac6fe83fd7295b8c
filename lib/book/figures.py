"""One figure style for the whole book: size, fonts, colours, panel layout and the mask convention.

Every chapter calls :func:`use` once (in its imports cell) and draws with these helpers, so that all figures

- are sized to the text column (``TEXT_WIDTH`` inches wide) and keep their fonts at 9 pt or more at the size
  the page shows them: fonts are set in points for a figure that is displayed at (or below) its own width;
- stay legible on a phone, which shows a figure at most :data:`PHONE_FIGURE_PX` wide (measured in the built
  book: a 390 px screen shows the text column's images 342 px wide): :func:`text_px_on_phone` gives the size of
  a figure's smallest text there, :func:`svg_text_px` the same for a stored SVG (at least :data:`MIN_TEXT_PX`
  is the book's rule). A figure drawn :data:`PHONE_WIDTH` inches wide keeps the style's smallest font (9.5 pt)
  above it, and the fonts of :data:`PHONE_TEXT` (10 pt and more) with a margin; a full-width one
  (``TEXT_WIDTH``) needs fonts of about 13.5 pt (``panels(..., width=PHONE_WIDTH)`` draws the narrow one);
- have at most two panels per row (:func:`panels` makes a grid otherwise);
- use the colour-blind-safe Okabe-Ito palette (:data:`PALETTE`, also the default colour cycle);
- are vector graphics (SVG) in the notebook, the HTML and the PDF, crisp at any zoom and on a phone: :func:`use`
  sets IPython's inline backend to SVG with every text drawn as paths (``svg.fonttype = "path"``: no font on
  the reader's side is needed) and a fixed ``svg.hashsalt`` and no date, so an SVG is the same on every run;
- draw boolean masks one way only (:func:`show_mask`): **dark blue = may attend** (``True``), light grey =
  masked (``False``), the convention the notation chapter defines.

A figure's number and caption come from the notebook cell's metadata (``mystnb.figure``: ``caption`` and
``name``), so the text can refer to it with ``{numref}``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MASKED_COLOR", "MAY_ATTEND_COLOR", "MIN_TEXT_PX", "PALETTE", "PHONE_FIGURE_PX", "PHONE_TEXT",
           "PHONE_WIDTH", "STYLE", "TEXT_WIDTH", "panels", "show_mask", "svg_text_px", "text_px_on_phone", "use"]

#: Width of the book's text column, in inches: the width every figure is drawn at.
TEXT_WIDTH = 7.0
#: The widest a figure is shown on a phone, in CSS pixels: measured with Chromium in the built book at a 390 px
#: viewport (the page's margins taken off, every chapter's figures are 342 px wide; tests/browser/test_layout.py
#: measures it again on every build and fails if a figure is shown wider).
PHONE_FIGURE_PX = 342
#: The smallest text a figure may have at that width, in CSS pixels.
MIN_TEXT_PX = 9.0
#: A figure this wide (inches) keeps 9.5 pt text above 9 px on a phone: saved 4.9 in wide (0.1 in of padding
#: each side), it shows 9.5 * 342 / (72 * 4.9) = 9.2 px; the 10 pt of :data:`PHONE_TEXT`, 9.7 px.
PHONE_WIDTH = 4.7
#: rcParams for a figure meant to be read on a phone at :data:`PHONE_WIDTH` (the sliders' panels): no text
#: under 10 pt.
PHONE_TEXT: dict[str, float] = {"font.size": 10.5, "axes.labelsize": 10.5, "axes.titlesize": 11,
                                "xtick.labelsize": 10, "ytick.labelsize": 10, "legend.fontsize": 10}
#: Okabe & Ito's colour-blind-safe palette (black first), in the order the colour cycle uses.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
#: The mask convention: a position that may be attended (True) is drawn dark blue, a masked one light grey.
MAY_ATTEND_COLOR = "#0072B2"
MASKED_COLOR = "#E6E6E6"

#: matplotlib rcParams of the book's style.
STYLE: dict[str, Any] = {
    "figure.figsize": (TEXT_WIDTH, 3.6),
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "figure.constrained_layout.use": True,
    "font.size": 10.5,
    "axes.titlesize": 11,
    "axes.labelsize": 10.5,
    "xtick.labelsize": 9.5,
    "ytick.labelsize": 9.5,
    "legend.fontsize": 9.5,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.8,
    "lines.markersize": 5,
    "image.cmap": "viridis",
    # Vector figures, byte-identical from run to run (ids hashed with a fixed salt; no date: see use()).
    "svg.fonttype": "path",
    "svg.hashsalt": "transformer-book",
}

#: Keyword arguments the inline backend passes to ``savefig`` for every figure: no creation date in the SVG.
SVG_SAVEFIG = {"metadata": {"Date": None}}


def use() -> None:
    """Apply the book's style to matplotlib (call once per chapter, before the first figure)."""
    import matplotlib as mpl
    from cycler import cycler

    mpl.rcParams.update(STYLE)
    mpl.rcParams["axes.prop_cycle"] = cycler(color=list(PALETTE))
    _inline_svg()


def _inline_svg() -> None:
    """In an IPython kernel, figures are shown as SVG (and only SVG); elsewhere nothing to do."""
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if get_ipython() is None:
        return
    set_matplotlib_formats("svg", **SVG_SAVEFIG)


def panels(n: int, *, height: float = 3.0, ncols: int | None = None, width: float = TEXT_WIDTH,
           **subplot_kw: Any):
    """A figure of ``n`` panels, at most two per row, ``width`` inches wide (the text column's ``TEXT_WIDTH``
    unless told; :data:`PHONE_WIDTH` for a figure legible on a phone) and ``height`` inches per row.

    Returns ``(fig, axes)`` with ``axes`` a flat list of ``n`` Axes (unused grid cells are removed).
    """
    import matplotlib.pyplot as plt

    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    cols = min(2, int(n)) if ncols is None else ncols
    if isinstance(cols, bool) or not isinstance(cols, int) or not 1 <= cols <= 2:
        raise ValueError(f"ncols must be 1 or 2 (at most two panels per row), got {ncols!r}")
    rows = -(-int(n) // cols)
    if not width > 0:
        raise ValueError(f"width must be a positive number of inches, got {width!r}")
    fig, axes = plt.subplots(rows, cols, figsize=(width, height * rows), squeeze=False, **subplot_kw)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.remove()
    return fig, flat[:n]


def show_mask(ax, mask: Any, *, title: str | None = None, xlabel: str = "key position $j$",
              ylabel: str = "query position $i$", legend: bool = True):
    """Draw a boolean mask (True = may attend) in the book's convention: dark blue may attend, grey masked."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    m = np.asarray(mask.detach().cpu() if hasattr(mask, "detach") else mask)
    if m.dtype != bool:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {m.dtype}")
    if m.ndim != 2:
        raise ValueError(f"mask must be 2-D (queries x keys), got shape {m.shape}")
    image = ax.imshow(m.astype(np.int8), cmap=ListedColormap([MASKED_COLOR, MAY_ATTEND_COLOR]), vmin=0, vmax=1,
                      interpolation="nearest")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(False)
    if title:
        ax.set_title(title)
    if legend:
        ax.legend(handles=[Patch(color=MAY_ATTEND_COLOR, label="may attend"), Patch(color=MASKED_COLOR,
                                                                                  label="masked")],
                  loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return image


def text_px_on_phone(fig, shown_px: float = PHONE_FIGURE_PX) -> float:
    """The size, in CSS pixels, of the smallest visible text of ``fig`` when a page shows it ``shown_px`` wide.

    A figure saved ``W`` inches wide is ``96 W`` CSS pixels at its own size (SVG and PNG alike); a narrower
    screen scales it down, never up, so text of ``s`` points shows at ``s * 96/72 * min(1, shown_px / (96 W))``
    px. ``W`` is the width Jupyter saves: the figure's tight bounding box plus 0.1 in of padding on each side.
    Counts every visible, non-empty text of the figure (titles, labels, tick labels, legends, annotations);
    returns ``inf`` for a figure without text.
    """
    from matplotlib.text import Text

    fig.draw_without_rendering()  # tick labels and the constrained layout exist once the figure is drawn
    width_px = (fig.get_tightbbox().width + 0.2) * 96
    scale = min(1.0, shown_px / width_px)
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes) * 96 / 72 * scale if sizes else float("inf")


def svg_text_px(svg: str, shown_px: float = PHONE_FIGURE_PX) -> float:
    """The size, in CSS pixels, of the smallest text of a matplotlib SVG (text drawn as paths, as :func:`use`
    sets) when a page shows it ``shown_px`` wide (never wider than its own size).

    The SVG's ``width`` is in points; each text is a ``<g id="text_N">`` group whose glyphs are placed with
    ``scale(s -s)``, ``s`` being the font size in points over 100. A text's size is its largest glyph scale
    (a formula's subscripts are smaller, by design). Returns ``inf`` for an SVG without text.
    """
    import re

    head = re.search(r'<svg[^>]*?\swidth="([\d.]+)(pt|px)?"', svg)
    if head is None:
        raise ValueError("not an SVG with a width")
    width_px = float(head.group(1)) * (96 / 72 if head.group(2) in (None, "pt") else 1.0)
    scale = min(1.0, shown_px / width_px)
    starts = [m.end() for m in re.finditer(r'<g id="text_\d+">', svg)]
    sizes = []
    for start, end in zip(starts, [*starts[1:], len(svg)], strict=True):
        glyphs = re.findall(r"scale\(([\d.]+) -[\d.]+\)", svg[start:end])
        if glyphs:
            sizes.append(max(float(g) for g in glyphs) * 100)
    return min(sizes) * 96 / 72 * scale if sizes else float("inf")
