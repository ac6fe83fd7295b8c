r"""Read a model's ``config.json`` (the format model hubs publish) into one architecture description.

No ``transformers`` needed: each supported ``model_type`` has a small reader that maps its field names onto
:class:`ModelConfig`, the book's symbols (``n_layers`` = :math:`L`, ``d_model``, ``n_heads`` = :math:`h`,
``n_kv_heads`` = :math:`h_{kv}`, ``head_dim`` = :math:`d_k`, ``d_ff``, ``vocab_size`` = :math:`n_\text{vocab}`).

Families read:

* Llama-style (``llama``, ``mistral``, ``mixtral``, ``qwen2``): ``num_hidden_layers``, ``hidden_size``,
  ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``, ``intermediate_size``, ``vocab_size``,
  ``tie_word_embeddings``, ``sliding_window``; mixture of experts via ``num_local_experts`` and
  ``num_experts_per_tok`` (Mixtral: every expert has width ``intermediate_size``).
* DeepSeek-V2 style (``deepseek_v2``, ``deepseek_v3``): the Llama fields plus ``n_routed_experts``,
  ``n_shared_experts``, ``moe_intermediate_size``, ``first_k_dense_replace``, ``moe_layer_freq`` and the
  multi-head latent attention fields ``kv_lora_rank``, ``q_lora_rank``, ``qk_rope_head_dim``,
  ``qk_nope_head_dim``, ``v_head_dim`` (DeepSeek-AI 2024).
* GPT-2 style (``gpt2``, ``gpt_bigcode``): ``n_layer``, ``n_embd``, ``n_head``, ``n_inner``, ``n_positions``
  (learned positions, LayerNorm with bias, biased linear layers, tied embeddings; ``gpt_bigcode`` adds
  ``multi_query``).
* Falcon (``falcon``): ``hidden_size``, ``num_attention_heads``, ``multi_query``, ``parallel_attn``,
  ``new_decoder_architecture``, ``num_kv_heads``, ``bias``, ``ffn_hidden_size``.

An unknown ``model_type`` is read with the Llama-style field names (or the GPT-2 ones if those are the ones
present) and a :class:`UnknownModelTypeWarning`. Every problem raises :class:`ConfigError` (a
``ValueError``) naming the field and what was wrong with it.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ConfigError",
    "UnknownModelTypeWarning",
    "ModelConfig",
    "config_from_dict",
    "load_config",
    "SUPPORTED_MODEL_TYPES",
]


class ConfigError(ValueError):
    """A configuration that cannot describe a model: the message names the field and the problem."""


class UnknownModelTypeWarning(UserWarning):
    """The ``model_type`` has no dedicated reader; the common field names were used."""


@dataclass(frozen=True)
class ModelConfig:
    """One decoder-only Transformer, in the book's symbols. Build it with :func:`config_from_dict`.

    Attention: ``n_heads`` query heads of width ``head_dim``, ``n_kv_heads`` key/value heads
    (``== n_heads``: multi-head; ``1``: multi-query; in between: grouped-query). With ``kv_lora_rank`` set
    the layer uses multi-head latent attention (MLA), whose cache holds a latent of width ``kv_lora_rank`` plus
    one shared rotary key of width ``qk_rope_head_dim`` per token and layer.

    Feed-forward: ``d_ff`` wide, ``gated`` (SwiGLU: three matrices) or plain (two). Mixture of experts:
    ``n_routed_experts`` experts of width ``moe_d_ff`` of which ``n_experts_per_tok`` run per token, plus
    ``n_shared_experts`` that always run; layers ``i < first_dense_layers`` (and those with
    ``i % moe_layer_freq != 0``) stay dense with width ``d_ff``.
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
    gated: bool = True
    norm_bias: bool = False  #: LayerNorm (weight and bias) instead of RMSNorm (weight only)
    norms_per_layer: int = 2
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    n_positions: int = 0  #: rows of a learned position table (0: rotary or none, no parameters)
    # mixture of experts
    n_routed_experts: int = 0
    n_experts_per_tok: int = 0
    n_shared_experts: int = 0
    moe_d_ff: int | None = None
    first_dense_layers: int = 0
    moe_layer_freq: int = 1
    # multi-head latent attention
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    name: str = ""

    @property
    def attention_kind(self) -> str:
        """``"latent"``, ``"multi-query"``, ``"grouped-query"`` or ``"multi-head"``."""
        if self.kv_lora_rank is not None:
            return "latent"
        if self.n_kv_heads == self.n_heads:
            return "multi-head"
        return "multi-query" if self.n_kv_heads == 1 else "grouped-query"

    @property
    def is_moe(self) -> bool:
        return self.n_routed_experts > 0

    def is_moe_layer(self, i: int) -> bool:
        """Whether layer ``i`` (0-based) has a mixture-of-experts feed-forward block."""
        return self.is_moe and i >= self.first_dense_layers and i % self.moe_layer_freq == 0

    @property
    def n_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.n_layers))


# ------------------------------------------------------------------------------------------------ field reading


