"""Diagrams of the architecture chapters, drawn with matplotlib in the book's style (:mod:`lib.book.figures`).

Each function draws one picture of an idea and returns the figure (or draws into ``ax`` when one is given):

- :func:`multihead_split_concat` -- multi-head attention as data flow: project, split into column blocks,
  attend per head, concatenate, project with ``W_O``;
- :func:`rope_rotations` -- RoPE as rotations of 2-D feature pairs, each pair at its own speed, computed
  with :func:`lib.positional.apply_rope`;
- :func:`layernorm_placement` -- a residual sub-layer with the LayerNorm after the sum (Post-LN) or on the
  sub-layer's input (Pre-LN);
- :func:`transformer_overview` -- the whole encoder-decoder Transformer: the two stacks with their residual
  paths and the mask each attention uses.

The colours follow one key: attention blue, feed-forward green, LayerNorm / add orange, embeddings pink,
the output head grey. Text is 10 pt or more at the column width, so that it stays legible at phone width.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import figures

__all__ = [
    "COLORS",
    "layernorm_placement",
    "multihead_split_concat",
    "rope_rotations",
    "transformer_overview",
]

#: One colour per kind of box, from the book's palette.
COLORS = {
    "attention": figures.PALETTE[0],
    "ffn": figures.PALETTE[2],
    "norm": figures.PALETTE[1],
    "embed": figures.PALETTE[4],
    "head": "#7F7F7F",
    "data": "#404040",
}
_HEAD_COLORS = (figures.PALETTE[0], figures.PALETTE[1], figures.PALETTE[2], figures.PALETTE[3])
_FONT = 10.5


def _light(color: str, amount: float = 0.78) -> tuple[float, float, float]:
    """``color`` mixed with white (``amount`` = share of white)."""
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


def _canvas(ax: Any, width: float, height: float, xlim: tuple[float, float], ylim: tuple[float, float]):
    import matplotlib.pyplot as plt

    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return (fig if fig is not None else ax.figure), ax


def _box(ax: Any, x: float, y: float, w: float, h: float, text: str, kind: str, *, fontsize: float = _FONT,
         bold: bool = False) -> tuple[float, float, float, float]:
    """A rounded box centred at ``(x, y)``; returns ``(left, bottom, right, top)``."""
    from matplotlib.patches import FancyBboxPatch

    color = COLORS[kind]
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.0,rounding_size=0.12",
                                facecolor=_light(color), edgecolor=color, linewidth=1.6, zorder=2))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, zorder=3,
            fontweight="bold" if bold else "normal")
    return x - w / 2, y - h / 2, x + w / 2, y + h / 2


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], *, color: str = "#404040",
           style: str = "-|>", lw: float = 1.4, connection: str = "arc3", shrink: float = 0.0) -> None:
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color=color, linewidth=lw,
                                 connectionstyle=connection, shrinkA=shrink, shrinkB=shrink, zorder=1))


def _plus(ax: Any, x: float, y: float, r: float = 0.16) -> None:
    """The residual sum: a circle with a plus."""
    from matplotlib.patches import Circle

    ax.add_patch(Circle((x, y), r, facecolor="white", edgecolor=COLORS["data"], linewidth=1.4, zorder=3))
    ax.plot([x - r * 0.6, x + r * 0.6], [y, y], color=COLORS["data"], lw=1.4, zorder=4)
    ax.plot([x, x], [y - r * 0.6, y + r * 0.6], color=COLORS["data"], lw=1.4, zorder=4)


def _residual(ax: Any, x: float, y_from: float, y_to: float, side: float, *, color: str = "#404040") -> None:
    """A residual path: leave the main line at ``y_from``, run beside it at ``x + side``, join at ``y_to``."""
    xs = [x, x + side, x + side, x]
    ys = [y_from, y_from, y_to, y_to]
    ax.plot(xs[:3], ys[:3], color=color, lw=1.4, zorder=1)
    _arrow(ax, (x + side, y_to), (x + 0.17 * np.sign(side), y_to), color=color)


def _matrix(ax: Any, x: float, y: float, w: float, h: float, colors: list[Any], *, label: str | None = None,
            label_below: bool = True, fontsize: float = _FONT) -> tuple[float, float, float, float]:
    """A matrix as a rectangle cut into ``len(colors)`` column blocks (``None`` = one grey block)."""
    from matplotlib.patches import Rectangle

    k = len(colors)
    for i, c in enumerate(colors):
        face = _light(c, 0.45) if c is not None else _light(COLORS["data"], 0.85)
        ax.add_patch(Rectangle((x - w / 2 + i * w / k, y - h / 2), w / k, h, facecolor=face,
                               edgecolor=COLORS["data"], linewidth=1.0, zorder=2))
    if label:
        ty = y - h / 2 - 0.12 if label_below else y + h / 2 + 0.12
        ax.text(x, ty, label, ha="center", va="top" if label_below else "bottom", fontsize=fontsize)
    return x - w / 2, y - h / 2, x + w / 2, y + h / 2


def _mask_icon(ax: Any, x: float, y: float, mask: np.ndarray, size: float = 0.6) -> None:
    """A small boolean mask, centred at ``(x, y)``, in the book's convention (dark blue = may attend)."""
    from matplotlib.patches import Rectangle

    m = np.asarray(mask, dtype=bool)
    n_r, n_c = m.shape
    cell = size / max(n_r, n_c)
    x0, y0 = x - cell * n_c / 2, y + cell * n_r / 2
    for i in range(n_r):
        for j in range(n_c):
            ax.add_patch(Rectangle((x0 + j * cell, y0 - (i + 1) * cell), cell, cell,
                                   facecolor=figures.MAY_ATTEND_COLOR if m[i, j] else figures.MASKED_COLOR,
                                   edgecolor="white", linewidth=0.6, zorder=3))


