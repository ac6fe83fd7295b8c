r"""Memory and compute sizing of a decoder-only Transformer at inference: parameters, weights, KV cache, FLOPs,
and the number of GPUs a workload needs.

Units: bytes are plain ints (or floats for int4's half byte); ``GB = 10**9`` and ``GiB = 2**30`` come from
:mod:`lib.constants` and are never swapped. Bytes per element come from ``lib.constants.BYTES_PER_DTYPE``.

The KV cache (chapter "KV-cache memory"), per token, all layers (eq. kv-bytes):

.. math::
    b_\text{token} = 2\,L\,h_{kv}\,d_k\,p
    \qquad(\text{multi-head: } h_{kv} d_k = d_\text{model}, \text{ so } 2\,L\,d_\text{model}\,p)

with the factor 2 for K and V, :math:`h_{kv} = h` (multi-head), :math:`1 \le h_{kv} < h` (grouped-query,
Ainslie et al. 2023) or :math:`1` (multi-query, Shazeer 2019). Multi-head latent attention (DeepSeek-AI 2024,
eq. 14 of the DeepSeek-V2 paper) caches :math:`(d_c + d_h^R)\,L\,p` bytes per token: one latent of width
:math:`d_c` (``kv_lora_rank``) and one shared rotary key of width :math:`d_h^R` (``qk_rope_head_dim``), no
factor 2. A sliding window of :math:`w` tokens caps the cached tokens at :math:`\min(n, w)`.

Run ``python -m lib.sizing CONFIG.json`` for the capacity planner's report (see :func:`main`).
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .constants import BYTES_PER_DTYPE, GB, KB, MB, TB, GiB, KiB, MiB, TiB
from .flops import PerTokenFlops, crossover_length, forward_flops_per_token
from .model_config import ConfigError, ModelConfig, load_config
from .multihead import matmul_flops

__all__ = [
    "DTYPE_ALIASES",
    "bytes_per_element",
    "parse_bytes",
    "kv_cache_bytes_per_token",
    "mha_kv_cache_bytes_per_token",
    "mla_cache_bytes_per_token",
    "cached_tokens",
    "kv_cache_bytes",
    "weight_bytes",
    "naive_gpu_count",
    "ParameterCount",
    "parameter_count",
    "model_kv_bytes_per_token",
    "model_kv_cache_bytes",
    "kv_elements_per_token_layer",
    "forward_flops",
    "model_crossover_length",
    "valid_tp_degrees",
    "TPLayout",
    "tp_layout",
    "GPUPlan",
    "plan_gpus",
    "report",
    "format_report",
    "planner_html",
    "main",
]

#: Names accepted for a number format (config.json's ``torch_dtype`` spellings included).
DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "float64": "fp64",
}


def _count(value: Any, name: str, *, minimum: int = 1) -> int:
    """An int count of at least ``minimum`` (booleans refused), or a ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        what = "positive" if minimum == 1 else f"at least {minimum}"
        raise ValueError(f"{name} must be {what}, got {value}")
    return int(value)


def _fraction(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0 < value <= 1:
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)


