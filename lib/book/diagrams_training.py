"""Diagrams of the training chapter, drawn with matplotlib in the book's figure style (:mod:`lib.book.figures`).

- :func:`token_label` -- a token id of the reversal task as the chapter writes it: a digit, ``<bos>``,
  ``<eos>`` or ``PAD``;
- :func:`teacher_forcing` -- one training step on one sequence: the source into the encoder, the decoder
  input (``<bos>`` and the target shifted right) through the causal mask, the memory read by the
  cross-attention, and the logits at every target position scored against the target, padding ignored;
- :func:`greedy_generation` -- generation: the decoder reads ``<bos>``, then its own outputs, one token at a
  time; the answer is read up to its ``<eos>``;
- :func:`reversal_step_figure` -- both, one above the other, in a figure narrow enough to stay legible at
  phone width.

The positions of a sequence are the rows of the picture, so the shift between the decoder input and the
target reads as one row. A diagram takes the token labels it draws (one training sequence, as
:func:`lib.pt.train.reversal_batch` makes it) and returns what it drew, so that a chapter can check the
picture against its own code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lib.pt.train import BOS, EOS, PAD

from . import figures
from .diagrams_architecture import _light, _mask_icon  # the blocks chapter's tints and mask picture

__all__ = ["FIGURE_SIZE", "greedy_generation", "reversal_step_figure", "teacher_forcing", "token_label"]

#: Width and height (inches) of :func:`reversal_step_figure`: narrow, so that its text stays legible when the
#: page is a phone's width.
FIGURE_SIZE = (4.7, 7.2)
_FONT = 12.0
_CELL_W, _CELL_H, _ROW = 0.62, 0.36, 0.45  # a token cell and the distance between two rows (inches)
_BLUE, _ORANGE, _GREEN, _GREY = figures.PALETTE[0], figures.PALETTE[1], figures.PALETTE[2], "#7F7F7F"
_SPECIAL = ("<bos>", "<eos>")


def token_label(token: int) -> str:
    """The reversal task's token ``token`` as text: ``PAD``, ``<bos>``, ``<eos>``, or digit ``token - 3``."""
    names = {PAD: "PAD", BOS: "<bos>", EOS: "<eos>"}
    if token in names:
        return names[token]
    if not 3 <= token <= 12:
        raise ValueError(f"token must be PAD, BOS, EOS or a digit's id 3..12, got {token!r}")
    return str(token - 3)


def _dark(color: str, amount: float = 0.3) -> tuple[float, float, float]:
    """``color`` mixed with black (``amount`` = share of black): small text in it stands out on white."""
    from matplotlib.colors import to_rgb

    return tuple(c * (1 - amount) for c in to_rgb(color))  # type: ignore[return-value]


def _cell(ax: Any, x: float, y: float, text: str, *, edge: str = _GREY, w: float = _CELL_W) -> None:
    """One token, centred at ``(x, y)``; padding is drawn grey, the generated tokens' colour is ``edge``."""
    from matplotlib.patches import FancyBboxPatch

    pad = text == "PAD"
    face = "#F2F2F2" if pad else (_light(edge, 0.82) if edge != _GREY else "white")
    ax.add_patch(FancyBboxPatch((x - w / 2, y - _CELL_H / 2), w, _CELL_H,
                                boxstyle="round,pad=0.0,rounding_size=0.06", facecolor=face,
                                edgecolor="#BBBBBB" if pad else edge, linewidth=1.2, zorder=2))
    ax.text(x, y, text, ha="center", va="center", zorder=3, color="#8C8C8C" if pad else "black",
            fontsize=_FONT - 1 if pad or text in _SPECIAL else _FONT)


def _block(ax: Any, x: float, y_top: float, y_bottom: float, w: float, text: str) -> None:
    """A tall box (an encoder or decoder stack) from ``y_bottom`` to ``y_top``, its name written upwards."""
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x - w / 2, y_bottom), w, y_top - y_bottom,
                                boxstyle="round,pad=0.0,rounding_size=0.1", facecolor=_light(_BLUE),
                                edgecolor=_BLUE, linewidth=1.6, zorder=2))
    ax.text(x, (y_top + y_bottom) / 2, text, rotation=90, ha="center", va="center", fontsize=_FONT,
            zorder=3)


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], *, color: str = "#404040",
           lw: float = 1.2, connection: str = "arc3", zorder: float = 1) -> None:
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color=color, linewidth=lw,
                                 connectionstyle=connection, shrinkA=0, shrinkB=0, zorder=zorder))