def multihead_split_concat(ax: Any = None, h: int = 4):
    """Multi-head attention as data flow, top to bottom: ``X`` is projected to ``Q, K, V``; column block ``i``
    of each is head ``i``'s input; each head attends on its own; the ``h`` outputs are concatenated and
    multiplied by ``W_O``. Colours mark the heads. Drawn tall and narrow (the saved figure is its tight box,
    about 4.9 inches wide), so that its text stays legible on a phone."""
    from matplotlib.patches import FancyBboxPatch

    fig, ax = _canvas(ax, figures.TEXT_WIDTH, 5.6, (0.0, 10.0), (-0.2, 11.0))
    heads = [_HEAD_COLORS[i % len(_HEAD_COLORS)] for i in range(h)]
    x_mid = 4.5
    _matrix(ax, x_mid, 10.3, 1.0, 1.0, [None])
    ax.text(x_mid + 0.7, 10.3, "$X$ ($n \\times d_{\\mathrm{model}}$)", ha="left", va="center", fontsize=_FONT)
    y_qkv = 7.8
    xs = {"Q": 1.5, "K": x_mid, "V": 7.4}
    widths = {"Q": 1.6, "K": 1.6, "V": 2.0}
    w_label = {"Q": (2.6, 9.05, "right"), "K": (x_mid + 0.15, 8.95, "left"), "V": (6.4, 9.05, "left")}
    for name, x in xs.items():
        _arrow(ax, (x_mid, 9.8), (x, y_qkv + 0.47))
        lx, ly, ha = w_label[name]
        ax.text(lx, ly, f"$W_{name}$", fontsize=_FONT, ha=ha, va="center")
        ax.text(x - widths[name] / 2 - 0.15, y_qkv, f"${name}$", ha="right", va="center", fontsize=_FONT + 1)
        _matrix(ax, x, y_qkv, widths[name], 0.9, heads, label=None)
    y_head = 5.0
    x_heads = np.linspace(1.2, 7.8, h)
    for i, (x, c) in enumerate(zip(x_heads, heads, strict=True)):
        ax.add_patch(FancyBboxPatch((x - 0.75, y_head - 0.3), 1.5, 0.6,
                                    boxstyle="round,pad=0.0,rounding_size=0.12", facecolor=_light(c, 0.7),
                                    edgecolor=c, linewidth=1.6, zorder=2))
        ax.text(x, y_head, f"head {i + 1}", ha="center", va="center", fontsize=_FONT, zorder=3)
        for name, xm in xs.items():
            xb = xm - widths[name] / 2 + widths[name] * (i + 0.5) / h
            _arrow(ax, (xb, y_qkv - 0.45), (x, y_head + 0.3), color=c, lw=0.8, style="-")
        x_stripe = x_mid - 1.0 + 2.0 * (i + 0.5) / h
        _arrow(ax, (x, y_head - 0.3), (x_stripe, 3.05), color=c, lw=1.2)
    # the labels sit beside the fan and the arrows, never on them
    ax.text(8.55, y_qkv, "$h$ blocks,\n$d_k$ wide\n($V$: $d_v$)", ha="left", va="center", fontsize=_FONT - 0.5,
            linespacing=1.15)
    ax.text(1.75, 2.45, "head $i$:\nsoftmax$(Q_iK_i^\\top\\!/\\sqrt{d_k})\\,V_i$", ha="center", va="center",
            fontsize=_FONT - 0.5, linespacing=1.3)
    _matrix(ax, x_mid, 2.6, 2.0, 0.9, heads)
    ax.text(x_mid + 1.2, 2.6, "Concat\n$n \\times h d_v$", ha="left", va="center", fontsize=_FONT)
    _arrow(ax, (x_mid, 2.15), (x_mid, 0.95))
    ax.text(x_mid + 0.2, 1.55, "$W_O$ ($h d_v \\times d_{\\mathrm{model}}$)", ha="left", va="center",
            fontsize=_FONT)
    _matrix(ax, x_mid, 0.45, 1.0, 0.9, [None])
    ax.text(x_mid + 0.7, 0.45, "output ($n \\times d_{\\mathrm{model}}$)", ha="left", va="center",
            fontsize=_FONT)
    return fig


