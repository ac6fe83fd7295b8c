r"""A plain recurrent network, for comparison with attention: its forward pass, the Jacobian chain that a
gradient crosses from the last token back to the first, and its cost in FLOPs.

Shapes: inputs ``x`` are ``(n, d_in)``, the state ``h_t`` has width ``d`` (the recurrent weight ``w_hh`` is
``(d, d)``, the input weight ``w_xh`` is ``(d_in, d)``). The recurrence (Elman 1990), with :math:`h_0 = 0`:

.. math::
    h_t = \tanh(h_{t-1} W_{hh} + x_t W_{xh}), \qquad
    J_t = \frac{\partial h_t}{\partial h_{t-1}} = \operatorname{diag}(1 - h_t^2)\, W_{hh}^\top
    \qquad\text{(eq. rnn-step)}

(row vectors, so :math:`J_t` maps a change of :math:`h_{t-1}` to a change of :math:`h_t`). A gradient from
:math:`h_n` back to :math:`h_1` is multiplied by :math:`J_n J_{n-1} \cdots J_2`: ``n - 1`` factors
(Bengio, Simard and Frasconi 1994; Pascanu, Mikolov and Bengio 2013).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validate import as_float_array, check_int, check_real
from .flops import matmul_flops

__all__ = [
    "rnn_forward",
    "rnn_jacobians",
    "jacobian_chain_norms",
    "random_recurrent_weight",
    "rnn_layer_flops",
]


def random_recurrent_weight(d: int, spectral_radius: float, rng: np.random.Generator) -> np.ndarray:
    """A random ``(d, d)`` Gaussian matrix rescaled so that its spectral radius (largest |eigenvalue|) is
    ``spectral_radius``."""
    d = check_int(d, "d")
    rho = check_real(spectral_radius, "spectral_radius", above=0.0)
    w = rng.normal(size=(d, d)) / np.sqrt(d)
    return w * (rho / np.max(np.abs(np.linalg.eigvals(w))))


def rnn_forward(x: Any, w_xh: Any, w_hh: Any) -> np.ndarray:
    """States ``(n, d)`` of eq. rnn-step for inputs ``x`` ``(n, d_in)``, starting from :math:`h_0 = 0`.

    The loop is sequential by construction: step ``t`` needs ``h_{t-1}``."""
    x, w_xh, w_hh = (as_float_array(a, name) for a, name in ((x, "x"), (w_xh, "w_xh"), (w_hh, "w_hh")))
    if x.ndim != 2 or w_xh.ndim != 2 or w_hh.ndim != 2:
        raise ValueError(f"x, w_xh, w_hh must be 2-D, got shapes {x.shape}, {w_xh.shape}, {w_hh.shape}")
    d = w_hh.shape[0]
    if w_hh.shape != (d, d) or w_xh.shape != (x.shape[1], d):
        raise ValueError(f"w_hh must be (d, d) and w_xh (d_in, d) with d_in = x.shape[1], got x.shape={x.shape}, "
                         f"w_xh.shape={w_xh.shape}, w_hh.shape={w_hh.shape}")
    h = np.zeros((x.shape[0], d), dtype=x.dtype)
    prev = np.zeros(d, dtype=x.dtype)
    for t in range(x.shape[0]):
        prev = np.tanh(prev @ w_hh + x[t] @ w_xh)
        h[t] = prev
    return h


def rnn_jacobians(h: Any, w_hh: Any) -> np.ndarray:
    r"""Step Jacobians of eq. rnn-step, shape ``(n - 1, d, d)``.

    ``J[t-1] = diag(1 - h_t^2) W_hh^T`` maps a change of ``h[t-1]`` to ``h[t]``
    (column-vector convention: the transpose of the book's row-vector J_t).
    """
    h, w_hh = as_float_array(h, "h"), as_float_array(w_hh, "w_hh")
    return (1.0 - h[1:, :, None] ** 2) * w_hh.T[None]  # (n - 1, d, d)


def jacobian_chain_norms(jacobians: Any) -> np.ndarray:
    r"""Spectral norms of the products :math:`J_t J_{t-1} \cdots J_1` for ``t = 1 .. len(jacobians)``:
    entry ``t - 1`` is :math:`\lVert \partial h_t / \partial h_0 \rVert_2` in 0-based states, a path of ``t`` steps."""
    jacobians = as_float_array(jacobians, "jacobians")
    prod = np.eye(jacobians.shape[-1], dtype=jacobians.dtype)
    norms = np.empty(jacobians.shape[0])
    for t, j in enumerate(jacobians):
        prod = j @ prod
        norms[t] = np.linalg.norm(prod, 2)
    return norms


def rnn_layer_flops(n: int, d: int, d_in: int | None = None) -> int:
    r"""Matmul FLOPs of eq. rnn-step over ``n`` tokens: :math:`2 n d^2` for :math:`h W_{hh}` plus
    :math:`2 n d_\text{in} d` for :math:`x W_{xh}`; :math:`4 n d^2` when ``d_in = d`` (the default)."""
    n, d = check_int(n, "n", minimum=0), check_int(d, "d")
    d_in = d if d_in is None else check_int(d_in, "d_in")
    return matmul_flops(n, d, d) + matmul_flops(n, d_in, d)
