"""lib.book.figures: the book's one figure style."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lib.book import figures  # noqa: E402
from lib.book.widgets import explore  # noqa: E402


@pytest.mark.parametrize(("n", "rows"), [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3)])
def test_panels_at_most_two_per_row(n: int, rows: int) -> None:
    fig, axes = figures.panels(n, height=2.5)
    assert len(axes) == n == len(fig.get_axes())
    cols = {round(ax.get_position().x0, 3) for ax in axes}
    assert len(cols) <= 2
    assert fig.get_size_inches() == pytest.approx((figures.TEXT_WIDTH, 2.5 * rows))
    plt.close(fig)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_panels_refuses_bad_counts(bad) -> None:
    with pytest.raises(ValueError, match="n must be a positive int"):
        figures.panels(bad)


def test_panels_refuses_three_columns() -> None:
    with pytest.raises(ValueError, match="at most two panels per row"):
        figures.panels(3, ncols=3)


def test_use_sets_readable_fonts_and_the_palette() -> None:
    figures.use()
    rc = matplotlib.rcParams
    assert min(rc["font.size"], rc["xtick.labelsize"], rc["ytick.labelsize"], rc["legend.fontsize"]) >= 9
    assert rc["axes.prop_cycle"].by_key()["color"][0] == figures.PALETTE[0]
    assert rc["figure.figsize"][0] == figures.TEXT_WIDTH


def test_show_mask_colours_may_attend_dark_blue() -> None:
    fig, (ax,) = figures.panels(1)
    mask = np.tril(np.ones((4, 4), dtype=bool))
    image = figures.show_mask(ax, mask, title="causal")
    rgba = image.to_rgba(image.get_array())
    blue, grey = matplotlib.colors.to_rgba(figures.MAY_ATTEND_COLOR), matplotlib.colors.to_rgba(figures.MASKED_COLOR)
    assert tuple(rgba[3, 0]) == pytest.approx(blue) and tuple(rgba[0, 3]) == pytest.approx(grey)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["may attend", "masked"]
    plt.close(fig)


def test_show_mask_refuses_non_boolean_masks() -> None:
    fig, (ax,) = figures.panels(1)
    with pytest.raises(TypeError, match="mask must be boolean"):
        figures.show_mask(ax, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="mask must be 2-D"):
        figures.show_mask(ax, np.zeros(3, dtype=bool))
    plt.close(fig)


def test_static_explore_grid_is_one_column_legible_on_a_phone() -> None:
    """The slider's static grid (the PDF's and JupyterLab's figure): one panel per row at PHONE_WIDTH, its
    smallest text at least 9 px where a phone shows it, and no taller than a printed page."""
    fig = explore(lambda ax, v: (ax.plot([0, 1], [0, v]), ax.set_title(f"v = {v:g}")), "v", [1, 2, 3, 4, 5],
                  mode="static")
    assert len(fig.get_axes()) == 5
    width, height = fig.get_size_inches()
    assert width == pytest.approx(figures.PHONE_WIDTH) and height <= 9.0 + 1e-9
    assert len({round(ax.get_position().x0, 3) for ax in fig.get_axes()}) == 1
    assert figures.text_px_on_phone(fig.figure) >= figures.MIN_TEXT_PX
    assert figures.svg_text_px(_svg(fig.figure)) >= figures.MIN_TEXT_PX
    assert fig.text_px >= figures.MIN_TEXT_PX  # the HTML slider's frames


@pytest.mark.parametrize(("width", "points"), [(figures.PHONE_WIDTH, 9.5), (figures.TEXT_WIDTH, 9.5),
                                              (figures.TEXT_WIDTH, 14.0)])
def test_svg_text_px_reads_the_stored_figure(width: float, points: float) -> None:
    """svg_text_px, reading the SVG a chapter stores, agrees with the figure's own fonts and saved width: the
    smallest text (a 9.5 pt tick label here, or the 14 pt of every text) at PHONE_FIGURE_PX."""
    with plt.rc_context({"font.size": points, "xtick.labelsize": points, "ytick.labelsize": points,
                         "axes.titlesize": points + 2}):
        fig, ax = plt.subplots(figsize=(width, 2.5))
        ax.plot([0, 1], [0, 1])
        ax.set_title(r"$d_{\mathrm{model}}$ and text")  # a subscript is smaller by design: not counted
        fig.draw_without_rendering()
    svg = _svg(fig)
    saved_px = float(__import__("re").search(r'width="([\d.]+)pt"', svg).group(1)) * 96 / 72
    expected = points * 96 / 72 * min(1.0, figures.PHONE_FIGURE_PX / saved_px)
    assert figures.svg_text_px(svg) == pytest.approx(expected, rel=1e-6)
    assert figures.svg_text_px(svg, shown_px=2000) == pytest.approx(points * 96 / 72)  # never shown enlarged
    plt.close(fig)
    assert (figures.svg_text_px(svg) >= figures.MIN_TEXT_PX) == (width == figures.PHONE_WIDTH or points >= 14)


def _svg(fig) -> str:
    import io

    buf = io.StringIO()
    fig.savefig(buf, format="svg", **figures.SVG_SAVEFIG)
    return buf.getvalue()


def test_figures_are_deterministic_svg_with_text_as_paths() -> None:
    """The same figure gives the same SVG bytes twice (nbval and the stored outputs rely on it), with no date
    and no <text> element (a reader's browser needs no font of ours)."""
    figures.use()
    drawn = []
    for _ in range(2):
        fig, (ax,) = figures.panels(1)
        ax.plot([0, 1, 2], [0, 1, 4], label=r"$d_{\mathrm{model}}$")
        ax.set_title("a title")
        ax.legend()
        drawn.append(_svg(fig))
        plt.close(fig)
    assert drawn[0] == drawn[1]
    assert "<dc:date>" not in drawn[0] and "<text" not in drawn[0]


#: How wide a phone shows a figure inside an exercise solution (its box is indented), in CSS px: measured with
#: Chromium in the built book at 390 px (tests/browser/test_layout.py measures every figure where it is shown).
SOLUTION_FIGURE_PX = 275


def _stored_figures():
    """(chapter, cell index, output, shown px) for every figure a chapter stores: shown PHONE_FIGURE_PX wide,
    or SOLUTION_FIGURE_PX between a ``solution-start`` and its ``solution-end``."""
    import json
    from pathlib import Path

    for path in sorted((Path(__file__).resolve().parents[1] / "chapters").glob("*.ipynb")):
        in_solution = False
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "markdown":
                text = "".join(cell["source"])
                for marker in re.findall(r"\{solution-(start|end)\}", text):
                    in_solution = marker == "start"
                continue
            shown = SOLUTION_FIGURE_PX if in_solution else figures.PHONE_FIGURE_PX
            for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
                if any(k.startswith("image/") for k in out.get("data", {})):
                    yield path.stem, i, out, shown


def test_every_stored_figure_is_legible_on_a_phone() -> None:
    """Every figure of every chapter, as stored: its smallest text at least MIN_TEXT_PX (9 px) where a phone
    shows it PHONE_FIGURE_PX wide (SOLUTION_FIGURE_PX in an exercise solution; the browser test measures those
    widths in the built book), and so are the frames of every slider (their ``text_px``, recorded when the
    chapter was executed)."""
    from lib.book.widgets import METADATA_KEY

    small, unmeasured = [], []
    for chapter, i, out, shown in _stored_figures():
        svg = out["data"].get("image/svg+xml")
        if svg is None:
            unmeasured.append(f"{chapter} cell {i}: not SVG")
        else:
            px = figures.svg_text_px("".join(svg) if isinstance(svg, list) else svg, shown_px=shown)
            if px < figures.MIN_TEXT_PX:
                small.append(f"{chapter} cell {i}: {px:.1f} px at {shown} px")
        meta = out.get("metadata", {}).get(METADATA_KEY)
        if meta is not None:
            if "text_px" not in meta:
                unmeasured.append(f"{chapter} cell {i}: slider frames without text_px (re-execute)")
            elif meta["text_px"] < figures.MIN_TEXT_PX:
                small.append(f"{chapter} cell {i}: slider frames {meta['text_px']:.1f} px")
    assert not unmeasured, f"{len(unmeasured)} figures not measured: {unmeasured}"
    assert not small, (f"{len(small)} figures have text under {figures.MIN_TEXT_PX:g} px where a phone shows them "
                       f"(draw them narrower, e.g. PHONE_WIDTH wide, or with larger fonts): {small}")
