r"""Parameter counts of the encoder and decoder layers (Vaswani et al. 2017, sec. 3.1), as integers.

NumPy-only, so a reader (or the capacity planner) can count a model without torch; the ``nn.Module`` blocks
themselves are in :mod:`lib.pt.blocks`, whose tests hold these counts to ``sum(p.numel())``. With biases:

.. math::
    P_\text{enc} = (4d^2 + 4d) + (2 d\,d_\text{ff} + d_\text{ff} + d) + 2\cdot 2d
    \qquad\text{(eq. encoder-params)}

.. math::
    P_\text{dec} = 2(4d^2 + 4d) + (2 d\,d_\text{ff} + d_\text{ff} + d) + 3\cdot 2d
    \qquad\text{(eq. decoder-params)}

The same for Post-LN and Pre-LN (the norms only move).
"""

from __future__ import annotations

from .ffn import ffn_param_count
from .multihead import param_count as mha_param_count
from .norms import layer_norm_param_count

__all__ = ["encoder_layer_param_count", "decoder_layer_param_count", "layer_norm_param_count"]


def encoder_layer_param_count(d_model: int, n_heads: int, d_ff: int, bias: bool = True) -> int:
    """Parameters of one encoder layer: self-attention, FFN and two LayerNorms (eq. encoder-params)."""
    return (mha_param_count(d_model, n_heads, bias=bias) + ffn_param_count(d_model, d_ff, bias)
            + 2 * layer_norm_param_count(d_model))


def decoder_layer_param_count(d_model: int, n_heads: int, d_ff: int, bias: bool = True) -> int:
    """Parameters of one decoder layer: masked self-attention, cross-attention, FFN and three LayerNorms
    (eq. decoder-params)."""
    return (2 * mha_param_count(d_model, n_heads, bias=bias) + ffn_param_count(d_model, d_ff, bias)
            + 3 * layer_norm_param_count(d_model))
