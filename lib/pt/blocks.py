r"""Encoder and decoder blocks built from the library's pieces, in both LayerNorm placements.

Every block is made of :class:`lib.pt.multihead.MultiHeadAttention`, :class:`lib.pt.ffn.FeedForward` and
:class:`lib.pt.norms.LayerNorm`; nothing here re-implements attention. Shapes: ``x (B, n, d_model)``
(decoder input ``(B, n_tgt, d_model)``), encoder output ``memory (B, n_src, d_model)``; masks are boolean,
broadcastable to ``(B, h, n_q, n_k)``, True = may attend (:mod:`lib.constants`); build them with
:func:`lib.pt.attention.causal_mask` and :func:`lib.pt.attention.padding_mask` (``[:, None]`` adds the head
axis). Each attention sub-layer also takes an optional additive ``bias`` on its scaled logits, a float tensor
broadcastable to ``(B, h, n_q, n_k)`` (ALiBi's ``(h, n_q, n_k)``; see
:func:`lib.pt.multihead.multi_head_attention`); None (the default) leaves the block as it was.

The two placements of the LayerNorm around a sub-layer ``F`` (attention or FFN) are separate classes:

.. math::
    \text{Post-LN (Vaswani et al. 2017):}\quad x \leftarrow \operatorname{LN}\big(x + F(x)\big)
    \qquad\text{(eq. post-ln)}

.. math::
    \text{Pre-LN (Xiong et al. 2020; GPT-2 and later):}\quad x \leftarrow x + F\big(\operatorname{LN}(x)\big)
    \qquad\text{(eq. pre-ln)}

A Pre-LN stack needs one more LayerNorm after its last block (the model adds it, see :mod:`lib.pt.model`).
Dropout (on each sub-layer's output, before the residual sum, as in the paper) is 0 by default.
The parameter counts of one layer are :func:`lib.blocks.encoder_layer_param_count` and
:func:`lib.blocks.decoder_layer_param_count` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..blocks import (  # re-exported: the integer counts live in NumPy-only code
    decoder_layer_param_count,
    encoder_layer_param_count,
    layer_norm_param_count,
)
from .ffn import FeedForward, relu
from .multihead import MultiHeadAttention, load_from_torch_mha
from .norms import DEFAULT_EPS, LayerNorm

__all__ = [
    "PostLNEncoderBlock",
    "PreLNEncoderBlock",
    "PostLNDecoderBlock",
    "PreLNDecoderBlock",
    "encoder_layer_param_count",
    "decoder_layer_param_count",
    "layer_norm_param_count",
    "load_from_torch_layer",
]

Activation = Callable[[torch.Tensor], torch.Tensor]


def _check_x(x: torch.Tensor, d_model: int, name: str) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != d_model:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a tensor of shape (B, n, d_model={d_model}), got {shape}")


class _Block(nn.Module):
    """Shared construction; subclasses choose where the LayerNorm goes (:meth:`sublayer`)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, n_norms: int, activation: Activation,
                 eps: float, dropout: float, bias: bool):
        super().__init__()
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, n_heads, bias=bias)
        self.ffn = FeedForward(d_model, d_ff, activation, bias=bias)
        self.norms = nn.ModuleList(LayerNorm(d_model, eps) for _ in range(n_norms))
        self.dropout = nn.Dropout(dropout)

    def sublayer(self, x: torch.Tensor, norm: LayerNorm, f: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError


class _PostLN:
    def sublayer(self, x, norm, f):
        # Post-LN: normalise the sum
        return norm(x + self.dropout(f(x)))


class _PreLN:
    def sublayer(self, x, norm, f):
        # Pre-LN: normalise the sub-layer's input, keep the residual clean
        return x + self.dropout(f(norm(x)))


class _EncoderBlock(_Block):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, activation: Activation = relu,
                 eps: float = DEFAULT_EPS, dropout: float = 0.0, bias: bool = True):
        super().__init__(d_model, n_heads, d_ff, 2, activation, eps, dropout, bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                bias: torch.Tensor | None = None) -> torch.Tensor:
        """``x (B, n, d_model) -> (B, n, d_model)``; ``mask`` (e.g. key padding ``(B, 1, 1, n)``) or None;
        ``bias`` added to the self-attention's scaled logits (e.g. ALiBi's ``(h, n, n)``) or None."""
        _check_x(x, self.d_model, "x")
        x = self.sublayer(x, self.norms[0], lambda t: self.self_attn(t, t, mask, bias)[0])  # (B, n, d_model)
        return self.sublayer(x, self.norms[1], self.ffn)  # (B, n, d_model)


