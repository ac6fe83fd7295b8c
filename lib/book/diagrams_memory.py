"""Diagram of the training-memory chapter: what one decoder layer holds during its backward pass.

:func:`draw_layer_backward` draws two stacked columns for one Llama-style layer with eager attention. The left
column is what autograd keeps for the layer after its forward pass, op by op, from the attention norm at the
bottom to SwiGLU at the top, as :func:`lib.planner.training.llama_layer_bytes` gives it. The right column is the
same layer at the softmax's backward, the moment of its backward pass that holds the most. The MLP's tensors,
``W_O``'s input, ``V`` and the bf16 probabilities are already freed there. Two fp32 ``n x n`` gradients (the
probabilities' gradient cast to fp32 and the softmax backward's output) sit beside the kept fp32 softmax
output, with the pending gradient of the residual stream. The function returns the two columns' segments
(label, bytes), so that a chapter can check the picture against its numbers.
"""

from __future__ import annotations

from typing import Any

from . import figures

__all__ = ["draw_layer_backward", "backward_columns"]

_KEPT_ORDER = [  # (label on the figure, keys of llama_layer_bytes), bottom to top
    ("attention norm", ("attention norm",)),
    ("Q/K/V input", ("Q/K/V input",)),
    ("Q, K, V", ("Q, K, V (K and V per query head)",)),
    ("softmax out (fp32)", ("softmax output (fp32)",)),
    ("probabilities (bf16)", ("probabilities (model dtype)",)),
    ("W_O input", ("W_O input",)),
    ("MLP norm", ("MLP norm",)),
    ("gate/up input", ("gate/up input",)),
    ("SwiGLU", ("gate, SiLU(gate), up, product",)),
]


def backward_columns(layer: dict[str, int], b: int, n: int, h: int, d: int, head_dim: int,
                     p: int = 2) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The segments of the two columns: what the layer keeps, and what it holds at the softmax's backward
    (the attention half's tensors less ``V``, plus two fp32 ``n x n`` gradients and the residual's gradient)."""
    kept = [(label, sum(layer.get(k, 0) for k in keys)) for label, keys in _KEPT_ORDER]
    v_rep = p * b * n * h * head_dim
    at_softmax = [("attention norm", layer["attention norm"]), ("Q/K/V input", layer["Q/K/V input"]),
                  ("Q, K", layer["Q, K, V (K and V per query head)"] - v_rep),
                  ("softmax out (fp32)", layer["softmax output (fp32)"]),
                  ("2 fp32 n x n gradients", 8 * b * h * n * n),
                  ("residual gradient", p * b * n * d)]
    return kept, at_softmax


def draw_layer_backward(layer: dict[str, int], peak: dict[str, int] | None = None, *, b: int = 1,
                        n: int = 2048, h: int = 32, d: int = 4096, head_dim: int = 128, p: int = 2) -> Any:
    """Draw :func:`backward_columns` for ``layer`` (:func:`lib.planner.training.llama_layer_bytes`, eager) in
    GB; ``peak`` (:func:`lib.planner.training.llama_peak_bytes`) is accepted for the caption's numbers and
    not drawn. Returns the figure."""
    import matplotlib.pyplot as plt

    kept, at_softmax = backward_columns(layer, b, n, h, d, head_dim, p)
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    colours = {label: figures.PALETTE[i % len(figures.PALETTE)] for i, (label, _) in enumerate(kept)}
    colours["Q, K"] = colours["Q, K, V"]
    colours["2 fp32 n x n gradients"] = figures.PALETTE[3]
    colours["residual gradient"] = "#7F7F7F"
    for x, column in ((0, kept), (1, at_softmax)):
        bottom, small = 0.0, 0.0
        side, ha = (x - 0.32, "right") if x == 0 else (x + 0.32, "left")
        for label, nbytes in column:
            if not nbytes:
                continue
            gb = nbytes / 1e9
            hatch = "//" if label == "2 fp32 n x n gradients" else None
            ax.bar(x, gb, bottom=bottom, width=0.55, color=colours[label], hatch=hatch, edgecolor="white")
            if gb > 0.06:
                ax.text(side, bottom + gb / 2, label.replace("2 fp32 n x n", "2 fp32 n x n\n"), va="center",
                        ha=ha, fontsize=9)
            elif bottom < 0.2:
                small = bottom + gb
            bottom += gb
        ax.text(side, small / 2, "norms, inputs,\nQ, K, V", va="center", ha=ha, fontsize=9)
    ax.set_xticks([0, 1], ["kept after\nthe forward", "at the\nsoftmax's\nbackward"])
    ax.set_xlim(-1.5, 2.6)
    ax.set_ylabel("GB (one layer)")
    ax.spines[["top", "right"]].set_visible(False)
    return fig