def rope_rotations(ax: Any = None, d: int = 8, positions: tuple[int, ...] = (0, 1, 2, 3), base: float = 10.0):
    """RoPE as rotations: a ``d``-wide vector is ``d/2`` points in the plane; at position ``m`` pair ``i``
    is turned by the angle ``m * theta_i``, computed here with :func:`lib.positional.apply_rope`.

    A small ``base`` makes the slower pairs visibly turn within a few positions (the book's models use
    ``10000``; the picture is the same with smaller angles)."""
    import matplotlib.pyplot as plt

    from ..positional import apply_rope, sinusoid_frequencies

    pairs = d // 2
    if ax is None:
        fig, axes = plt.subplots(1, pairs, figsize=(figures.TEXT_WIDTH, 2.3))
    else:
        axes, fig = list(np.atleast_1d(ax)), np.atleast_1d(ax)[0].figure
    x = np.tile([1.0, 0.0], pairs)  # every pair starts on the horizontal axis
    rotated = apply_rope(np.broadcast_to(x, (len(positions), d)), np.array(positions), base)
    theta = sinusoid_frequencies(d, base)
    shades = np.linspace(0.35, 1.0, len(positions))  # the first arrow pale but visible (contrast 1.7:1)
    t = np.linspace(0, 2 * np.pi, 200)
    for i, a in enumerate(axes):
        a.plot(np.cos(t), np.sin(t), color="#BBBBBB", lw=1.0)
        tips = rotated[:, 2 * i:2 * i + 2]
        for m, s, (px, py), spot in zip(positions, shades, tips, _label_spots(tips), strict=True):
            a.annotate("", xy=(px, py), xytext=(0, 0),
                       arrowprops=dict(arrowstyle="-|>", color=_mix(COLORS["attention"], s), lw=1.8))
            if spot is not None:  # the shades order the arrows; the numbers, in the full colour, stay legible
                a.text(*spot, f"{m}", ha="center", va="center", fontsize=_FONT - 0.5, color=COLORS["attention"])
        lim = _LABEL_RADII[-1] + 0.15
        a.set_xlim(-lim, lim)
        a.set_ylim(-lim, lim)
        a.set_aspect("equal")
        a.axis("off")
        a.set_title(f"pair {i}\n$\\theta_{i} = {theta[i]:.2f}$", fontsize=_FONT)
    return fig


