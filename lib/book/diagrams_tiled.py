"""Diagrams of the cost chapters, drawn with matplotlib in the book's style (:mod:`lib.book.figures`).

- :func:`tiled_forward` -- the tiled forward pass: one block of queries walks over the key tiles, and its
  running maximum ``m``, running sum ``l`` and running output are updated tile by tile (chapter
  "Exact attention without the n x n matrix").
- :func:`running_weights` -- one query row after some of its key tiles: the weights the running statistics
  give the keys seen so far, against the softmax over all keys (the chapter's slider over the keys seen).
- :func:`layer_flops` -- where one layer's FLOPs go: the matrix products of the attention sub-layer and
  of the feed-forward block, and their shares at several sequence lengths (chapter on FLOPs).

Each function draws from numbers it is given (computed by the chapter) and returns the figure; the chapter
gives it a number and a caption in its cell metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import figures

__all__ = ["LARGE_TEXT", "layer_flops", "running_weights", "tiled_forward"]

_GREY = "0.35"

#: rcParams for a full-width plot whose text must stay legible when the page is a phone's width (about half
#: the figure's own size): a chapter draws such a plot inside ``plt.rc_context(LARGE_TEXT)``.
LARGE_TEXT = {"font.size": 13.5, "axes.labelsize": 13.5, "axes.titlesize": 13.5, "xtick.labelsize": 12.5,
              "ytick.labelsize": 12.5, "legend.fontsize": 12}


def _box(ax, x, y, w, h, text, *, face, edge="0.2", color="black", size=10.5, lw=1.0, alpha=1.0):
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", fc=face,
                                ec=edge, lw=lw, alpha=alpha))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", color=color, fontsize=size)


def _arrow(ax, start, end, *, color=_GREY, lw=1.4, style="-|>"):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle=style, color=color, lw=lw, shrinkA=0, shrinkB=0))


def tiled_forward(logits: Sequence[float], tile: int, running_max: Sequence[float],
                  running_sum: Sequence[float], *, n_query_blocks: int = 4):
    """The tiled forward pass (top) and, for one query row, its running statistics after each tile (bottom).

    ``logits`` are one query row's scaled logits over all keys, cut into tiles of ``tile`` keys;
    ``running_max[t]`` and ``running_sum[t]`` are ``m`` and ``l`` after the tiles ``0..t`` (as the chapter's
    code computes them). The top panel shows the score matrix as query blocks by key tiles: the highlighted
    query block visits its key tiles left to right, holding only one tile of scores at a time and carrying
    ``(m, l, o)`` from tile to tile.
    """
    import matplotlib.pyplot as plt

    s = np.asarray(logits, dtype=float)
    m = np.asarray(running_max, dtype=float)
    ell = np.asarray(running_sum, dtype=float)
    n_tiles = -(-s.size // tile)
    if m.shape != (n_tiles,) or ell.shape != (n_tiles,):
        raise ValueError(f"running_max and running_sum need one value per tile ({n_tiles}), "
                         f"got {m.shape} and {ell.shape}")
    fig = plt.figure(figsize=(figures.TEXT_WIDTH, 9.6))
    grid = fig.add_gridspec(3, 1, height_ratios=[2.1, 1.0, 0.8])
    ax = fig.add_subplot(grid[0])
    _schedule_panel(ax, n_tiles, n_query_blocks)
    ax1 = fig.add_subplot(grid[1])
    ax2 = fig.add_subplot(grid[2], sharex=ax1)
    _statistics_panels(ax1, ax2, s, tile, m, ell)
    return fig


def running_weights(ax, logits: Sequence[float], tile: int, keys_seen: int) -> tuple[float, float, np.ndarray]:
    """One query row after its first ``keys_seen`` keys (whole tiles of ``tile`` keys): the running weights.

    The running maximum ``m`` and sum ``l`` are updated tile by tile as in the chapter's loop; the keys seen
    get the weights ``exp(s_j - m) / l`` (blue bars), the softmax over the keys seen so far. Grey outlines are
    the softmax over all keys, the answer the loop reaches after its last tile; grey lines are tile boundaries.
    Returns ``(m, l, weights)`` for the keys seen, so the chapter can check the picture against its numbers.
    """
    s = np.asarray(logits, dtype=float)
    seen = int(keys_seen)
    if seen % tile or not 0 < seen <= s.size:
        raise ValueError(f"keys_seen must be a whole number of tiles of {tile} in (0, {s.size}], got {keys_seen!r}")
    m, ell, top, stages = -np.inf, 0.0, 0.0, {}
    for j in range(0, s.size, tile):  # the update of the chapter's attend_block, for one row
        m_new = max(m, float(s[j:j + tile].max()))
        ell = np.exp(m - m_new) * ell + float(np.exp(s[j:j + tile] - m_new).sum())
        m = m_new
        stages[j + tile] = (m, ell)
        top = max(top, float(np.exp(s[:j + tile].max() - m)) / ell)  # the largest bar of any stage
    m, ell = stages[seen]
    weights = np.exp(s[:seen] - m) / ell
    final = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    keys = np.arange(s.size)
    ax.bar(keys, final, width=0.8, fc="none", ec="0.55", lw=1.0, label="softmax, all keys")
    ax.bar(keys[:seen], weights, width=0.8, color=figures.PALETTE[0], label="running")
    for t in range(tile, s.size, tile):
        ax.axvline(t - 0.5, color="0.8", lw=0.8, zorder=0)
    if seen < s.size:
        ax.axvspan(seen - 0.5, s.size - 0.5, color="0.93", zorder=0)
    ax.set_ylim(0, 1.45 * top)  # the same scale for every number of keys seen
    ax.set_xlim(-0.6, s.size - 0.4)
    ax.set_xlabel("key $j$", fontsize=12)
    ax.set_ylabel("weight", fontsize=12)
    ax.tick_params(labelsize=11)
    ax.grid(False)
    ax.set_title(f"{seen} keys: $m$ = {m:.2f}, $\\ell$ = {ell:.2f}", fontsize=13)
    ax.legend(loc="upper left", fontsize=10.5)
    return m, ell, weights


def _schedule_panel(ax, n_tiles: int, n_qb: int) -> None:
    # narrow layout: labels above and to the left, the running state below the matrix, so that the panel is
    # about as wide as the score matrix and its text stays legible at phone width
    active = 1  # the highlighted query block
    x0, y0 = 1.3, 0.0  # lower-left corner of the score matrix
    cw, ch = 1.0, 0.62
    top = y0 + n_qb * ch
    x_end = x0 + n_tiles * cw
    # K and V tiles along the top, their label above them
    for j in range(n_tiles):
        _box(ax, x0 + j * cw + 0.05, top + 0.12, cw - 0.1, 0.5, f"$K_{j + 1}, V_{j + 1}$",
             face=figures.PALETTE[5], alpha=0.35, size=14)
    ax.text(x0 + n_tiles * cw / 2, top + 0.72, "key and value tiles", ha="center", va="bottom", fontsize=15)
    # Q blocks down the left
    for i in range(n_qb):
        y = top - (i + 1) * ch
        face = figures.PALETTE[1] if i == active else "0.92"
        _box(ax, 0.3, y + 0.05, 0.9, ch - 0.1, f"$Q_{i + 1}$", face=face, alpha=0.8 if i == active else 1.0, size=15)
    ax.text(0.05, top - n_qb * ch / 2, "queries", rotation=90, ha="center", va="center", fontsize=15)
    # the score matrix, tile by tile
    for i in range(n_qb):
        for j in range(n_tiles):
            x, y = x0 + j * cw, top - (i + 1) * ch
            face = "white" if i != active else ("#FBE3BE" if j != 2 else figures.PALETTE[1])
            _box(ax, x + 0.04, y + 0.04, cw - 0.08, ch - 0.08, "", face=face, edge="0.6", lw=0.8)
    y_act = top - (active + 1) * ch
    ax.text(x0 + 2.5 * cw, y_act + ch * 0.66, "$S'$ tile", ha="center", va="center", fontsize=14)
    for j in range(n_tiles - 1):  # the walk over the key tiles
        _arrow(ax, (x0 + j * cw + 0.62, y_act + 0.17), (x0 + (j + 1) * cw + 0.38, y_act + 0.17),
               color="0.15", lw=1.2)
    # the running state, below the matrix, fed from the end of the active row
    box_top = y0 - 0.3
    _box(ax, x0, box_top - 0.62, n_tiles * cw, 0.62,
         "running state of $Q_2$'s rows: $m$, $\\ell$, $o$", face="#FBE3BE", size=15)
    x_turn = x_end + 0.3
    ax.plot([x_end - 0.02, x_turn, x_turn], [y_act + ch / 2, y_act + ch / 2, box_top - 0.31], color="0.15", lw=1.4)
    _arrow(ax, (x_turn, box_top - 0.31), (x_end + 0.02, box_top - 0.31), color="0.15")
    ax.set_xlim(-0.2, x_turn + 0.2)
    ax.set_ylim(box_top - 0.75, top + 1.25)
    ax.set_aspect("equal")
    ax.axis("off")


def _statistics_panels(ax1, ax2, s: np.ndarray, tile: int, m: np.ndarray, ell: np.ndarray) -> None:
    n_tiles = m.size
    keys = np.arange(s.size)
    for t in range(n_tiles):
        sl = slice(t * tile, min((t + 1) * tile, s.size))
        ax1.plot(keys[sl], s[sl], "o", ms=4.5, color=figures.PALETTE[t % 2 * 5], alpha=0.9)
        if t:
            ax1.axvline(t * tile - 0.5, color="0.75", lw=0.8)
            ax2.axvline(t * tile - 0.5, color="0.75", lw=0.8)
    edges = np.minimum(np.arange(1, n_tiles + 1) * tile, s.size) - 0.5
    starts = np.concatenate([[-0.5], edges[:-1]])
    for t in range(n_tiles):  # each value holds from the end of its tile on
        ax1.hlines(m[t], starts[t], edges[t], color=figures.PALETTE[3], lw=2.2,
                   label="running max $m$" if t == 0 else None)
    ax1.set_ylabel("logit $s_j$")
    ax1.set_title("one query row: logits by tile, $m$ after each tile", fontsize=13)
    ax1.legend(loc="lower right")
    ax1.tick_params(labelbottom=False)
    x = edges
    ax2.plot(x, ell, "s-", color=figures.PALETTE[2], label=r"running sum $\ell$")
    grew = np.flatnonzero(np.diff(m) > 0) + 1
    ax2.plot(x[grew], ell[grew], "o", ms=11, mfc="none", mec=figures.PALETTE[3], mew=1.6,
             label=r"$m$ grew: $\ell$ rescaled by $e^{m_\mathrm{old}-m}$")
    ax2.set_ylim(0, ell.max() * 1.35)
    ax2.set_ylabel(r"$\ell$")
    ax2.set_xlabel("key index $j$ (tile boundaries in grey)")
    ax2.legend(loc="upper left", ncols=1)


def layer_flops(steps: Sequence[tuple[str, str, str]], shares: Mapping[Any, Mapping[str, float]],
                groups: Mapping[str, str]):
    """Where one layer's FLOPs go.

    ``steps`` are the layer's operations in order, ``(label, flops formula, group)``; a group of ``""`` is
    an operation without matrix products (drawn grey). ``shares`` maps a sequence-length label to the share
    of each group in the layer's FLOPs (summing to 1); ``groups`` maps each group to its legend label.
    Top: the data flow, one box per operation, coloured by group. Bottom: the shares as stacked bars.
    """
    import matplotlib.pyplot as plt

    colors = {g: figures.PALETTE[i] for i, g in enumerate(groups)}
    fig = plt.figure(figsize=(figures.TEXT_WIDTH, 6.4))
    grid = fig.add_gridspec(2, 1, height_ratios=[1.05, 1.0])
    ax = fig.add_subplot(grid[0])
    per_row = -(-len(steps) // 2)
    w, h, gap = 1.9, 0.95, 0.45
    for idx, (label, formula, group) in enumerate(steps):
        row, col = divmod(idx, per_row)
        col = col if row == 0 else per_row - 1 - col  # the second row runs back (a snake)
        x, y = col * (w + gap), -row * (h + 0.75)
        face = colors.get(group, "0.9")
        text = label if not formula else f"{label}\n{formula}"
        _box(ax, x, y, w, h, text, face=face, alpha=0.3 if group else 1.0, size=12.5)
        if idx + 1 < len(steps):
            nrow, ncol = divmod(idx + 1, per_row)
            if nrow == row:
                step = 1 if row == 0 else -1
                xa = x + w if step == 1 else x
                _arrow(ax, (xa, y + h / 2), (xa + step * gap, y + h / 2))
            else:
                _arrow(ax, (x + w / 2, y), (x + w / 2, y - 0.75))
    ax.set_xlim(-0.1, per_row * (w + gap) - gap + 0.1)
    ax.set_ylim(-(h + 0.75) - 0.1, h + 0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    bx = fig.add_subplot(grid[1])
    labels = list(shares)
    left = np.zeros(len(labels))
    for g, name in groups.items():
        vals = np.array([shares[lab][g] for lab in labels])
        bx.barh(range(len(labels)), vals, left=left, color=colors[g], label=name, height=0.62)
        for i, v in enumerate(vals):
            if v >= 0.08:
                bx.text(left[i] + v / 2, i, f"{100 * v:.0f}%", ha="center", va="center", fontsize=12,
                        color="white" if g != list(groups)[1] else "black")
        left += vals
    bx.set_yticks(range(len(labels)), [str(lab) for lab in labels])
    bx.invert_yaxis()
    bx.set_xlim(0, 1)
    bx.set_xticks([0, 0.25, 0.5, 0.75, 1], ["0", "25%", "50%", "75%", "100%"])
    bx.set_xlabel("share of the layer's FLOPs")
    bx.set_ylabel("sequence length $n$")
    bx.grid(False)
    bx.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=len(groups))
    return fig
