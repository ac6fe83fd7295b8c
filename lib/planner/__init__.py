"""The capacity planner: how much memory and how many GPUs a Transformer needs at inference (and, with
``--train``, for a training step), how fast it serves, and how sure the answer is, for any model transformers
knows as it is published: decoder-only models, mixtures of experts, hybrids with recurrent layers,
encoder-decoders (BART, T5, Whisper, BLIP) and quantised checkpoints, read exactly or refused in one line.

One module per concern, named after what a reader looks for:

* :mod:`lib.planner.units`: bytes per dtype, sizes with units (``"80GB"``, ``"81559MiB"``);
* :mod:`lib.planner.config`: reading ``config.json`` by hand, family by family, exactly or not at all;
* :mod:`lib.planner.engine`: the same description read from ``transformers``' own model, built on the meta device
  (encoder-decoders whole, with their cross-attention cache; FLOPs per token; cached for the command line);
* :mod:`lib.planner.quant`: weights as a checkpoint stores them (``quantization_config``: fp8 blocks, mxfp4,
  nvfp4, AWQ, GPTQ, compressed-tensors, bitsandbytes), its published size, and what the count assumes;
* :mod:`lib.planner.counts`: parameter counts and weight bytes;
* :mod:`lib.planner.cache`: KV-cache bytes (eq. kv-bytes), layer by layer with sliding windows;
* :mod:`lib.planner.flops`: forward FLOPs of a whole model (the per-block mathematics is :mod:`lib.flops`);
* :mod:`lib.planner.gpus`: GPU presets, memory as the driver and as the serving engine see it, and each card's
  data-sheet roofline (bandwidth, dense matrix peaks, link);
* :mod:`lib.planner.serving`: tensor/pipeline parallel plans under vLLM's memory accounting by release band
  (``VLLM_BANDS``: 0.12 and later, 0.10-0.11, V0): the profiling run's activation peak with the sampler's warm-up,
  non-torch memory by replica size, the sliding-window reservation, ``max_num_seqs``, plans from the KV memory a
  running vLLM printed, and a verdict against the model's error measured on public start-up logs;
* :mod:`lib.planner.speed`: time and throughput of a plan (prefill, decode step, tokens per second per user and per
  GPU, GPUs for a target rate, cost per million tokens) on the roofline with efficiencies fitted to published
  measurements;
* :mod:`lib.planner.training` and :mod:`lib.planner.train_cli`: one training step's memory per GPU (weights,
  gradients, optimizer states under ZeRO, activations with checkpointing, LoRA and quantised bases) and FLOPs;
* :mod:`lib.planner.cli`: the report (:func:`~lib.planner.cli.report`, one for models either reader read), its
  JSON schema and the in-page calculator's data and HTML (``web/planner.js``, which plans as the command line
  does); :mod:`lib.planner.text` renders the report as text, :mod:`lib.planner.command` is the command line
  (argparse, one-line errors).

This package re-exports their public names; ``python -m lib.sizing CONFIG.json --help`` runs the command line.
"""

from __future__ import annotations

from .cache import (
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
from .cli import JSON_KEYS, SCHEMA_VERSION, format_report, main, normalised, planner_html, report
from .counts import ParameterCount, attention_parameters, layer_parameters, parameter_count, weight_bytes
from .flops import forward_flops, model_crossover_length
from .gpus import GPU, GPUS, gpu
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
    "ParameterCount", "parameter_count", "weight_bytes", "attention_parameters", "layer_parameters",
    "forward_flops", "model_crossover_length",
    "GPU", "GPUS", "gpu",
    "naive_gpu_count", "valid_tp_degrees", "TPLayout", "tp_layout", "pp_layer_partition", "activation_peak_bytes",
    "GPUPlan", "plan_gpus", "ServingAssumptions", "serving_plan",
    "SCHEMA_VERSION", "JSON_KEYS", "report", "format_report", "normalised", "planner_html", "main",
]
