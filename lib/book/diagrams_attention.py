"""Diagrams of scaled dot-product attention, drawn with matplotlib in the book's figure style.

- :func:`attention_dataflow` -- one head as data flow: ``Q, K, V -> S = Q Kᵀ -> S' = S/√d_k -> mask ->
  A = softmax(S') -> O = A V``, each stage with the shape of what it produces. The notation chapter shows it.
- :func:`computation_graph` -- the same head as a computational graph, each node with its forward value and
  the gradient of the loss. The backward chapter shows it for its worked example
  (:func:`computation_graph_figure`: in a narrow figure of its own).
- :func:`softmax_paths` -- one row of logits through the softmax twice, as written and shifted by its maximum,
  with the numbers each step produces (the softmax chapter's opening picture).
- :func:`scaling_variance` -- why the logit's spread grows like √d_k: ``d_k`` products of variance one summed
  into ``q · k`` of variance ``d_k``, and the division that brings it back to one (the scaling chapter's).

A diagram is a function of an ``Axes`` (so a chapter can place it) that returns the stages it drew, top to
bottom, so a chapter can check that the picture and the equations name the same steps.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from lib.book import figures

__all__ = [
    "ATTENTION_STAGES",
    "GRAPH_EDGES",
    "GRAPH_LAYOUT",
    "GRAPH_SIZE",
    "Stage",
    "attention_dataflow",
    "attention_dataflow_figure",
    "computation_graph",
    "computation_graph_figure",
    "scaling_variance",
    "scaling_variance_figure",
    "softmax_paths",
    "softmax_paths_figure",
]


class Stage(NamedTuple):
    """One box of a data-flow diagram: its key, the formula drawn in it and the shape of its result."""

    key: str
    label: str
    shape: str


#: The stages of one head, in the order the data flows (the inputs first, the output last).
ATTENTION_STAGES: tuple[Stage, ...] = (
    Stage("q", r"$Q$", r"$n_q \times d_k$"),
    Stage("k", r"$K$", r"$n_k \times d_k$"),
    Stage("v", r"$V$", r"$n_k \times d_v$"),
    Stage("s", r"$S = Q K^\top$", r"$n_q \times n_k$"),
    Stage("scale", r"$S' = S / \sqrt{d_k}$", r"$n_q \times n_k$"),
    Stage("mask", r"mask: $-\infty$ where $M_{ij}$ is False", r"$n_q \times n_k$"),
    Stage("softmax", r"$A = \mathrm{softmax}(S')$, along each row", r"$n_q \times n_k$"),
    Stage("out", r"$O = A V$", r"$n_q \times d_v$"),
)


def _box(ax: Any, x: float, y: float, w: float, h: float, text: str, shape: str, *, color: str,
         dashed: bool = False, size: float = 12.5) -> None:
    """A rounded box with a formula on its first line and the shape of the result, in grey, below it."""
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc=color, ec="0.25", lw=1.3, ls="--" if dashed else "-"))
    ax.text(x, y + 0.2 * h, text, ha="center", va="center", fontsize=size)
    ax.text(x, y - 0.27 * h, shape, ha="center", va="center", fontsize=10.5, color="0.3")


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], **kw: Any) -> None:
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color="0.3", lw=1.4, shrinkA=0, shrinkB=0, **kw))


def attention_dataflow(ax: Any, *, masked: bool = True) -> tuple[Stage, ...]:
    """Draw one head of scaled dot-product attention as data flow on ``ax``, top to bottom.

    Inputs (light blue) at the top, the operations (white) in one column, the output (light green) at the
    bottom; every box gives the shape of what it produces. The mask stage is dashed: it is optional
    (``masked=False`` leaves it out). Returns the stages drawn, in order.
    """
    stages = {s.key: s for s in ATTENTION_STAGES}
    inputs = "#DCEBF7"  # a light tint of the palette's blue
    output = "#D9F0E6"  # a light tint of the palette's green
    chain = ["s", "scale"] + (["mask"] if masked else []) + ["softmax", "out"]
    h, step = 1.25, 1.95
    top = 1.0 + step * len(chain) + 0.3
    ax.set_xlim(0, 10)
    ax.set_ylim(0.2, top + 0.75)
    ax.set_axis_off()
    cx = 4.4
    xs = {"q": 2.0, "k": 5.0, "v": 8.7}
    for key, x in xs.items():
        _box(ax, x, top, 2.0, h, stages[key].label, stages[key].shape, color=inputs, size=14)
    ys = [top - step * (i + 1) for i in range(len(chain))]
    widths = {"s": 3.2, "scale": 3.2, "mask": 6.6, "softmax": 6.6, "out": 3.2}
    for key, y in zip(chain, ys, strict=True):
        _box(ax, cx, y, widths[key], h, stages[key].label, stages[key].shape,
             color=output if key == "out" else "white", dashed=key == "mask")
    # arrows: Q and K into S; each stage into the next; V around the column into O
    _arrow(ax, (xs["q"], top - h / 2), (cx - 0.9, ys[0] + h / 2))
    _arrow(ax, (xs["k"], top - h / 2), (cx + 0.6, ys[0] + h / 2))
    for y0, y1 in zip(ys[:-1], ys[1:], strict=True):
        _arrow(ax, (cx, y0 - h / 2), (cx, y1 + h / 2))
    _arrow(ax, (xs["v"] + 0.6, top - h / 2), (cx + widths["out"] / 2, ys[-1]),
           connectionstyle="angle,angleA=-90,angleB=0")
    return tuple(stages[k] for k in ("q", "k", "v", *chain))


def attention_dataflow_figure(*, masked: bool = True):
    """A figure of its own for :func:`attention_dataflow`, narrow enough to stay legible at phone width."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(0.72 * figures.TEXT_WIDTH, 6.4 if masked else 5.4))
    drawn = attention_dataflow(ax, masked=masked)
    return fig, drawn


