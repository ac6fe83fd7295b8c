r"""Synthetic task data, a training loop and evaluation for the small Transformer of the training chapter.

The task: **reverse a sequence of digits**. Output position ``t`` must copy input position ``L - 1 - t``,
so it needs attention (to fetch one token among many) and order (to know which one): a model that sees
the source as a set cannot do it. Sequences have random lengths in ``[min_len, max_len]`` and are padded.
A second task, **copy** (:func:`copy_batch`), has output position ``t`` copy input position ``t``: the same
tokens, but a relation between the two positions that does not depend on the length ``L``, where reversal's
does. The chapter *Before and beyond attention* trains both to compare position schemes beyond the training
length (:func:`evaluate_by_length`).

Token ids: ``PAD = 0``, ``BOS = 1``, ``EOS = 2``, digit ``k`` is ``k + 3``. For a source ``x_1..x_L``:
``src = x_1..x_L PAD..``, ``tgt_in = BOS x_L..x_1 PAD..``, ``tgt_out = x_L..x_1 EOS PAD..`` (teacher
forcing: ``tgt_out`` is ``tgt_in`` shifted left by one). The loss is the mean cross-entropy over the
non-padding target tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from .model import Seq2SeqTransformer, padding_only_mask, source_mask, target_mask

__all__ = ["PAD", "BOS", "EOS", "N_DIGITS", "VOCAB_SIZE", "TaskBatch", "ReversalBatch", "reversal_batch",
           "copy_batch", "TASKS", "loss_fn", "train", "evaluate", "evaluate_by_length", "LengthAccuracy", "Evaluation",
           "set_determinism"]

PAD, BOS, EOS = 0, 1, 2
N_DIGITS = 10
VOCAB_SIZE = 3 + N_DIGITS


def set_determinism(seed: int = 0, threads: int = 2) -> None:
    """Fix the seed, the thread count and deterministic kernels: the chapter's stored outputs depend on it."""
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)


@dataclass
class TaskBatch:
    """One batch of a sequence task (reversal or copy); ids are int64, lengths count the digits of each
    sequence."""

    src: torch.Tensor  #: (B, max_len)
    tgt_in: torch.Tensor  #: (B, max_len + 1)
    tgt_out: torch.Tensor  #: (B, max_len + 1)
    lengths: torch.Tensor  #: (B,)


ReversalBatch = TaskBatch  # the name the training chapter uses


def _check_sizes(batch_size: int, min_len: int, max_len: int) -> None:
    if not (isinstance(batch_size, int) and batch_size > 0):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if not (isinstance(min_len, int) and isinstance(max_len, int) and 1 <= min_len <= max_len):
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len!r}, max_len={max_len!r}")


def reversal_batch(batch_size: int, min_len: int, max_len: int,
                   generator: torch.Generator) -> TaskBatch:
    """Digit sequences, lengths uniform in [min_len, max_len], reversed."""
    _check_sizes(batch_size, min_len, max_len)  # checks the sizes
    B, g = batch_size, generator
    lengths = torch.randint(min_len, max_len + 1, (B,), generator=g)
    digits = torch.randint(0, N_DIGITS, (B, max_len), generator=g) + 3
    pos = torch.arange(max_len)
    real = pos < lengths[:, None]  # (B, max_len): a digit, not padding
    src = torch.where(real, digits, PAD)
    back = (lengths[:, None] - 1 - pos).clamp(min=0)  # output t <- m-1-t
    out = torch.where(real, digits.gather(1, back), PAD)  # reversed
    tgt_in = torch.cat([torch.full((B, 1), BOS), out], dim=1)
    tgt_out = torch.cat([out, torch.full((B, 1), PAD)], dim=1)
    tgt_out[torch.arange(B), lengths] = EOS  # right after the last digit
    return TaskBatch(src, tgt_in, tgt_out, lengths)


def copy_batch(batch_size: int, min_len: int, max_len: int, generator: torch.Generator) -> TaskBatch:
    """The same draws as :func:`reversal_batch` (same generator state, same sources), each target a copy of its
    source: output position ``t`` holds source position ``t``."""
    rev = reversal_batch(batch_size, min_len, max_len, generator)
    tgt_out = torch.cat([rev.src, torch.full((batch_size, 1), PAD)], dim=1)
    tgt_out[torch.arange(batch_size), rev.lengths] = EOS
    tgt_in = torch.cat([torch.full((batch_size, 1), BOS), rev.src], dim=1)
    return TaskBatch(rev.src, tgt_in, tgt_out, rev.lengths)


#: The tasks :func:`train` accepts, by name.
TASKS = {"reverse": reversal_batch, "copy": copy_batch}


