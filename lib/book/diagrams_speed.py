"""The roofline diagram, drawn with matplotlib in the book's figure style.

- :func:`roofline` -- attainable FLOP/s against arithmetic intensity (FLOP per byte) on log axes: the slanted
  memory roof :math:`I\\beta`, the flat compute roof :math:`\\pi`, the ridge point :math:`\\pi/\\beta` where they
  meet, and named kernels placed at their intensity on the roof. Returns the ridge point and, per kernel, the
  FLOP/s the roof allows it.
- :func:`step_reads` -- what a prefill step and a decode step multiply and read, as blocks: the prompt's rows
  or the batch's rows times one weight matrix, read once per step, and in decode one cache per sequence.

A diagram is a function of an ``Axes`` that returns what it drew, so a chapter can check the picture against the
numbers it computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from lib.book import figures

__all__ = ["roofline", "step_reads"]


def roofline(ax: Any, peak: float, bandwidth: float, kernels: Mapping[str, float], *, unit: float = 1e12,
             unit_name: str = "TFLOP/s", span: tuple[float, float] = (0.25, 1e5)) -> tuple[float, dict[str, float]]:
    """Draw the roofline of a processor of ``peak`` FLOP/s and ``bandwidth`` bytes/s, with each kernel of
    ``kernels`` (name -> intensity, FLOP per byte) as a point on the roof, labelled.

    Returns ``(ridge, attainable)``: the ridge intensity ``peak / bandwidth`` and, per kernel, the roof's FLOP/s
    ``min(peak, intensity * bandwidth)`` at its intensity (in FLOP/s, not in ``unit``).
    """
    if not (peak > 0 and bandwidth > 0):
        raise ValueError(f"peak and bandwidth must be positive, got {peak!r} and {bandwidth!r}")
    ridge = peak / bandwidth
    x = np.geomspace(*span, 400)
    roof = np.minimum(peak, x * bandwidth)
    ax.plot(x, roof / unit, color="k", lw=2)
    ax.fill_between(x, roof / unit, span[0] * bandwidth / unit / 10, color=figures.PALETTE[5], alpha=0.12, lw=0)
    ax.axvline(ridge, color="0.45", ls=":", lw=1.2)
    ax.text(ridge * 1.15, peak / unit * 0.02, f"ridge\n{ridge:.0f} FLOP/B", fontsize=10, color="0.25",
            va="bottom")
    ax.text(span[0] * 1.5, peak / unit * 1.35, "compute roof", fontsize=10, va="bottom")
    x_mem = math.sqrt(span[0] * ridge) / 3  # on the slanted roof, left of the middle, above the line
    ax.text(x_mem, x_mem * bandwidth / unit * 6, "memory\nroof", fontsize=10, ha="right", va="bottom")
    attainable = {}
    colours = [figures.PALETTE[i] for i in (3, 0, 2, 1, 4, 5)]
    for (name, intensity), colour in zip(kernels.items(), colours * 4, strict=False):
        if intensity <= 0:
            raise ValueError(f"kernel {name!r}: intensity must be positive, got {intensity!r}")
        y = min(peak, intensity * bandwidth)
        attainable[name] = y
        ax.plot([intensity], [y / unit], "o", color=colour, ms=8, zorder=3, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*span)
    ax.set_ylim(span[0] * bandwidth / unit, peak / unit * 4)
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel(f"attainable {unit_name}")
    ax.legend(loc="lower right", fontsize=10)
    return ridge, attainable


def step_reads(ax: Any, n_prompt: int = 8, batch: int = 4) -> dict[str, int]:
    """What one step multiplies and reads, drawn as blocks for one weight matrix ``W`` (d x d).

    Top, a prefill step: the prompt's ``n_prompt`` token rows times ``W``, which is read once for all of them.
    Bottom, a decode step: ``batch`` rows, one new token per sequence, times the same ``W``, read once for the
    batch, plus one key/value cache per sequence, each read for its own row. Returns the rows and reads drawn:
    ``prefill_rows``, ``decode_rows``, ``weight_reads`` (per step, the same in both) and ``caches``.
    """
    from matplotlib.patches import Rectangle

    if n_prompt < 2 or batch < 1 or batch >= n_prompt:
        raise ValueError(f"need 1 <= batch < n_prompt and n_prompt >= 2, got n_prompt={n_prompt}, batch={batch}")
    ink, row_h, side = "#404040", 0.3, 2.4  # one token row's height; W is side x side
    weight_face, row_face = figures.PALETTE[5], figures.PALETTE[1]
    cache_face = figures.PALETTE[2]

    def rows(x: float, top: float, k: int) -> None:
        for i in range(k):
            ax.add_patch(Rectangle((x, top - (i + 1) * row_h), 1.0, row_h, facecolor=row_face, alpha=0.55,
                                   edgecolor=ink, lw=1.0))

    def weight(x: float, top: float, text: str) -> None:
        ax.add_patch(Rectangle((x, top - side), side, side, facecolor=weight_face, alpha=0.35, edgecolor=ink,
                               lw=1.4))
        ax.text(x + side / 2, top - side / 2, text, ha="center", va="center", fontsize=10)

    top_pre, top_dec = 6.6, 2.9
    ax.text(0.0, top_pre + 0.25, f"prefill: one prompt of n = {n_prompt} tokens", fontsize=11, va="bottom")
    rows(0.0, top_pre, n_prompt)
    ax.text(1.25, top_pre - side / 2, "×", fontsize=14, ha="center", va="center")
    weight(1.6, top_pre, "W\nread once\nfor n rows")
    ax.text(4.3, top_pre - side / 2, "2n FLOPs\nper weight\nread", fontsize=10, va="center")

    ax.text(0.0, top_dec + 0.25, f"decode: b = {batch} sequences, one token each", fontsize=11, va="bottom")
    rows(0.0, top_dec, batch)
    ax.text(1.25, top_dec - side / 2, "×", fontsize=14, ha="center", va="center")
    weight(1.6, top_dec, "W\nread once\nfor b rows")
    ax.text(4.3, top_dec - side / 2, "+", fontsize=14, ha="center", va="center")
    for i in range(batch):  # one cache per sequence, each as long as its context
        ax.add_patch(Rectangle((4.7 + i * 0.45, top_dec - side), 0.32, side, facecolor=cache_face, alpha=0.45,
                               edgecolor=ink, lw=1.0))
    ax.text(4.7 + batch * 0.45 + 0.1, top_dec - side / 2, "b caches,\neach read\nfor 1 row", fontsize=10,
            va="center")
    ax.set_xlim(-0.1, 8.6)
    ax.set_ylim(top_dec - side - 0.15, top_pre + 0.8)
    ax.set_aspect("equal")
    ax.axis("off")
    return {"prefill_rows": n_prompt, "decode_rows": batch, "weight_reads": 1, "caches": batch}
