"""Diagrams of the KV cache and of a capacity plan, drawn with matplotlib in the book's figure style.

- :func:`cache_growth` -- decoding step by step: at step ``t`` the new token's query reads the keys and values of
  the ``t`` tokens so far, and the cache gains one key and one value per layer. Returns the cached tokens per step.
- :func:`cache_width` -- what one token adds to one layer's cache under multi-head, grouped-query, multi-query and
  latent attention, as bars of elements. Returns the widths drawn.
- :func:`gpu_stacks` -- a serving plan as one column per GPU: weights, engine overhead and cache stacked against
  the share of the card the engine may use. Returns each column's total.

A diagram is a function of an ``Axes`` that returns what it drew, so a chapter can check the picture against the
numbers it computed.
"""

from __future__ import annotations

from typing import Any

from matplotlib.patches import Rectangle

from lib.book import figures

__all__ = ["cache_growth", "cache_width", "gpu_stacks"]


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


def gpu_stacks(ax: Any, columns: list[dict[str, float]], usable: float, label: str = "GiB") -> list[float]:
    """One column per GPU: its ``weights``, ``overhead`` and ``cache`` stacked; a dashed line at ``usable``."""
    parts = [("weights", figures.PALETTE[0]), ("overhead", figures.PALETTE[3]), ("cache", figures.PALETTE[2])]
    totals = []
    for i, col in enumerate(columns):
        bottom = 0.0
        for key, color in parts:
            h = col.get(key, 0.0)
            ax.bar(i, h, bottom=bottom, color=color, width=0.7, label=key if i == 0 else None)
            bottom += h
        totals.append(bottom)
    ax.axhline(usable, color="grey", ls="--", lw=1, label="the engine's share of a card")
    ax.set_xticks(range(len(columns)), [f"GPU {i + 1}" for i in range(len(columns))])
    ax.set_ylabel(label)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=2, fontsize=9, frameon=False)
    return totals
