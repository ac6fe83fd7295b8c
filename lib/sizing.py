"""Sizing a decoder-only Transformer at inference: one import for the capacity planner's pieces.

Each concern has its own module, named after what a reader looks for:

* :mod:`lib.units`: bytes per dtype, sizes with units (``"80GB"``, ``"81559MiB"``);
* :mod:`lib.model_config`: reading ``config.json``, exactly or not at all;
* :mod:`lib.params`: parameter counts and weight bytes;
* :mod:`lib.kv_cache`: KV-cache bytes (eq. kv-bytes), layer by layer with sliding windows;
* :mod:`lib.model_flops`: forward FLOPs of a whole model;
* :mod:`lib.gpus`: GPU presets, memory as the devices report it;
* :mod:`lib.serving`: tensor/pipeline parallel plans under vLLM's memory accounting;
* :mod:`lib.planner`: the report, its JSON schema, the command line and the in-page calculator.

This module re-exports their public names (the chapters import them from here) and runs the command line:
``python -m lib.sizing CONFIG.json --help``.
"""

from __future__ import annotations

from .gpus import GPU, GPUS, gpu
from .kv_cache import (
    cached_token_layers,
    cached_tokens,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    kv_elements_per_token_layer,
    mha_kv_cache_bytes_per_token,
    mla_cache_bytes_per_token,
    model_kv_bytes_per_sequence,
    model_kv_bytes_per_token,
    model_kv_cache_bytes,
)
from .model_flops import forward_flops, model_crossover_length
from .params import ParameterCount, _attention_params, parameter_count, weight_bytes
from .planner import JSON_KEYS, SCHEMA_VERSION, format_report, main, normalised, planner_html, report
from .serving import (
    GPUPlan,
    ServingAssumptions,
    TPLayout,
    activation_peak_bytes,
    naive_gpu_count,
    plan_gpus,
    pp_layer_partition,
    serving_plan,
    tp_layout,
    valid_tp_degrees,
)
from .units import DTYPE_ALIASES, bytes_per_element, format_bytes, parse_bytes

__all__ = [
    "DTYPE_ALIASES", "bytes_per_element", "parse_bytes", "format_bytes",
    "kv_cache_bytes_per_token", "mha_kv_cache_bytes_per_token", "mla_cache_bytes_per_token", "cached_tokens",
    "kv_cache_bytes", "kv_elements_per_token_layer", "model_kv_bytes_per_token", "cached_token_layers",
    "model_kv_bytes_per_sequence", "model_kv_cache_bytes",
    "ParameterCount", "parameter_count", "weight_bytes", "_attention_params",
    "forward_flops", "model_crossover_length",
    "GPU", "GPUS", "gpu",
    "naive_gpu_count", "valid_tp_degrees", "TPLayout", "tp_layout", "pp_layer_partition", "activation_peak_bytes",
    "GPUPlan", "plan_gpus", "ServingAssumptions", "serving_plan",
    "SCHEMA_VERSION", "JSON_KEYS", "report", "format_report", "normalised", "planner_html", "main",
]

if __name__ == "__main__":
    raise SystemExit(main())
