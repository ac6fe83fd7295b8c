r"""A complete encoder-decoder Transformer (Vaswani et al. 2017, fig. 1) built from :mod:`lib.pt.blocks`.

Shapes: token ids ``src (B, n_src)`` and ``tgt_in (B, n_tgt)`` (int64; ``pad_id`` marks padding);
embeddings and block activations ``(B, n, d_model)``; logits ``(B, n_tgt, vocab_size)``.

Forward pass:

.. math::
    X = \sqrt{d_\text{model}}\,E[\text{tokens}] + PE_{0:n}, \qquad
    M = \operatorname{Encoder}(X_\text{src}), \qquad
    \text{logits} = \operatorname{Decoder}(X_\text{tgt}, M)\,W_\text{out} + b_\text{out}
    \qquad\text{(eq. transformer)}

with one embedding table ``E`` shared by source and target (one vocabulary) and the sinusoidal table
``PE`` of :func:`lib.pt.positional.sinusoidal_encoding` (or none, to show what is lost without it).
Masks are explicit arguments, so the training chapter can leave one out on purpose:
:func:`source_mask` (key padding, ``(B, 1, 1, n_src)``) and :func:`target_mask` (causal AND key padding,
``(B, 1, n_tgt, n_tgt)``); ``True`` = may attend.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch
from torch import nn

from .attention import causal_mask
from .blocks import PostLNDecoderBlock, PostLNEncoderBlock, PreLNDecoderBlock, PreLNEncoderBlock
from .ffn import relu
from .norms import LayerNorm
from .positional import sinusoidal_encoding

__all__ = ["Seq2SeqTransformer", "source_mask", "target_mask", "padding_only_mask"]


def _check_tokens(tokens: torch.Tensor, name: str) -> None:
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.dtype != torch.long:
        what = f"dtype {tokens.dtype}, shape {tuple(tokens.shape)}" if isinstance(tokens, torch.Tensor) else (
            type(tokens).__name__)
        raise ValueError(f"{name} must be an int64 tensor of token ids (B, n), got {what}")


def source_mask(src: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Key-padding mask ``(B, 1, 1, n_src)``: True where the source token is not padding."""
    _check_tokens(src, "src")
    return (src != pad_id)[:, None, None, :]