def _matrix_text(m: Any) -> str:
    import numpy as np

    rows = np.atleast_2d(m)
    return "\n".join("[" + " ".join(f"{x:+.4f}" for x in row) + "]" for row in rows)


#: Where each node of the backward chapter's graph sits (x, y in inches) and its title: two columns, so that
#: the figure is narrow and its numbers stay legible at phone width.
GRAPH_LAYOUT: dict[str, tuple[float, float, str]] = {
    "Q": (1.1, 6.15, "$Q$"),
    "K": (3.35, 6.15, "$K$"),
    "S": (1.1, 4.45, r"$S = QK^\top$"),
    "S'": (3.35, 4.45, r"$S' = S/\sqrt{d_k}$"),
    "V": (1.1, 2.75, "$V$"),
    "A": (3.35, 2.75, r"$A = \mathrm{softmax}(S')$"),
    "L": (1.1, 1.05, r"$\mathcal{L} = \sum O$"),
    "O": (3.35, 1.05, "$O = AV$"),
}
#: The edges of that graph, in the direction of the forward pass.
GRAPH_EDGES: tuple[tuple[str, str], ...] = (
    ("Q", "S"), ("K", "S"), ("S", "S'"), ("S'", "A"), ("A", "O"), ("V", "O"), ("O", "L"),
)
#: Width and height (inches) of the figure :func:`computation_graph_figure` draws the graph in.
GRAPH_SIZE = (4.45, 7.2)