def _check_example(source: list[str], decoder_input: list[str], target: list[str]) -> list[str]:
    """The reversal task's rules for one sequence; returns its digits. Raises ``ValueError`` if broken."""
    digits = [t for t in source if t != "PAD"]
    m = len(digits)
    if not digits or source != digits + ["PAD"] * (len(source) - m):
        raise ValueError(f"source must be digits followed by padding, got {source}")
    if len(target) != len(source) + 1 or len(decoder_input) != len(target):
        raise ValueError(f"target and decoder input must be one token longer than the source ({len(source)}), "
                         f"got {len(target)} and {len(decoder_input)}")
    want = digits[::-1] + ["<eos>"] + ["PAD"] * (len(target) - m - 1)
    if target != want:
        raise ValueError(f"target must be the source reversed, then <eos> and padding: want {want}, got {target}")
    shifted = ["<bos>"] + [("PAD" if t == "<eos>" else t) for t in target[:-1]]
    if decoder_input != shifted:
        raise ValueError(f"decoder input must be <bos> and the target shifted right: want {shifted}, "
                         f"got {decoder_input}")
    return digits


def teacher_forcing(ax: Any, source: list[str], decoder_input: list[str], target: list[str], *,
                    top: float) -> dict[str, Any]:
    """One training step on one sequence, drawn on ``ax`` (coordinates in inches) below height ``top``.

    Rows are positions. Columns, left to right: the source, the encoder, the decoder input, the decoder
    (with its self-attention mask: causal and no padding keys) and the target, which scores the logits of each
    row; a padding row is not scored. The encoder's memory reaches the decoder over the top. Returns the
    labels drawn per column, which rows are scored and the decoder's mask. Raises ``ValueError`` if the
    three rows are not one sequence of the reversal task (:func:`_check_example`).
    """
    _check_example(source, decoder_input, target)
    n = len(target)
    x_src, x_enc, x_in, x_dec, x_tgt = 0.42, 1.15, 1.9, 2.72, 3.58
    y_title = top - 0.2
    y_mem = top - 0.62
    ys = [top - 1.08 - i * _ROW for i in range(n)]
    y_hi, y_lo = ys[0] + _CELL_H / 2 + 0.05, ys[-1] - _CELL_H / 2 - 0.05

    ax.text(0.05, y_title, "training step (teacher forcing)", ha="left", va="center", fontsize=_FONT + 1,
            fontweight="bold")
    for i, y in enumerate(ys):
        if i < len(source):
            _cell(ax, x_src, y, source[i])
            _arrow(ax, (x_src + _CELL_W / 2, y), (x_enc - 0.19, y))
        _cell(ax, x_in, y, decoder_input[i])
        _arrow(ax, (x_in + _CELL_W / 2, y), (x_dec - 0.28, y))
        scored = target[i] != "PAD"
        _arrow(ax, (x_dec + 0.28, y), (x_tgt - _CELL_W / 2, y), color="#404040" if scored else "#BBBBBB")
        _cell(ax, x_tgt, y, target[i], edge=_GREEN if scored else _GREY)
    y_src_lo = ys[len(source) - 1] - _CELL_H / 2 - 0.05
    _block(ax, x_enc, y_hi, y_src_lo, 0.38, "encoder")
    _block(ax, x_dec, y_hi, y_lo, 0.56, "")
    keep = np.tril(np.ones((n, n), dtype=bool)) & np.array([t != "PAD" for t in decoder_input])[None, :]
    _mask_icon(ax, x_dec, y_hi - 0.38, keep, size=0.42)
    ax.text(x_dec, (y_hi - 0.62 + y_lo) / 2, "decoder", rotation=90, ha="center", va="center",
            fontsize=_FONT, zorder=3)
    ax.text(x_dec, y_hi - 0.69, "causal", ha="center", va="center", fontsize=_FONT - 2, zorder=3)
    # the memory: encoder output -> keys and values of the decoder's cross-attention
    ax.plot([x_enc, x_enc, x_dec], [y_hi, y_mem, y_mem], color=_BLUE, lw=1.6, zorder=1)
    _arrow(ax, (x_dec, y_mem), (x_dec, y_hi), color=_BLUE, lw=1.6)
    ax.text((x_enc + x_dec) / 2, y_mem + 0.05, "memory", ha="center", va="bottom", fontsize=_FONT,
            color=_BLUE)
    ax.text(x_dec + 0.4, (y_mem + y_hi) / 2, "cross-\nattention", ha="left", va="center", fontsize=_FONT - 1.5,
            color=_BLUE, linespacing=1.0)
    pads = [i for i, t in enumerate(target) if t == "PAD"]
    for i in pads:
        ax.text(x_tgt + _CELL_W / 2 + 0.06, ys[i], "ignored", ha="left", va="center", fontsize=_FONT - 1.5,
                color=_GREY)
    y_names = y_lo - 0.14
    for x, name in ((x_src, "source"), (x_in, "decoder\ninput"), (x_tgt, "target")):
        ax.text(x, y_names, name, ha="center", va="top", fontsize=_FONT, linespacing=1.0)
    # the arrows from the decoder to the target are its logits, one row per position
    ax.text(x_tgt, y_names - 0.24, "logits scored by\ncross-entropy", ha="center", va="top",
            fontsize=_FONT - 1.5, linespacing=1.0, color=_dark(_GREEN))
    return {"source": list(source), "decoder input": list(decoder_input), "target": list(target),
            "scored": [t != "PAD" for t in target], "mask": keep, "bottom": y_names - 0.62}