def padding_only_mask(tgt_in: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Key-padding mask for the decoder WITHOUT the causal part ``(B, 1, 1, n_tgt)`` (the deliberate bug)."""
    _check_tokens(tgt_in, "tgt_in")
    return (tgt_in != pad_id)[:, None, None, :]


def target_mask(tgt_in: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Decoder self-attention mask ``(B, 1, n_tgt, n_tgt)``: causal AND key padding."""
    _check_tokens(tgt_in, "tgt_in")
    n = tgt_in.shape[1]
    return causal_mask(n, device=tgt_in.device)[None, None] & (tgt_in != pad_id)[:, None, None, :]


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer (eq. transformer) from the library's blocks.

    Args:
        vocab_size: tokens in the (shared) vocabulary. d_model, n_heads, d_ff: layer sizes.
        n_layers: encoder layers = decoder layers (``N`` in the paper).
        norm: ``"post"`` (the paper) or ``"pre"`` (Pre-LN, with a final LayerNorm after each stack).
        positional: ``"sinusoidal"`` or ``"none"`` (no position information at all).
        max_len: longest sequence the positional table covers. pad_id: the padding token id.
    """

    def __init__(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, *,
                 norm: Literal["post", "pre"] = "pre", positional: Literal["sinusoidal", "none"] = "sinusoidal",
                 max_len: int = 64, pad_id: int = 0,
                 activation: Callable[[torch.Tensor], torch.Tensor] = relu, dropout: float = 0.0):
        super().__init__()
        for name, v in (("vocab_size", vocab_size), ("n_layers", n_layers), ("max_len", max_len)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if norm not in ("post", "pre"):
            raise ValueError(f"norm must be 'post' or 'pre', got {norm!r}")
        if positional not in ("sinusoidal", "none"):
            raise ValueError(f"positional must be 'sinusoidal' or 'none', got {positional!r}")
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id must lie in [0, vocab_size={vocab_size}), got {pad_id!r}")
        enc_cls, dec_cls = (PreLNEncoderBlock, PreLNDecoderBlock) if norm == "pre" else (
            PostLNEncoderBlock, PostLNDecoderBlock)
        kw = {"activation": activation, "dropout": dropout}
        self.d_model, self.pad_id, self.max_len, self.norm, self.positional = (
            d_model, pad_id, max_len, norm, positional)
        self.embed = nn.Embedding(vocab_size, d_model)
        # std d_model^-1/2, so that sqrt(d_model) * E has unit-variance entries, on the scale of PE's (in [-1, 1]);
        # nn.Embedding's N(0, 1) would make the token part sqrt(d_model) times larger and drown the positions.
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        self.encoder = nn.ModuleList(enc_cls(d_model, n_heads, d_ff, **kw) for _ in range(n_layers))
        self.decoder = nn.ModuleList(dec_cls(d_model, n_heads, d_ff, **kw) for _ in range(n_layers))
        self.enc_norm = LayerNorm(d_model) if norm == "pre" else nn.Identity()
        self.dec_norm = LayerNorm(d_model) if norm == "pre" else nn.Identity()
        self.out = nn.Linear(d_model, vocab_size)
        pe = sinusoidal_encoding(max_len, d_model) if positional == "sinusoidal" else torch.zeros(max_len, d_model)
        self.register_buffer("pe", pe, persistent=False)  # (max_len, d_model)

    def embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, n)`` ids -> ``(B, n, d_model)``: ``sqrt(d_model) * E[tokens] + PE[:n]``."""
        n = tokens.shape[1]
        if n > self.max_len:
            raise ValueError(f"sequence length {n} exceeds max_len={self.max_len} of the positional table")
        return self.embed(tokens) * math.sqrt(self.d_model) + self.pe[:n]

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        """``src (B, n_src)`` -> ``memory (B, n_src, d_model)``."""
        _check_tokens(src, "src")
        x = self.embed_tokens(src)
        for block in self.encoder:
            x = block(x, src_mask)
        return self.enc_norm(x)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None,
               src_mask: torch.Tensor | None) -> torch.Tensor:
        """``tgt_in (B, n_tgt)``, ``memory (B, n_src, d_model)`` -> logits ``(B, n_tgt, vocab_size)``."""
        _check_tokens(tgt_in, "tgt_in")
        y = self.embed_tokens(tgt_in)
        for block in self.decoder:
            y = block(y, memory, tgt_mask, src_mask)
        return self.out(self.dec_norm(y))

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, src_mask: torch.Tensor | None = None,
                tgt_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher-forced logits ``(B, n_tgt, vocab_size)``. Pass the masks explicitly (None = no mask)."""
        return self.decode(tgt_in, self.encode(src, src_mask), tgt_mask, src_mask)

    @torch.no_grad()
    def greedy_decode(self, src: torch.Tensor, src_mask: torch.Tensor | None, n_steps: int, bos_id: int,
                      causal: bool = True) -> torch.Tensor:
        """Autoregressive greedy generation: ``(B, n_steps)`` token ids, one new token per step.

        At step ``t`` the decoder sees only the ``t + 1`` tokens generated so far (BOS first); ``causal``
        chooses whether its self-attention is causally masked among them, as it was in training.
        """
        memory = self.encode(src, src_mask)
        out = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
        for _ in range(n_steps):
            mask = target_mask(out, self.pad_id) if causal else None
            logits = self.decode(out, memory, mask, src_mask)  # (B, t+1, vocab)
            out = torch.cat([out, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
        return out[:, 1:]