_LABEL_RADII = (1.25, 1.55)  # the rings a position's number may sit on, outside the unit circle of the arrows
_LABEL_GAP = 0.42  # the least distance between two numbers' centres (a number is about 0.3 high)


def _label_spots(tips: np.ndarray) -> list[tuple[float, float] | None]:
    """Where to write the number of each arrow ``tips[k]`` (unit vectors), on the arrow's line: the last arrow's
    on the inner ring, then the others in order on the first ring that keeps ``_LABEL_GAP`` from the numbers
    already placed, or nowhere (None) if neither does. So the last arrow is always numbered and the others,
    the first included, where there is room; arrows a small angle apart are told apart by their shades."""
    if len(tips) == 0:
        return []
    spots: list[tuple[float, float] | None] = [None] * len(tips)
    placed: list[tuple[float, float]] = []
    for k in [len(tips) - 1, *range(len(tips) - 1)]:
        for r in _LABEL_RADII:
            x, y = r * tips[k][0], r * tips[k][1]
            if all(np.hypot(x - sx, y - sy) >= _LABEL_GAP for sx, sy in placed):
                spots[k] = (x, y)
                placed.append((x, y))
                break
    return spots


def _mix(color: str, s: float) -> tuple[float, float, float]:
    return _light(color, 1.0 - s)


def layernorm_placement(ax: Any = None):
    """One residual sub-layer ``F`` (attention or feed-forward) in the two placements of the LayerNorm:
    Post-LN normalises the sum, ``LN(x + F(x))``; Pre-LN normalises the sub-layer's input and leaves the
    residual path untouched, ``x + F(LN(x))``."""
    import matplotlib.pyplot as plt

    if ax is None:
        # the column's width, the two panels side by side in its middle: the saved figure (its tight box) is
        # narrow, so that its text stays legible on a phone
        fig, axes = plt.subplots(1, 2, figsize=(figures.TEXT_WIDTH, 3.6), layout="none")
        fig.subplots_adjust(left=0.15, right=0.85, top=0.9, bottom=0.02, wspace=0.0)
    else:
        axes, fig = list(ax), ax[0].figure
    for a, title in zip(axes, ("Post-LN", "Pre-LN"), strict=True):
        a.set_xlim(-2.2, 2.2)
        a.set_ylim(-0.4, 6.4)
        a.set_aspect("equal")
        a.axis("off")
        a.set_title(title, fontsize=_FONT + 1)
        a.text(0, -0.2, "$x_l$", ha="center", va="center", fontsize=_FONT + 1)
        a.text(0, 6.2, "$x_{l+1}$", ha="center", va="center", fontsize=_FONT + 1)
    post, pre = axes
    # Post-LN: x -> F -> (+) -> LN -> out; the residual joins before the LN
    _arrow(post, (0, 0.05), (0, 1.3))
    _box(post, 0, 1.75, 2.8, 0.9, "$F$\n(attention or FFN)", "attention", fontsize=_FONT - 0.5)
    _arrow(post, (0, 2.2), (0, 3.3))
    _plus(post, 0, 3.5)
    _residual(post, 0, 0.6, 3.5, -1.6)
    _arrow(post, (0, 3.66), (0, 4.25))
    _box(post, 0, 4.65, 1.6, 0.75, "LayerNorm", "norm")
    _arrow(post, (0, 5.03), (0, 6.0))
    post.text(-1.75, 2.05, "residual", rotation=90, ha="center", va="center", fontsize=_FONT - 1)
    # Pre-LN: x -> LN -> F -> (+) -> out; the residual skips both
    _arrow(pre, (0, 0.05), (0, 1.05))
    _box(pre, 0, 1.45, 1.6, 0.75, "LayerNorm", "norm")
    _arrow(pre, (0, 1.83), (0, 2.6))
    _box(pre, 0, 3.05, 2.8, 0.9, "$F$\n(attention or FFN)", "attention", fontsize=_FONT - 0.5)
    _arrow(pre, (0, 3.5), (0, 4.45))
    _plus(pre, 0, 4.65)
    _residual(pre, 0, 0.6, 4.65, -1.6)
    _arrow(pre, (0, 4.81), (0, 6.0))
    pre.text(-1.75, 2.6, "residual (identity)", rotation=90, ha="center", va="center", fontsize=_FONT - 1)
    return fig