def computation_graph(ax: Any, values: dict[str, tuple[Any, Any]]) -> tuple[str, ...]:
    """Draw one head's forward and backward pass as a computational graph on ``ax``.

    ``values`` maps each node of :data:`GRAPH_LAYOUT` to ``(forward value, gradient of the loss)``; each box
    shows its title, the forward value (blue) and the gradient (orange, the palette's vermilion), and the
    arrows follow the forward pass. Returns the nodes drawn. The layout is in inches for an ``ax`` filling a
    figure of :data:`GRAPH_SIZE` (:func:`computation_graph_figure`).
    """
    import numpy as np
    from matplotlib.patches import FancyBboxPatch

    missing = set(GRAPH_LAYOUT) - set(values)
    if missing:
        raise ValueError(f"values lacks the nodes {sorted(missing)}")
    blue, red = figures.PALETTE[0], figures.PALETTE[3]
    w, h_box = 2.05, 1.3
    for node, (x, y, title) in GRAPH_LAYOUT.items():
        value, grad = values[node]
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h_box / 2), w, h_box, boxstyle="round,pad=0.03",
                                    fc="#f7f7f7", ec="0.3"))
        rows = np.atleast_2d(value).shape[0]
        ax.text(x, y + 0.44, title, ha="center", va="center", fontsize=12)
        ax.text(x, y + 0.03, _matrix_text(value), ha="center", va="center", fontsize=11, color=blue,
                family="monospace")
        ax.text(x, y - 0.4 + 0.1 * (2 - rows), _matrix_text(grad), ha="center", va="center", fontsize=11,
                color=red, family="monospace")

    def anchor(node: str, toward: str) -> tuple[float, float]:
        (x0, y0), (x1, y1) = GRAPH_LAYOUT[node][:2], GRAPH_LAYOUT[toward][:2]
        dx, dy = x1 - x0, y1 - y0
        t = min(w / 2 / abs(dx) if dx else float("inf"), h_box / 2 / abs(dy) if dy else float("inf"))
        return x0 + t * dx, y0 + t * dy

    for a, b in GRAPH_EDGES:
        ax.annotate("", xy=anchor(b, a), xytext=anchor(a, b),
                    arrowprops=dict(arrowstyle="-|>", color="0.35", lw=1.3, shrinkA=2, shrinkB=2))
    ax.text(GRAPH_SIZE[0] / 2, GRAPH_SIZE[1] - 0.2, "blue: forward value, orange: gradient of $\\mathcal{L}$",
            fontsize=11, ha="center", va="center")
    ax.set_xlim(0, GRAPH_SIZE[0])
    ax.set_ylim(0.25, GRAPH_SIZE[1])
    ax.set_axis_off()
    return tuple(GRAPH_LAYOUT)


def computation_graph_figure(values: dict[str, tuple[Any, Any]]):
    """A figure of its own for :func:`computation_graph`, narrow enough to stay legible at phone width."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=GRAPH_SIZE, layout="none")
    fig.subplots_adjust(0, 0, 1, 1)
    drawn = computation_graph(ax, values)
    return fig, drawn


_BLUE_TINT, _GREEN_TINT, _RED_TINT = "#DCEBF7", "#D9F0E6", "#FADBCB"  # tints of the palette's blue, green, vermilion


def _vector_text(v: Any) -> str:
    """A short vector as the diagrams print it: finite entries to three decimals (integers as integers)."""
    import numpy as np

    def one(x: float) -> str:
        if not np.isfinite(x):
            return "nan" if np.isnan(x) else ("inf" if x > 0 else "-inf")
        return f"{x:.0f}" if float(x).is_integer() else f"{x:.3f}"

    return "[" + ", ".join(one(float(x)) for x in np.ravel(v)) + "]"


def softmax_paths(ax: Any, x: Any) -> tuple[str, ...]:
    """Draw one row of logits ``x`` through the softmax twice, top to bottom, on ``ax``: on the left as written
    (``exp``, then divide by the sum), on the right shifted by the row's maximum first; each box gives the
    step and the vector it produces, computed here in float64. A result that is not finite is drawn on a
    vermilion tint, a finite one on green. Returns the steps drawn: ``("x", "exp", "divide", "shift",
    "exp_shifted", "divide_shifted")``.
    """
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        naive = e / e.sum()
    z = x - x.max()
    ez = np.exp(z)
    stable = ez / ez.sum()
    h, w, step = 1.05, 4.3, 1.5
    ax.set_xlim(0, 10)
    top = 1.0 + 3 * step + 0.8
    ax.set_ylim(0.35, top + 0.65)
    ax.set_axis_off()
    _box(ax, 5.0, top, 7.0, h, "logits $x$", _vector_text(x), color=_BLUE_TINT, size=13)
    cols = {2.45: ("as written", [("exp", r"$e^{x_j}$", e), ("divide", "divide by the sum", naive)]),
            7.55: ("shifted first", [("shift", r"$z = x - \max(x)$", z), ("exp_shifted", r"$e^{z_j}$", ez),
                                     ("divide_shifted", "divide by the sum", stable)])}
    drawn = ["x"]
    for cx, (title, boxes) in cols.items():
        ys = [top - 0.45 - step * (i + 1 + 3 - len(boxes)) for i in range(len(boxes))]  # last boxes level
        _arrow(ax, (cx, top - h / 2), (cx, ys[0] + h / 2))
        ax.text(cx, top - h / 2 - 0.42, title, ha="center", va="center", fontsize=12, fontweight="bold",
                bbox=dict(fc="white", ec="none", pad=1.5))
        for (key, label, value), y in zip(boxes, ys, strict=True):
            finite = bool(np.isfinite(value).all())
            color = _RED_TINT if not finite else (_GREEN_TINT if key.startswith("divide") else "white")
            _box(ax, cx, y, w, h, label, _vector_text(value), color=color, size=12.5)
            drawn.append(key)
        for y0, y1 in zip(ys[:-1], ys[1:], strict=True):
            _arrow(ax, (cx, y0 - h / 2), (cx, y1 + h / 2))
    return tuple(drawn)


def softmax_paths_figure(x: Any):
    """A figure of its own for :func:`softmax_paths`, narrow enough to stay legible at phone width."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(figures.PHONE_WIDTH, 4.6))
    drawn = softmax_paths(ax, x)
    return fig, drawn


