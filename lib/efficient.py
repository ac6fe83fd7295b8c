r"""Cheaper attention: a sliding window (sparse) and a kernelised linear attention, with their FLOP counts.

Both are NumPy references for self-attention over one sequence (leading batch/head axes broadcast):
``q, k`` ``(..., n, d_k)``, ``v`` ``(..., n, d_v)``, output ``(..., n, d_v)``.

**Sliding window** (Beltagy et al. 2020 for the symmetric window; Jiang et al. 2023 for the causal one used
here): query :math:`i` attends to the ``window`` most recent keys, :math:`i - w < j \le i`, the keys a
rolling cache of ``window`` tokens holds (:func:`lib.planner.cache.cached_tokens`). Exact softmax attention
restricted to a band; only the band's scores are formed, :func:`sliding_window_pairs` of them.

**Linear attention** (Katharopoulos, Vyas, Pappas and Fleuret 2020): replace :math:`e^{q \cdot k}` by
:math:`\phi(q) \cdot \phi(k)` with the positive feature map :math:`\phi(x) = \operatorname{elu}(x) + 1`. Then

.. math::
    o_i = \frac{\sum_j \phi(q_i)^\top \phi(k_j)\, v_j}{\sum_j \phi(q_i)^\top \phi(k_j)}
        = \frac{\phi(q_i)^\top \big(\sum_j \phi(k_j) v_j^\top\big)}{\phi(q_i)^\top \sum_j \phi(k_j)}
    \qquad\text{(eq. linear-attention)}

and the bracket, a ``(d_k, d_v)`` matrix, is computed once (or as a running sum for the causal form): the
cost is linear in ``n``. It is a different attention, not an approximation of softmax attention with an error
that vanishes: its weights :math:`\phi(q_i)^\top\phi(k_j)` cannot be as peaked as :math:`e^{q_i \cdot k_j}`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validate import as_float_array, check_int
from .attention import default_scale
from .constants import FLOPS_PER_MAC
from .softmax import masked_softmax

__all__ = [
    "sliding_window_mask",
    "sliding_window_attention",
    "sliding_window_pairs",
    "sliding_window_flops",
    "elu_feature_map",
    "linear_attention",
    "causal_linear_attention",
    "linear_attention_weights",
    "linear_attention_flops",
]


def _self_attention_inputs(q: Any, k: Any, v: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q, k, v = (as_float_array(a, name) for a, name in ((q, "q"), (k, "k"), (v, "v")))
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"q, k, v must have at least 2 dimensions, got q.shape={q.shape}, k.shape={k.shape}, "
                         f"v.shape={v.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has width {q.shape[-1]} but k has width {k.shape[-1]} (q.shape={q.shape}, "
                         f"k.shape={k.shape})")
    if not q.shape[-2] == k.shape[-2] == v.shape[-2]:
        raise ValueError(f"self-attention needs one length n for q, k and v, got q.shape={q.shape}, "
                         f"k.shape={k.shape}, v.shape={v.shape}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    return q, k, v


def sliding_window_mask(n: int, window: int) -> np.ndarray:
    """Boolean ``(n, n)`` mask, True where key ``j`` lies in query ``i``'s window: ``i - window < j <= i``."""
    n, window = check_int(n, "n", minimum=0), check_int(window, "window")
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return (j <= i) & (j > i - window)


def sliding_window_attention(
    q: Any, k: Any, v: Any, window: int, scale: float | None = None
) -> np.ndarray:
    """Causal sliding-window attention, forming only the n x window band of scores.

    Row ``i`` gathers keys ``i - window + 1 .. i`` (those before 0 are masked):
    the result equals ``attention(q, k, v, sliding_window_mask(n, window))[0]``
    with ``sliding_window_pairs(n, window)`` scores instead of ``n**2``.
    """
    q, k, v = _self_attention_inputs(q, k, v)
    window = check_int(window, "window")
    n = q.shape[-2]
    s = default_scale(q.shape[-1]) if scale is None else scale
    # (n, window): the key index of each slot of each query's band
    idx = np.arange(n)[:, None] - window + 1 + np.arange(window)[None, :]
    valid = idx >= 0  # slots before the first token are masked
    idx = np.where(valid, idx, 0)
    k_band, v_band = k[..., idx, :], v[..., idx, :]  # (..., n, window, d)
    scores = np.einsum("...id,...iwd->...iw", q, k_band) * q.dtype.type(s)
    a = masked_softmax(scores, valid, axis=-1)  # (..., n, window)
    return np.einsum("...iw,...iwd->...id", a, v_band)  # (..., n, d_v)


