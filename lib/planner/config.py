r"""Read a model's ``config.json`` (the format model hubs publish) into one architecture description, exactly or
not at all.

No ``transformers`` needed: each supported ``model_type`` has a small reader that maps its field names onto
:class:`ModelConfig`, the book's symbols (``n_layers`` = :math:`L`, ``d_model``, ``n_heads`` = :math:`h`,
``n_kv_heads`` = :math:`h_{kv}`, ``head_dim`` = :math:`d_k`, ``d_ff``, ``vocab_size`` = :math:`n_\text{vocab}`)
plus the per-family details that change a parameter count or a KV-cache size (biases, norms, q/k norms, experts,
per-layer sliding windows). Each reader mirrors the modules of the ``transformers`` class of the same
``model_type``; tests/test_families.py checks every family's count against ``transformers`` itself.

Exact or refused
    A ``model_type`` without a reader, or a field known to change the count or the cache (:data:`COUNT_FIELDS`)
    that the family's reader does not read, raises :class:`UnsupportedConfigError` (one line naming the type or
    the field and listing the supported types). ``assume_family="llama"`` (the CLI's ``--assume-family``) reads
    the config with that family's reader anyway and records what it assumed in :attr:`ModelConfig.assumptions`,
    which the planner's report repeats. A confident wrong number is the outcome this module exists to prevent.

Every other problem raises :class:`ConfigError` (a ``ValueError``) naming the field and what was wrong with it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ConfigError",
    "UnsupportedConfigError",
    "ModelConfig",
    "config_from_dict",
    "load_config",
    "SUPPORTED_MODEL_TYPES",
    "COUNT_FIELDS",
    "model_name",
]


class ConfigError(ValueError):
    """A configuration that cannot describe a model: the message names the field and the problem."""


class UnsupportedConfigError(ConfigError):
    """A ``model_type`` without a reader, or a count-changing field its reader does not read (see the module).
    ``unread`` names those fields (empty for an unsupported ``model_type``)."""

    unread: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelConfig:
    """One decoder-only Transformer, in the book's symbols. Build it with :func:`config_from_dict`.

    Attention: ``n_heads`` query heads of width ``head_dim``, ``n_kv_heads`` key/value heads
    (``== n_heads``: multi-head; ``1``: multi-query; in between: grouped-query). With ``kv_lora_rank`` set
    the layer uses multi-head latent attention (MLA), whose cache holds a latent of width ``kv_lora_rank`` plus
    one shared rotary key of width ``qk_rope_head_dim`` per token and layer. ``qk_norm``: ``"head"`` (an RMSNorm
    of width ``head_dim`` on queries and one on keys, shared by the heads: Qwen3, Gemma 3), ``"projection"`` (one
    over all query heads, one over all key heads: OLMo 2) or ``""``.

    Sliding windows: ``layer_windows`` gives each layer's window (``None``: full attention), as Gemma 2
    (alternating), Gemma 3 (five local to one global) and ``layer_types`` configs have it; when it is ``None``
    every layer uses ``sliding_window`` (Mistral 7B: all layers 4096; ``None``: no window).

    Feed-forward: ``d_ff`` wide, ``gated`` (SwiGLU/GeGLU: three matrices) or plain (two). Mixture of experts:
    ``n_routed_experts`` experts of width ``moe_d_ff`` of which ``n_experts_per_tok`` run per token, a router of
    :math:`d_\\text{model} \\times E`, plus an always-on shared MLP of width ``shared_d_ff`` (DeepSeek:
    ``n_shared_experts * moe_d_ff``; Qwen2-MoE: ``shared_expert_intermediate_size``, with a one-output gate when
    ``shared_gate``). Which layers are MoE: ``moe_layers`` if given, else ``i >= first_dense_layers`` and
    ``i % moe_layer_freq == 0``; the others stay dense with width ``d_ff``.

    ``assumptions`` lists what was assumed rather than read (empty unless the reader was chosen by the caller).
    """

    model_type: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab_size: int
    tie_embeddings: bool = False
    sliding_window: int | None = None
    layer_windows: tuple[int | None, ...] | None = None
    gated: bool = True
    norm_bias: bool = False  #: LayerNorm (weight and bias) instead of RMSNorm (weight only)
    norms_per_layer: int = 2
    qk_norm: str = ""
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    n_positions: int = 0  #: rows of a learned position table (0: rotary or none, no parameters)
    # mixture of experts
    n_routed_experts: int = 0
    n_experts_per_tok: int = 0
    n_shared_experts: int = 0  #: descriptive; the parameters are in ``shared_d_ff``
    moe_d_ff: int | None = None
    shared_d_ff: int = 0
    shared_gate: bool = False
    first_dense_layers: int = 0
    moe_layer_freq: int = 1
    moe_layers: tuple[bool, ...] | None = None
    # multi-head latent attention
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    name: str = ""
    max_positions: int = 0  #: ``max_position_embeddings`` (or ``n_positions``) as written; 0: not given
    family: str = ""  #: the reader used (``model_type`` unless the caller assumed a family)
    assumptions: tuple[str, ...] = ()

    @property
    def attention_kind(self) -> str:
        """``"latent"``, ``"multi-query"``, ``"grouped-query"`` or ``"multi-head"``."""
        if self.kv_lora_rank is not None:
            return "latent"
        if self.n_kv_heads == self.n_heads:
            return "multi-head"
        return "multi-query" if self.n_kv_heads == 1 else "grouped-query"

    @property
    def windows(self) -> tuple[int | None, ...]:
        """Each layer's sliding window (``None``: the layer attends to the whole context)."""
        if self.layer_windows is not None:
            return self.layer_windows
        return (self.sliding_window,) * self.n_layers

    @property
    def is_moe(self) -> bool:
        return self.n_routed_experts > 0

    def is_moe_layer(self, i: int) -> bool:
        """Whether layer ``i`` (0-based) has a mixture-of-experts feed-forward block."""
        if not self.is_moe:
            return False
        if self.moe_layers is not None:
            return self.moe_layers[i]
        return i >= self.first_dense_layers and i % self.moe_layer_freq == 0

    @property
    def n_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.n_layers))