def scaling_variance(ax: Any, d_k: int = 4) -> tuple[str, ...]:
    """Draw why the scale is √d_k, top to bottom, on ``ax``: the components of ``q`` and ``k`` (``d_k`` of each,
    mean 0 and variance 1), their ``d_k`` products (variance 1 each), the sum ``q · k`` (variance ``d_k``) and
    the scaled logit (variance 1). ``d_k`` boxes are drawn for the components, the last one labelled with the
    general index and set apart from the others by an ellipsis. Returns the stages drawn:
    ``("components", "products", "sum", "scaled")``.
    """
    if not isinstance(d_k, int) or not 2 <= d_k <= 6:
        raise ValueError(f"d_k must be an int from 2 to 6 (the boxes drawn), got {d_k!r}")
    ax.set_xlim(0, 10)
    ax.set_ylim(0.2, 8.0)
    ax.set_axis_off()
    names = [str(c + 1) for c in range(d_k - 1)] + ["...", "d_k"]  # an ellipsis before the general index
    step = 7.7 / (len(names) - 1)
    xs = [1.15 + i * step for i in range(len(names))]
    w = min(2.0, step - 0.2)
    y_in, y_prod, y_sum, y_scaled = 7.2, 5.25, 3.1, 1.0
    for x, c in zip(xs, names, strict=True):
        if c == "...":
            for y in (y_in, y_prod):
                ax.text(x, y, r"$\cdots$", ha="center", va="center", fontsize=16)
            continue
        _box(ax, x, y_in, w, 1.15, rf"$q_{{{c}}},\ k_{{{c}}}$", "var. 1", color=_BLUE_TINT, size=12)
        _box(ax, x, y_prod, w, 1.15, rf"$q_{{{c}}} k_{{{c}}}$", "var. 1", color="white", size=12)
        _arrow(ax, (x, y_in - 0.575), (x, y_prod + 0.575))
        _arrow(ax, (x, y_prod - 0.575), (5.0 + (x - 5.0) * 0.45, y_sum + 0.6))
    _box(ax, 5.0, y_sum, 6.4, 1.2, r"$q \cdot k = q_1 k_1 + \cdots + q_{d_k} k_{d_k}$", r"variance $d_k$",
         color="white")
    _arrow(ax, (5.0, y_sum - 0.6), (5.0, y_scaled + 0.6))
    ax.text(5.3, (y_sum + y_scaled) / 2, r"divide by $\sqrt{d_k}$", ha="left", va="center", fontsize=12)
    _box(ax, 5.0, y_scaled, 6.4, 1.2, r"$q \cdot k / \sqrt{d_k}$", r"variance 1, for every $d_k$",
         color=_GREEN_TINT)
    return ("components", "products", "sum", "scaled")


def scaling_variance_figure(d_k: int = 4):
    """A figure of its own for :func:`scaling_variance`, narrow enough to stay legible at phone width."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(figures.PHONE_WIDTH, 4.4))
    drawn = scaling_variance(ax, d_k)
    return fig, drawn