def _sublayer(ax: Any, x: float, y: float, text: str, kind: str, w: float, side: float,
              mask: tuple[np.ndarray, str] | None = None, box_h: float = 0.7) -> float:
    """Draw ``text`` box at height ``y``, then an add-and-LayerNorm box above it with a residual path on
    ``side``; returns the top of the add-and-LayerNorm box."""
    _box(ax, x, y, w, box_h, text, kind)
    y_norm = y + box_h / 2 + 0.55
    _arrow(ax, (x, y + box_h / 2), (x, y_norm - 0.25))
    _box(ax, x, y_norm, w, 0.5, "add & LayerNorm", "norm")
    _residual(ax, x, y - box_h / 2 - 0.2, y_norm, side)
    if mask is not None:
        xm = x + (w / 2 + 0.48) * np.sign(-side)
        _mask_icon(ax, xm, y + 0.1, mask[0], size=0.5)
        ax.text(xm, y - 0.3, mask[1], ha="center", va="top", fontsize=_FONT)
    return y_norm + 0.25


def _encoder_column(ax: Any, x: float, y0: float, w: float) -> tuple[float, float]:
    """The encoder layer's two sub-layers starting at ``y0``, residual paths on the left and the padding mask
    on the right; returns (top, y of the attention box)."""
    pad = (np.array([[1, 1, 1, 0]] * 4, dtype=bool), "padding")
    y_att = y0 + 0.55
    _arrow(ax, (x, y0 - 0.3), (x, y_att - 0.35))
    top = _sublayer(ax, x, y_att, "multi-head\nself-attention", "attention", w, -w / 2 - 0.35, pad)
    y_ffn = top + 0.75
    _arrow(ax, (x, top), (x, y_ffn - 0.35))
    top = _sublayer(ax, x, y_ffn, "feed-forward", "ffn", w, -w / 2 - 0.35)
    return top, y_att


def _decoder_column(ax: Any, x: float, y0: float, w: float) -> tuple[float, float]:
    """The decoder layer's three sub-layers, residual paths on the left and masks on the right; returns (top,
    y of the cross-attention box)."""
    causal = (np.tril(np.ones((4, 4), dtype=bool)), "causal")
    cross = (np.array([[1, 1, 1, 0]] * 4, dtype=bool), "padding")
    y_self = y0 + 0.55
    _arrow(ax, (x, y0 - 0.3), (x, y_self - 0.35))
    top = _sublayer(ax, x, y_self, "masked multi-head\nself-attention", "attention", w, -w / 2 - 0.35, causal)
    y_cross = top + 0.75
    _arrow(ax, (x, top), (x, y_cross - 0.35))
    top = _sublayer(ax, x, y_cross, "cross-attention\n(keys, values: $E$)", "attention", w, -w / 2 - 0.35,
                    cross)
    y_ffn = top + 0.75
    _arrow(ax, (x, top), (x, y_ffn - 0.35))
    top = _sublayer(ax, x, y_ffn, "feed-forward", "ffn", w, -w / 2 - 0.35)
    return top, y_cross


