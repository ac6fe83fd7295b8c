r"""The position-wise feed-forward block on torch tensors: the contract of :mod:`lib.ffn` (eq. ffn).

:func:`feed_forward` is the pure function, :class:`FeedForward` its thin ``nn.Module`` wrapper with
``linear1`` (d_model → d_ff) and ``linear2`` (d_ff → d_model), named as in
``torch.nn.TransformerEncoderLayer``.
Note that ``nn.Linear`` stores its weight as ``(d_out, d_in)`` and computes ``x @ weight.T + bias``, so
``linear1.weight.T`` is the book's ``W_1`` of shape ``(d_model, d_ff)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..ffn import ffn_param_count
from ._validate import as_float_tensor, check_finite, check_real


def _finite(x: Any, name: str) -> torch.Tensor:
    x = as_float_tensor(x, name)
    check_finite(x, name)
    return x

__all__ = ["relu", "gelu", "gelu_tanh", "feed_forward", "FeedForward", "ffn_param_count"]


def relu(x: torch.Tensor) -> torch.Tensor:
    """``max(0, x)``; see :func:`lib.ffn.relu`."""
    return torch.relu(as_float_tensor(x, "x"))


def gelu(x: torch.Tensor) -> torch.Tensor:
    r"""Exact GELU :math:`\tfrac{x}{2}(1 + \operatorname{erf}(x/\sqrt2))`; see :func:`lib.ffn.gelu`."""
    x = as_float_tensor(x, "x")
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """The tanh approximation of GELU; see :func:`lib.ffn.gelu_tanh`."""
    x = as_float_tensor(x, "x")
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def feed_forward(
    x: Any, w1: Any, b1: Any, w2: Any, b2: Any, activation: Callable[[torch.Tensor], torch.Tensor] = relu
) -> torch.Tensor:
    """``activation(x @ w1 + b1) @ w2 + b2``, ``w1`` ``(d_model, d_ff)``; see :func:`lib.ffn.feed_forward`."""
    named = ((x, "x"), (w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))
    x, w1, b1, w2, b2 = (_finite(t, name) for t, name in named)  # NaN and ±inf refused, as in lib.ffn
    if x.ndim < 1:
        raise ValueError("x must have at least 1 dimension (..., d_model), got a scalar")
    if w1.ndim != 2 or w2.ndim != 2:
        raise ValueError(
            f"w1 and w2 must be matrices, got w1.shape={tuple(w1.shape)}, w2.shape={tuple(w2.shape)}"
        )
    d_model, d_ff = w1.shape
    if x.shape[-1] != d_model:
        raise ValueError(f"x has width {x.shape[-1]} but w1 expects d_model={d_model}"
                         f" (x.shape={tuple(x.shape)}, w1.shape={tuple(w1.shape)}; rows are tokens: x @ w1)")
    if tuple(w2.shape) != (d_ff, d_model):
        raise ValueError(f"w2 must have shape (d_ff, d_model) = {(d_ff, d_model)} to match"
                         f" w1.shape={tuple(w1.shape)}, got {tuple(w2.shape)}")
    if tuple(b1.shape) != (d_ff,):
        raise ValueError(f"b1 must have shape (d_ff,) = ({d_ff},), got {tuple(b1.shape)}")
    if tuple(b2.shape) != (d_model,):
        raise ValueError(f"b2 must have shape (d_model,) = ({d_model},), got {tuple(b2.shape)}")
    return activation(x @ w1 + b1) @ w2 + b2  # (..., d_ff) then (..., d_model)


class FeedForward(nn.Module):
    """Eq. ffn: ``linear2(dropout(activation(linear1(x))))``: ``(..., d_model) -> (..., d_model)``.

    Args:
        d_model, d_ff: widths. activation: :func:`relu` (Vaswani et al. 2017) or :func:`gelu`.
        dropout: applied to the hidden activations in training mode (0 by default, as in the book's runs).
    Parameters: ``ffn_param_count(d_model, d_ff, bias)``.
    """

    def __init__(self, d_model: int, d_ff: int, activation: Callable[[torch.Tensor], torch.Tensor] = relu,
                 bias: bool = True, dropout: float = 0.0):
        super().__init__()
        ffn_param_count(d_model, d_ff)  # validates the widths with a clear message
        check_real(dropout, "dropout", at_least=0, below=1)
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.linear1.in_features:
            raise ValueError(
                f"x must have width d_model={self.linear1.in_features}, got shape {tuple(x.shape)}"
            )
        return self.linear2(self.dropout(self.activation(self.linear1(x))))  # (..., d_ff) -> (..., d_model)