def loss_fn(logits: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the non-padding targets; logits ``(B, n, V)``, targets ``(B, n)``."""
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                                       ignore_index=PAD)


def _masks(model: Seq2SeqTransformer, b: TaskBatch, causal: bool, src_padding: bool):
    src_mask = source_mask(b.src, model.pad_id) if src_padding else None
    tgt_mask = target_mask(b.tgt_in, model.pad_id) if causal else padding_only_mask(b.tgt_in, model.pad_id)
    return src_mask, tgt_mask


def train(model: Seq2SeqTransformer, steps: int, *, batch_size: int = 64, min_len: int = 2, max_len: int = 8,
          lr: float = 1e-3, warmup: int = 50, causal: bool = True, src_padding: bool = True, seed: int = 0,
          log_every: int = 25, task: str = "reverse") -> list[tuple[int, float]]:
    """Train with Adam, linear warm-up then cosine decay to 0; returns ``[(step, loss), ...]`` every
    ``log_every`` steps (the loss averaged over those steps). ``causal=False`` trains the decoder without its
    causal mask, ``src_padding=False`` trains without the source padding mask (the encoder and the
    cross-attention then attend to padding too): the failure cases of the chapter. Data come from a generator
    seeded with ``seed``; the model's initial weights are whatever the caller made them. ``task`` names the
    batches' maker in :data:`TASKS` (``"reverse"`` or ``"copy"``)."""
    if not (isinstance(steps, int) and steps > 0):
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(map(repr, TASKS))}, got {task!r}")
    make_batch = TASKS[task]
    gen = torch.Generator().manual_seed(seed)
    # fused: the same Adam update, each parameter tensor in one pass rather than as a handful of separate
    # element-wise operations issued from Python (other rounding of the same arithmetic)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9, fused=True)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    model.train()
    history, running = [], 0.0
    for step in range(steps):
        b = make_batch(batch_size, min_len, max_len, gen)
        src_mask, tgt_mask = _masks(model, b, causal, src_padding)
        loss = loss_fn(model(b.src, b.tgt_in, src_mask, tgt_mask), b.tgt_out)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        running += loss.item()
        if (step + 1) % log_every == 0:
            history.append((step + 1, running / log_every))
            running = 0.0
    model.eval()
    return history


@dataclass
class Evaluation:
    """Accuracies on one batch: teacher-forced per token, and greedy autoregressive per token and per sequence."""

    teacher_forced_token_acc: float
    generated_token_acc: float
    generated_sequence_acc: float


@torch.no_grad()
def evaluate(model: Seq2SeqTransformer, b: TaskBatch, *, causal: bool = True,
             src_padding: bool = True) -> Evaluation:
    """Score ``model`` on ``b`` with the masks it was trained with (``causal``) or without the source padding
    mask (``src_padding=False``). Token accuracies count non-padding target positions (digits and EOS)."""
    model.eval()
    src_mask, tgt_mask = _masks(model, b, causal, src_padding)
    keep = b.tgt_out != PAD
    tf = model(b.src, b.tgt_in, src_mask, tgt_mask).argmax(-1)
    gen = model.greedy_decode(b.src, src_mask, b.tgt_out.shape[1], BOS, causal=causal)
    ok = (gen == b.tgt_out) | ~keep
    return Evaluation(
        teacher_forced_token_acc=float(((tf == b.tgt_out) & keep).sum() / keep.sum()),
        generated_token_acc=float(((gen == b.tgt_out) & keep).sum() / keep.sum()),
        generated_sequence_acc=float(ok.all(dim=1).float().mean()),
    )


class LengthAccuracy(NamedTuple):
    """Accuracies of one source length, teacher-forced (see :func:`evaluate_by_length`)."""

    sequence_acc: float  #: share of the sequences whose every target token (digits and EOS) is predicted
    token_acc: float  #: share of the non-padding target tokens predicted, each given the true prefix
    n_sequences: int  #: sequences of this length in the batch


@torch.no_grad()
def evaluate_by_length(model: Seq2SeqTransformer, b: TaskBatch) -> dict[int, LengthAccuracy]:
    """Exact-sequence and per-token accuracy for each source length in ``b``, from one teacher-forced pass with
    both masks: ``{length: LengthAccuracy}``, lengths in increasing order.

    The sequence accuracy is the greedy one of :func:`evaluate` at the cost of one pass: greedy generation
    reproduces a target exactly if and only if every teacher-forced prediction is right (each step then sees
    the true prefix), up to round-off in near-ties of the arg-max. The token accuracy is teacher-forced: each
    token is judged given the true prefix, so one error does not spoil the tokens after it. Sequences of
    different lengths share the batch; the masks keep each blind to the padding, so its outputs do not depend
    on what it is batched with beyond round-off.
    """
    model.eval()
    src_mask, tgt_mask = _masks(model, b, causal=True, src_padding=True)
    keep = b.tgt_out != PAD  # (B, n_tgt)
    ok = model(b.src, b.tgt_in, src_mask, tgt_mask).argmax(-1) == b.tgt_out  # (B, n_tgt)
    out = {}
    for length in sorted(set(b.lengths.tolist())):
        rows = b.lengths == length
        k = keep[rows]
        out[length] = LengthAccuracy(
            sequence_acc=float((ok[rows] | ~k).all(dim=1).float().mean()),
            token_acc=float((ok[rows] & k).sum() / k.sum()),
            n_sequences=int(rows.sum()),
        )
    return out
