"""Diagrams of the KV cache and of a capacity plan, drawn with matplotlib in the book's figure style.

- :func:`cache_growth` -- decoding step by step: at step ``t`` the new token's query reads the keys and values of
  the ``t`` tokens so far, and the cache gains one key and one value per layer. Returns the cached tokens per step.
- :func:`cache_width` -- what one token adds to one layer's cache under multi-head, grouped-query, multi-query and
  latent attention, as bars of elements. Returns the widths drawn.
- :func:`gpu_budget` -- the memory budget of one GPU under a serving engine's accounting: the CUDA total, the
  engine's share of it, and what that share holds (weights, activation peak, non-torch memory, KV cache), as one
  labelled column. Returns the boundaries it drew.

A diagram is a function of an ``Axes`` that returns what it drew, so a chapter can check the picture against the
numbers it computed.
"""

from __future__ import annotations

from typing import Any

from matplotlib.patches import Rectangle

from lib.book import figures

__all__ = ["cache_growth", "cache_width", "gpu_budget"]


def cache_growth(ax: Any, steps: int = 6) -> list[int]:
    """Rows are decoding steps 1..``steps``; row ``t`` shows the ``t`` cached (key, value) pairs the new token
    reads, the newest one highlighted. Returns the cached tokens per step, ``[1, 2, ..., steps]``."""
    cached = []
    for t in range(1, steps + 1):
        y = steps - t
        for j in range(t):
            new = j == t - 1
            color = figures.PALETTE[1] if new else figures.PALETTE[0]
            ax.add_patch(Rectangle((j, y + 0.1), 0.9, 0.8, color=color, alpha=0.9 if new else 0.55))
        ax.text(-0.3, y + 0.5, f"step {t}", ha="right", va="center", fontsize=11)
        ax.text(t + 0.1, y + 0.5, f"{t} cached", ha="left", va="center", fontsize=10)
        cached.append(t)
    ax.set_xlim(-2.2, steps + 2.2)
    ax.set_ylim(-0.2, steps + 0.2)
    ax.set_axis_off()
    ax.text(steps / 2, -0.15, "token position (one K and one V per layer each)", ha="center", va="top",
            fontsize=10)
    return cached


def cache_width(ax: Any, widths: dict[str, int]) -> dict[str, int]:
    """Horizontal bars: elements one token adds to one layer's cache, one bar per attention layout."""
    names = list(widths)
    ax.barh(names, [widths[n] for n in names], color=[figures.PALETTE[i % 4] for i in range(len(names))])
    for i, n in enumerate(names):
        ax.text(widths[n], i, f" {widths[n]:,}", va="center", fontsize=10)
    ax.invert_yaxis()
    ax.set_xlabel("elements cached per token and layer")
    ax.set_xlim(0, max(widths.values()) * 1.25)
    return dict(widths)


def gpu_budget(ax: Any, parts: dict[str, float], total: float, share: float, *, unit: str = "GiB",
               min_gap: float | None = None) -> list[float]:
    """One GPU's memory as a column from 0 to ``total``: the ``parts`` stacked from the bottom in order (weights,
    activation peak, non-torch memory, KV cache, say), then the headroom from ``share`` to ``total`` hatched.

    Each part is labelled on the right with its size (labels spread at least ``min_gap`` apart, with a leader
    line to their part); brackets on the left mark the engine's share and the total. Returns the boundaries
    drawn, ``[0, p1, p1 + p2, ..., share, total]``; the parts must sum to ``share`` (within 1e-9 relative).
    """
    values = [float(v) for v in parts.values()]
    if any(v < 0 for v in values):
        raise ValueError(f"parts must be non-negative, got {parts}")
    if abs(sum(values) - share) > 1e-9 * max(1.0, share):
        raise ValueError(f"the parts sum to {sum(values)}, not to the engine's share {share}")
    if not 0 < share <= total:
        raise ValueError(f"share must be in (0, total], got share={share}, total={total}")
    gap = total / 11 if min_gap is None else min_gap
    colours = [figures.PALETTE[0], figures.PALETTE[3], figures.PALETTE[4], figures.PALETTE[2],
               figures.PALETTE[1], figures.PALETTE[5]]
    bounds, bottom, mids = [0.0], 0.0, []
    for (_name, h), colour in zip(parts.items(), colours, strict=False):
        ax.add_patch(Rectangle((0, bottom), 1, h, facecolor=colour, edgecolor="white", lw=0.8))
        mids.append(bottom + h / 2)
        bottom += h
        bounds.append(bottom)
    ax.add_patch(Rectangle((0, share), 1, total - share, facecolor="white", edgecolor="0.5", hatch="///",
                           lw=0.8))
    bounds.append(float(total))
    labels = [f"{name}: {v:.2f} {unit}" for name, v in parts.items()]
    labels.append(f"headroom: {total - share:.2f} {unit}")
    mids.append((share + total) / 2)
    ys = []  # spread the labels upwards, then shift them down if the last one left the column's range
    for m in mids:
        ys.append(max(m, ys[-1] + gap) if ys else m)
    over = ys[-1] - total
    if over > 0:
        ys = [max(y - over, lo) for y, lo in zip(ys, [i * gap for i in range(len(ys))], strict=True)]
    for m, y, text in zip(mids, ys, labels, strict=True):
        ax.plot([1.02, 1.18], [m, y], color="0.4", lw=0.7)
        ax.text(1.22, y, text, va="center", ha="left", fontsize=10)
    ax.plot([-0.1, -0.1], [0, share], color="0.2", lw=1.0)  # a bracket over the engine's share
    for y in (0, share):
        ax.plot([-0.14, -0.06], [y, y], color="0.2", lw=1.0)
    ax.text(-0.18, share / 2, f"engine's\nshare\n{share:.2f} {unit}", va="center", ha="right", fontsize=10)
    ax.plot([-0.14, 1.0], [total, total], color="0.2", lw=1.0)
    ax.text(-0.18, total, f"CUDA total\n{total:.2f} {unit}", va="center", ha="right", fontsize=10)
    ax.set_xlim(-1.1, 2.9)
    ax.set_ylim(0, total * 1.04)
    ax.set_axis_off()
    return bounds
