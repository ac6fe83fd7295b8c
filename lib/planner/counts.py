r"""Parameter counts of a decoder-only Transformer from its :class:`~lib.planner.config.ModelConfig`, part by part,
and the bytes its weights take.

Per layer: attention (:math:`W_Q, W_K, W_V, W_O`, biases where the family has them, q/k norms; or MLA's
projections), the feed-forward block (3 matrices gated, 2 plain; a mixture-of-experts layer has a router of
:math:`d_\text{model} \times E`, :math:`E` routed experts and the always-on shared MLP), and ``norms_per_layer``
norms (:math:`d_\text{model}` weights each, twice that for LayerNorm with a bias). Plus the token table
:math:`n_\text{vocab} d_\text{model}`, a learned position table, the final norm and an untied output head.
tests/test_families.py checks every supported family against ``transformers``' own modules.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig
from .units import as_count, bytes_per_element

__all__ = ["ParameterCount", "parameter_count", "weight_bytes", "layer_parameters", "layer_active_parameters"]


@dataclass(frozen=True)
class ParameterCount:
    """Parameters of a model, by part. ``active`` is what one token uses (routed experts: only the top-k)."""

    embedding: int  #: input token table (and learned positions)
    lm_head: int  #: the output projection (0 when tied to the input table)
    attention: int  #: all layers
    ffn: int  #: all layers, every expert
    norms: int  #: all norms, the final one included
    ffn_active: int  #: all layers, router, shared experts and the top-k routed ones only
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


def attention_parameters(cfg: ModelConfig) -> tuple[int, int]:
    """(one attention layer's parameters, of which K/V projections)."""
    d, h = cfg.d_model, cfg.n_heads
    if cfg.kv_lora_rank is not None:  # MLA (DeepSeek-V2, section 2.1)
        r_q, r_kv = cfg.q_lora_rank, cfg.kv_lora_rank
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        if r_q is None:
            q = d * h * qk
        else:  # down-projection, its RMSNorm, up-projection
            q = d * r_q + r_q + r_q * h * qk
        # the latent and the shared rotary key
        kv_down = d * (r_kv + cfg.qk_rope_head_dim)
        kv_norm = r_kv
        kv_up = r_kv * h * (cfg.qk_nope_head_dim + cfg.v_head_dim)
        o = h * cfg.v_head_dim * d
        return q + kv_down + kv_norm + kv_up + o, 0
    w, w_kv = h * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    kv = 2 * _linear(d, w_kv, cfg.qkv_bias)
    qk_norm = {"": 0, "head": 2 * cfg.head_dim,
               "projection": w + w_kv}[cfg.qk_norm]
    q = _linear(d, w, cfg.qkv_bias)
    o = _linear(w, d, cfg.o_bias)
    return q + kv + o + qk_norm, kv


def _ffn_layer(cfg: ModelConfig, i: int) -> tuple[int, int]:
    """(parameters of layer ``i``'s feed-forward block, of which one token uses)."""
    if not cfg.is_moe_layer(i):
        n = _ffn_params(cfg, cfg.d_ff)
        return n, n
    expert = _ffn_params(cfg, cfg.moe_d_ff)
    always = cfg.d_model * cfg.n_routed_experts  # the router
    if cfg.shared_d_ff:
        always += _ffn_params(cfg, cfg.shared_d_ff) + (cfg.d_model if cfg.shared_gate else 0)
    return always + cfg.n_routed_experts * expert, always + cfg.n_experts_per_tok * expert


def norm_parameters(cfg: ModelConfig) -> int:
    return cfg.d_model * (2 if cfg.norm_bias else 1)


def layer_parameters(cfg: ModelConfig, i: int) -> int:
    """Parameters of decoder layer ``i`` (attention, feed-forward, its norms): what a pipeline stage holds per
    layer."""
    return attention_parameters(cfg)[0] + _ffn_layer(cfg, i)[0] + cfg.norms_per_layer * norm_parameters(cfg)


def layer_active_parameters(cfg: ModelConfig, i: int) -> int:
    """Parameters of decoder layer ``i`` that one token uses (a mixture of experts: router, shared experts and
    the top-k routed ones)."""
    return attention_parameters(cfg)[0] + _ffn_layer(cfg, i)[1] + cfg.norms_per_layer * norm_parameters(cfg)


def parameter_count(cfg: ModelConfig) -> ParameterCount:
    r"""Count a model's parameters from its configuration, part by part (see the module docstring).

    Equal to the sum of ``numel()`` over ``transformers``' ``AutoModelForCausalLM.from_config`` for every
    fixture in tests/fixtures (tests/test_families.py), and ``active`` to the same count with each routed
    expert weighted by top-k / E.
    """
    d = cfg.d_model
    attn_layer, kv_layer = attention_parameters(cfg)
    ffn = ffn_active = 0
    for i in range(cfg.n_layers):
        total_i, active_i = _ffn_layer(cfg, i)
        ffn += total_i
        ffn_active += active_i
    return ParameterCount(
        embedding=cfg.vocab_size * d + cfg.n_positions * d,
        lm_head=0 if cfg.tie_embeddings else cfg.vocab_size * d,
        attention=cfg.n_layers * attn_layer,
        ffn=ffn,
        norms=cfg.n_layers * cfg.norms_per_layer * norm_parameters(cfg) + norm_parameters(cfg),
        ffn_active=ffn_active,
        kv_projection=cfg.n_layers * kv_layer,
    )


def weight_bytes(n_params: int, dtype: str = "fp16") -> float:
    """Bytes of ``n_params`` weights stored as ``dtype`` (int4: half a byte each, scales not counted)."""
    return as_count(n_params, "n_params") * bytes_per_element(dtype)