def _nonneg_bytes(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number of bytes, got {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite, non-negative number of bytes, got {value!r}")
    return value


def bytes_per_element(dtype: str) -> float:
    """Bytes per element of ``dtype`` (``"fp16"``, ``"bf16"``, ``"fp8"``, ``"int8"``, ``"int4"``, ``"fp32"``, or a
    ``torch_dtype`` spelling such as ``"bfloat16"``), from ``lib.constants.BYTES_PER_DTYPE``."""
    if not isinstance(dtype, str):
        raise ValueError(f"dtype must be a string such as 'bf16', got {type(dtype).__name__} {dtype!r}")
    key = DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
    if key not in BYTES_PER_DTYPE:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(BYTES_PER_DTYPE)}")
    return BYTES_PER_DTYPE[key]


_UNITS = {"b": 1, "kb": KB, "mb": MB, "gb": GB, "tb": TB, "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB}


def parse_bytes(text: str, *, allow_zero: bool = False) -> int:
    """Parse a memory size such as ``"80GB"`` (80·10⁹ bytes), ``"80 GiB"`` (80·2³⁰), ``"141GB"`` or ``"512MiB"``.

    A unit is required (a bare number is ambiguous between GB and GiB, the very confusion this module exists to
    avoid); units are case-insensitive: B, KB, MB, GB, TB (powers of 10) and KiB, MiB, GiB, TiB (powers of 2).
    Zero is refused unless ``allow_zero`` (an overhead may be zero, a GPU's memory may not).
    """
    if not isinstance(text, str):
        raise ValueError(f"memory size must be a string such as '80GB', got {type(text).__name__} {text!r}")
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m:
        raise ValueError(f"cannot read memory size {text!r}: expected a number and a unit, e.g. '80GB' or '80GiB'")
    number, unit = float(m.group(1)), m.group(2).lower()
    if not unit:
        raise ValueError(f"memory size {text!r} has no unit: write GB (10**9 bytes) or GiB (2**30 bytes)")
    if unit not in _UNITS:
        raise ValueError(f"unknown unit {m.group(2)!r} in {text!r}; use one of B, KB, MB, GB, TB, KiB, MiB, GiB, TiB")
    value = number * _UNITS[unit]
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"memory size must be positive, got {text!r}")
    return round(value)


# ------------------------------------------------------------------------------------------------ KV cache


def kv_cache_bytes_per_token(n_layers: int, n_kv_heads: int, head_dim: int, dtype: str = "fp16") -> float:
    r"""Bytes of K and V cached per token, all layers: :math:`2\,L\,h_{kv}\,d_k\,p` (eq. kv-bytes).

    Multi-head attention: pass ``n_kv_heads = h`` and ``head_dim = d_model / h`` (then this is
    :math:`2 L d_\text{model} p`); grouped-query: the number of key/value heads; multi-query: ``1``.
    Example: ``L = 32``, ``h = 32``, ``d_k = 128``, fp16 → 524,288 B = 512 KiB.
    """
    n_layers = _count(n_layers, "n_layers")
    n_kv_heads = _count(n_kv_heads, "n_kv_heads")
    head_dim = _count(head_dim, "head_dim")
    return 2 * n_layers * n_kv_heads * head_dim * bytes_per_element(dtype)


def mha_kv_cache_bytes_per_token(n_layers: int, d_model: int, n_heads: int, dtype: str = "fp16") -> float:
    r"""Bytes of K and V cached per token by multi-head attention: :math:`2\,L\,d_\text{model}\,p`.

    The special case :math:`h_{kv} = h`, :math:`d_k = d_\text{model}/h` of :func:`kv_cache_bytes_per_token`
    (Vaswani et al. 2017); ``n_heads`` must divide ``d_model``. Use :func:`kv_cache_bytes_per_token` for
    grouped-query and multi-query attention, where the cache is :math:`h / h_{kv}` times smaller.
    """
    n_layers = _count(n_layers, "n_layers")
    d_model = _count(d_model, "d_model")
    n_heads = _count(n_heads, "n_heads")
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
    n_layers = _count(n_layers, "n_layers")
    kv_lora_rank = _count(kv_lora_rank, "kv_lora_rank")
    qk_rope_head_dim = _count(qk_rope_head_dim, "qk_rope_head_dim")
    return n_layers * (kv_lora_rank + qk_rope_head_dim) * bytes_per_element(dtype)


def cached_tokens(context: int, sliding_window: int | None = None) -> int:
    """Tokens held in a sequence's cache: ``context``, or ``min(context, sliding_window)`` with a sliding window
    (a rolling buffer keeps only the last ``sliding_window`` keys and values, Jiang et al. 2023)."""
    context = _count(context, "context")
    if sliding_window is None:
        return context
    return min(context, _count(sliding_window, "sliding_window"))


def kv_cache_bytes(
    bytes_per_token: float, context: int, sequences: int = 1, sliding_window: int | None = None
) -> float:
    """Bytes of KV cache for ``sequences`` sequences of ``context`` tokens:
    ``bytes_per_token * cached_tokens(context, sliding_window) * sequences``."""
    bytes_per_token = _nonneg_bytes(bytes_per_token, "bytes_per_token")
    sequences = _count(sequences, "sequences")
    return bytes_per_token * cached_tokens(context, sliding_window) * sequences


def weight_bytes(n_params: int, dtype: str = "fp16") -> float:
    """Bytes of ``n_params`` weights stored as ``dtype`` (int4: half a byte each, scales not counted)."""
    return _count(n_params, "n_params") * bytes_per_element(dtype)


def naive_gpu_count(total_bytes: float, gpu_memory_bytes: int) -> int:
    """The back-of-envelope count: ``ceil(total_bytes / gpu_memory_bytes)``, as if every byte of every GPU were
    usable and a model could be cut anywhere. :func:`plan_gpus` applies the serving constraints."""
    total_bytes = _nonneg_bytes(total_bytes, "total_bytes")
    gpu_memory_bytes = _count(gpu_memory_bytes, "gpu_memory_bytes")
    return max(1, math.ceil(total_bytes / gpu_memory_bytes))


# ------------------------------------------------------------------------------------------------ parameters


@dataclass(frozen=True)
class ParameterCount:
    """Parameters of a model, by part. ``active`` is what one token uses (routed experts: only the top-k)."""

    embedding: int  #: input token table (and learned positions)
    lm_head: int  #: the output projection (0 when tied to the input table)
    attention: int  #: all layers
    ffn: int  #: all layers, every expert
    norms: int  #: all norms, the final one included
    ffn_active: int  #: all layers, shared experts and the top-k routed ones only
    kv_projection: int  #: the part of ``attention`` that maps to keys and values (replicated under wide TP)

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.attention + self.ffn + self.norms

    @property
    def active(self) -> int:
        return self.total - self.ffn + self.ffn_active


def _linear(d_in: int, d_out: int, bias: bool) -> int:
    return d_in * d_out + (d_out if bias else 0)


def _ffn_params(cfg: ModelConfig, d_ff: int) -> int:
    n_in = 2 if cfg.gated else 1  # gate and up (gated) or up (plain)
    return n_in * _linear(cfg.d_model, d_ff, cfg.mlp_bias) + _linear(d_ff, cfg.d_model, cfg.mlp_bias)


def _attention_params(cfg: ModelConfig) -> tuple[int, int]:
    """(parameters of one attention layer, of which the key/value projections)."""
    d, h = cfg.d_model, cfg.n_heads
    if cfg.kv_lora_rank is not None:  # MLA (DeepSeek-V2, section 2.1)
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        if cfg.q_lora_rank is None:
            q = d * h * qk
        else:  # down-projection, its RMSNorm, up-projection
            q = d * cfg.q_lora_rank + cfg.q_lora_rank + cfg.q_lora_rank * h * qk
        kv_down = d * (cfg.kv_lora_rank + cfg.qk_rope_head_dim)  # latent and the shared rotary key
        kv_norm = cfg.kv_lora_rank
        kv_up = cfg.kv_lora_rank * h * (cfg.qk_nope_head_dim + cfg.v_head_dim)
        o = h * cfg.v_head_dim * d
        return q + kv_down + kv_norm + kv_up + o, 0
    w, w_kv = h * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    kv = 2 * _linear(d, w_kv, cfg.qkv_bias)
    return _linear(d, w, cfg.qkv_bias) + kv + _linear(w, d, cfg.o_bias), kv


def parameter_count(cfg: ModelConfig) -> ParameterCount:
    r"""Count a model's parameters from its configuration, part by part.

    Per layer: attention (:math:`W_Q, W_K, W_V, W_O`, biases where the family has them; or MLA's projections),
    the feed-forward block (3 matrices gated, 2 plain; a mixture-of-experts layer has a router of
    :math:`d_\text{model} \times E` and :math:`E` routed plus the shared experts), and ``norms_per_layer``
    norms (:math:`d_\text{model}` weights each, twice that for LayerNorm with a bias). Plus the token table
    :math:`V d_\text{model}`, a learned position table, the final norm and an untied output head.
    Reproduces the published counts of the fixtures exactly (tests/test_sizing.py).
    """
    d = cfg.d_model
    norm = d * (2 if cfg.norm_bias else 1)
    attn_layer, kv_layer = _attention_params(cfg)
    ffn = ffn_active = 0
    for i in range(cfg.n_layers):
        if cfg.is_moe_layer(i):
            expert = _ffn_params(cfg, cfg.moe_d_ff)
            router = d * cfg.n_routed_experts
            shared = cfg.n_shared_experts * expert
            ffn += router + cfg.n_routed_experts * expert + shared
            ffn_active += router + cfg.n_experts_per_tok * expert + shared
        else:
            ffn += _ffn_params(cfg, cfg.d_ff)
            ffn_active += _ffn_params(cfg, cfg.d_ff)
    return ParameterCount(
        embedding=cfg.vocab_size * d + cfg.n_positions * d,
        lm_head=0 if cfg.tie_embeddings else cfg.vocab_size * d,
        attention=cfg.n_layers * attn_layer,
        ffn=ffn,
        norms=cfg.n_layers * cfg.norms_per_layer * norm + norm,
        ffn_active=ffn_active,
        kv_projection=cfg.n_layers * kv_layer,
    )


# ------------------------------------------------------------------------------------------------ KV per model


def kv_elements_per_token_layer(cfg: ModelConfig) -> int:
    """Numbers cached per token per layer: ``2 * n_kv_heads * head_dim``, or ``kv_lora_rank + qk_rope_head_dim``
    for latent attention."""
    if cfg.kv_lora_rank is not None:
        return cfg.kv_lora_rank + cfg.qk_rope_head_dim
    return 2 * cfg.n_kv_heads * cfg.head_dim


def model_kv_bytes_per_token(cfg: ModelConfig, kv_dtype: str = "bf16") -> float:
    """KV-cache bytes per cached token for ``cfg``: :func:`kv_cache_bytes_per_token` or, for latent attention,
    :func:`mla_cache_bytes_per_token`."""
    if cfg.kv_lora_rank is not None:
        return mla_cache_bytes_per_token(cfg.n_layers, cfg.kv_lora_rank, cfg.qk_rope_head_dim, kv_dtype)
    return kv_cache_bytes_per_token(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, kv_dtype)


def model_kv_cache_bytes(cfg: ModelConfig, context: int, sequences: int = 1, kv_dtype: str = "bf16") -> float:
    """KV-cache bytes for ``sequences`` sequences of ``context`` tokens, the model's sliding window applied."""
    return kv_cache_bytes(model_kv_bytes_per_token(cfg, kv_dtype), context, sequences, cfg.sliding_window)


# ------------------------------------------------------------------------------------------------ FLOPs


def _active_ffn_width(cfg: ModelConfig, moe: bool) -> int:
    """Width of one dense block with the FLOPs of a layer's active feed-forward part (top-k routed plus shared
    experts of width ``moe_d_ff`` cost the same matmul FLOPs as one block of the summed width)."""
    if moe:
        return (cfg.n_experts_per_tok + cfg.n_shared_experts) * cfg.moe_d_ff
    return cfg.d_ff


def forward_flops(cfg: ModelConfig, n_context: int, *, include_lm_head: bool = True) -> PerTokenFlops:
    r"""Forward matmul FLOPs of one token that attends to ``n_context`` positions (see
    :func:`lib.flops.forward_flops_per_token`, whose formulas this uses for every standard layer).

    * The sliding window caps the keys a token attends to at ``min(n_context, sliding_window)``.
    * A mixture-of-experts layer counts only the active experts (top-k routed plus shared); the router's
      :math:`2\,d_\text{model} E` FLOPs are left out, like the other non-matmul work.
    * Latent attention (MLA) counts its projections from their shapes (:func:`lib.multihead.matmul_flops`)
      and its scores over the full per-head widths, :math:`2 n h (d^{nope}+d^R) + 2 n h d_v`, the
      straightforward (not weight-absorbed) evaluation.
    """
    n_context = _count(n_context, "n_context")
    keys = cached_tokens(n_context, cfg.sliding_window)
    vocab = cfg.vocab_size if include_lm_head else None
    n_moe = cfg.n_moe_layers
    groups = [(cfg.n_layers - n_moe, False), (n_moe, True)]
    parts = np.zeros(4, dtype=object)
    for n_layers, moe in groups:
        if n_layers == 0:
            continue
        if cfg.kv_lora_rank is None:
            per = forward_flops_per_token(
                keys, cfg.d_model, n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
                _active_ffn_width(cfg, moe), cfg.gated,
            )
            parts += [per.attention, per.projections, per.ffn, 0]
        else:
            h, qk = cfg.n_heads, cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
            attention = matmul_flops(1, h * qk, keys) + matmul_flops(1, h * cfg.v_head_dim, keys)
            attn_params, _ = _attention_params(cfg)
            norm_params = cfg.kv_lora_rank + (cfg.q_lora_rank or 0)  # elementwise, not matmuls
            projections = matmul_flops(1, attn_params - norm_params, 1)
            ffn = forward_flops_per_token(
                1, cfg.d_model, 1, 1, 1, 1, _active_ffn_width(cfg, moe), cfg.gated
            ).ffn
            parts += [n_layers * attention, n_layers * projections, n_layers * ffn, 0]
    if vocab is not None:
        parts[3] = matmul_flops(1, cfg.d_model, vocab)
    return PerTokenFlops(*(int(p) for p in parts))


def model_crossover_length(cfg: ModelConfig) -> float:
    """Context length at which a token's attention-score FLOPs equal its feed-forward FLOPs (dense layers, or the
    active experts of a mixture-of-experts layer; the sliding window ignored).

    Standard attention: :func:`lib.flops.crossover_length` (unmasked scores, no projections). Latent attention:
    the same balance from :func:`forward_flops`, both parts being linear in the context length.
    """
    moe = cfg.n_moe_layers > cfg.n_layers // 2  # the kind of layer most layers are
    width = _active_ffn_width(cfg, moe)
    if cfg.kv_lora_rank is None:
        return crossover_length(
            cfg.d_model, width, gated=cfg.gated, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads,
            head_dim=cfg.head_dim,
        )
    one = forward_flops(_replace_window(cfg, None), 1, include_lm_head=False)
    per_layer_attention = one.attention / cfg.n_layers
    ffn = forward_flops_per_token(1, cfg.d_model, 1, 1, 1, 1, width, cfg.gated).ffn
    return ffn / per_layer_attention


def _replace_window(cfg: ModelConfig, window: int | None) -> ModelConfig:
    from dataclasses import replace

    return replace(cfg, sliding_window=window)


# ------------------------------------------------------------------------------------------------ GPU plan


def valid_tp_degrees(n_heads: int, n_kv_heads: int, max_degree: int = 64) -> list[int]:
    """Tensor-parallel degrees ``t`` a serving engine accepts (vLLM's rules): ``t`` divides the number of query
    heads, and either ``t`` divides the key/value heads or the key/value heads divide ``t`` (then each key/value
    head is replicated on ``t / n_kv_heads`` GPUs)."""
    n_heads = _count(n_heads, "n_heads")
    n_kv_heads = _count(n_kv_heads, "n_kv_heads")
    max_degree = _count(max_degree, "max_degree")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
    return [
        t for t in range(1, max_degree + 1)
        if n_heads % t == 0 and (n_kv_heads % t == 0 or t % n_kv_heads == 0)
    ]


@dataclass(frozen=True)
class TPLayout:
    """What one GPU of a tensor-parallel group of ``degree`` GPUs holds."""

    degree: int
    weight_bytes_per_gpu: float  #: weights split over the group (key/value projections replicated if needed)
    kv_bytes_per_token_per_gpu: float  #: this GPU's share of one cached token
    kv_replication: int  #: how many GPUs hold each key/value head (1: no replication)


def tp_layout(cfg: ModelConfig, degree: int, dtype: str = "bf16", kv_dtype: str = "bf16",
              *, replicate_weights: bool = False) -> TPLayout:
    r"""Split a model over a tensor-parallel group of ``degree`` GPUs.

    Weights: every matrix split ``degree`` ways (``replicate_weights=True``: each GPU holds a full copy, as in
    pure data parallelism); when ``degree`` exceeds the key/value heads, each key/value head (its projection
    weights and its cache) lives on ``degree / n_kv_heads`` GPUs. Latent attention's cache is one latent per
    token that every GPU needs, so it is held in full on each GPU. Norms are counted as split too (they are a
    few thousand numbers).
    """
    degree = _count(degree, "degree")
    valid = valid_tp_degrees(cfg.n_heads, cfg.n_kv_heads, max(degree, 1))
    if degree not in valid:
        raise ValueError(
            f"tensor-parallel degree {degree} is impossible for {cfg.n_heads} query heads and {cfg.n_kv_heads}"
            f" key/value heads; valid degrees up to {degree}: {valid}"
        )
    params = parameter_count(cfg)
    p = bytes_per_element(dtype)
    if cfg.kv_lora_rank is not None:
        replication = degree
        kv_token = model_kv_bytes_per_token(cfg, kv_dtype)  # the full latent on every GPU
    else:
        replication = max(1, degree // cfg.n_kv_heads)
        kv_token = model_kv_bytes_per_token(cfg, kv_dtype) * replication / degree
    kv_rep = 1 if cfg.kv_lora_rank is not None else replication
    if replicate_weights:
        w = params.total * p
    else:
        w = (params.total - params.kv_projection + params.kv_projection * kv_rep) * p / degree
    return TPLayout(degree, w, kv_token, replication)


@dataclass(frozen=True)
class GPUPlan:
    """A way to serve a workload, and what it costs."""

    gpus: int  #: total GPUs = replicas * tp_degree
    tp_degree: int
    replicas: int
    sequences_per_replica: int  #: how many full-length sequences one replica's cache holds
    usable_bytes_per_gpu: float  #: fraction * memory - overhead
    weight_bytes_per_gpu: float
    kv_bytes_per_gpu: float  #: cache each GPU holds at the full workload (busiest replica)
    naive_gpus: int  #: ceil((weights + cache) / memory), no constraint applied


def plan_gpus(
    cfg: ModelConfig,
    *,
    users: int,
    context: int,
    gpu_memory_bytes: int,
    memory_fraction: float = 0.9,
    overhead_bytes: float = 0,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    replicate_weights: bool = False,
    max_tp: int = 64,
) -> GPUPlan:
    r"""The fewest GPUs that serve ``users`` concurrent sequences of ``context`` tokens, under serving rules.

    Assumptions, each a parameter: a serving engine uses at most ``memory_fraction`` of each GPU's memory for
    weights plus cache (vLLM's ``gpu_memory_utilization`` defaults to 0.9), minus ``overhead_bytes`` per GPU
    (CUDA context, activations, allocator slack); the model runs as ``replicas`` copies, each over a
    tensor-parallel group of ``t`` GPUs with ``t`` from :func:`valid_tp_degrees`; a sequence's cache lives
    within one replica. For every valid ``t``, the cache room per GPU after the weights gives the sequences a
    replica holds, :math:`s = \lfloor (u - w_t) / (b_t\,n_c) \rfloor` (``n_c`` = cached tokens), and
    :math:`\lceil \text{users}/s \rceil` replicas; the smallest total wins (ties: the smaller ``t``).
    Raises ``ValueError`` if no degree up to ``max_tp`` fits even one sequence.
    """
    users = _count(users, "users")
    context = _count(context, "context")
    gpu_memory_bytes = _count(gpu_memory_bytes, "gpu_memory_bytes")
    memory_fraction = _fraction(memory_fraction, "memory_fraction")
    overhead_bytes = _nonneg_bytes(overhead_bytes, "overhead_bytes")
    kv_dtype = dtype if kv_dtype is None else kv_dtype
    usable = memory_fraction * gpu_memory_bytes - overhead_bytes
    if usable <= 0:
        raise ValueError(
            f"nothing is left per GPU: memory_fraction * gpu_memory_bytes = {memory_fraction * gpu_memory_bytes:.4g}"
            f" B is not more than overhead_bytes = {overhead_bytes:.4g} B"
        )
    n_cached = cached_tokens(context, cfg.sliding_window)
    total = parameter_count(cfg).total * bytes_per_element(dtype) + model_kv_cache_bytes(cfg, context, users, kv_dtype)
    naive = naive_gpu_count(total, gpu_memory_bytes)
    best: GPUPlan | None = None
    for t in valid_tp_degrees(cfg.n_heads, cfg.n_kv_heads, max_tp):
        lay = tp_layout(cfg, t, dtype, kv_dtype, replicate_weights=replicate_weights)
        room = usable - lay.weight_bytes_per_gpu
        per_seq = lay.kv_bytes_per_token_per_gpu * n_cached
        if room < per_seq:
            continue
        seqs = int(room // per_seq)
        replicas = math.ceil(users / seqs)
        busiest = math.ceil(users / replicas)
        plan = GPUPlan(replicas * t, t, replicas, seqs, usable, lay.weight_bytes_per_gpu, busiest * per_seq, naive)
        if best is None or plan.gpus < best.gpus:
            best = plan
    if best is None:
        raise ValueError(
            f"the model does not fit: no tensor-parallel degree up to {max_tp} leaves room for one sequence of"
            f" {context} tokens on GPUs of {gpu_memory_bytes / GB:.4g} GB ({gpu_memory_bytes / GiB:.4g} GiB)"
            f" with memory_fraction={memory_fraction} and overhead {overhead_bytes / GB:.4g} GB"
        )
    return best


# ------------------------------------------------------------------------------------------------ report / CLI


def report(
    cfg: ModelConfig,
    *,
    context: int | None = None,
    users: int = 1,
    gpu_memory_bytes: int = 80 * GB,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    memory_fraction: float = 0.9,
    overhead_bytes: float = 0,
) -> dict[str, Any]:
    """Everything the planner says about ``cfg`` for a workload, as a JSON-ready dict (bytes as numbers, with
    their GB and GiB forms). ``context`` defaults to 4096 tokens."""
    kv_dtype = dtype if kv_dtype is None else kv_dtype
    context = 4096 if context is None else _count(context, "context")
    params = parameter_count(cfg)
    w_bytes = params.total * bytes_per_element(dtype)
    kv_tok = model_kv_bytes_per_token(cfg, kv_dtype)
    kv_total = model_kv_cache_bytes(cfg, context, users, kv_dtype)
    fl = forward_flops(cfg, context)
    plan = plan_gpus(cfg, users=users, context=context, gpu_memory_bytes=gpu_memory_bytes,
                     memory_fraction=memory_fraction, overhead_bytes=overhead_bytes, dtype=dtype, kv_dtype=kv_dtype)
    return {
        "model": cfg.name or cfg.model_type,
        "model_type": cfg.model_type,
        "attention": cfg.attention_kind,
        "architecture": {k: v for k, v in asdict(cfg).items() if v is not None and k != "name"},
        "parameters": {"total": params.total, "active_per_token": params.active, **asdict(params)},
        "workload": {"context": context, "cached_tokens": cached_tokens(context, cfg.sliding_window), "users": users,
                     "dtype": dtype, "kv_dtype": kv_dtype, "gpu_memory_bytes": gpu_memory_bytes,
                     "memory_fraction": memory_fraction, "overhead_bytes": overhead_bytes},
        "weights_bytes": w_bytes,
        "kv_bytes_per_token": kv_tok,
        "kv_cache_bytes": kv_total,
        "total_bytes": w_bytes + kv_total,
        "flops_per_token": {"attention": fl.attention, "projections": fl.projections, "ffn": fl.ffn,
                            "lm_head": fl.lm_head, "total": fl.total},
        "crossover_context": model_crossover_length(cfg),
        "gpus": asdict(plan),
    }


def _fmt_bytes(b: float) -> str:
    return f"{b:,.0f} B = {b / GB:,.2f} GB = {b / GiB:,.2f} GiB"


def format_report(r: dict[str, Any]) -> str:
    """The readable form of :func:`report` (GB = 10**9 B and GiB = 2**30 B always labelled)."""
    w, p, g, f = r["workload"], r["parameters"], r["gpus"], r["flops_per_token"]
    lines = [
        f"model: {r['model']} ({r['model_type']}, {r['attention']} attention)",
        f"parameters: {p['total']:,} total, {p['active_per_token']:,} active per token",
        f"weights ({w['dtype']}): {_fmt_bytes(r['weights_bytes'])}",
        f"KV cache per token ({w['kv_dtype']}): {r['kv_bytes_per_token']:,.0f} B"
        f" = {r['kv_bytes_per_token'] / KiB:,.2f} KiB",
        f"KV cache for {w['users']} x {w['context']} tokens ({w['cached_tokens']} cached each): "
        f"{_fmt_bytes(r['kv_cache_bytes'])}",
        f"weights + cache: {_fmt_bytes(r['total_bytes'])}",
        f"forward FLOPs per token at context {w['context']}: {f['total']:.4g} (attention scores {f['attention']:.4g},"
        f" projections {f['projections']:.4g}, feed-forward {f['ffn']:.4g}, LM head {f['lm_head']:.4g})",
        f"attention scores = feed-forward FLOPs at context {r['crossover_context']:,.0f}",
        f"GPUs of {w['gpu_memory_bytes'] / GB:,.2f} GB ({w['gpu_memory_bytes'] / GiB:,.2f} GiB): naive "
        f"{g['naive_gpus']}; planned {g['gpus']} = {g['replicas']} replica(s) x tensor-parallel {g['tp_degree']} "
        f"(using {w['memory_fraction']:.0%} of memory minus {w['overhead_bytes'] / GB:,.2f} GB overhead per GPU; "
        f"{g['sequences_per_replica']} sequences fit per replica)",
    ]
    return "\n".join(lines)


def planner_html(presets: dict[str, ModelConfig], element_id: str = "planner-app") -> str:
    """HTML for the in-page calculator: a ``<div>`` carrying the presets' configurations and
    ``BYTES_PER_DTYPE`` as JSON, then ``lib/web/planner.js`` inline in a ``<script>`` (no kernel, no network).

    The script re-implements :func:`parameter_count`, :func:`model_kv_bytes_per_token`, :func:`tp_layout` and
    :func:`plan_gpus` in JavaScript; the browser test checks it against these functions.
    """
    if not presets:
        raise ValueError("presets must name at least one model configuration")
    if not re.fullmatch(r"[A-Za-z][\w-]*", element_id):
        raise ValueError(f"element_id must be a simple HTML id, got {element_id!r}")
    script = (Path(__file__).parent / "web" / "planner.js").read_text(encoding="utf-8")
    if "</script" in script.lower():
        raise ValueError("planner.js must not contain '</script'")
    data = {"bytes_per_dtype": BYTES_PER_DTYPE, "presets": {name: asdict(c) for name, c in presets.items()}}
    style = (
        f"<style>#{element_id} form{{display:grid;grid-template-columns:repeat(auto-fill,minmax(17em,1fr));"
        f"gap:.3em 1.2em;margin-bottom:.8em}}#{element_id} label{{display:flex;justify-content:space-between;"
        f"align-items:center;gap:.5em}}#{element_id} input{{width:8em}}#{element_id} td{{font-family:monospace}}"
        f"</style>\n"
    )
    return style + (
        f'<div id="{element_id}" class="capacity-planner mathjax_ignore" '
        f'data-planner="{html.escape(json.dumps(data), quote=True)}"></div>\n<script>\n{script}</script>'
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def _fraction_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the usage too; we don't)
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    """``python -m lib.sizing CONFIG.json [--context N] [--users N] [--gpu-memory 80GB] [--dtype bf16]
    [--kv-dtype fp8] [--memory-fraction 0.9] [--overhead 0GB] [--json]``.

    Prints the report (or JSON) and returns 0; on bad input prints one line ``error: ...`` to stderr and
    returns 2 (no traceback).
    """
    ap = _Parser(prog="python -m lib.sizing", description="Capacity planner: parameters, memory, FLOPs, GPUs.")
    ap.add_argument("config", help="a model's config.json")
    ap.add_argument("--context", type=_positive_int, default=None, help="tokens per sequence (default 4096)")
    ap.add_argument("--users", type=_positive_int, default=1, help="concurrent sequences (default 1)")
    ap.add_argument("--gpu-memory", default="80GB", help="memory per GPU with a unit: 80GB, 141GB, 80GiB")
    ap.add_argument("--dtype", default="bf16", help="weight format (fp32, bf16, fp16, fp8, int8, int4)")
    ap.add_argument("--kv-dtype", default=None, help="cache format (default: --dtype)")
    ap.add_argument("--memory-fraction", type=_fraction_arg, default=0.9, help="usable fraction (vLLM: 0.9)")
    ap.add_argument("--overhead", default="0GB", help="runtime overhead per GPU with a unit (default 0GB)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = ap.parse_args(argv)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cfg = load_config(args.config)
        for w in caught:
            sys.stderr.write(f"warning: {w.message}\n")
        bytes_per_element(args.dtype)
        if args.kv_dtype is not None:
            bytes_per_element(args.kv_dtype)
        overhead = parse_bytes(args.overhead, allow_zero=True)
        r = report(cfg, context=args.context, users=args.users, gpu_memory_bytes=parse_bytes(args.gpu_memory),
                   dtype=args.dtype, kv_dtype=args.kv_dtype, memory_fraction=args.memory_fraction,
                   overhead_bytes=overhead)
    except (ConfigError, ValueError, TypeError) as err:
        sys.stderr.write(f"error: {err}\n")
        return 2
    sys.stdout.write((json.dumps(r, indent=2) if args.json else format_report(r)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
