r"""A complete encoder-decoder Transformer (Vaswani et al. 2017, fig. 1) built from :mod:`lib.pt.blocks`.

Shapes: token ids ``src (B, n_src)`` and ``tgt_in (B, n_tgt)`` (int64; ``pad_id`` marks padding);
embeddings and block activations ``(B, n, d_model)``; logits ``(B, n_tgt, vocab_size)``.

Forward pass:

.. math::
    X = \sqrt{d_\text{model}}\,E[\text{tokens}] + PE_{0:n}, \qquad
    M = \operatorname{Encoder}(X_\text{src}), \qquad
    \text{logits} = \operatorname{Decoder}(X_\text{tgt}, M)\,W_\text{out} + b_\text{out}
    \qquad\text{(eq. transformer)}

with one embedding table ``E`` shared by source and target (one vocabulary). Where positions enter depends on
``positional``:

* ``"sinusoidal"`` (the default): ``PE`` is the fixed table of :func:`lib.pt.positional.sinusoidal_encoding`,
  ``max_len`` rows;
* ``"learned"``: ``PE`` is a trainable table of ``max_len`` rows (as in BERT and GPT-2), initialised
  :math:`\mathcal N(0, 1/2)`, the mean square of a sinusoid's entries; a longer input is refused, since the
  table has no row for it;
* ``"none"``: ``PE = 0``, no position information at all (to show what is lost without it);
* ``"alibi"``: no ``PE``; every attention adds a per-head linear distance penalty to its scaled logits
  (Press et al. 2022; :mod:`lib.position_bias`, built by :mod:`lib.pt.positional`), with ALiBi's slopes
  :math:`m_h`: the encoder's self-attention ``-m_h |j - i|`` (:func:`~lib.pt.positional.alibi_bias_symmetric`),
  the decoder's causal self-attention ``m_h (j - i)``, ``j <= i`` (:func:`~lib.pt.positional.alibi_bias`), and
  the cross-attention ``-m_h |j - i|`` between target position ``i`` and source position ``j``
  (:func:`~lib.pt.positional.alibi_bias_symmetric` with ``n_q = n_tgt``, ``n_k = n_src``).

  Why the cross-attention gets a bias too. ALiBi is defined for one causal sequence; an encoder-decoder has
  two. With the symmetric encoder bias and no bias in the cross-attention the model could not tell a source
  from its mirror image: ``|j - i|`` is unchanged when both positions are reflected, so the encoder maps a
  reversed (unpadded) source to its reversed output, and a cross-attention without positions reads that
  output as a set. The bias ``-m_h |j - i|`` lays target position ``i`` beside source position ``i``, from the
  first tokens on: a prior of a monotone, diagonal alignment, which is what copying needs and what reversing
  does not. It is a modelling choice (T5, for example, adds relative biases to self-attention only); no
  chapter trains this variant.

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
from .positional import alibi_bias, alibi_bias_symmetric, sinusoidal_encoding

__all__ = ["Seq2SeqTransformer", "source_mask", "target_mask", "padding_only_mask", "POSITIONAL"]

#: The position schemes :class:`Seq2SeqTransformer` accepts.
POSITIONAL = ("sinusoidal", "learned", "alibi", "none")


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
        positional: ``"sinusoidal"``, ``"learned"``, ``"alibi"`` or ``"none"`` (see the module's docstring).
        max_len: longest sequence the positional table covers (``"alibi"`` has no table and no limit).
        pad_id: the padding token id.
    """

    def __init__(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, *,
                 norm: Literal["post", "pre"] = "pre",
                 positional: Literal["sinusoidal", "learned", "alibi", "none"] = "sinusoidal",
                 max_len: int = 64, pad_id: int = 0,
                 activation: Callable[[torch.Tensor], torch.Tensor] = relu, dropout: float = 0.0):
        super().__init__()
        for name, v in (("vocab_size", vocab_size), ("n_layers", n_layers), ("max_len", max_len)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if norm not in ("post", "pre"):
            raise ValueError(f"norm must be 'post' or 'pre', got {norm!r}")
        if positional not in POSITIONAL:
            raise ValueError(f"positional must be one of {', '.join(map(repr, POSITIONAL))}, got {positional!r}")
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id must lie in [0, vocab_size={vocab_size}), got {pad_id!r}")
        enc_cls, dec_cls = (PreLNEncoderBlock, PreLNDecoderBlock) if norm == "pre" else (
            PostLNEncoderBlock, PostLNDecoderBlock)
        kw = {"activation": activation, "dropout": dropout}
        self.d_model, self.n_heads, self.pad_id, self.max_len, self.norm, self.positional = (
            d_model, n_heads, pad_id, max_len, norm, positional)
        self.embed = nn.Embedding(vocab_size, d_model)
        # std d_model^-1/2, so that sqrt(d_model) * E has unit-variance entries, on the scale of PE's (in [-1, 1]);
        # nn.Embedding's N(0, 1) would make the token part sqrt(d_model) times larger and drown the positions.
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        self.encoder = nn.ModuleList(enc_cls(d_model, n_heads, d_ff, **kw) for _ in range(n_layers))
        self.decoder = nn.ModuleList(dec_cls(d_model, n_heads, d_ff, **kw) for _ in range(n_layers))
        self.enc_norm = LayerNorm(d_model) if norm == "pre" else nn.Identity()
        self.dec_norm = LayerNorm(d_model) if norm == "pre" else nn.Identity()
        self.out = nn.Linear(d_model, vocab_size)
        if positional == "learned":  # trainable; drawn after every other weight, so the others stay as they were
            self.pe = nn.Parameter(torch.randn(max_len, d_model) * 0.5**0.5)  # (max_len, d_model)
        elif positional == "alibi":
            self.pe = None  # positions enter as biases on the logits (_alibi)
        else:
            pe = sinusoidal_encoding(max_len, d_model) if positional == "sinusoidal" else torch.zeros(max_len, d_model)
            self.register_buffer("pe", pe, persistent=False)  # (max_len, d_model)

    def embed_tokens(self, tokens: torch.Tensor, name: str = "tokens") -> torch.Tensor:
        """``(B, n)`` ids -> ``(B, n, d_model)``: ``sqrt(d_model) * E[tokens] + PE[:n]`` (no ``PE`` for ALiBi)."""
        n = tokens.shape[1]
        if self.pe is None:
            return self.embed(tokens) * math.sqrt(self.d_model)
        if n > self.max_len and self.positional == "learned":
            raise ValueError(
                f"{name} has {n} positions but the learned position table has max_len={self.max_len} rows:"
                f" positions {self.max_len}..{n - 1} have no embedding (a learned table cannot be evaluated"
                " beyond the length it was built for)")
        if n > self.max_len:
            raise ValueError(f"{name} has sequence length {n}, which exceeds max_len={self.max_len} of the"
                             " positional table")
        return self.embed(tokens) * math.sqrt(self.d_model) + self.pe[:n]

    def _alibi(self, kind: Literal["encoder", "decoder", "cross"], n_q: int, n_k: int,
               like: torch.Tensor) -> torch.Tensor | None:
        """ALiBi's bias ``(h, n_q, n_k)`` for one kind of attention (see the module's docstring), or None."""
        if self.positional != "alibi":
            return None
        kw = {"dtype": like.dtype, "device": like.device}
        if kind == "decoder":  # causal: m (j - i) for j <= i. The entries j > i are positive: the causal mask must
            # remove them (without it, the training chapter's leaky failure, they favour the later tokens)
            return alibi_bias(n_q, n_k, self.n_heads, **kw)
        return alibi_bias_symmetric(n_q, n_k, self.n_heads, **kw)  # -m |j - i|

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        """``src (B, n_src)`` -> ``memory (B, n_src, d_model)``."""
        _check_tokens(src, "src")
        x = self.embed_tokens(src, "src")
        bias = self._alibi("encoder", src.shape[1], src.shape[1], x)
        for block in self.encoder:
            x = block(x, src_mask, bias)
        return self.enc_norm(x)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None,
               src_mask: torch.Tensor | None) -> torch.Tensor:
        """``tgt_in (B, n_tgt)``, ``memory (B, n_src, d_model)`` -> logits ``(B, n_tgt, vocab_size)``."""
        _check_tokens(tgt_in, "tgt_in")
        y = self.embed_tokens(tgt_in, "tgt_in")
        n_tgt, n_src = tgt_in.shape[1], memory.shape[1]
        self_bias, memory_bias = self._alibi("decoder", n_tgt, n_tgt, y), self._alibi("cross", n_tgt, n_src, y)
        for block in self.decoder:
            y = block(y, memory, tgt_mask, src_mask, self_bias, memory_bias)
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