def transformer_overview(ax: Any = None):
    """The encoder-decoder Transformer as a whole, Post-LN as in the original: token embeddings plus positional
    encodings, a stack of ``L`` encoder layers, a stack of ``L`` decoder layers whose cross-attention reads the
    encoder's output ``E``, and the output head (a linear map to the vocabulary, tied to the embedding, and a
    softmax) that gives the next token's probabilities. Each sub-layer has a residual path (left) into an
    add-and-LayerNorm; the small grids (right) are the masks each attention uses (dark blue = may attend):
    source padding for the encoder's self-attention and the cross-attention, causal (with target padding) for
    the decoder's self-attention."""
    from matplotlib.patches import FancyBboxPatch

    # x limits hug the drawing: the saved figure is its tight box, narrow enough to stay legible on a phone
    fig, ax = _canvas(ax, figures.TEXT_WIDTH, 6.0, (-0.1, 10.1), (-1.4, 10.0))
    xe, xd, w = 2.05, 7.35, 2.9
    left, right = w / 2 + 0.55, w / 2 + 1.2  # the stack's dashed frame: residual paths left, masks right
    for x, label in ((xe, "source tokens"), (xd, "target tokens\n(shifted right)")):
        ax.text(x, -1.0, label, ha="center", va="center", fontsize=_FONT)
        _arrow(ax, (x, -0.65), (x, -0.3))
        _box(ax, x, 0.0, w, 0.6, "embedding + position", "embed")
    y0 = 1.0
    top_e, _ = _encoder_column(ax, xe, y0, w)
    top_d, y_cross = _decoder_column(ax, xd, y0, w)
    for x, top, name in ((xe, top_e, "encoder"), (xd, top_d, "decoder")):
        ax.add_patch(FancyBboxPatch((x - left, y0 - 0.1), left + right, top - y0 + 0.3,
                                    boxstyle="round,pad=0.0,rounding_size=0.2", facecolor="none",
                                    edgecolor="#999999", linewidth=1.2, linestyle="--", zorder=0))
        ax.text(x - left, 0.68, name, ha="left", va="center", fontsize=_FONT + 1, fontweight="bold")
        ax.text(x + right, 0.68, "$\\times L$", ha="right", va="center", fontsize=_FONT + 1)
    _arrow(ax, (xe, 0.3), (xe, y0 + 0.25))
    _arrow(ax, (xd, 0.3), (xd, y0 + 0.25))
    ax.text(xe, top_e + 0.75, "encoder output $E$", ha="center", va="center", fontsize=_FONT)
    _arrow(ax, (xe, top_e), (xe, top_e + 0.55))
    _arrow(ax, (xe + 1.3, top_e + 0.75), (xd - w / 2, y_cross), connection="arc3,rad=-0.3",
           color=COLORS["attention"])
    y_lin = top_d + 0.75
    _arrow(ax, (xd, top_d), (xd, y_lin - 0.3))
    _box(ax, xd, y_lin, w + 0.9, 0.6, "linear (tied to embedding)", "head")
    y_soft = y_lin + 0.95
    _arrow(ax, (xd, y_lin + 0.3), (xd, y_soft - 0.3))
    _box(ax, xd, y_soft, w, 0.6, "softmax", "head")
    ax.text(xd, y_soft + 0.7, "next-token probabilities", ha="center", va="center", fontsize=_FONT)
    _arrow(ax, (xd, y_soft + 0.3), (xd, y_soft + 0.5))
    return fig
