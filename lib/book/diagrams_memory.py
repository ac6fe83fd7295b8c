"""Diagram of the training-memory chapter: what one decoder layer holds during its backward pass.

:func:`draw_layer_backward` draws two stacked columns for one Llama-style layer with eager attention, in GB. The
left column is what autograd keeps for the layer after its forward pass, as
:func:`lib.planner.training.llama_layer_bytes` gives it, grouped as in the chapter's figure of one layer's parts
(the norms, the projections' inputs, Q, K, V and the merged heads in one small segment; the fp32 softmax output;
the bf16 probabilities; SwiGLU's four tensors). The right column is the same layer at the softmax's backward,
the moment of its backward pass that holds the most: the MLP's tensors, ``W_O``'s input, ``V`` and the bf16
probabilities are freed, and two fp32 ``n x n`` gradients (the probabilities' gradient cast to fp32 and the
softmax backward's output) sit beside the kept fp32 softmax output, with the pending gradient of the residual
stream (in the small segment). A part has one colour in both columns. The function returns the two columns'
segments (label, bytes), so that a chapter can check the picture against its numbers.
"""

from __future__ import annotations

from typing import Any

from . import figures

__all__ = ["draw_layer_backward", "backward_columns"]

SMALL = "norms, inputs, Q, K, V"
SMALL_AT = "norms, inputs, Q, K, residual gradient"
_COLOURS = {SMALL: "#9E9E9E", SMALL_AT: "#9E9E9E", "softmax output (fp32)": figures.PALETTE[0],
            "probabilities (bf16)": figures.PALETTE[1], "SwiGLU": figures.PALETTE[2],
            "2 fp32 n×n gradients": figures.PALETTE[3]}


def backward_columns(layer: dict[str, int], b: int, n: int, h: int, d: int, head_dim: int,
                     p: int = 2) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The segments of the two columns, bottom to top: what the layer keeps, and what it holds at the softmax's
    backward (the attention half's tensors less ``V``, two fp32 ``n x n`` gradients and the residual's
    gradient, the last in the small grey segment). Each column's segments sum to its bytes."""
    big = ("softmax output (fp32)", "probabilities (model dtype)", "gate, SiLU(gate), up, product")
    small_kept = sum(v for k, v in layer.items() if k != "total" and k not in big)
    kept = [(SMALL, small_kept), ("softmax output (fp32)", layer["softmax output (fp32)"]),
            ("probabilities (bf16)", layer.get("probabilities (model dtype)", 0)),
            ("SwiGLU", layer["gate, SiLU(gate), up, product"])]
    v_rep = p * b * n * h * head_dim
    small_at = (layer["attention norm"] + layer["Q/K/V input"] + layer["Q, K, V (K and V per query head)"] - v_rep
                + p * b * n * d)
    at_softmax = [(SMALL_AT, small_at), ("softmax output (fp32)", layer["softmax output (fp32)"]),
                  ("2 fp32 n×n gradients", 8 * b * h * n * n)]
    return kept, at_softmax


def draw_layer_backward(layer: dict[str, int], peak: dict[str, int] | None = None, *, b: int = 1,
                        n: int = 2048, h: int = 32, d: int = 4096, head_dim: int = 128, p: int = 2) -> Any:
    """Draw :func:`backward_columns` for ``layer`` (:func:`lib.planner.training.llama_layer_bytes`, eager) in
    GB, each segment labelled beside its column with its size; ``peak``
    (:func:`lib.planner.training.llama_peak_bytes`) is accepted for the caption's numbers and not drawn.
    Returns the figure."""
    import matplotlib.pyplot as plt

    kept, at_softmax = backward_columns(layer, b, n, h, d, head_dim, p)
    fig, ax = plt.subplots(figsize=(4.0, 4.0))
    for x, column in ((0, kept), (1, at_softmax)):
        bottom = 0.0
        side, ha = (x - 0.34, "right") if x == 0 else (x + 0.34, "left")
        for label, nbytes in column:
            if not nbytes:
                continue
            gb = nbytes / 1e9
            hatch = "//" if label.startswith("2 fp32") else None
            ax.bar(x, gb, bottom=bottom, width=0.6, color=_COLOURS[label], hatch=hatch, edgecolor="white")
            text = (label.replace("n×n ", "n×n\n").replace(" (", "\n(").replace("inputs, ", "inputs,\n")
                    .replace("K, residual ", "K, residual\n"))
            sep = " " if label in (SMALL, SMALL_AT) else "\n"
            ax.text(side, max(bottom + gb / 2, 0.1), f"{text}{sep}{gb:.2f} GB", va="center", ha=ha, fontsize=9,
                    linespacing=1.0)
            bottom += gb
        ax.text(x, bottom + 0.03, f"{bottom:.2f} GB", ha="center", va="bottom", fontsize=9)
    ax.set_xticks([0, 1], ["kept after\nthe forward", "at the\nsoftmax's\nbackward"], fontsize=9)
    ax.set_xlim(-1.45, 2.45)
    # every segment carries its size, so no y axis: the left column's labels would run into it
    ax.set_yticks([])
    ax.grid(False)
    ax.spines[["top", "right", "left"]].set_visible(False)
    return fig