#: Fields that change a parameter count or a KV-cache size in at least one family. A config carrying one (with a
#: value other than null) that its family's reader does not read is refused: its meaning for that family is unknown.
COUNT_FIELDS: frozenset[str] = frozenset({
    # sizes
    "num_hidden_layers", "n_layer", "hidden_size", "n_embd", "num_attention_heads", "n_head",
    "num_key_value_heads", "num_kv_heads", "head_dim", "intermediate_size", "n_inner", "ffn_hidden_size",
    "vocab_size", "tie_word_embeddings", "n_positions",
    # biases, norms, layer layout
    "attention_bias", "mlp_bias", "use_bias", "bias", "qkv_bias", "multi_query", "new_decoder_architecture",
    "parallel_attn", "num_ln_in_parallel_attn", "use_qk_norm", "qk_layernorm", "qk_norm",
    # mixture of experts
    "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok", "n_shared_experts",
    "moe_intermediate_size", "shared_expert_intermediate_size", "first_k_dense_replace", "moe_layer_freq",
    "decoder_sparse_step", "mlp_only_layers", "moe_num_experts", "num_experts_per_token", "n_experts",
    "interleave_moe_layer_step", "intermediate_size_mlp",
    # latent attention
    "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
    # which layers cache what
    "sliding_window", "use_sliding_window", "max_window_layers", "layer_types", "sliding_window_pattern",
    "attention_chunk_size", "num_nextn_predict_layers",
})


# ------------------------------------------------------------------------------------------------ field reading


def _where(name: str) -> str:
    return f" in {name}" if name else ""


