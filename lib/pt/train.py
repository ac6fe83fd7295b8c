r"""Synthetic task data, a training loop and evaluation for the small Transformer of the training chapter.

The task: **reverse a sequence of digits**. Output position ``t`` must copy input position ``L - 1 - t``,
so it needs attention (to fetch one token among many) and order (to know which one): a model that sees
the source as a set cannot do it. Sequences have random lengths in ``[min_len, max_len]`` and are padded.

Token ids: ``PAD = 0``, ``BOS = 1``, ``EOS = 2``, digit ``k`` is ``k + 3``. For a source ``x_1..x_L``:
``src = x_1..x_L PAD..``, ``tgt_in = BOS x_L..x_1 PAD..``, ``tgt_out = x_L..x_1 EOS PAD..`` (teacher
forcing: ``tgt_out`` is ``tgt_in`` shifted left by one). The loss is the mean cross-entropy over the
non-padding target tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .model import Seq2SeqTransformer, padding_only_mask, source_mask, target_mask

__all__ = ["PAD", "BOS", "EOS", "N_DIGITS", "VOCAB_SIZE", "ReversalBatch", "reversal_batch", "loss_fn",
           "train", "evaluate", "Evaluation", "set_determinism"]

PAD, BOS, EOS = 0, 1, 2
N_DIGITS = 10
VOCAB_SIZE = 3 + N_DIGITS


def set_determinism(seed: int = 0, threads: int = 2) -> None:
    """Fix the seed, the thread count and deterministic kernels: the chapter's stored outputs depend on it."""
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)


@dataclass
class ReversalBatch:
    """One batch of the reversal task; ids are int64, lengths count the digits of each sequence."""

    src: torch.Tensor  #: (B, max_len)
    tgt_in: torch.Tensor  #: (B, max_len + 1)
    tgt_out: torch.Tensor  #: (B, max_len + 1)
    lengths: torch.Tensor  #: (B,)


def reversal_batch(batch_size: int, min_len: int, max_len: int, generator: torch.Generator) -> ReversalBatch:
    """Draw ``batch_size`` digit sequences with lengths uniform in ``[min_len, max_len]``, and their reversals."""
    if not (isinstance(batch_size, int) and batch_size > 0):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if not (isinstance(min_len, int) and isinstance(max_len, int) and 1 <= min_len <= max_len):
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len!r}, max_len={max_len!r}")
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
    digits = torch.randint(0, N_DIGITS, (batch_size, max_len), generator=generator) + 3
    pos = torch.arange(max_len)[None, :]
    valid = pos < lengths[:, None]  # (B, max_len)
    src = torch.where(valid, digits, PAD)
    # reversed: output position t holds source position L - 1 - t
    rev_idx = (lengths[:, None] - 1 - pos).clamp(min=0)
    rev = torch.where(valid, torch.gather(digits, 1, rev_idx), PAD)  # (B, max_len)
    pad_col = torch.full((batch_size, 1), PAD, dtype=torch.long)
    tgt_out = torch.cat([rev, pad_col], dim=1)
    tgt_out[torch.arange(batch_size), lengths] = EOS
    tgt_in = torch.cat([torch.full((batch_size, 1), BOS, dtype=torch.long), rev], dim=1)
    return ReversalBatch(src=src, tgt_in=tgt_in, tgt_out=tgt_out, lengths=lengths)


def loss_fn(logits: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the non-padding targets; logits ``(B, n, V)``, targets ``(B, n)``."""
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                                       ignore_index=PAD)


def _masks(model: Seq2SeqTransformer, b: ReversalBatch, causal: bool, src_padding: bool):
    src_mask = source_mask(b.src, model.pad_id) if src_padding else None
    tgt_mask = target_mask(b.tgt_in, model.pad_id) if causal else padding_only_mask(b.tgt_in, model.pad_id)
    return src_mask, tgt_mask


def train(model: Seq2SeqTransformer, steps: int, *, batch_size: int = 64, min_len: int = 2, max_len: int = 8,
          lr: float = 1e-3, warmup: int = 50, causal: bool = True, src_padding: bool = True, seed: int = 0,
          log_every: int = 25) -> list[tuple[int, float]]:
    """Train with Adam, linear warm-up then cosine decay to 0; returns ``[(step, loss), ...]`` every
    ``log_every`` steps (the loss averaged over those steps). ``causal=False`` trains the decoder without its
    causal mask, ``src_padding=False`` trains without the source padding mask (the encoder and the
    cross-attention then attend to padding too): the failure cases of the chapter. Data come from a generator
    seeded with ``seed``; the model's initial weights are whatever the caller made them."""
    if not (isinstance(steps, int) and steps > 0):
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    model.train()
    history, running = [], 0.0
    for step in range(steps):
        b = reversal_batch(batch_size, min_len, max_len, gen)
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
def evaluate(model: Seq2SeqTransformer, b: ReversalBatch, *, causal: bool = True,
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
