"""Diagrams of the chapter *Before and beyond attention*, drawn with matplotlib in the book's figure style.

- :func:`gradient_paths` -- how far a gradient travels from output ``t`` back to token 1: through the chain
  of a recurrent network (``t - 1`` Jacobian factors) and through one attention layer (one step whose size
  is the weight ``a_t1``).

A diagram is a function of an ``Axes`` that returns what it drew, so the chapter can check the picture
against its equations. The chapter draws its plots :data:`PHONE_WIDTH` inches wide with the fonts of
:data:`PHONE_TEXT`, so that their smallest text stays above 9 px where a phone shows a figure 342 px wide
(:data:`lib.book.figures.PHONE_FIGURE_PX`): 10 pt at 5.0 in (5.1 in as saved) is 10 * 96/72 * 342 / (96 * 5.1)
= 9.3 px.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PHONE_TEXT", "PHONE_WIDTH", "gradient_paths"]

#: Width, in inches, of the chapter's plots: narrow enough that :data:`PHONE_TEXT` stays legible on a phone.
PHONE_WIDTH = 5.0
#: rcParams of those plots: no text under 10 pt.
PHONE_TEXT = {"font.size": 10.5, "axes.labelsize": 10.5, "axes.titlesize": 11, "xtick.labelsize": 10,
              "ytick.labelsize": 10, "legend.fontsize": 10}

_STATE = "#DCEBF7"  # light tint of the palette's blue: states and values
_OUTPUT = "#D9F0E6"  # light tint of the palette's green: the output the loss reads
_GRADIENT = "#D55E00"  # the palette's vermilion: the backward path


def _node(ax: Any, x: float, y: float, text: str, color: str) -> None:
    from matplotlib.patches import FancyBboxPatch

    w, h = 1.15, 0.8
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.12",
                                fc=color, ec="0.25", lw=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=13)


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], *, color: str = "0.3",
           ls: str = "-", rad: float = 0.0, lw: float = 1.4) -> None:
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=lw, ls=ls, shrinkA=0, shrinkB=0,
                                connectionstyle=f"arc3,rad={rad}"))


def gradient_paths(ax: Any) -> dict[str, int]:
    """Draw the two gradient paths on ``ax``: a recurrence (top) and one attention layer (bottom).

    Top: states ``h_1 -> h_2 -> h_3 -> ... -> h_t``, each arrow one step of the recurrence; the gradient of a
    loss at ``h_t`` comes back along the same chain, one factor ``J_s^T`` per step. Bottom: values
    ``v_1 .. v_t`` each joined to the output ``o_t`` by one arrow of weight ``a_tj``. Five positions are
    drawn (``t = 5``); returns the arrows between token 1 and position ``t`` on each path:
    ``{"recurrence": 4, "attention": 1}``, that is ``t - 1`` and 1.
    """
    ax.set_xlim(-0.9, 10.2)
    ax.set_ylim(-0.2, 7.4)
    ax.set_axis_off()
    xs = [0.6, 2.6, 4.6, 6.6, 8.6]
    labels = ["1", "2", "3", r"\cdots", "t"]

    # recurrence: a chain of states
    y_r = 5.6
    ax.text(-0.8, 7.1, "recurrence", fontsize=12, weight="bold", va="center")
    steps_r = 0
    for i, (x, lab) in enumerate(zip(xs, labels, strict=True)):
        if lab == r"\cdots":
            ax.text(x, y_r, r"$\cdots$", ha="center", va="center", fontsize=14)
        else:
            _node(ax, x, y_r, f"$h_{{{lab}}}$", _OUTPUT if lab == "t" else _STATE)
        if i:
            _arrow(ax, (xs[i - 1] + 0.62, y_r), (x - 0.62, y_r))
            steps_r += 1
    _arrow(ax, (xs[-1], y_r + 0.45), (xs[0], y_r + 0.45), color=_GRADIENT, ls="--", rad=0.18, lw=1.6)
    ax.text(4.6, 4.55, r"gradient: $t - 1$ factors $J_s^\top$, one per step", ha="center", va="center",
            fontsize=11.5, color=_GRADIENT)

    # attention: every value joined to the output in one step
    y_v, y_o = 0.6, 3.0
    ax.text(-0.8, 3.75, "attention", fontsize=12, weight="bold", va="center")
    _node(ax, xs[-1], y_o, "$o_t$", _OUTPUT)
    steps_a = 0
    for x, lab in zip(xs, labels, strict=True):
        if lab == r"\cdots":
            ax.text(x, y_v, r"$\cdots$", ha="center", va="center", fontsize=14)
            continue
        _node(ax, x, y_v, f"$v_{{{lab}}}$", _STATE)
        first = lab == "1"
        _arrow(ax, (x + 0.25, y_v + 0.42), (xs[-1] - 0.3 if x < xs[-1] else x, y_o - 0.42),
               color=_GRADIENT if first else "0.3", lw=1.8 if first else 1.4)
        steps_a += first
    ax.text(2.1, 2.55, r"one step of size $a_{t1}$", ha="center", va="center", fontsize=11.5, color=_GRADIENT)
    return {"recurrence": steps_r, "attention": steps_a}