class _Fields:
    """Typed access to a config dict: every error names the field and the file; every key read is recorded."""

    def __init__(self, raw: dict[str, Any], name: str) -> None:
        self.raw, self.name = raw, name
        self.read: set[str] = {"model_type"}

    def has(self, key: str) -> bool:
        self.read.add(key)
        return self.raw.get(key) is not None

    def understood(self, *keys: str) -> None:
        """Mark ``keys`` as read: the family's ``transformers`` class ignores them (each call says why)."""
        self.read.update(keys)

    def int(self, key: str, default: Any = ..., *, minimum: int = 1) -> Any:
        self.read.add(key)
        value = self.raw.get(key)
        if value is None:
            if default is ...:
                raise ConfigError(f"config field {key!r} is missing{_where(self.name)}")
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not value.is_integer()
        ):
            raise ConfigError(
                f"config field {key!r} must be an integer, got {type(value).__name__} {value!r}{_where(self.name)}"
            )
        value = int(value)
        if value < minimum:
            what = "positive" if minimum == 1 else f"at least {minimum}"
            raise ConfigError(f"config field {key!r} must be {what}, got {value}{_where(self.name)}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        self.read.add(key)
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(
                f"config field {key!r} must be true or false, got {type(value).__name__} {value!r}"
                f"{_where(self.name)}"
            )
        return value

    def list(self, key: str, kind: type, default: list) -> list:
        self.read.add(key)
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
            raise ConfigError(
                f"config field {key!r} must be a list of {kind.__name__}, got {value!r}{_where(self.name)}"
            )
        return value

    def first(self, *keys: str) -> str:
        """The first of ``keys`` present (for families whose field names changed over versions)."""
        for key in keys:
            if self.has(key):
                return key
        return keys[0]


def _require(f: _Fields, keys: list[str]) -> None:
    missing = [k for k in keys if not f.has(k)]
    if missing:
        raise ConfigError(
            f"config is missing required field{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(k) for k in missing)}{_where(f.name)}"
        )


def _head_dim(f: _Fields, d_model: int, n_heads: int) -> int:
    if f.has("head_dim"):
        return f.int("head_dim")
    if d_model % n_heads:
        raise ConfigError(
            f"hidden size {d_model} is not divisible by {n_heads} attention heads and no 'head_dim' is given"
            f" (d_model % n_heads = {d_model % n_heads}){_where(f.name)}"
        )
    return d_model // n_heads


# ------------------------------------------------------------------------------------------------ readers
# One per family, each mirroring the modules of transformers' class for that model_type.


def _decoder(f: _Fields, *, tie: bool, bias_field: str | None = "attention_bias", bias: bool = False,
             mlp_bias_field: str | None = None) -> dict[str, Any]:
    """The Llama-shaped core: RMSNorm twice per layer, gated MLP, rotary positions; biases as the family reads
    them (``bias_field`` switches all four attention projections; ``None``: the family hard-codes ``bias``)."""
    _require(f, ["num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size"])
    d_model = f.int("hidden_size")
    n_heads = f.int("num_attention_heads")
    attn_bias = f.bool(bias_field, bias) if bias_field else bias
    return dict(
        n_layers=f.int("num_hidden_layers"),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=f.int("num_key_value_heads", n_heads),
        head_dim=_head_dim(f, d_model, n_heads),
        d_ff=f.int("intermediate_size"),
        vocab_size=f.int("vocab_size"),
        tie_embeddings=f.bool("tie_word_embeddings", tie),
        gated=True,
        qkv_bias=attn_bias,
        o_bias=attn_bias,
        mlp_bias=f.bool(mlp_bias_field, False) if mlp_bias_field else False,
    )


_LAYER_TYPES = {"sliding_attention": True, "full_attention": False}


def _windows_from_types(f: _Fields, n_layers: int, window: int | None) -> tuple[int | None, ...] | None:
    """Per-layer windows from ``layer_types`` (``"sliding_attention"``/``"full_attention"``), or ``None`` if the
    config has no such field."""
    if not f.has("layer_types"):
        return None
    types = f.list("layer_types", str, [])
    if len(types) != n_layers:
        raise ConfigError(
            f"config field 'layer_types' has {len(types)} entries for {n_layers} layers{_where(f.name)}"
        )
    unknown = sorted(set(types) - set(_LAYER_TYPES))
    if unknown:
        raise UnsupportedConfigError(
            f"config field 'layer_types' has unsupported layer type(s) {', '.join(map(repr, unknown))}"
            f"{_where(f.name)}; supported: {', '.join(map(repr, _LAYER_TYPES))}"
        )
    if window is None and any(_LAYER_TYPES[t] for t in types):
        raise ConfigError(f"'layer_types' has sliding layers but 'sliding_window' is not set{_where(f.name)}")
    return tuple(window if _LAYER_TYPES[t] else None for t in types)


def _pattern(n_layers: int, window: int | None, sliding: Callable[[int], bool]) -> tuple[int | None, ...] | None:
    if window is None:
        return None
    return tuple(window if sliding(i) else None for i in range(n_layers))


def _llama(f: _Fields) -> dict[str, Any]:
    # LlamaAttention has no sliding window (a 'sliding_window' field is refused, not ignored: engines differ).
    return _decoder(f, tie=False, mlp_bias_field="mlp_bias")


def _mistral(f: _Fields) -> dict[str, Any]:
    f.understood("attention_bias", "mlp_bias")  # MistralAttention/MLP hard-code bias=False
    out = _decoder(f, tie=False, bias_field=None)
    out["sliding_window"] = f.int("sliding_window", None)  # every layer
    return out


def _mixtral(f: _Fields) -> dict[str, Any]:
    f.understood("attention_bias", "mlp_bias")
    out = _decoder(f, tie=False, bias_field=None)
    _require(f, ["num_local_experts", "num_experts_per_tok"])
    out.update(sliding_window=f.int("sliding_window", None), n_routed_experts=f.int("num_local_experts"),
               n_experts_per_tok=f.int("num_experts_per_tok"), moe_d_ff=out["d_ff"])
    return out


def _qwen_windows(f: _Fields, n_layers: int) -> tuple[int | None, tuple[int | None, ...] | None]:
    """Qwen2/Qwen3: ``sliding_window`` counts only with ``use_sliding_window``, and then for layers
    ``i >= max_window_layers`` (or as ``layer_types`` says)."""
    window = f.int("sliding_window", None) if f.bool("use_sliding_window", False) else None
    f.understood("sliding_window")
    layers = _windows_from_types(f, n_layers, window)
    if layers is None:
        first = f.int("max_window_layers", 28, minimum=0)
        layers = _pattern(n_layers, window, lambda i: i >= first)
    return (window if layers and any(layers) else None), layers


def _qwen2(f: _Fields) -> dict[str, Any]:
    f.understood("attention_bias", "mlp_bias")  # Qwen2Attention: q, k, v biased, o not, regardless
    out = _decoder(f, tie=False, bias_field=None)
    out.update(qkv_bias=True, o_bias=False)
    out["sliding_window"], out["layer_windows"] = _qwen_windows(f, out["n_layers"])
    return out


def _qwen3(f: _Fields) -> dict[str, Any]:
    out = _decoder(f, tie=False)
    out["qk_norm"] = "head"
    out["sliding_window"], out["layer_windows"] = _qwen_windows(f, out["n_layers"])
    return out


def _qwen_moe_layers(f: _Fields, n_layers: int) -> tuple[bool, ...]:
    step = f.int("decoder_sparse_step", 1)
    dense = set(f.list("mlp_only_layers", int, []))
    return tuple(i not in dense and (i + 1) % step == 0 for i in range(n_layers))


def _qwen2_moe(f: _Fields) -> dict[str, Any]:
    f.understood("attention_bias", "mlp_bias")
    out = _decoder(f, tie=False, bias_field=None)
    out.update(qkv_bias=f.bool("qkv_bias", True), o_bias=False)
    _require(f, ["num_experts", "num_experts_per_tok", "moe_intermediate_size"])
    moe_d_ff = f.int("moe_intermediate_size")
    shared = f.int("shared_expert_intermediate_size", 0, minimum=0)
    out.update(n_routed_experts=f.int("num_experts"), n_experts_per_tok=f.int("num_experts_per_tok"),
               moe_d_ff=moe_d_ff, shared_d_ff=shared, shared_gate=shared > 0, n_shared_experts=int(shared > 0),
               moe_layers=_qwen_moe_layers(f, out["n_layers"]))
    # Qwen2MoeConfig: sliding layers are the even ones below max_window_layers (transformers' layer_types rule)
    window = f.int("sliding_window", None) if f.bool("use_sliding_window", False) else None
    f.understood("sliding_window")
    layers = _windows_from_types(f, out["n_layers"], window)
    if layers is None:
        below = f.int("max_window_layers", 28, minimum=0)
        layers = _pattern(out["n_layers"], window, lambda i: (i + 1) % 2 == 1 and i < below)
    out.update(sliding_window=window if layers and any(layers) else None, layer_windows=layers)
    return out


def _qwen3_moe(f: _Fields) -> dict[str, Any]:
    f.understood("mlp_bias")  # Qwen3MoeMLP hard-codes bias=False
    out = _decoder(f, tie=False)
    _require(f, ["num_experts", "num_experts_per_tok", "moe_intermediate_size"])
    out.update(qk_norm="head", n_routed_experts=f.int("num_experts"), n_experts_per_tok=f.int("num_experts_per_tok"),
               moe_d_ff=f.int("moe_intermediate_size"), moe_layers=_qwen_moe_layers(f, out["n_layers"]))
    # Qwen3MoeAttention: the window (when use_sliding_window) on every layer; max_window_layers unused
    f.understood("max_window_layers", "sliding_window")
    out["sliding_window"] = f.int("sliding_window", None) if f.bool("use_sliding_window", False) else None
    return out


def _phi3(f: _Fields) -> dict[str, Any]:
    f.understood("attention_bias", "mlp_bias")  # fused qkv_proj and gate_up_proj, no biases
    out = _decoder(f, tie=False, bias_field=None)
    out["sliding_window"] = f.int("sliding_window", None)  # every layer
    return out


def _starcoder2(f: _Fields) -> dict[str, Any]:
    out = _decoder(f, tie=True, bias_field="use_bias", bias=True)
    out.update(gated=False, norm_bias=True, mlp_bias=out["qkv_bias"], sliding_window=f.int("sliding_window", None))
    return out


def _gemma(f: _Fields) -> dict[str, Any]:
    f.understood("mlp_bias")  # GemmaMLP hard-codes bias=False
    return _decoder(f, tie=True)


def _gemma2(f: _Fields) -> dict[str, Any]:
    f.understood("mlp_bias")
    out = _decoder(f, tie=True)
    window = f.int("sliding_window", 4096)
    layers = _windows_from_types(f, out["n_layers"], window)
    if layers is None:  # Gemma2Config: even layers (0, 2, ...) local, odd layers global
        layers = _pattern(out["n_layers"], window, lambda i: (i + 1) % 2 == 1)
    out.update(norms_per_layer=4, sliding_window=window if any(layers) else None, layer_windows=layers)
    return out


def _gemma3_text(f: _Fields) -> dict[str, Any]:
    f.understood("mlp_bias")
    out = _decoder(f, tie=True)
    window = f.int("sliding_window", 4096)
    if f.bool("use_bidirectional_attention", False):
        raise UnsupportedConfigError(
            f"config field 'use_bidirectional_attention' (an encoder variant) is not supported{_where(f.name)}")
    layers = _windows_from_types(f, out["n_layers"], window)
    if layers is None:  # Gemma3TextConfig: every sliding_window_pattern-th layer global (default 6: 5 local : 1)
        every = f.int("sliding_window_pattern", 6)
        layers = _pattern(out["n_layers"], window, lambda i: (i + 1) % every != 0)
    f.understood("sliding_window_pattern")
    out.update(norms_per_layer=4, qk_norm="head", sliding_window=window if any(layers) else None,
               layer_windows=layers)
    return out


def _olmo2(f: _Fields) -> dict[str, Any]:
    f.understood("mlp_bias")
    out = _decoder(f, tie=False)
    out.update(qk_norm="projection")  # q_norm over all query heads, k_norm over all key heads
    return out


def _gpt_neox(f: _Fields) -> dict[str, Any]:
    _require(f, ["num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size"])
    d_model, n_heads = f.int("hidden_size"), f.int("num_attention_heads")
    bias = f.bool("attention_bias", True)
    f.understood("num_key_value_heads")  # GPTNeoXAttention: one fused query_key_value of 3 d_model, no GQA
    return dict(
        n_layers=f.int("num_hidden_layers"), d_model=d_model, n_heads=n_heads, n_kv_heads=n_heads,
        head_dim=_head_dim(f, d_model, n_heads), d_ff=f.int("intermediate_size"), vocab_size=f.int("vocab_size"),
        tie_embeddings=f.bool("tie_word_embeddings", False), gated=False, norm_bias=True,
        qkv_bias=bias, o_bias=bias, mlp_bias=True,
    )


def _deepseek(f: _Fields) -> dict[str, Any]:
    out = _decoder(f, tie=False, mlp_bias_field="mlp_bias")
    if out["qkv_bias"]:
        raise UnsupportedConfigError(
            f"config field 'attention_bias' = true with latent attention is not supported{_where(f.name)}")
    # The multi-token-prediction layer (num_nextn_predict_layers) is not instantiated by transformers and is
    # loaded by vLLM only for speculative decoding: it is not counted.
    f.understood("num_nextn_predict_layers")
    if f.has("n_routed_experts"):
        _require(f, ["num_experts_per_tok", "moe_intermediate_size"])
        moe_d_ff = f.int("moe_intermediate_size")
        n_shared = f.int("n_shared_experts", 0, minimum=0)
        out.update(
            n_routed_experts=f.int("n_routed_experts"),
            n_experts_per_tok=f.int("num_experts_per_tok"),
            n_shared_experts=n_shared,
            moe_d_ff=moe_d_ff,
            shared_d_ff=n_shared * moe_d_ff,
            first_dense_layers=f.int("first_k_dense_replace", 0, minimum=0),
            moe_layer_freq=f.int("moe_layer_freq", 1),
        )
    _require(f, ["kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"])
    out.update(
        kv_lora_rank=f.int("kv_lora_rank"),
        q_lora_rank=f.int("q_lora_rank", None),
        qk_rope_head_dim=f.int("qk_rope_head_dim"),
        qk_nope_head_dim=f.int("qk_nope_head_dim"),
        v_head_dim=f.int("v_head_dim"),
    )
    return out


def _gpt2_like(f: _Fields, multi_query: bool) -> dict[str, Any]:
    _require(f, ["n_layer", "n_embd", "n_head", "vocab_size", "n_positions"])
    d_model = f.int("n_embd")
    n_heads = f.int("n_head")
    return dict(
        n_layers=f.int("n_layer"),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=1 if multi_query else n_heads,
        head_dim=_head_dim(f, d_model, n_heads),
        d_ff=f.int("n_inner", 4 * d_model),
        vocab_size=f.int("vocab_size"),
        tie_embeddings=f.bool("tie_word_embeddings", True),
        gated=False,
        norm_bias=True,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        n_positions=f.int("n_positions"),
    )


def _gpt2(f: _Fields) -> dict[str, Any]:
    return _gpt2_like(f, False)


def _gpt_bigcode(f: _Fields) -> dict[str, Any]:
    return _gpt2_like(f, f.bool("multi_query", True))


def _falcon(f: _Fields) -> dict[str, Any]:
    layers, heads = f.first("num_hidden_layers", "n_layer"), f.first("num_attention_heads", "n_head")
    _require(f, [layers, "hidden_size", heads, "vocab_size"])
    d_model, n_heads = f.int("hidden_size"), f.int(heads)
    new_arch = f.bool("new_decoder_architecture", False)
    if new_arch:
        n_kv = f.int("num_kv_heads", n_heads)
    else:
        n_kv = 1 if f.bool("multi_query", True) else n_heads
    parallel = f.bool("parallel_attn", True)
    bias = f.bool("bias", False)
    return dict(
        n_layers=f.int(layers),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=_head_dim(f, d_model, n_heads),
        d_ff=f.int("ffn_hidden_size", 4 * d_model),
        vocab_size=f.int("vocab_size"),
        tie_embeddings=f.bool("tie_word_embeddings", True),
        gated=False,
        norm_bias=True,
        norms_per_layer=(f.int("num_ln_in_parallel_attn", 2) if new_arch else 1) if parallel else 2,
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=bias,
    )


_READERS: dict[str, Callable[[_Fields], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "qwen2_moe": _qwen2_moe,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "phi3": _phi3,
    "starcoder2": _starcoder2,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3_text": _gemma3_text,
    "olmo2": _olmo2,
    "gpt_neox": _gpt_neox,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gpt2": _gpt2,
    "gpt_bigcode": _gpt_bigcode,
    "falcon": _falcon,
}
#: The ``model_type`` values with a dedicated reader.
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_READERS))


