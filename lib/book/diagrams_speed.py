"""The roofline diagram, drawn with matplotlib in the book's figure style.

- :func:`roofline` -- attainable FLOP/s against arithmetic intensity (FLOP per byte) on log axes: the slanted
  memory roof :math:`I\\beta`, the flat compute roof :math:`\\pi`, the ridge point :math:`\\pi/\\beta` where they
  meet, and named kernels placed at their intensity on the roof. Returns the ridge point and, per kernel, the
  FLOP/s the roof allows it.

A diagram is a function of an ``Axes`` that returns what it drew, so a chapter can check the picture against the
numbers it computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from lib.book import figures

__all__ = ["roofline"]


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
