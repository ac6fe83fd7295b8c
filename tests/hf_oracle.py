"""transformers as the oracle for lib.planner.config / lib.planner.counts: instantiate a config on the meta device (no
weights are allocated, so even DeepSeek-V3 takes seconds) and count the parameters of the real modules.

Test-only: lib never imports transformers or torch for sizing.
"""

from __future__ import annotations

import json
import re
import warnings
from functools import cache
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

transformers.logging.set_verbosity_error()

# A routed expert's parameters: "...mlp.experts.<i>.up_proj.weight" or the fused "...mlp.experts.gate_up_proj";
# a shared expert ("shared_expert.", "shared_experts.") does not match.
_ROUTED = re.compile(r"(^|\.)experts\.")


def hf_config(raw: dict):
    raw = dict(raw)
    model_type = raw.pop("model_type")
    for key in ("architectures", "transformers_version", "torch_dtype", "auto_map"):
        raw.pop(key, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoConfig.for_model(model_type, **raw)


@cache
def hf_counts(path: str) -> tuple[int, int]:
    """(total parameters, parameters one token uses) of the model ``path`` describes, from transformers' modules.

    Active: every parameter except routed experts, plus ``top_k / n_experts`` of each layer's routed experts (a
    token runs ``top_k`` of the ``n_experts`` equal experts; the router and any shared expert always run).
    """
    raw = json.loads(Path(path).read_text())
    cfg = hf_config(raw)
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_config(cfg)
    total = active = 0.0
    top_k = getattr(cfg, "num_experts_per_tok", None)
    n_experts = next((getattr(cfg, k) for k in ("num_local_experts", "num_experts", "n_routed_experts")
                      if getattr(cfg, k, None)), None)
    seen = set()
    for name, p in model.named_parameters(remove_duplicate=True):
        if id(p) in seen:
            continue
        seen.add(id(p))
        n = p.numel()
        total += n
        active += n * top_k / n_experts if (n_experts and _ROUTED.search(name)) else n
    assert active == int(active)
    return int(total), int(active)


_ATTENTION = {"full_attention", "sliding_attention", "chunked_attention", "hybrid", "hybrid_sliding",
              "indexed_attention"}
_RECURRENT = {"linear_attention", "conv", "hybrid", "hybrid_sliding"}


def _n_kv_heads(text) -> int:
    heads = text.num_attention_heads
    if text.model_type == "gpt_bigcode":
        return 1 if text.multi_query else heads
    if text.model_type == "falcon":
        return text.num_kv_heads if text.new_decoder_architecture else (1 if text.multi_query else heads)
    return getattr(text, "num_key_value_heads", None) or heads


def _state_elements(text) -> int:
    """One recurrent layer's state from the config's fields (conv state at its full kernel width + recurrent)."""
    t = text.model_type
    if t == "qwen3_next":
        conv_dim = 2 * text.linear_num_key_heads * text.linear_key_head_dim + \
            text.linear_num_value_heads * text.linear_value_head_dim
        return conv_dim * text.linear_conv_kernel_dim + \
            text.linear_num_value_heads * text.linear_key_head_dim * text.linear_value_head_dim
    if t == "nemotron_h":
        inner = text.mamba_num_heads * text.mamba_head_dim
        conv_dim = inner + 2 * text.n_groups * text.ssm_state_size
        return conv_dim * text.conv_kernel + inner * text.ssm_state_size
    if t == "falcon_h1":
        inner = text.mamba_n_heads * text.mamba_d_head
        conv_dim = inner + 2 * text.mamba_n_groups * text.mamba_d_state
        return conv_dim * text.mamba_d_conv + inner * text.mamba_d_state
    raise NotImplementedError(f"no state formula for {t}")


@cache
def hf_cache(path: str) -> tuple[tuple[tuple[int, int | None], ...], int]:
    """What transformers' own cache lays out for the model ``path`` describes, from its config alone: per layer
    (elements cached per token, window) as ``get_layer_types_and_kwargs`` gives the layer types and windows, with
    K and V of ``num_key_value_heads x head_dim`` each (MLA: the latent ``kv_lora_rank + qk_rope_head_dim``); and the
    elements of per-sequence recurrent state."""
    from transformers.cache_utils import get_layer_types_and_kwargs

    cfg = hf_config(json.loads(Path(path).read_text()))
    text = cfg.get_text_config()
    types, kwargs = get_layer_types_and_kwargs(text)
    if getattr(text, "kv_lora_rank", None):
        per_layer = text.kv_lora_rank + text.qk_rope_head_dim
    else:
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        per_layer = 2 * _n_kv_heads(text) * head_dim
    layers = tuple((per_layer, kw.get("sliding_window")) if t in _ATTENTION else (0, None)
                   for t, kw in zip(types, kwargs, strict=True))
    state = sum(_state_elements(text) for t in types if t in _RECURRENT)
    return layers, state