def _check(cfg: ModelConfig, where: str) -> None:
    """Head and expert arithmetic that no real model can violate."""
    if cfg.n_kv_heads > cfg.n_heads or cfg.n_heads % cfg.n_kv_heads:
        raise ConfigError(
            f"{cfg.n_heads} attention heads are not divisible by {cfg.n_kv_heads} key/value heads: every key/value"
            f" head must serve the same number of query heads{where}"
        )
    if cfg.is_moe:
        if cfg.n_experts_per_tok > cfg.n_routed_experts:
            raise ConfigError(
                f"num_experts_per_tok={cfg.n_experts_per_tok} exceeds the {cfg.n_routed_experts} routed experts"
                f"{where}"
            )
        if cfg.first_dense_layers > cfg.n_layers:
            raise ConfigError(
                f"first_k_dense_replace={cfg.first_dense_layers} exceeds num_hidden_layers={cfg.n_layers}{where}"
            )
    if cfg.sliding_window is not None and cfg.sliding_window < 1:
        raise ConfigError(f"sliding_window must be positive, got {cfg.sliding_window}{where}")
    for field, seq in (("layer_windows", cfg.layer_windows), ("moe_layers", cfg.moe_layers)):
        if seq is not None and len(seq) != cfg.n_layers:
            raise ConfigError(f"{field} has {len(seq)} entries for {cfg.n_layers} layers{where}")
    if cfg.qk_norm not in ("", "head", "projection"):
        raise ConfigError(f"qk_norm must be '', 'head' or 'projection', got {cfg.qk_norm!r}{where}")