def sliding_window_pairs(n: int, window: int) -> int:
    r"""Query-key pairs in the causal window: :math:`\sum_{i=0}^{n-1} \min(i + 1, w)`, which is
    :math:`n(n+1)/2` for :math:`n \le w` and :math:`w(w+1)/2 + (n - w)\,w` otherwise: linear in ``n``."""
    n, window = check_int(n, "n", minimum=0), check_int(window, "window")
    if n <= window:
        return n * (n + 1) // 2
    return window * (window + 1) // 2 + (n - window) * window


def sliding_window_flops(n: int, d_k: int, d_v: int, window: int) -> int:
    """Matmul FLOPs of :func:`sliding_window_attention`: one MAC per pair and unit of width in the scores and
    in the weighted sum, ``FLOPS_PER_MAC * pairs * (d_k + d_v)``."""
    d_k, d_v = check_int(d_k, "d_k"), check_int(d_v, "d_v")
    return FLOPS_PER_MAC * sliding_window_pairs(n, window) * (d_k + d_v)


def elu_feature_map(x: Any) -> np.ndarray:
    r""":math:`\phi(x) = \operatorname{elu}(x) + 1`, elementwise: :math:`x + 1` for :math:`x > 0`, :math:`e^x`
    otherwise. Positive everywhere, so the weights of eq. linear-attention are positive and rows never sum to 0."""
    x = as_float_array(x, "x")
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention_weights(q: Any, k: Any, causal: bool = False) -> np.ndarray:
    r"""The ``(..., n, n)`` weights that linear attention implies, :math:`\phi(q_i)^\top\phi(k_j)` normalised by
    row (zero above the diagonal when ``causal``). Quadratic: for checking and for pictures only."""
    q, k, _ = _self_attention_inputs(q, k, k)
    w = elu_feature_map(q) @ np.swapaxes(elu_feature_map(k), -1, -2)
    if causal:
        w = np.tril(w)
    return w / w.sum(axis=-1, keepdims=True)


def linear_attention(q: Any, k: Any, v: Any) -> np.ndarray:
    """Non-causal linear attention, eq. linear-attention in the linear order: ``(d_k, d_v)`` summary first."""
    q, k, v = _self_attention_inputs(q, k, v)
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)  # (..., n, d_k)
    kv = np.swapaxes(phi_k, -1, -2) @ v  # (..., d_k, d_v): sum_j phi(k_j) v_j^T
    z = phi_k.sum(axis=-2)  # (..., d_k): sum_j phi(k_j)
    return (phi_q @ kv) / (phi_q @ z[..., None])  # (..., n, d_v)


def causal_linear_attention(q: Any, k: Any, v: Any) -> np.ndarray:
    """Causal linear attention: eq. linear-attention with running sums over j <= i.

    Holds all ``(n, d_k, d_v)`` prefix sums at once, for clarity; a recurrent
    implementation keeps one ``(d_k, d_v)`` state and updates it per token.
    """
    q, k, v = _self_attention_inputs(q, k, v)
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)  # (..., n, d_k)
    outer = phi_k[..., :, :, None] * v[..., :, None, :]  # phi(k_j) v_j^T
    kv = np.cumsum(outer, axis=-3)  # (..., n, d_k, d_v)
    z = np.cumsum(phi_k, axis=-2)  # (..., n, d_k)
    num = np.einsum("...id,...ide->...ie", phi_q, kv)  # (..., n, d_v)
    den = np.sum(phi_q * z, axis=-1, keepdims=True)  # (..., n, 1)
    return num / den


def linear_attention_flops(n: int, d_k: int, d_v: int) -> int:
    r"""Matmul FLOPs of linear attention, causal or not: :math:`\phi(K)^\top V` (or its running outer
    products) and :math:`\phi(Q)` times it, :math:`2 \cdot 2 n d_k d_v`, plus the normaliser
    :math:`\phi(Q) z`, :math:`2 n d_k`. The feature map and the sums are elementwise and not counted."""
    n = check_int(n, "n", minimum=0)
    d_k, d_v = check_int(d_k, "d_k"), check_int(d_v, "d_v")
    return FLOPS_PER_MAC * (2 * n * d_k * d_v + n * d_k)
