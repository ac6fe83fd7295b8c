"""transformers as the oracle for the planner: a config instantiated on the meta device (no weights are allocated,
so even a trillion-parameter model takes seconds), its parameters counted, and its cache laid out from the config
the way transformers' own cache classes lay it out.

Independent of lib.planner.engine by construction: the engine reads expert counts, cache widths and recurrent
state from the *modules* it finds; this oracle reads them from the *config* fields transformers documents, and
counts with ``model.parameters()`` (which yields a tied tensor once). Two readings that agree on every fixture.

Test-only: lib never imports this module.
"""

from __future__ import annotations

import json
import re
import warnings
from functools import cache
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText
from transformers.cache_utils import get_layer_types_and_kwargs
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

transformers.logging.set_verbosity_error()

_NOT_CONFIG = ("model_type", "architectures", "transformers_version", "torch_dtype", "dtype", "auto_map")


def hf_config(raw: dict):
    """The transformers config of ``raw``. A hub type transformers does not register (Kimi-K2's ``kimi_k2``) is
    built with the class its ``auto_map`` names, looked up by name in transformers."""
    fields = {k: v for k, v in raw.items() if k not in _NOT_CONFIG}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if raw["model_type"] in CONFIG_MAPPING:
            return AutoConfig.for_model(raw["model_type"], **fields)
        return getattr(transformers, raw["auto_map"]["AutoConfig"].split(".")[-1])(**fields)


@cache
def _model(path: str):
    """(config, model on the meta device) of the fixture ``path``: built once per test session."""
    cfg = hf_config(json.loads(Path(path).read_text()))
    # a config with a vision tower is an image-text-to-text checkpoint: built whole, tower included
    auto = AutoModelForImageTextToText if hasattr(cfg, "vision_config") else AutoModelForCausalLM
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cfg, auto.from_config(cfg)


# how configs name the experts per layer (E) and the experts a token runs (k)
_E_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_K_FIELDS = ("num_experts_per_tok", "moe_k", "moe_topk", "experts_per_token", "top_k_experts")
_ROUTED = re.compile(r"\.experts\.")  # "...mlp.experts.3.up_proj.weight" or the fused "...experts.gate_up_proj"


@cache
def hf_counts(path: str) -> tuple[int, int]:
    """(total parameters, parameters one token uses) of the model ``path`` describes.

    Active = total - (1 - k/E) x routed: a token runs ``k`` of each layer's ``E`` equal routed experts (k and E
    as the config states them); routers and shared experts always run.
    """
    cfg, model = _model(path)
    text = cfg.get_text_config()
    total = sum(p.numel() for p in model.parameters())
    routed = sum(p.numel() for name, p in model.named_parameters() if _ROUTED.search("." + name))
    if not routed:
        return total, total
    e = next(getattr(text, f) for f in _E_FIELDS if getattr(text, f, None))
    k = next(getattr(text, f) for f in _K_FIELDS if getattr(text, f, None))
    if isinstance(k, list):  # one per layer (Hunyuan): the same in every layer of the fixtures
        assert len(set(k)) == 1, path
        k = k[0]
    skipped = routed * (e - k)
    assert skipped % e == 0, path
    return total, total - skipped // e


_ATTENTION = {"full_attention", "sliding_attention", "chunked_attention", "hybrid", "hybrid_sliding",
              "indexed_attention"}
_RECURRENT = {"linear_attention", "conv", "hybrid", "hybrid_sliding", "mamba"}


def _kv_heads(text) -> int:
    heads = text.num_attention_heads
    if text.model_type == "gpt_bigcode":
        return 1 if text.multi_query else heads
    if text.model_type == "falcon":
        return text.num_kv_heads if text.new_decoder_architecture else (1 if text.multi_query else heads)
    return getattr(text, "num_key_value_heads", None) or heads


def _state(text) -> int:
    """One recurrent layer's state from the config (the convolution state at its full kernel width, plus the
    recurrent state), as transformers' linear-attention and Mamba cache layers hold it."""
    f = text.to_dict()
    if "linear_num_key_heads" in f:  # gated DeltaNet (Qwen3-Next, Qwen3.5)
        kd, vd = f["linear_num_key_heads"] * f["linear_key_head_dim"], f["linear_num_value_heads"] * f[
            "linear_value_head_dim"]
        return (2 * kd + vd) * f["linear_conv_kernel_dim"] + f["linear_num_value_heads"] * f[
            "linear_key_head_dim"] * f["linear_value_head_dim"]
    names = {"nemotron_h": ("mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size", "conv_kernel"),
             "falcon_h1": ("mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv"),
             "granitemoehybrid": ("mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv")}
    if text.model_type in names:  # Mamba-2: heads x head width x state, conv over x, B and C
        heads, width, groups, state, kernel = (f[n] for n in names[text.model_type])
        return (heads * width + 2 * groups * state) * kernel + heads * width * state
    if text.model_type == "jamba":  # Mamba-1: conv and state over the expanded inner width
        inner = text.mamba_expand * text.hidden_size
        return inner * text.mamba_d_conv + inner * text.mamba_d_state
    raise NotImplementedError(f"no state formula for {text.model_type}")


@cache
def hf_cache(path: str) -> tuple[tuple[tuple[int, int | None], ...], int]:
    """What transformers' own cache lays out for the model ``path`` describes, from its config alone: per layer
    (elements cached per token, window) with the layer types and windows of ``get_layer_types_and_kwargs``; K and V
    of ``num_key_value_heads x head_dim`` each (latent attention: ``kv_lora_rank + qk_rope_head_dim``, plus the
    indexer's ``index_head_dim`` keys of an indexed layer); and the elements of per-sequence recurrent state."""
    text = _model(path)[0].get_text_config()
    types, kwargs = get_layer_types_and_kwargs(text)
    if getattr(text, "kv_lora_rank", None):
        per_layer = [text.kv_lora_rank + text.qk_rope_head_dim] * len(types)
    elif text.model_type == "mimo_v2_flash":  # K of head_dim, V of v_head_dim; sliding layers twice the heads
        per_layer = [text.num_key_value_heads * (2 if t == "sliding_attention" else 1)
                     * (text.head_dim + text.v_head_dim) for t in types]
    elif text.model_type == "gemma4_text":  # Gemma 4: widths per layer (config.per_layer_config), V cached beside K
        per_layer = [2 * text.per_layer_config[i].num_key_value_heads * text.per_layer_config[i].head_dim
                     for i in range(len(types))]
    else:
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        per_layer = [2 * _kv_heads(text) * head_dim] * len(types)
    shared = getattr(text, "num_kv_shared_layers", 0) or 0  # Gemma 3n: the last layers reuse earlier caches
    layers = tuple(
        (per_layer[i] + (text.index_head_dim if t == "indexed_attention" else 0), kw.get("sliding_window"))
        if t in _ATTENTION and i < len(types) - shared else (0, None)
        for i, (t, kw) in enumerate(zip(types, kwargs, strict=True)))
    state = sum(_state(text) for t in types if t in _RECURRENT)
    return layers, state