def greedy_generation(ax: Any, source: list[str], target: list[str], *, top: float) -> list[list[str]]:
    """Greedy generation for the same source, drawn on ``ax`` below height ``top``: at step ``k`` the decoder
    reads ``<bos>`` and its ``k - 1`` outputs so far (and the memory of the source, computed once) and emits
    the argmax of its last logits, which is fed back as the next step's last input. The answer is read up to
    its first ``<eos>`` (a decoder run for a fixed number of steps emits more tokens after it, which are not
    read). The outputs drawn are the target's tokens up to ``<eos>``: what a model that has learned the task
    emits.
    Returns each step's inputs followed by its output.
    """
    digits = [t for t in source if t != "PAD"]
    outputs = target[: target.index("<eos>") + 1] if "<eos>" in target else None
    if outputs != digits[::-1] + ["<eos>"]:
        raise ValueError(f"target must start with the source reversed and <eos>, got {target} for {source}")
    x0, pitch, x_out = 1.0, 0.64, 3.88
    ax.text(0.05, top - 0.2, "generation (greedy)", ha="left", va="center", fontsize=_FONT + 1,
            fontweight="bold")
    ax.text(0.05, top - 0.55, f"memory of {' '.join(digits)}: the encoder runs once", ha="left", va="center",
            fontsize=_FONT - 1, color=_BLUE)
    steps = []
    for k, out in enumerate(outputs):
        y = top - 1.0 - k * 0.58
        inputs = ["<bos>"] + outputs[:k]
        ax.text(0.05, y, f"step {k + 1}", ha="left", va="center", fontsize=_FONT - 1)
        for j, tok in enumerate(inputs):
            _cell(ax, x0 + j * pitch, y, tok, edge=_ORANGE if j else _GREY)
        _arrow(ax, (x0 + (len(inputs) - 1) * pitch + _CELL_W / 2 + 0.04, y), (x_out - _CELL_W / 2 - 0.04, y))
        _cell(ax, x_out, y, out, edge=_ORANGE)
        if k == 0:
            ax.text((x0 + _CELL_W / 2 + x_out - _CELL_W / 2) / 2, y + 0.06, "decoder, argmax", ha="center",
                    va="bottom", fontsize=_FONT - 1.5)
        if out == "<eos>":
            ax.text(x_out, y - _CELL_H / 2 - 0.04, "answer ends", ha="center", va="top", fontsize=_FONT - 1.5)
        else:  # the output is the next step's last input; its head drawn over the cell it points at
            _arrow(ax, (x_out - 0.1, y - _CELL_H / 2), (x0 + (k + 1) * pitch + 0.1, y - 0.58 + _CELL_H / 2 + 0.02),
                   color=_ORANGE, connection="arc3,rad=-0.15", zorder=4)
        steps.append(inputs + [out])
    ax.text((x0 + pitch + x_out) / 2, top - 1.0 - 0.33, "fed back", ha="center", va="center",
            fontsize=_FONT - 1.5, color=_dark(_ORANGE), zorder=5,
            bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none"))
    return steps


def reversal_step_figure(source: list[str], decoder_input: list[str], target: list[str]):
    """:func:`teacher_forcing` above :func:`greedy_generation` for one sequence, in a figure of
    :data:`FIGURE_SIZE`. Returns ``(fig, drawn)``: what :func:`teacher_forcing` drew, with the generation
    steps under ``"generation"``."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=FIGURE_SIZE, layout="none")
    fig.subplots_adjust(0, 0, 1, 1)
    w, h = FIGURE_SIZE
    ax.set_xlim(0, w)
    ax.set_ylim(0, h)
    ax.set_aspect("equal")
    ax.set_axis_off()
    drawn = teacher_forcing(ax, source, decoder_input, target, top=h)
    drawn["generation"] = greedy_generation(ax, source, target, top=drawn.pop("bottom"))
    return fig, drawn
