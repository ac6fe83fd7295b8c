r"""The position-wise feed-forward block and its activations: the NumPy reference.

Row-vector convention (the book's): a token is a row ``x`` of width ``d_model``; a batch of tokens is
``(..., d_model)``. The block applies the same two linear maps to every token independently:

.. math::
    \operatorname{FFN}(x) = \phi(x W_1 + b_1)\, W_2 + b_2, \qquad
    W_1 \in \mathbb{R}^{d_\text{model} \times d_\text{ff}},\;
    b_1 \in \mathbb{R}^{d_\text{ff}},\;
    W_2 \in \mathbb{R}^{d_\text{ff} \times d_\text{model}},\;
    b_2 \in \mathbb{R}^{d_\text{model}}
    \qquad\text{(eq. ffn)}

with :math:`\phi = \operatorname{ReLU}` in Vaswani et al. (2017, eq. 2) and GELU (Hendrycks & Gimpel 2016)
in BERT/GPT-2. Its parameter count is :math:`2\,d_\text{model} d_\text{ff} + d_\text{ff} + d_\text{model}`
(see :func:`ffn_param_count`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._validate import as_float_array, check_finite, check_int

__all__ = ["relu", "gelu", "gelu_tanh", "feed_forward", "ffn_param_count"]

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _finite(x: Any, name: str) -> np.ndarray:
    x = as_float_array(x, name)
    check_finite(x, name)
    return x


def relu(x: Any) -> np.ndarray:
    r""":math:`\operatorname{ReLU}(x) = \max(0, x)`, elementwise; keeps ``x``'s shape and dtype."""
    x = as_float_array(x, "x")
    return np.maximum(x, x.dtype.type(0))


def gelu(x: Any) -> np.ndarray:
    r"""Exact GELU, :math:`x\,\Phi(x) = \tfrac{x}{2}\big(1 + \operatorname{erf}(x/\sqrt2)\big)` (Hendrycks &
    Gimpel 2016, eq. 1), elementwise; ``torch.nn.functional.gelu``'s default. Computed in float64 and cast
    back to ``x``'s dtype. Its tanh approximation is :func:`gelu_tanh`."""
    x = as_float_array(x, "x")
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)))).astype(x.dtype)


def gelu_tanh(x: Any) -> np.ndarray:
    r"""The tanh approximation of GELU used by GPT-2 (Hendrycks & Gimpel 2016, sec. 2):
    :math:`\tfrac{x}{2}\big(1 + \tanh(\sqrt{2/\pi}\,(x + 0.044715\,x^3))\big)`; ``approximate="tanh"``
    in PyTorch. It differs from :func:`gelu` by at most about 5e-4 (measured in the tests)."""
    x = as_float_array(x, "x")
    c = x.dtype.type(math.sqrt(2.0 / math.pi))
    return x.dtype.type(0.5) * x * (1 + np.tanh(c * (x + x.dtype.type(0.044715) * x**3)))


def feed_forward(
    x: Any, w1: Any, b1: Any, w2: Any, b2: Any, activation: Callable[[np.ndarray], np.ndarray] = relu
) -> np.ndarray:
    r"""The position-wise feed-forward block (eq. ffn): ``activation(x @ w1 + b1) @ w2 + b2``.

    Args:
        x: ``(..., d_model)``; w1: ``(d_model, d_ff)``; b1: ``(d_ff,)``; w2: ``(d_ff, d_model)``;
            b2: ``(d_model,)``. All floating and finite.
        activation: an elementwise function, :func:`relu` (the original paper) or :func:`gelu`.
    Returns:
        ``(..., d_model)``: each token transformed independently of every other.
    """
    named = ((x, "x"), (w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))
    x, w1, b1, w2, b2 = (_finite(t, name) for t, name in named)
    if x.ndim < 1:
        raise ValueError("x must have at least 1 dimension (..., d_model), got a scalar")
    if w1.ndim != 2 or w2.ndim != 2:
        raise ValueError(f"w1 and w2 must be matrices, got w1.shape={w1.shape}, w2.shape={w2.shape}")
    d_model, d_ff = w1.shape
    if x.shape[-1] != d_model:
        raise ValueError(f"x has width {x.shape[-1]} but w1 expects d_model={d_model} (x.shape={x.shape},"
                         f" w1.shape={w1.shape}; rows are tokens: x @ w1)")
    if w2.shape != (d_ff, d_model):
        raise ValueError(f"w2 must have shape (d_ff, d_model) = {(d_ff, d_model)} to match"
                         f" w1.shape={w1.shape}, got {w2.shape}")
    if b1.shape != (d_ff,):
        raise ValueError(f"b1 must have shape (d_ff,) = ({d_ff},), got {b1.shape}")
    if b2.shape != (d_model,):
        raise ValueError(f"b2 must have shape (d_model,) = ({d_model},), got {b2.shape}")
    hidden = activation(x @ w1 + b1)  # (..., d_ff)
    return hidden @ w2 + b2  # (..., d_model)


def ffn_param_count(d_model: int, d_ff: int, bias: bool = True) -> int:
    r"""Parameters of eq. ffn: :math:`2\,d_\text{model} d_\text{ff}` weights plus
    :math:`d_\text{ff} + d_\text{model}` biases (when ``bias``)."""
    d_model, d_ff = check_int(d_model, "d_model"), check_int(d_ff, "d_ff")
    return 2 * d_model * d_ff + ((d_ff + d_model) if bias else 0)
