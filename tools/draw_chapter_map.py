"""Draw the front page's map of the chapters: ``_static/chapter-map.svg`` (committed; rerun after a toc change).

One column of chapters in reading order, grouped by the parts of ``_toc.yml``, each chapter a box with its number
and a short name; an arc on the right for each dependency (from a chapter to one that uses its result, not the
reading order). Narrow, so it stays legible on a phone. Drawn with matplotlib in the book's figure style
(``lib.book.figures``), with the colour key of the architecture diagrams (``lib.book.diagrams_architecture.COLORS``).
Fails when a chapter of the table of contents has no short name here (the map cannot silently drop a chapter) or
when a chapter is said to build on a later one.

Usage: ``.venv/bin/python tools/draw_chapter_map.py [--output _static/chapter-map.svg]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import yaml  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from lib.book import figures  # noqa: E402
from lib.book.diagrams_architecture import COLORS  # noqa: E402

SHORT = {
    "chapters/notation": "Notation and conventions",
    "chapters/softmax": "A stable softmax",
    "chapters/scaling": "Why divide by \u221ad\u2096",
    "chapters/attention_backward": "The backward pass",
    "chapters/multihead": "Multi-head attention",
    "chapters/positional": "Positional encodings",
    "chapters/layernorm_ffn": "LayerNorm and FFN",
    "chapters/blocks": "Encoder and decoder",
    "chapters/training": "Training on a CPU",
    "chapters/flops": "Where the FLOPs go",
    "chapters/kv_cache": "The KV cache",
    "chapters/speed": "How fast",
    "chapters/train_memory": "Memory to train",
    "chapters/capacity_planner": "Planning a deployment",
    "chapters/tiled_attention": "Tiled exact attention",
    "chapters/beyond": "Before and beyond",
}
# (from, to): the later chapter uses the earlier one's result (what it needs, not the reading order).
BUILDS_ON = [
    ("chapters/notation", "chapters/softmax"),               # the shapes and the mask convention
    ("chapters/notation", "chapters/multihead"),
    ("chapters/softmax", "chapters/scaling"),                # the softmax's saturation
    ("chapters/softmax", "chapters/attention_backward"),     # its Jacobian
    ("chapters/scaling", "chapters/attention_backward"),     # the scaled logits
    ("chapters/scaling", "chapters/multihead"),              # scaled dot-product attention, per head
    ("chapters/multihead", "chapters/positional"),           # positions enter the heads' dot products
    ("chapters/multihead", "chapters/blocks"),
    ("chapters/positional", "chapters/blocks"),
    ("chapters/layernorm_ffn", "chapters/blocks"),
    ("chapters/blocks", "chapters/training"),                # the model that is trained
    ("chapters/blocks", "chapters/flops"),                   # the block whose FLOPs are counted
    ("chapters/multihead", "chapters/kv_cache"),             # heads and KV heads
    ("chapters/flops", "chapters/kv_cache"),
    ("chapters/training", "chapters/train_memory"),
    ("chapters/flops", "chapters/train_memory"),
    ("chapters/kv_cache", "chapters/capacity_planner"),
    ("chapters/flops", "chapters/speed"),                    # FLOPs per token, against the peak
    ("chapters/kv_cache", "chapters/speed"),                 # the cache a decode step reads
    ("chapters/speed", "chapters/capacity_planner"),         # is the plan fast enough
    ("chapters/train_memory", "chapters/capacity_planner"),
    ("chapters/attention_backward", "chapters/tiled_attention"),  # the backward pass that is tiled
    ("chapters/softmax", "chapters/tiled_attention"),        # the running max and sum
    ("chapters/flops", "chapters/tiled_attention"),          # memory traffic
    ("chapters/positional", "chapters/beyond"),
    ("chapters/training", "chapters/beyond"),
    ("chapters/kv_cache", "chapters/beyond"),
]
PART_COLORS = [COLORS["attention"], COLORS["ffn"], COLORS["norm"]]
ARROW = "#5a5a5a"


def numbered_parts(root: Path = ROOT) -> list[tuple[str, list[str]]]:
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    return [(p["caption"], [c["file"] for c in p["chapters"]]) for p in toc["parts"] if p.get("numbered")]


def draw(root: Path = ROOT):
    """One column of chapters in reading order, grouped by part; each dependency an arc on the right, from the
    chapter whose result is used to the chapter that uses it. Narrow (4.6 in) so that its text stays legible
    when a phone shows it at 342 px."""
    figures.use()
    parts = numbered_parts(root)
    missing = [f for _, files in parts for f in files if f not in SHORT]
    if missing:
        raise SystemExit(f"draw_chapter_map: no short name for {missing}: add them to SHORT")
    order = [f for _, files in parts for f in files]
    backwards = [(a, b) for a, b in BUILDS_ON if a in order and b in order and order.index(a) >= order.index(b)]
    if backwards:
        raise SystemExit(f"draw_chapter_map: a chapter builds on a later one: {backwards}")
    box_w, box_h, step, head = 2.85, 0.36, 0.46, 0.42  # the longest title, "Notation and conventions", fits
    n_rows = len(order)
    height = n_rows * step + len(parts) * head + 0.1
    width = 4.6
    fig, ax = plt.subplots(figsize=(width, height))
    fig.set_layout_engine("none")
    fig.subplots_adjust(0, 0, 1, 1)
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    left = 0.05
    right = left + box_w
    y = height
    centre: dict[str, float] = {}
    number = 0
    for p, (caption, files) in enumerate(parts):
        color = PART_COLORS[p % len(PART_COLORS)]
        y -= head
        ax.text(left, y + 0.12, f"Part {'I' * (p + 1) if p < 3 else p + 1}. {caption}", ha="left",
                va="center", fontsize=10.5, fontweight="bold", color=color)
        for f in files:
            number += 1
            cy = y - step / 2 + 0.02
            ax.add_patch(FancyBboxPatch((left, cy - box_h / 2), box_w, box_h,
                                        boxstyle="round,pad=0,rounding_size=0.08", facecolor="white",
                                        edgecolor=color, linewidth=1.5, zorder=2))
            ax.text(left + 0.1, cy, f"{number}", ha="left", va="center", fontsize=10.5, fontweight="bold",
                    color=color, zorder=3)
            ax.text(left + 0.42, cy, SHORT[f], ha="left", va="center", fontsize=10.5, zorder=3)
            centre[f] = cy
            y -= step
    # each arc leaves the right edge of the box it starts at and enters the right edge of the one it ends at;
    # a longer jump bulges further out, so that arcs nest instead of crossing boxes
    span_max = max(order.index(b) - order.index(a) for a, b in BUILDS_ON)
    for a, b in BUILDS_ON:
        ya, yb = centre[a], centre[b]
        span = order.index(b) - order.index(a)
        offset = 0.035 * ((order.index(a) * 7 + order.index(b) * 3) % 5 - 2)  # spread the ends on the edge
        start, end = (right, ya + offset), (right, yb - offset)
        reach = 0.18 + 1.45 * (span / span_max) ** 0.8  # how far right the arc goes, in inches
        rad = reach / max(abs(ya - yb), 1e-9) * 2
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=9, color=ARROW,
                                     linewidth=1.0, alpha=0.85, connectionstyle=f"arc3,rad={-rad:.3f}",
                                     shrinkA=0, shrinkB=0, zorder=1))
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", type=Path, default=ROOT / "_static" / "chapter-map.svg")
    args = ap.parse_args(argv)
    fig = draw()
    smallest = figures.text_px_on_phone(fig)  # the front page shows it at most 440 px wide, 342 px on a phone
    if smallest < figures.MIN_TEXT_PX:
        raise SystemExit(f"draw_chapter_map: its smallest text is {smallest:.1f} px on a phone, under "
                         f"{figures.MIN_TEXT_PX:g} px")
    matplotlib.rcParams["svg.hashsalt"] = "chapter-map"  # the same SVG from the same drawing
    fig.savefig(args.output, format="svg", bbox_inches="tight", pad_inches=0.05, metadata={"Date": None})
    print(f"draw_chapter_map: wrote {args.output} (smallest text {smallest:.1f} px on a phone)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
