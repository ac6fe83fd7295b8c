"""lib.book.figures: the book's one figure style."""

from __future__ import annotations

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


def test_static_explore_uses_the_two_column_grid() -> None:
    fig = explore(lambda ax, v: ax.set_title(f"v = {v:g}"), "v", [1, 2, 3, 4, 5], mode="static")
    assert len(fig.get_axes()) == 5
    assert fig.get_size_inches()[0] == pytest.approx(figures.TEXT_WIDTH)
    assert len({round(ax.get_position().x0, 3) for ax in fig.get_axes()}) == 2


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