class _DecoderBlock(_Block):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, activation: Activation = relu,
                 eps: float = DEFAULT_EPS, dropout: float = 0.0, bias: bool = True):
        super().__init__(d_model, n_heads, d_ff, 3, activation, eps, dropout, bias)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, bias=bias)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, self_bias: torch.Tensor | None = None,
                memory_bias: torch.Tensor | None = None) -> torch.Tensor:
        """``x (B, n_tgt, d_model)``, ``memory (B, n_src, d_model) -> (B, n_tgt, d_model)``.

        ``self_mask`` (causal and target padding, to ``(B, h, n_tgt, n_tgt)``) guards the masked
        self-attention; ``memory_mask`` (source key padding, ``(B, 1, 1, n_src)``) the cross-attention,
        whose queries come from the decoder and keys and values from ``memory``. ``self_bias`` (to
        ``(B, h, n_tgt, n_tgt)``) and ``memory_bias`` (to ``(B, h, n_tgt, n_src)``) are added to the scaled
        logits of the two attentions, or None.
        """
        _check_x(x, self.d_model, "x")
        _check_x(memory, self.d_model, "memory")
        if memory.shape[0] != x.shape[0]:
            raise ValueError(f"memory has batch {memory.shape[0]} but x has batch {x.shape[0]}")
        x = self.sublayer(x, self.norms[0], lambda t: self.self_attn(t, t, self_mask, self_bias)[0])
        x = self.sublayer(x, self.norms[1], lambda t: self.cross_attn(t, memory, memory_mask, memory_bias)[0])
        return self.sublayer(x, self.norms[2], self.ffn)  # (B, n_tgt, d_model)


class PostLNEncoderBlock(_PostLN, _EncoderBlock):
    """The original encoder layer (Vaswani et al. 2017, sec. 3.1): ``LN(x + SelfAttn(x))``, then
    ``LN(x + FFN(x))``. Matches ``torch.nn.TransformerEncoderLayer(norm_first=False)`` in eval mode."""


class PreLNEncoderBlock(_PreLN, _EncoderBlock):
    """The Pre-LN encoder layer: ``x + SelfAttn(LN(x))``, then ``x + FFN(LN(x))``. Matches
    ``torch.nn.TransformerEncoderLayer(norm_first=True)`` in eval mode."""


class PostLNDecoderBlock(_PostLN, _DecoderBlock):
    """The original decoder layer: masked self-attention, cross-attention into the encoder output, FFN, each
    as ``LN(x + F(x))``. Matches ``torch.nn.TransformerDecoderLayer(norm_first=False)`` in eval mode."""


class PreLNDecoderBlock(_PreLN, _DecoderBlock):
    """The Pre-LN decoder layer, each sub-layer as ``x + F(LN(x))``. Matches
    ``torch.nn.TransformerDecoderLayer(norm_first=True)`` in eval mode."""


@torch.no_grad()
def load_from_torch_layer(
    block: _EncoderBlock | _DecoderBlock, layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer
) -> _EncoderBlock | _DecoderBlock:
    """Copy a ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` into ``block`` (in place).

    The block must have the same kind (encoder/decoder), LayerNorm placement (``norm_first``) and sizes;
    torch's ``self_attn``, ``multihead_attn``, ``linear1``, ``linear2``, ``norm1..3`` map to ``self_attn``,
    ``cross_attn``, ``ffn.linear1``, ``ffn.linear2``, ``norms[0..2]``. Used to check the blocks against torch.
    """
    is_dec = isinstance(layer, nn.TransformerDecoderLayer)
    if is_dec != isinstance(block, _DecoderBlock) or not isinstance(
        layer, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)
    ):
        raise TypeError(f"cannot load a {type(layer).__name__} into a {type(block).__name__}")
    if layer.norm_first != isinstance(block, _PreLN):
        raise ValueError(
            f"LayerNorm placement differs: torch layer has norm_first={layer.norm_first}, block is"
            f" {type(block).__name__}"
        )
    if (layer.linear1.in_features, layer.linear1.out_features) != (
        block.ffn.linear1.in_features, block.ffn.linear1.out_features
    ):
        raise ValueError(
            f"sizes differ: torch layer has d_model, d_ff = {layer.linear1.in_features},"
            f" {layer.linear1.out_features}; block has {block.ffn.linear1.in_features},"
            f" {block.ffn.linear1.out_features}"
        )
    load_from_torch_mha(block.self_attn, layer.self_attn)
    if is_dec:
        load_from_torch_mha(block.cross_attn, layer.multihead_attn)
    block.ffn.linear1.load_state_dict(layer.linear1.state_dict())
    block.ffn.linear2.load_state_dict(layer.linear2.state_dict())
    torch_norms = [layer.norm1, layer.norm2] + ([layer.norm3] if is_dec else [])
    for mine, theirs in zip(block.norms, torch_norms, strict=True):
        if mine.eps != theirs.eps:
            raise ValueError(f"LayerNorm eps differs: block has {mine.eps}, torch layer has {theirs.eps}")
        mine.load_state_dict(theirs.state_dict())
    return block