def _where(name: str) -> str:
    return f" in {name}" if name else ""


class _Fields:
    """Typed access to a config dict: every error names the field and the file."""

    def __init__(self, raw: dict[str, Any], name: str) -> None:
        self.raw, self.name = raw, name

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def int(self, key: str, default: Any = ..., *, minimum: int = 1) -> Any:
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
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(
                f"config field {key!r} must be true or false, got {type(value).__name__} {value!r}"
                f"{_where(self.name)}"
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


def _llama(f: _Fields, model_type: str) -> dict[str, Any]:
    _require(f, ["num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size"])
    d_model = f.int("hidden_size")
    n_heads = f.int("num_attention_heads")
    window = None
    if f.bool("use_sliding_window", True):
        window = f.int("sliding_window", None)
    out: dict[str, Any] = dict(
        n_layers=f.int("num_hidden_layers"),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=f.int("num_key_value_heads", n_heads),
        head_dim=_head_dim(f, d_model, n_heads),
        d_ff=f.int("intermediate_size"),
        vocab_size=f.int("vocab_size"),
        tie_embeddings=f.bool("tie_word_embeddings", False),
        sliding_window=window,
        gated=True,
        qkv_bias=f.bool("attention_bias", model_type == "qwen2"),
        o_bias=f.bool("attention_bias", False),
        mlp_bias=f.bool("mlp_bias", False),
    )
    if f.has("num_local_experts"):  # Mixtral: every expert as wide as intermediate_size
        out.update(
            n_routed_experts=f.int("num_local_experts"),
            n_experts_per_tok=f.int("num_experts_per_tok"),
            moe_d_ff=out["d_ff"],
        )
    if f.has("n_routed_experts"):  # DeepSeek-V2 style
        _require(f, ["num_experts_per_tok", "moe_intermediate_size"])
        out.update(
            n_routed_experts=f.int("n_routed_experts"),
            n_experts_per_tok=f.int("num_experts_per_tok"),
            n_shared_experts=f.int("n_shared_experts", 0, minimum=0),
            moe_d_ff=f.int("moe_intermediate_size"),
            first_dense_layers=f.int("first_k_dense_replace", 0, minimum=0),
            moe_layer_freq=f.int("moe_layer_freq", 1),
        )
    if f.has("kv_lora_rank"):
        _require(f, ["qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"])
        out.update(
            kv_lora_rank=f.int("kv_lora_rank"),
            q_lora_rank=f.int("q_lora_rank", None),
            qk_rope_head_dim=f.int("qk_rope_head_dim"),
            qk_nope_head_dim=f.int("qk_nope_head_dim"),
            v_head_dim=f.int("v_head_dim"),
        )
    return out


def _gpt2(f: _Fields, model_type: str) -> dict[str, Any]:
    _require(f, ["n_layer", "n_embd", "n_head", "vocab_size", "n_positions"])
    d_model = f.int("n_embd")
    n_heads = f.int("n_head")
    multi_query = model_type == "gpt_bigcode" and f.bool("multi_query", True)
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


def _falcon(f: _Fields, model_type: str) -> dict[str, Any]:
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


_READERS = {
    "llama": _llama,
    "mistral": _llama,
    "mixtral": _llama,
    "qwen2": _llama,
    "deepseek_v2": _llama,
    "deepseek_v3": _llama,
    "gpt2": _gpt2,
    "gpt_bigcode": _gpt2,
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


def config_from_dict(raw: Any, name: str = "") -> ModelConfig:
    """Build a :class:`ModelConfig` from a parsed ``config.json`` (a dict), dispatching on ``model_type``.

    ``name`` (e.g. the file name) is used in error messages and stored on the result. Raises
    :class:`ConfigError` for a missing required field (all of them named), a field of the wrong type, a zero
    or negative count, or impossible head arithmetic; warns :class:`UnknownModelTypeWarning` for an unknown
    ``model_type`` and reads it with the common (Llama-style, else GPT-2 style) field names.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"a config must be a JSON object, got {type(raw).__name__}{_where(name)}")
    f = _Fields(raw, name)
    model_type = raw.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ConfigError(f"config field 'model_type' must be a string, got {model_type!r}{_where(name)}")
    reader = _READERS.get(model_type or "")
    if reader is None:
        fallback = _gpt2 if f.has("n_embd") and not f.has("hidden_size") else _llama
        warnings.warn(
            f"unknown model_type {model_type!r}{_where(name)}: reading it with the "
            f"{'GPT-2' if fallback is _gpt2 else 'Llama'}-style field names (supported: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)})",
            UnknownModelTypeWarning,
            stacklevel=2,
        )
        reader = fallback
    fields = reader(f, model_type or "")
    cfg = ModelConfig(model_type=model_type or "unknown", name=name, **fields)
    _check(cfg, _where(name))
    return cfg


def load_config(path: str | Path) -> ModelConfig:
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
    name = p.name.removesuffix(".json").removesuffix(".config")
    return config_from_dict(raw, name)
