r"""KV-cache memory of a decoder-only Transformer (chapter "KV-cache memory").

Per token, all layers (eq. kv-bytes):

.. math::
    b_\text{token} = 2\,L\,h_{kv}\,d_k\,p
    \qquad(\text{multi-head: } h_{kv} d_k = d_\text{model}, \text{ so } 2\,L\,d_\text{model}\,p)

with the factor 2 for K and V, :math:`h_{kv} = h` (multi-head), :math:`1 \le h_{kv} < h` (grouped-query,
Ainslie et al. 2023) or :math:`1` (multi-query, Shazeer 2019). Multi-head latent attention (DeepSeek-AI 2024,
eq. 14 of the DeepSeek-V2 paper) caches :math:`(d_c + d_h^R)\,L\,p` bytes per token: one latent of width
:math:`d_c` (``kv_lora_rank``) and one shared rotary key of width :math:`d_h^R` (``qk_rope_head_dim``), no
factor 2. A layer with a sliding window of :math:`w` tokens caches :math:`\min(n, w)` of them, so a model whose
layers differ (Gemma 2: alternating; Gemma 3: five local to one global) caches
:math:`\sum_i \min(n, w_i)` token-layers per sequence: the sum is taken layer by layer.
"""

from __future__ import annotations

from .config import ModelConfig
from .units import as_count, as_nonneg_bytes, bytes_per_element

__all__ = [
    "kv_cache_bytes_per_token",
    "mha_kv_cache_bytes_per_token",
    "mla_cache_bytes_per_token",
    "cached_tokens",
    "kv_cache_bytes",
    "kv_elements_per_token_layer",
    "model_kv_bytes_per_token",
    "cached_token_layers",
    "model_kv_bytes_per_sequence",
    "model_kv_cache_bytes",
]


def kv_cache_bytes_per_token(
    n_layers: int, n_kv_heads: int, head_dim: int, dtype: str = "fp16"
) -> float:
    """Bytes of K and V cached per token, all layers: 2 L h_kv d_k p.

    Multi-head attention: n_kv_heads = h and head_dim = d_model / h
    (then 2 L d_model p); grouped-query: the key/value heads; MQA: 1.
    Example: L = 32, h = 32, d_k = 128, fp16 -> 524,288 B = 512 KiB.
    """
    n_layers = as_count(n_layers, "n_layers")
    n_kv_heads = as_count(n_kv_heads, "n_kv_heads")
    head_dim = as_count(head_dim, "head_dim")
    return 2 * n_layers * n_kv_heads * head_dim * bytes_per_element(dtype)