def _supported() -> str:
    return ", ".join(SUPPORTED_MODEL_TYPES)


def config_from_dict(raw: Any, name: str = "", *, assume_family: str | None = None) -> ModelConfig:
    """Build a :class:`ModelConfig` from a parsed ``config.json`` (a dict), dispatching on ``model_type``.

    ``name`` (e.g. the file name) is used in error messages and stored on the result. Raises
    :class:`UnsupportedConfigError` for a ``model_type`` without a reader or a count-changing field
    (:data:`COUNT_FIELDS`) that the reader does not read, unless ``assume_family`` names the reader to use: then
    the result's ``assumptions`` say what was assumed. Raises :class:`ConfigError` for a missing required field
    (all of them named), a field of the wrong type, a zero or negative count, or impossible head arithmetic.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"a config must be a JSON object, got {type(raw).__name__}{_where(name)}")
    model_type = raw.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ConfigError(f"config field 'model_type' must be a string, got {model_type!r}{_where(name)}")
    assumptions: list[str] = []
    if assume_family is not None:
        if assume_family not in _READERS:
            raise ConfigError(f"unknown family {assume_family!r} to assume; supported: {_supported()}")
        family = assume_family
        if model_type != family:
            assumptions.append(f"model_type {model_type!r} read as {family!r} (assumed, not checked)")
    elif model_type in _READERS:
        family = model_type
    else:
        raise UnsupportedConfigError(
            f"unsupported model_type {model_type!r}{_where(name)}; supported: {_supported()}"
            " (to read it as one of these anyway, pass --assume-family FAMILY / assume_family=FAMILY)"
        )
    f = _Fields(raw, name)
    fields = _READERS[family](f)
    unread = sorted(k for k in COUNT_FIELDS & raw.keys() - f.read if raw[k] is not None)
    if unread and assume_family is None:
        shown = ", ".join(f"{k}={raw[k]!r}" for k in unread)
        err = UnsupportedConfigError(
            f"config field{'s' if len(unread) > 1 else ''} {shown}{_where(name)} change{'' if len(unread) > 1 else 's'}"
            f" the parameter count or the KV cache, and the {family!r} reader does not read "
            f"{'them' if len(unread) > 1 else 'it'}; supported model types: {_supported()}"
            " (to ignore it anyway, pass --assume-family FAMILY / assume_family=FAMILY)"
        )
        err.unread = tuple(unread)
        raise err
    assumptions += [f"field {k}={raw[k]!r} ignored (the {family!r} reader does not read it)" for k in unread]
    mpe = next((raw[k] for k in ("max_position_embeddings", "n_positions", "max_sequence_length")
                if isinstance(raw.get(k), int) and not isinstance(raw.get(k), bool) and raw[k] > 0), 0)
    cfg = ModelConfig(model_type=model_type or "unknown", name=name, family=family, max_positions=mpe,
                      assumptions=tuple(assumptions), **fields)
    _check(cfg, _where(name))
    return cfg


def load_config(path: str | Path, *, assume_family: str | None = None) -> ModelConfig:
    """Read ``config.json`` at ``path`` (see :func:`config_from_dict`).

    Raises :class:`ConfigError` for a missing or unreadable file and for malformed JSON (with line and column).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read config file {p}: {err}") from None
    try:
        raw = json.loads(text, parse_constant=lambda c: math.nan)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{p} is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    return config_from_dict(raw, model_name(p, raw), assume_family=assume_family)


def model_name(path: Path, raw: Any) -> str:
    """A model's name for the report: the file name without ``.config.json``; for a file called ``config.json``,
    the last part of its ``_name_or_path``, else its folder's name, else its first architecture."""
    name = path.name.removesuffix(".json").removesuffix(".config")
    if name != "config":
        return name
    raw = raw if isinstance(raw, dict) else {}
    hub = raw.get("_name_or_path")
    if isinstance(hub, str) and hub.strip("/"):
        return hub.strip("/").split("/")[-1]
    folder = path.resolve().parent.name
    if folder:
        return folder
    arch = raw.get("architectures")
    if isinstance(arch, list) and arch and isinstance(arch[0], str):
        return arch[0]
    return name
