"""The capacity planner's report: what a model needs to serve a workload as one JSON-ready dict (:func:`report`,
for a model either reader read), reading a config (:func:`read_model`),
the normalised description the in-page calculator receives (:func:`normalised`) and its HTML
(:func:`planner_html`). The text form is :mod:`lib.planner.text`, the command line ``python -m lib.sizing
CONFIG.json`` :mod:`lib.planner.command`; both names stay importable from here.

The JSON form is a stable interface: its keys are listed in :data:`JSON_KEYS` (and in the README); a rename or a
change of meaning bumps :data:`SCHEMA_VERSION`; new keys may be added without a bump.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..constants import BYTES_PER_DTYPE, GiB
from . import engine as eng_mod
from .cache import (
    cached_token_layers,
    kv_elements_per_token_layer,
    model_kv_bytes_per_sequence,
    model_kv_bytes_per_token,
    model_kv_cache_bytes,
)
from .config import (
    SUPPORTED_MODEL_TYPES,
    ConfigError,
    ModelConfig,
    UnsupportedConfigError,
    config_from_dict,
    load_config,
    model_name,
)
from .counts import attention_parameters, layer_active_parameters, layer_parameters, norm_parameters, parameter_count
from .flops import forward_flops, model_crossover_length
from .gpus import GPUS, gpu
from .quant import Quantisation, checkpoint_bytes, for_dtype, read_quantisation
from .serving import (
    _BIG_GPU,
    DEFAULT_BAND,
    MODEL_ERROR_BYTES,
    NON_TORCH_ALONE,
    NON_TORCH_PARALLEL,
    SAMPLER_BYTES_PER_LOGIT,
    VLLM_BANDS,
    GPUPlan,
    ServingAssumptions,
    activation_peak_bytes,
    engine_activation_peak_bytes,
    engine_plan,
    fit_verdict,
    plan_gpus,
    serving_plan,
    vllm_batch_defaults,
)
from .train_cli import TRAINING_KEYS
from .units import as_count, bytes_per_element

__all__ = ["SCHEMA_VERSION", "JSON_KEYS", "read_model", "report", "format_report", "normalised",
           "layer_kinds", "serving_web_data", "planner_html", "main"]

#: Version of the ``--json`` layout: bumped on any rename or change of meaning of a key in :data:`JSON_KEYS`.
SCHEMA_VERSION = 3

#: Top-level keys of :func:`report` (the ``--json`` output), each with its meaning.
JSON_KEYS: dict[str, str] = {
    "schema_version": "int, the layout version (bumped on renames)",
    "model": "the config's name (file name without .config.json) or its model_type",
    "model_type": "model_type as written in the config",
    "reader": "'hand-written' (NumPy only) or 'transformers' (the engine: the model built on the meta device)",
    "layers": "each layer's kind in one line, e.g. '24 layers: 12 window 128 (sinks), 12 full (sinks)'",
    "family": "the hand-written reader used (model_type, or the family given with --assume-family), or the"
              " transformers config class the engine built",
    "attention": "multi-head, grouped-query, multi-query or latent",
    "assumptions": "list of strings: what was assumed rather than read (empty: the config was read exactly)",
    "notes": "list of strings: how a refused config was read after all (a hub type built as a registered one; fields"
             " that change nothing transformers builds, checked by building it)",
    "warnings": "list of strings: inputs the model was not made for (a context beyond max_position_embeddings)",
    "architecture": "the normalised description (lib.planner.config.ModelConfig fields)",
    "parameters": "total, active_per_token and (hand-written reader) the parts: embedding, lm_head, attention,"
                  " ffn, norms, ffn_active, kv_projection; (transformers) language_model, the text decoder's share",
    "workload": "context, users, dtype, kv_dtype, gpu (preset name or null), gpu_memory_bytes (the total the serving"
                " engine divides up: torch.cuda.mem_get_info()'s, nvidia-smi's where that is unknown),"
                " gpu_nvidia_smi_bytes (null for --gpu-memory), cached_token_layers",
    "weights_bytes": "the weights as the serving engine loads them: a quantised checkpoint's matrices as stored"
                     " (packed weights, scales, zero points), every other tensor at dtype; --dtype int8/fp8/int4"
                     " quantises the matrices and keeps the embeddings and output head at 16 bit; otherwise"
                     " parameters.total x bytes per element of dtype",
    "quantisation": "the layout the weights were counted in, e.g. 'mxfp4 weights, one 8-bit scale per 32"
                    " (quantization_config)'; null for unquantised weights",
    "checkpoint_bytes": "(transformers reader only; else null) the published checkpoint's size as stored: what"
                        " model.safetensors.index.json's metadata.total_size states (the config's torch_dtype for"
                        " unquantised tensors, a DeepSeek-V3 MTP module included)",
    "kv_bytes_per_token": "bytes one token adds to the cache of a layer-complete (unwindowed) model",
    "kv_bytes_per_sequence": "bytes of one sequence of context tokens, summed layer by layer with each window",
    "kv_cache_bytes": "kv_bytes_per_sequence x users",
    "state_bytes_per_sequence": "fixed per-sequence state of recurrent layers (linear attention, Mamba, convolutions)"
                                " as vLLM holds it (conv_kernel - 1 columns of convolution state; transformers keeps"
                                " conv_kernel: lib.planner.engine.state_bytes_per_sequence(layout=...))"
                                " at the cache dtype; 0 for a model of attention layers only",
    "total_bytes": "weights_bytes + kv_cache_bytes + users x state_bytes_per_sequence",
    "flops_per_token": "attention, projections, ffn, lm_head, total: forward matmul FLOPs of one token at the"
                       " context (a model read by transformers: from its per-layer matrices and score widths,"
                       " lib.planner.engine.forward_flops, equal to the hand-written formulas for their families;"
                       " an encoder-decoder's decoder, the encoder run once per request left out)",
    "crossover_context": "context at which attention-score FLOPs equal feed-forward FLOPs (null: no self-attention)",
    "encoder_decoder": "null for a decoder-only model; for an encoder-decoder (BART, T5, Whisper, BLIP):"
                       " encoder_params (the encoder or image/audio tower, a table it shares with the decoder"
                       " included), decoder_layers, source_tokens (what the cross-attention caches per request:"
                       " Whisper's 1,500 positions of one 30-second window, an image's patches, a text encoder's"
                       " longest input), self_attention_bytes_per_generated_token,"
                       " cross_attention_bytes_per_source_token, cross_attention_bytes_per_request (included in"
                       " state_bytes_per_sequence)",
    "serving": "engine settings (vllm_version: the release band, gpu_memory_utilization, max_num_batched_tokens,"
               " max_num_seqs, non_torch_bytes: the tensor-parallel plan's, overhead_bytes), activation_peak_bytes,"
               " model_error_bytes, verdict (how much room the tensor-parallel plan leaves against the model's"
               " error; null with --overhead), max_num_seqs_limit (null, or the line saying the cache holds more"
               " sequences than vLLM runs at once and how many users would wait), assumptions (list of strings:"
               " the engine's terms as assumed), and the plans tensor_parallel and"
               " tensor_x_pipeline (each: gpus, tp_degree, pp_degree, replicas, sequences_per_replica (at most"
               " max_num_seqs), cache_sequences_per_replica, max_num_seqs, waiting_users, usable_bytes_per_gpu,"
               " weight_bytes_per_gpu, kv_bytes_per_gpu, overhead_bytes_per_gpu, spare_bytes_per_gpu,"
               " kv_bytes_per_sequence_per_gpu, naive_gpus), naive_gpus; for a model read by transformers the plans"
               " use its per-layer description (lib.planner.serving.engine_plan)",
    "speed": "time and throughput of the plan on the --gpu preset's data-sheet roofline with assumed efficiencies"
             " (lib.planner.speed; keys: lib.planner.speed.SPEED_KEYS): prefill_seconds, decode_seconds_per_token,"
             " tokens_per_second_per_user, tokens_per_second_per_gpu, with --tokens-per-second-per-user or"
             " --tokens-per-second gpus_for_target, with --gpu-hour-price cost_per_million_tokens, and the"
             " efficiencies and assumptions; null for --gpu-memory without a preset (no bandwidth or peak known)",
    "training": "only with --train: one training step's memory per GPU and FLOPs (keys: TRAINING_KEYS in"
                " lib.planner.train_cli: " + ", ".join(TRAINING_KEYS) + ")",
}


def normalised(model: ModelConfig | eng_mod.EngineModel, name: str = "") -> dict[str, Any]:
    """The JSON-ready normalised description of a model (the in-page calculator receives exactly this, so each
    family's quirks are read once, in Python, at book-build time).

    A hand-read :class:`~lib.planner.config.ModelConfig`: every field the generic formulas use (its dataclass
    fields, ``layer_windows`` and ``moe_layers`` as lists). An engine-read
    :class:`~lib.planner.engine.EngineModel` (a model only transformers knows): ``model_type``, ``name``,
    ``n_layers``, ``d_model``, ``n_heads``, ``n_kv_heads``, ``vocab_size``, ``max_positions``, ``family`` (the
    config class); the generic formulas do not apply to it, the per-layer keys below do.

    Both carry these keys (stable names; the calculator renders them):

    * ``reader``: ``"hand-written"`` or ``"transformers"``;
    * ``layers``: the one-line summary, e.g. ``"24 layers: 12 window 128 (sinks), 12 full (sinks)"``;
    * ``layer_kinds``: one label per layer (``"full"``, ``"window 128"``, ``"latent"``, ``"linear_attention"``,
      ``"mamba"``, ``"hybrid, window 4096"``, ``"shared cache"`` (attention over an earlier layer's cache),
      ``"feed-forward only"``; `` (sinks)`` appended where it applies);
    * ``windows``: per layer, the tokens it keeps (``null``: the whole context);
    * ``layer_kv_elements``: per layer, numbers cached per token (K and V, or a latent; 0: none);
    * ``layer_state_elements``: per layer, numbers of fixed per-sequence state (recurrent layers; else 0);
    * ``layer_params``, ``layer_active_params``: per layer, parameters and those one token uses;
    * ``layer_kv_projection``: per layer, parameters of the key/value projections (replicated on
      ``t / n_kv_heads`` GPUs when the tensor-parallel degree ``t`` exceeds the key/value heads);
    * ``first_params`` (before the layers: embeddings, a vision tower), ``last_params`` (after: final norm, an
      untied head), ``tied_head`` (parameters of a tied head, which a separate last pipeline stage copies);
    * ``latent``: whether the cache is a latent every tensor-parallel GPU holds whole;
    * (engine-read only) ``layer_kv_heads`` (key/value heads per layer, 0: the model's), ``layer_conv_channels``
      (convolution channels vLLM keeps one column fewer of), ``layer_widest`` (outputs per token of the widest block,
      for the activation estimate): what the calculator's serving plan needs beside the keys above;
    * ``parameters``: ``{"total", "active_per_token"}``.

    So bytes per token = sum(layer_kv_elements) x bytes per element, a sequence of n tokens caches
    sum(layer_kv_elements[i] x min(n, windows[i])) plus sum(layer_state_elements), and the parameters are
    first_params + sum(layer_params) + last_params.
    """
    if isinstance(model, eng_mod.EngineModel):
        layers = model.layers
        d = {"model_type": model.model_type, "name": name or model.model_type, "family": model.config_class,
             "n_layers": len(layers), "d_model": model.d_model, "n_heads": model.n_heads,
             "n_kv_heads": model.n_kv_heads, "vocab_size": model.vocab_size, "max_positions": model.max_positions,
             "reader": "transformers", "layers": eng_mod.layer_summary(model),
             "layer_kinds": eng_mod.layer_kinds(model),
             "windows": [la.window for la in layers], "layer_kv_elements": [la.kv_per_token for la in layers],
             "layer_state_elements": [la.state for la in layers], "layer_params": [la.params for la in layers],
             "layer_active_params": [la.active for la in layers],
             "layer_kv_projection": [la.kv_projection for la in layers],
             "layer_kv_heads": [la.kv_heads for la in layers],
             "layer_conv_channels": [la.conv_channels for la in layers],
             "layer_widest": [la.widest for la in layers], "first_params": model.first_params,
             "last_params": model.last_params, "tied_head": model.tied_head,
             "latent": any(la.kind == "latent" for la in layers),
             "parameters": {"total": model.total, "active_per_token": model.active}}
        return d
    cfg = model
    d = asdict(cfg)
    for key in ("layer_windows", "moe_layers", "assumptions"):
        if d[key] is not None:
            d[key] = list(d[key])
    p = parameter_count(cfg)
    attn, kv_proj = attention_parameters(cfg)
    kinds = _hand_layer_kinds(cfg)
    d.update({
        "reader": "hand-written", "layers": layer_kinds(cfg), "layer_kinds": kinds, "windows": list(cfg.windows),
        "layer_kv_elements": [kv_elements_per_token_layer(cfg)] * cfg.n_layers,
        "layer_state_elements": [0] * cfg.n_layers,
        "layer_params": [layer_parameters(cfg, i) for i in range(cfg.n_layers)],
        "layer_active_params": [layer_active_parameters(cfg, i) for i in range(cfg.n_layers)],
        "layer_kv_projection": [kv_proj] * cfg.n_layers,
        "first_params": p.embedding, "last_params": norm_parameters(cfg) + p.lm_head,
        "tied_head": cfg.vocab_size * cfg.d_model if cfg.tie_embeddings else 0,
        "latent": cfg.attention_kind == "latent",
        "parameters": {"total": p.total, "active_per_token": p.active},
    })
    return d


def _hand_layer_kinds(cfg: ModelConfig) -> list[str]:
    kind = "latent" if cfg.attention_kind == "latent" else "full"
    return [f"window {w}" if w else kind for w in cfg.windows]


def layer_kinds(cfg: ModelConfig) -> str:
    """Each layer's kind in one line, from a hand-read description (``"42 layers: 21 window 4096, 21 full"``)."""
    counts: dict[str, int] = {}
    for label in _hand_layer_kinds(cfg):
        counts[label] = counts.get(label, 0) + 1
    return f"{cfg.n_layers} layers: " + ", ".join(f"{n} {k}" for k, n in counts.items())


def read_model(path: str | Path, *, assume_family: str | None = None, cache: bool = False
               ) -> tuple[ModelConfig | None, eng_mod.EngineModel | None, list[str]]:
    """Read ``config.json``: the hand-written reader first; where it refuses, transformers (if installed) decides.

    Returns ``(cfg, None, [])`` when a hand-written reader reads it exactly; ``(cfg, engine_model, notes)`` when it
    refused only fields that, built with transformers, change nothing (the model is the same with and without
    them: the notes say which); ``(None, engine_model, notes)`` for a model only transformers knows. Raises
    :class:`ConfigError` (one line) when neither can read it, saying when transformers would be needed.
    """
    try:
        return load_config(path, assume_family=assume_family), None, []
    except UnsupportedConfigError as err:
        refusal = err
    if not eng_mod.available():
        raise ConfigError(f"{refusal}; this model needs the transformers engine, and transformers is not"
                          " installed (pip install transformers torch)") from None
    p = Path(path)
    raw = json.loads(p.read_text(encoding="utf-8"))
    try:
        em = eng_mod.describe(raw, cache=cache)
    except eng_mod.EngineError as err:
        raise ConfigError(f"{refusal}; the transformers engine cannot read it either: {err}") from None
    notes = list(em.notes)
    model_type = raw.get("model_type")
    if refusal.unread and model_type in SUPPORTED_MODEL_TYPES:
        cfg = config_from_dict(raw, model_name(p, raw), assume_family=model_type)
        same = (parameter_count(cfg).total == em.total and parameter_count(cfg).active == em.active
                and model_kv_bytes_per_token(cfg, "fp16") == eng_mod.kv_bytes_per_token(em, "fp16")
                and model_kv_bytes_per_sequence(cfg, 8192, "fp16") == eng_mod.kv_bytes_per_sequence(em, 8192, "fp16")
                and eng_mod.state_bytes_per_sequence(em) == 0)
        if not same:
            raise ConfigError(f"{refusal}; built by transformers, the model differs from what the"
                              f" {model_type!r} reader would read without those fields") from None
        if same:
            fields = ", ".join(refusal.unread)
            return replace(cfg, assumptions=()), em, notes + [
                f"{fields}: not read by the {model_type!r} reader, and transformers builds the same model"
                f" with or without {'it' if len(refusal.unread) == 1 else 'them'} (checked by building it)"]
    return None, em, notes


def _gpu(gpu_memory_bytes: int | None, gpu_name: str | None) -> tuple[str | None, int, int | None, list[str]]:
    """(preset name, bytes to plan with, nvidia-smi's bytes, notes) for a given size or a preset."""
    notes: list[str] = []
    smi_bytes = None
    if gpu_memory_bytes is None:
        card = gpu(gpu_name or "H100-80GB")
        gpu_name, gpu_memory_bytes, smi_bytes = card.name, card.plan_bytes, card.memory_bytes
        if card.engine_bytes is None:
            notes.append(f"{card.name}: no public printout of torch.cuda.mem_get_info()'s total was found;"
                         " planning with nvidia-smi's memory.total, which is a few hundred MiB larger on the"
                         " cards where both are known")
        elif card.derived:
            notes.append(f"{card.name}: no public printout of torch.cuda.mem_get_info()'s total was found;"
                         f" planning with the {card.engine_bytes / GiB:.2f} GiB that vLLM logs on the card imply"
                         f" ({card.engine_source.split(': ', 1)[-1]})")
    return gpu_name, as_count(gpu_memory_bytes, "gpu_memory_bytes"), smi_bytes, notes


def _quantisation(dtype: str, quant: Quantisation | None) -> tuple[Quantisation | None, str]:
    """(the layout to count the matrices in, the dtype of every other tensor): a checkpoint's own quantisation, or
    the one ``--dtype int8/fp8/int4`` asks for (the rest then at bf16)."""
    asked = for_dtype(dtype)
    if quant is not None and asked is not None:
        raise ValueError(f"the checkpoint is already quantised ({quant.description}); --dtype {dtype} would"
                         " quantise it again: give a 16-bit --dtype (the format of its unquantised tensors)")
    q = quant or asked
    return q, ("bf16" if asked is not None else dtype)


def report(
    model: ModelConfig | eng_mod.EngineModel,
    raw: dict[str, Any] | None = None,
    *,
    name: str = "",
    context: int | None = None,
    users: int = 1,
    gpu_memory_bytes: int | None = None,
    gpu_name: str | None = None,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    engine: ServingAssumptions | None = None,
    notes: list[str] | None = None,
    overhead_bytes: float | None = None,
    max_tp: int = 64,
    max_pp: int = 8,
    quant: Quantisation | None = None,
    speed: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything the planner says about a model for a workload, as a JSON-ready dict (keys: :data:`JSON_KEYS`):
    one report for a model the hand-written reader read (a :class:`~lib.planner.config.ModelConfig`) and for one
    the engine read (a :class:`~lib.planner.engine.EngineModel`, with ``raw``, its ``config.json`` as a dict).

    Each reader gives its description's parts (:func:`_hand_part`, :func:`_engine_part`): parameters, weights,
    cache, FLOPs, the serving plan's search; everything else is shared. GPU memory: ``gpu_memory_bytes`` if given,
    else the preset ``gpu_name`` (default ``"H100-80GB"``, torch's total 81,089 MiB). The serving plans follow
    vLLM's accounting with ``engine`` (:class:`~lib.planner.serving.ServingAssumptions`); a fixed
    ``overhead_bytes`` per GPU replaces the activation and non-torch estimates. ``context`` defaults to 4096.
    ``quant``: the checkpoint's quantisation (default: read from ``raw``'s ``quantization_config``); its
    assumptions join the report's. ``notes``: how a refused config was read after all (:func:`read_model`).
    ``speed``: keyword arguments of :func:`lib.planner.speed.speed_section` (``input_tokens``, ``output_tokens``,
    ``tokens_per_second_per_user``, ``tokens_per_second``, ``gpu_hour_price``) for the ``speed`` key.
    """
    kv_dtype = dtype if kv_dtype is None else kv_dtype
    bytes_per_element(dtype)
    bytes_per_element(kv_dtype)
    context = 4096 if context is None else as_count(context, "context")
    users = as_count(users, "users")
    gpu_name, gpu_memory_bytes, smi_bytes, gpu_notes = _gpu(gpu_memory_bytes, gpu_name)
    engine = engine or ServingAssumptions.vllm_defaults(gpu_memory_bytes, gpu_name or "")
    if quant is None and raw is not None:
        quant = read_quantisation(raw)
    q, base = _quantisation(dtype, quant)
    settings = dict(context=context, users=users, gpu_memory_bytes=gpu_memory_bytes, base=base, kv_dtype=kv_dtype,
                    engine=engine, overhead_bytes=overhead_bytes, max_tp=max_tp)
    if isinstance(model, eng_mod.EngineModel):
        if raw is None:
            raise ValueError("a model read by the engine needs its config.json (raw) for the report")
        part = _engine_part(model, raw, q, quant, name=name, **settings)
    else:
        part = _hand_part(model, q, name=name, **settings)
    act = part.pop("activation")
    plan = part.pop("plan")
    serving_notes = part.pop("serving_notes")
    out = {
        "schema_version": SCHEMA_VERSION,
        "model": part.pop("model"),
        "model_type": part.pop("model_type"),
        "reader": part.pop("reader"),
        "family": part.pop("family"),
        "layers": part.pop("layers"),
        "attention": part.pop("attention"),
        "assumptions": part.pop("assumptions") + (list(q.assumptions) if q else []),
        "notes": list(notes or []),
        "warnings": part.pop("warnings"),
        "architecture": part.pop("architecture"),
        "parameters": part.pop("parameters"),
        "workload": {"context": context, "users": users, "dtype": dtype, "kv_dtype": kv_dtype, "gpu": gpu_name,
                     "gpu_memory_bytes": gpu_memory_bytes, "gpu_nvidia_smi_bytes": smi_bytes,
                     "cached_token_layers": part.pop("cached_token_layers")},
        "weights_bytes": part.pop("weights_bytes"),
        "quantisation": q.description if q else None,
        **part,
        "serving": _serving(plan, engine, overhead_bytes, max_pp, act, gpu_notes + serving_notes),
    }
    out["speed"] = _speed(out, model, raw, gpu_name, speed)
    return out


def _max_positions_warning(context: int, limit: int | None) -> list[str]:
    return ([f"context {context:,} exceeds the model's max_position_embeddings {limit:,}: the model was not"
             " trained for it, and serving engines refuse it unless told otherwise"]
            if isinstance(limit, int) and limit and context > limit else [])


def _hand_part(cfg: ModelConfig, q: Quantisation | None, *, name: str, context: int, users: int,
               gpu_memory_bytes: int, base: str, kv_dtype: str, engine: ServingAssumptions,
               overhead_bytes: float | None, max_tp: int) -> dict[str, Any]:
    """The report's parts from the hand-written description: parameters by part, the closed-form cache and FLOPs,
    the plans of :func:`~lib.planner.serving.serving_plan` (or :func:`~lib.planner.serving.plan_gpus` with a fixed
    overhead). A quantised layout counts every decoder matrix's scales at the rate of a ``d_model`` x ``d_model``
    matrix, the rest at ``base``."""
    params = parameter_count(cfg)
    rate = None
    if q is None:
        w_bytes = params.total * bytes_per_element(base)
    else:
        rate = q.tensor_bytes((cfg.d_model, cfg.d_model)) / cfg.d_model ** 2
        matrices = params.attention + params.ffn
        w_bytes = (params.total - matrices) * bytes_per_element(base) + matrices * rate
    kv_total = model_kv_cache_bytes(cfg, context, users, kv_dtype)
    fl = forward_flops(cfg, context)

    def plan(pp: int) -> GPUPlan:
        common = dict(users=users, context=context, gpu_memory_bytes=gpu_memory_bytes, dtype=base,
                      kv_dtype=kv_dtype, max_tp=max_tp, max_pp=pp)
        if q is not None:
            common.update(layer_rate=rate, weights_bytes=w_bytes)
        if overhead_bytes is None:
            return serving_plan(cfg, assumptions=engine, **common)
        return plan_gpus(cfg, memory_fraction=engine.gpu_memory_utilization, overhead_bytes=overhead_bytes,
                         **common)

    return {
        "model": name or cfg.name or cfg.model_type,
        "model_type": cfg.model_type,
        "reader": "hand-written",
        "family": cfg.family or cfg.model_type,
        "layers": layer_kinds(cfg),
        "attention": cfg.attention_kind,
        "assumptions": list(cfg.assumptions),
        "warnings": _max_positions_warning(context, cfg.max_positions),
        "architecture": normalised(cfg),
        "parameters": {"total": params.total, "active_per_token": params.active, **asdict(params)},
        "cached_token_layers": cached_token_layers(cfg, context),
        "weights_bytes": _whole(w_bytes),
        "checkpoint_bytes": None,
        "kv_bytes_per_token": _whole(model_kv_bytes_per_token(cfg, kv_dtype)),
        "kv_bytes_per_sequence": _whole(model_kv_bytes_per_sequence(cfg, context, kv_dtype)),
        "kv_cache_bytes": _whole(kv_total),
        "state_bytes_per_sequence": 0,
        "total_bytes": _whole(w_bytes + kv_total),
        "flops_per_token": {"attention": fl.attention, "projections": fl.projections, "ffn": fl.ffn,
                            "lm_head": fl.lm_head, "total": fl.total},
        "crossover_context": model_crossover_length(cfg),
        "encoder_decoder": None,
        "plan": plan,
        "activation": activation_peak_bytes(cfg, engine.max_num_batched_tokens, engine.max_num_seqs, base,
                                            band=engine.band, max_model_len=engine.max_model_len or context),
        "serving_notes": ([f"hand-written reader: {q.description}; the scales of every matrix counted at the rate"
                           " of a d_model x d_model matrix"] if q else []),
    }


def _engine_part(em: eng_mod.EngineModel, raw: dict[str, Any], q: Quantisation | None,
                 quant: Quantisation | None, *, name: str, context: int, users: int, gpu_memory_bytes: int,
                 base: str, kv_dtype: str, engine: ServingAssumptions, overhead_bytes: float | None,
                 max_tp: int) -> dict[str, Any]:
    """The report's parts from the engine's per-layer description: parameters, weights as the checkpoint stores
    them (:func:`lib.planner.engine.weight_bytes`), the cache layer by layer with its window plus recurrent state
    and an encoder-decoder's cross-attention, FLOPs per token (:func:`lib.planner.engine.forward_flops`) and the
    plans of :func:`lib.planner.serving.engine_plan`. ``q``: the layout the weights are counted in; ``quant``: the
    checkpoint's own (None for a 16-bit checkpoint), for its published size."""
    stored = None
    if q is None:
        w_bytes = _whole(em.total * bytes_per_element(base))
    else:
        total_w, per_layer, before, after = eng_mod.weight_bytes(em, q, bytes_per_element(base))
        w_bytes, stored = _whole(total_w), (per_layer, before, after)
    per_seq = _whole(eng_mod.kv_bytes_per_sequence(em, context, kv_dtype))
    state = _whole(eng_mod.state_bytes_per_sequence(em, kv_dtype, layout="vllm"))
    # only a limit the file states: where it says none, transformers' class default is no property of the model
    text_raw = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}
    stated = any(k in src for src in (raw, text_raw) for k in ("max_position_embeddings", "n_positions"))
    mpe = (em.max_positions or raw.get("max_position_embeddings")) if stated else None
    kinds = {layer.kind for layer in em.layers}
    heads, kv_heads = raw.get("num_attention_heads"), raw.get("num_key_value_heads", raw.get("num_attention_heads"))
    if em.source_tokens:  # an encoder-decoder: the decoder's heads as built
        heads, kv_heads = em.n_heads, em.n_kv_heads
    cross = sum(layer.cross_kv_per_token for layer in em.layers)
    seq2seq = ({"encoder_params": em.encoder_params, "decoder_layers": len(em.layers),
                "source_tokens": em.source_tokens,
                "self_attention_bytes_per_generated_token": _whole(eng_mod.kv_bytes_per_token(em, kv_dtype)),
                "cross_attention_bytes_per_source_token": _whole(cross * bytes_per_element(kv_dtype)),
                "cross_attention_bytes_per_request": _whole(cross * em.source_tokens * bytes_per_element(kv_dtype))}
               if em.source_tokens else None)
    if "latent" in kinds:
        attention = "latent"
    elif kinds & {"mamba", "linear_attention", "conv", "hybrid"}:
        attention = "hybrid"
    elif isinstance(heads, int) and isinstance(kv_heads, int) and heads > 0:
        attention = ("multi-head" if kv_heads == heads else "multi-query" if kv_heads == 1 else "grouped-query")
    else:
        attention = "per-layer"

    def plan(pp: int) -> GPUPlan:
        return engine_plan(em, users=users, context=context, gpu_memory_bytes=gpu_memory_bytes, dtype=base,
                           kv_dtype=kv_dtype, assumptions=engine, overhead_bytes=overhead_bytes, max_tp=max_tp,
                           max_pp=pp, stored=stored)

    return {
        "model": name or em.model_type,
        "model_type": em.model_type,
        "reader": "transformers",
        "family": em.config_class,
        "layers": eng_mod.layer_summary(em),
        "attention": attention,
        "assumptions": [],
        "warnings": _max_positions_warning(context, mpe),
        "architecture": {"config_class": em.config_class, "layers": [asdict(layer) for layer in em.layers]},
        "parameters": {"total": em.total, "active_per_token": em.active, "language_model": em.language_total},
        "cached_token_layers": sum(min(context, la.window) if la.window else context
                                   for la in em.layers if la.kv_per_token),
        "weights_bytes": w_bytes,
        "checkpoint_bytes": _whole(checkpoint_bytes(em, raw, quant)) if em.tensors else None,
        "kv_bytes_per_token": _whole(eng_mod.kv_bytes_per_token(em, kv_dtype)),
        "kv_bytes_per_sequence": per_seq,
        "kv_cache_bytes": users * per_seq,
        "state_bytes_per_sequence": state,
        "total_bytes": w_bytes + users * (per_seq + state),
        "flops_per_token": eng_mod.forward_flops(em, context),
        "crossover_context": eng_mod.crossover_context(em),
        "encoder_decoder": seq2seq,
        "plan": plan,
        "activation": engine_activation_peak_bytes(em, engine.max_num_batched_tokens, engine.max_num_seqs, base,
                                                   band=engine.band,
                                                   max_model_len=engine.max_model_len or context),
        "serving_notes": (["activation peak estimated from the widest block of any layer (its active parameters"
                           " over d_model: the outputs per token of its matrices)"] if overhead_bytes is None else [])
        + (["recurrent state split over a tensor-parallel group like the heads it belongs to; tensor-parallel"
            " degrees checked against the attention heads"] if state else []),
    }


def _serving(plan, engine: ServingAssumptions, overhead_bytes: float | None, max_pp: int, activation: float,
             notes: list[str]) -> dict[str, Any]:
    """The report's ``serving`` section: the engine settings, and ``plan(max_pp)``'s tensor-parallel
    (``max_pp=1``) and tensor x pipeline plans with whole-byte per-GPU figures."""
    plans = {key: {k: (int(v) if k == "usable_bytes_per_gpu" else _whole(v)) if k.endswith("_per_gpu") else v
                   for k, v in asdict(plan(pp)).items()}
             for key, pp in (("tensor_parallel", 1), ("tensor_x_pipeline", max_pp))}
    serving_notes = engine.describe() if overhead_bytes is None else [
        f"gpu_memory_utilization {engine.gpu_memory_utilization}; a fixed overhead of"
        f" {overhead_bytes / GiB:.2f} GiB per GPU (given) replaces the activation and non-torch estimates"]
    tp_plan = plans["tensor_parallel"]
    verdict = fit_verdict(GPUPlan(**tp_plan)) if overhead_bytes is None else None
    limit = None
    if tp_plan["max_num_seqs"] is not None and tp_plan["cache_sequences_per_replica"] > tp_plan["max_num_seqs"]:
        limit = (f"one replica's cache holds {tp_plan['cache_sequences_per_replica']:,} sequences but vLLM runs"
                 f" at most max_num_seqs = {tp_plan['max_num_seqs']:,} at once: the plan counts"
                 f" {tp_plan['max_num_seqs']:,} per replica"
                 + (f"; on the fewer replicas the cache alone would call for, {tp_plan['waiting_users']:,}"
                    " users would wait" if tp_plan["waiting_users"] else ""))
    return {
        "vllm_version": VLLM_BANDS[engine.band],
        "gpu_memory_utilization": engine.gpu_memory_utilization,
        "max_num_batched_tokens": engine.max_num_batched_tokens,
        "max_num_seqs": engine.max_num_seqs,
        "non_torch_bytes": engine.non_torch(tp_plan["tp_degree"] * tp_plan["pp_degree"]),
        "overhead_bytes": overhead_bytes,
        "activation_peak_bytes": _whole(activation),
        "model_error_bytes": MODEL_ERROR_BYTES if overhead_bytes is None else None,
        "verdict": verdict,
        "max_num_seqs_limit": limit,
        "assumptions": notes + serving_notes,
        "naive_gpus": plans["tensor_parallel"]["naive_gpus"],
        **plans,
    }


def _speed(r: dict[str, Any], model: Any, raw: dict[str, Any] | None, gpu_name: str | None,
           options: dict[str, Any] | None) -> dict[str, Any] | None:
    """The report's ``speed`` object (:func:`lib.planner.speed.speed_section`), or None without a GPU preset.
    ``options``: its keyword arguments (input and output tokens, targets, price); where none were given and the
    default request cannot be formed (a context of one token), None rather than an error."""
    if gpu_name is None:
        return None
    from .speed import speed_section

    try:
        return speed_section(r, model, raw, gpu_name=gpu_name, **(options or {}))
    except ValueError:
        if options:
            raise
        return None


def _whole(b: float) -> int:
    """A byte count as an integer (fp8/int4 sizes are whole bytes for any realistic count; int4 rounds up)."""
    return int(-(-b // 1))


def serving_web_data() -> dict[str, Any]:
    """What the in-page calculator needs to plan as the command line does, read from the Python rules so the page
    repeats no constant: the GPU presets (the total vLLM divides up, :attr:`lib.planner.gpus.GPU.plan_bytes`),
    vLLM's batch defaults for a large and a small card (:func:`~lib.planner.serving.vllm_batch_defaults`, server
    entry) and the threshold between them, the sampler's bytes per logit, the non-torch figures, the model's error
    and the command line's defaults (context 4,096, one user, utilization 0.9, block size 16, the newest band)."""
    defaults = ServingAssumptions()
    return {
        "gpus": {name: card.plan_bytes for name, card in GPUS.items()},
        "default_gpu": "H100-80GB",
        "big_gpu_bytes": _BIG_GPU,
        "batch_defaults_big": list(vllm_batch_defaults(_BIG_GPU)),
        "batch_defaults_small": list(vllm_batch_defaults(1)),
        "excluded_from_big": "a100",
        "sampler_bytes_per_logit": SAMPLER_BYTES_PER_LOGIT,
        "non_torch_alone": NON_TORCH_ALONE,
        "non_torch_parallel": NON_TORCH_PARALLEL,
        "model_error_bytes": MODEL_ERROR_BYTES,
        "bands": dict(VLLM_BANDS),
        "default_band": DEFAULT_BAND,
        "gpu_memory_utilization": defaults.gpu_memory_utilization,
        "block_size": defaults.block_size,
        "context": 4096,
        "users": 1,
    }


def planner_html(presets: dict[str, ModelConfig | eng_mod.EngineModel], element_id: str = "planner-app", *,
                 start: dict[str, Any] | None = None, training: bool = True) -> str:
    """HTML for the in-page calculator: a ``<div>`` carrying the presets' normalised descriptions
    (:func:`normalised`, built here at book-build time: a model only transformers knows is read by the engine
    then), ``BYTES_PER_DTYPE``, the serving rules' data (:func:`serving_web_data`: the calculator starts from the
    command line's defaults and plans as it does) and the speed data (:func:`lib.planner.speed.web_data`: each
    preset's roofline description, the cards, the efficiencies) as JSON, then ``lib/planner/web/planner.js`` inline
    (no kernel, no network).
    tests/test_planner_node.py checks the script against :mod:`lib.sizing` under Node, tests/browser/test_planner.py
    in Chromium.

    ``start``: what the form opens on, ``{"preset": name, "users": n, "context": n}`` (any of them; default: the first
    preset and the command line's defaults), so a page can open on its own question. ``training=False`` leaves out
    the second form, one training step per GPU."""
    if not presets:
        raise ValueError("presets must name at least one model configuration")
    start = dict(start or {})
    unknown = set(start) - {"preset", "users", "context"}
    if unknown:
        raise ValueError(f"start takes preset, users and context, not {sorted(unknown)}")
    if "preset" in start and start["preset"] not in presets:
        raise ValueError(f"start preset {start['preset']!r} is not one of the presets")
    for key in ("users", "context"):
        if key in start:
            start[key] = as_count(start[key], key)
    if not re.fullmatch(r"[A-Za-z][\w-]*", element_id):
        raise ValueError(f"element_id must be a simple HTML id, got {element_id!r}")
    script = (Path(__file__).parent / "web" / "planner.js").read_text(encoding="utf-8")
    if "</script" in script.lower():
        raise ValueError("planner.js must not contain '</script'")
    from .speed import web_data

    data = {"bytes_per_dtype": BYTES_PER_DTYPE, "presets": {name: normalised(c, name) for name, c in presets.items()},
            "speed": web_data(presets), "serving": serving_web_data(), "start": start, "training": bool(training)}
    style = (
        f"<style>#{element_id} form{{display:grid;grid-template-columns:repeat(auto-fill,minmax(17em,1fr));"
        f"gap:.3em 1.2em;margin-bottom:.8em}}#{element_id} label{{display:flex;justify-content:space-between;"
        f"align-items:center;gap:.5em;min-width:0;overflow-wrap:anywhere}}#{element_id} input{{width:8em;"
        f"max-width:45%;flex:none;box-sizing:border-box}}#{element_id} td{{font-family:monospace}}"
        # the result tables' labels break between words only (the book's tables may break anywhere on a phone)
        f"#{element_id} th{{overflow-wrap:normal;word-break:normal}}"
        # a result table's "problem" row shows only when there is one
        f'#{element_id} tr:has(> td[id$="-error"]:empty){{display:none}}'
        f"</style>\n"
    )
    return style + (
        f'<div id="{element_id}" class="capacity-planner mathjax_ignore" '
        f'data-planner="{html.escape(json.dumps(data), quote=True)}"></div>\n<script>\n{script}</script>'
    )


# The text and the command line live in their own modules; their names stay importable from here.
from .command import _parser, main, training_fit  # noqa: E402, F401
from .text import format_report  # noqa: E402, F401

if __name__ == "__main__":
    raise SystemExit(main())
