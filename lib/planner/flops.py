r"""Forward FLOPs of one token for a whole model described by a :class:`~lib.planner.config.ModelConfig`, from the
per-layer formulas of :mod:`lib.flops` (dense, mixture of experts, latent attention, per-layer windows)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..flops import PerTokenFlops, crossover_length, forward_flops_per_token
from ..multihead import matmul_flops
from .cache import cached_tokens
from .config import ModelConfig
from .counts import attention_parameters
from .units import as_count

__all__ = ["forward_flops", "model_crossover_length"]


def _active_ffn_width(cfg: ModelConfig, moe: bool) -> int:
    """Width of one dense block with the FLOPs of a layer's active feed-forward part (top-k routed experts of
    width ``moe_d_ff`` plus the shared MLP cost the same matmul FLOPs as one block of the summed width)."""
    if moe:
        return cfg.n_experts_per_tok * cfg.moe_d_ff + cfg.shared_d_ff
    return cfg.d_ff


def forward_flops(cfg: ModelConfig, n_context: int, *, include_lm_head: bool = True) -> PerTokenFlops:
    r"""Forward matmul FLOPs of one token that attends to ``n_context`` positions (see
    :func:`lib.flops.forward_flops_per_token`, whose formulas this uses for every standard layer).

    * Each layer's sliding window caps the keys a token attends to at ``min(n_context, w_i)``.
    * A mixture-of-experts layer counts only the active experts (top-k routed plus shared); the router's
      :math:`2\,d_\text{model} E` FLOPs are left out, like the other non-matmul work (norms, q/k norms).
    * Latent attention (MLA) counts its projections from their shapes (:func:`lib.multihead.matmul_flops`)
      and its scores over the full per-head widths, :math:`2 n h (d^{nope}+d^R) + 2 n h d_v`, the
      straightforward (not weight-absorbed) evaluation.
    """
    n_context = as_count(n_context, "n_context")
    groups: dict[tuple[int, bool], int] = {}
    for i, w in enumerate(cfg.windows):
        key = (cached_tokens(n_context, w), cfg.is_moe_layer(i))
        groups[key] = groups.get(key, 0) + 1
    parts = np.zeros(4, dtype=object)
    for (keys, moe), n_layers in groups.items():
        if cfg.kv_lora_rank is None:
            per = forward_flops_per_token(
                keys, cfg.d_model, n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
                _active_ffn_width(cfg, moe), cfg.gated,
            )
            parts += [per.attention, per.projections, per.ffn, 0]
        else:
            h, qk = cfg.n_heads, cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
            attention = matmul_flops(1, h * qk, keys) + matmul_flops(1, h * cfg.v_head_dim, keys)
            attn_params, _ = attention_parameters(cfg)
            norm_params = cfg.kv_lora_rank + (cfg.q_lora_rank or 0)  # elementwise, not matmuls
            projections = matmul_flops(1, attn_params - norm_params, 1)
            ffn = forward_flops_per_token(
                1, cfg.d_model, 1, 1, 1, 1, _active_ffn_width(cfg, moe), cfg.gated
            ).ffn
            parts += [n_layers * attention, n_layers * projections, n_layers * ffn, 0]
    if include_lm_head:
        parts[3] = matmul_flops(1, cfg.d_model, cfg.vocab_size)
    return PerTokenFlops(*(int(p) for p in parts))


def model_crossover_length(cfg: ModelConfig) -> float:
    """Context length at which a token's attention-score FLOPs equal its feed-forward FLOPs (dense layers, or the
    active experts of a mixture-of-experts layer; sliding windows ignored).

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
    one = forward_flops(replace(cfg, sliding_window=None, layer_windows=None), 1, include_lm_head=False)
    per_layer_attention = one.attention / cfg.n_layers
    ffn = forward_flops_per_token(1, cfg.d_model, 1, 1, 1, 1, width, cfg.gated).ffn
    return ffn / per_layer_attention