def mha_kv_cache_bytes_per_token(n_layers: int, d_model: int, n_heads: int, dtype: str = "fp16") -> float:
    r"""Bytes of K and V cached per token by multi-head attention: :math:`2\,L\,d_\text{model}\,p`.

    The special case :math:`h_{kv} = h`, :math:`d_k = d_\text{model}/h` of :func:`kv_cache_bytes_per_token`
    (Vaswani et al. 2017); ``n_heads`` must divide ``d_model``. Use :func:`kv_cache_bytes_per_token` for
    grouped-query and multi-query attention, where the cache is :math:`h / h_{kv}` times smaller.
    """
    n_layers = as_count(n_layers, "n_layers")
    d_model = as_count(d_model, "d_model")
    n_heads = as_count(n_heads, "n_heads")
    if d_model % n_heads:
        raise ValueError(
            f"d_model={d_model} is not divisible by n_heads={n_heads} (d_model % n_heads = {d_model % n_heads}):"
            " multi-head attention needs d_k = d_model / n_heads to be a whole number"
        )
    return kv_cache_bytes_per_token(n_layers, n_heads, d_model // n_heads, dtype)


def mla_cache_bytes_per_token(n_layers: int, kv_lora_rank: int, qk_rope_head_dim: int, dtype: str = "bf16") -> float:
    r"""Bytes cached per token by multi-head latent attention: :math:`L\,(d_c + d_h^R)\,p`.

    One compressed latent :math:`c^{KV}` of width :math:`d_c` (``kv_lora_rank``) and one rotary key
    :math:`k^R` of width :math:`d_h^R` (``qk_rope_head_dim``) shared by all heads, per layer (DeepSeek-AI 2024,
    DeepSeek-V2, section 2.1). Keys and values are both recovered from the latent, so there is no factor 2.
    """
    n_layers = as_count(n_layers, "n_layers")
    kv_lora_rank = as_count(kv_lora_rank, "kv_lora_rank")
    qk_rope_head_dim = as_count(qk_rope_head_dim, "qk_rope_head_dim")
    return n_layers * (kv_lora_rank + qk_rope_head_dim) * bytes_per_element(dtype)


def cached_tokens(context: int, sliding_window: int | None = None) -> int:
    """Tokens held in one layer's cache for a sequence: ``context``, or ``min(context, sliding_window)`` with a
    sliding window (a rolling buffer keeps only the last ``sliding_window`` keys and values, Jiang et al. 2023)."""
    context = as_count(context, "context")
    if sliding_window is None:
        return context
    return min(context, as_count(sliding_window, "sliding_window"))


def kv_cache_bytes(
    bytes_per_token: float, context: int, sequences: int = 1, sliding_window: int | None = None
) -> float:
    """Bytes of KV cache for ``sequences`` sequences of ``context`` tokens, every layer with the same window:
    ``bytes_per_token * cached_tokens(context, sliding_window) * sequences``."""
    bytes_per_token = as_nonneg_bytes(bytes_per_token, "bytes_per_token")
    sequences = as_count(sequences, "sequences")
    return bytes_per_token * cached_tokens(context, sliding_window) * sequences


def kv_elements_per_token_layer(cfg: ModelConfig) -> int:
    """Numbers cached per token per layer: ``2 * n_kv_heads * head_dim``, or ``kv_lora_rank + qk_rope_head_dim``
    for latent attention."""
    if cfg.kv_lora_rank is not None:
        return cfg.kv_lora_rank + cfg.qk_rope_head_dim
    return 2 * cfg.n_kv_heads * cfg.head_dim


def model_kv_bytes_per_token(cfg: ModelConfig, kv_dtype: str = "bf16") -> float:
    """KV-cache bytes per token held by every layer: :func:`kv_cache_bytes_per_token` or, for latent attention,
    :func:`mla_cache_bytes_per_token` (a windowed layer stops adding bytes once the window is full)."""
    if cfg.kv_lora_rank is not None:
        return mla_cache_bytes_per_token(cfg.n_layers, cfg.kv_lora_rank, cfg.qk_rope_head_dim, kv_dtype)
    return kv_cache_bytes_per_token(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, kv_dtype)


def cached_token_layers(cfg: ModelConfig, context: int, layers: range | None = None) -> int:
    r""":math:`\sum_i \min(n, w_i)` over ``layers`` (default: all): the (token, layer) pairs one sequence of
    ``context`` tokens keeps in the cache, each layer with its own window."""
    context = as_count(context, "context")
    windows = cfg.windows
    return sum(cached_tokens(context, windows[i]) for i in (layers if layers is not None else range(cfg.n_layers)))


def model_kv_bytes_per_sequence(cfg: ModelConfig, context: int, kv_dtype: str = "bf16") -> float:
    """KV-cache bytes of one sequence of ``context`` tokens, summed layer by layer with each layer's window."""
    per_token_layer = kv_elements_per_token_layer(cfg) * bytes_per_element(kv_dtype)
    return per_token_layer * cached_token_layers(cfg, context)


def model_kv_cache_bytes(cfg: ModelConfig, context: int, sequences: int = 1, kv_dtype: str = "bf16") -> float:
    """KV-cache bytes for ``sequences`` sequences of ``context`` tokens, each layer's window applied."""
    return model_kv_bytes_per_sequence(cfg, context, kv_dtype) * as_count(sequences, "sequences")
