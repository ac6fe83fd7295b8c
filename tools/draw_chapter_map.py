"""Draw the front page's map of the chapters: ``_static/chapter-map.svg`` (committed; rerun after a toc change).

Three columns, one per part of ``_toc.yml``, each chapter a box with its number and a short name, and arrows
for what a chapter builds on. Drawn with matplotlib in the book's figure style (``lib.book.figures``), with the
colour key of the architecture diagrams (``lib.book.diagrams_architecture.COLORS``). Fails when a chapter of the
table of contents has no short name here, so the map cannot silently drop a chapter.

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
    "chapters/notation": "Notation and masks",
    "chapters/softmax": "A stable softmax",
    "chapters/scaling": "Why divide by \u221ad\u2096",
    "chapters/attention_backward": "The backward pass",
    "chapters/multihead": "Multi-head attention",
    "chapters/positional": "Positional encodings",
    "chapters/layernorm_ffn": "LayerNorm and FFN",
    "chapters/blocks": "Encoder and decoder",
    "chapters/training": "Training on a CPU",
    "chapters/flops": "Where the FLOPs go",
    "chapters/kv_cache": "KV cache and GPUs",
    "chapters/train_memory": "Memory to train",
    "chapters/capacity_planner": "A capacity planner",
    "chapters/tiled_attention": "Tiled exact attention",
    "chapters/beyond": "Before and beyond",
}
# (from, to): the later chapter uses the earlier one's result.
BUILDS_ON = [
    ("chapters/notation", "chapters/softmax"), ("chapters/softmax", "chapters/scaling"),
    ("chapters/scaling", "chapters/attention_backward"), ("chapters/attention_backward", "chapters/multihead"),
    ("chapters/multihead", "chapters/positional"), ("chapters/positional", "chapters/layernorm_ffn"),
    ("chapters/layernorm_ffn", "chapters/blocks"), ("chapters/blocks", "chapters/training"),
    ("chapters/blocks", "chapters/flops"), ("chapters/flops", "chapters/kv_cache"),
    ("chapters/kv_cache", "chapters/train_memory"), ("chapters/train_memory", "chapters/capacity_planner"),
    ("chapters/capacity_planner", "chapters/tiled_attention"), ("chapters/tiled_attention", "chapters/beyond"),
]
PART_COLORS = [COLORS["attention"], COLORS["ffn"], COLORS["norm"]]


def numbered_parts(root: Path = ROOT) -> list[tuple[str, list[str]]]:
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    return [(p["caption"], [c["file"] for c in p["chapters"]]) for p in toc["parts"] if p.get("numbered")]


def draw(root: Path = ROOT):
    figures.use()
    parts = numbered_parts(root)
    missing = [f for _, files in parts for f in files if f not in SHORT]
    if missing:
        raise SystemExit(f"draw_chapter_map: no short name for {missing}: add them to SHORT")
    rows = max(len(files) for _, files in parts)
    width, col_w, box_w, box_h, gap = figures.TEXT_WIDTH, 2.33, 2.05, 0.5, 0.3
    height = 0.75 + rows * (box_h + gap)
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    centre: dict[str, tuple[float, float]] = {}
    number = 0
    for p, (caption, files) in enumerate(parts):
        x = col_w * p + col_w / 2
        color = PART_COLORS[p % len(PART_COLORS)]
        ax.text(x, height - 0.28, f"Part {'I' * (p + 1) if p < 3 else p + 1}: {caption}", ha="center",
                va="center", fontsize=10, fontweight="bold", color=color)
        for r, f in enumerate(files):
            number += 1
            y = height - 0.75 - r * (box_h + gap) - box_h / 2
            ax.add_patch(FancyBboxPatch((x - box_w / 2, y - box_h / 2), box_w, box_h,
                                        boxstyle="round,pad=0,rounding_size=0.1", facecolor="white",
                                        edgecolor=color, linewidth=1.6, zorder=2))
            ax.text(x - box_w / 2 + 0.12, y, f"{number}", ha="left", va="center", fontsize=10.5,
                    fontweight="bold", color=color, zorder=3)
            ax.text(x - box_w / 2 + 0.42, y, SHORT[f], ha="left", va="center", fontsize=9.5, zorder=3)
            centre[f] = (x, y)
    for a, b in BUILDS_ON:
        if a not in centre or b not in centre:
            continue
        (xa, ya), (xb, yb) = centre[a], centre[b]
        if abs(xa - xb) < 1e-9:
            start, end, style = (xa, ya - box_h / 2), (xb, yb + box_h / 2), "arc3"
        else:
            side = 1 if xb > xa else -1
            start, end = (xa + side * box_w / 2, ya), (xb - side * box_w / 2, yb)
            style = "arc3,rad=0.0"
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color="#606060",
                                     linewidth=1.1, connectionstyle=style, shrinkA=1, shrinkB=1, zorder=1))
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", type=Path, default=ROOT / "_static" / "chapter-map.svg")
    args = ap.parse_args(argv)
    fig = draw()
    matplotlib.rcParams["svg.hashsalt"] = "chapter-map"  # the same SVG from the same drawing
    fig.savefig(args.output, format="svg", bbox_inches="tight", metadata={"Date": None})
    print(f"draw_chapter_map: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
