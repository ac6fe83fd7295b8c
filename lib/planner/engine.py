"""transformers as the planner's engine: a model's sizes read from the model transformers builds from its config.

The hand-written readers of :mod:`lib.planner.config` derive a model's description family by family; they are the
book's derivation and run with NumPy alone. This module asks ``transformers`` instead, for any model type it knows:
it builds the configuration class (``AutoConfig``; a hub type such as ``kimi_k2`` that transformers does not register
is mapped through its ``architectures``/``auto_map`` to a registered class, here DeepSeek-V3's), instantiates the
model on PyTorch's ``meta`` device (shapes only, no memory, seconds even for a trillion parameters) and reads:

* the parameters: every tensor once (tied weights once); for an image-text-to-text wrapper the whole checkpoint, with
  the language model's share beside it;
* the parameters one token uses: a mixture of experts runs ``top_k`` of the ``E`` routed experts of a layer, so
  their tensors count ``top_k / E``; shared experts, routers and gates always run;
* each decoder layer's kind and what it caches: K and V of an attention layer (the widths of its key and value
  projections), the latent of a latent-attention (MLA) layer (``kv_lora_rank + qk_rope_head_dim``) plus the keys of
  a sparse-attention indexer, all per token, a sliding or chunked window from transformers' own cache layout
  (``get_layer_types_and_kwargs``); and the fixed per-sequence state of a recurrent layer (linear attention, Mamba,
  short convolution): its convolution state at the full kernel width plus its recurrent state.

``transformers`` and ``torch`` are imported only when this module is used: ``python -m lib.sizing`` keeps working
without them for the families the hand-written readers cover.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any

from .units import as_count, bytes_per_element

__all__ = ["EngineError", "Layer", "EngineModel", "available", "describe", "kv_bytes_per_token",
           "kv_bytes_per_sequence", "state_bytes_per_sequence", "layer_summary"]


class EngineError(ValueError):
    """A configuration transformers cannot build (the message says why, in one line)."""


@dataclass(frozen=True)
class Layer:
    """One decoder layer as a serving engine sees it."""

    kind: str  #: "full", "window", "latent", "linear_attention", "mamba", "conv", "hybrid", "feed-forward only"
    kv_per_token: int  #: elements cached per token (K + V, or the latent and indexer keys)
    window: int | None = None  #: tokens a windowed layer keeps (None: the whole context)
    state: int = 0  #: elements of fixed per-sequence state (convolution + recurrent)
    sinks: bool = False  #: attention with learned sink logits


@dataclass(frozen=True)
class EngineModel:
    """What the engine read from transformers' model."""

    model_type: str
    config_class: str
    total: int  #: every parameter once
    active: int  #: parameters one token uses
    language_total: int  #: the language model's share (== total for a text-only model)
    layers: tuple[Layer, ...]
    notes: tuple[str, ...] = ()


def available() -> bool:
    """Whether ``transformers`` and ``torch`` can be imported."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


_DROP = ("architectures", "transformers_version", "torch_dtype", "dtype", "auto_map", "quantization_config",
         "_name_or_path", "model_type")
_TOP_K = ("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token", "top_k")
_ROUTED = re.compile(r"(^|\.)experts\.")
_NOT_TEXT = re.compile(r"(^|\.)(vision|visual|audio|vision_tower|audio_tower|multi_modal_projector|embed_vision|"
                       r"embed_audio|mm_projector|image)")


def _registered_type(raw: dict[str, Any]) -> tuple[str, list[str]]:
    """The transformers model type to build ``raw`` with, and notes on any mapping made."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = raw.get("model_type")
    if isinstance(model_type, str) and model_type in CONFIG_MAPPING_NAMES:
        return model_type, []
    by_class = {cls: t for t, cls in CONFIG_MAPPING_NAMES.items()}
    by_arch: dict[str, str] = {}
    for t, cls in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():  # several types may share a class: prefer its own
        if isinstance(cls, str) and (cls not in by_arch or
                                     cls.lower().startswith(t.replace("_", "").lower() + "for")):
            by_arch[cls] = t
    auto = raw.get("auto_map") if isinstance(raw.get("auto_map"), dict) else {}
    conf = auto.get("AutoConfig")
    if isinstance(conf, str) and conf.rsplit(".", 1)[-1] in by_class:
        t = by_class[conf.rsplit(".", 1)[-1]]
        return t, [f"model_type {model_type!r} built as transformers' {t!r} (its auto_map names {conf})"]
    for arch in raw.get("architectures") or []:
        if isinstance(arch, str) and arch in by_arch:
            t = by_arch[arch]
            return t, [f"model_type {model_type!r} built as transformers' {t!r} (its architecture {arch})"]
    raise EngineError(f"transformers does not know model_type {model_type!r}, and neither its auto_map nor its"
                      " architectures name a class it knows")


def _build(raw: dict[str, Any]) -> tuple[Any, Any, list[str]]:
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    model_type, notes = _registered_type(raw)
    kwargs = {k: v for k, v in raw.items() if k not in _DROP}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cfg = AutoConfig.for_model(model_type, **kwargs)
        except Exception as err:  # noqa: BLE001  (transformers raises many kinds)
            raise EngineError(f"transformers cannot build a {model_type!r} config from it: "
                              f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None
        errors = []
        for auto in (AutoModelForCausalLM, getattr(transformers, "AutoModelForImageTextToText", None)):
            if auto is None:
                continue
            try:
                with torch.device("meta"):
                    return cfg, auto.from_config(cfg), notes
            except Exception as err:  # noqa: BLE001
                errors.append(f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    raise EngineError(f"transformers cannot instantiate a {model_type!r} model from it ({'; '.join(errors)})")


def _decoder_layers(model: Any, n_layers: int) -> tuple[str, Any]:
    import torch

    found = [(name, mod) for name, mod in model.named_modules()
             if isinstance(mod, torch.nn.ModuleList) and len(mod) == n_layers and not _NOT_TEXT.search(name)
             and not name.endswith("experts")]
    if not found:
        raise EngineError(f"no list of {n_layers} decoder layers found in {type(model).__name__}")
    return min(found, key=lambda x: len(x[0]))


def _out(mod: Any) -> int:
    for attr in ("out_features", "nf"):
        if hasattr(mod, attr):
            return int(getattr(mod, attr))
    return int(mod.weight.shape[0])


def _attention_kv(layer: Any, text_cfg: Any) -> tuple[int, bool, bool]:
    """(elements cached per token, latent?, sinks?) of one decoder layer's self-attention (0 when it has none)."""
    for name, sub in layer.named_modules():
        if re.search(r"(linear_attn|mamba|conv|cross)", name):
            continue
        sinks = hasattr(sub, "sinks")
        if hasattr(sub, "kv_a_proj_with_mqa"):
            kv = _out(sub.kv_a_proj_with_mqa)
            indexer = getattr(sub, "indexer", None)
            if indexer is not None and hasattr(indexer, "wk"):
                kv += _out(indexer.wk)
            return kv, True, sinks
        if hasattr(sub, "k_proj") and hasattr(sub, "v_proj"):
            return _out(sub.k_proj) + _out(sub.v_proj), False, sinks
        for fused in ("query_key_value", "c_attn", "qkv_proj", "Wqkv", "qkv"):
            if hasattr(sub, fused) and hasattr(getattr(sub, fused), "weight"):
                heads = text_cfg.num_attention_heads
                head_dim = getattr(text_cfg, "head_dim", None) or text_cfg.hidden_size // heads
                return _out(getattr(sub, fused)) - heads * head_dim, False, sinks
    return 0, False, False


def _recurrent_state(layer: Any) -> tuple[int, str]:
    """(elements of per-sequence state, kind) of one decoder layer's recurrent mixer (0 when it has none)."""
    import torch

    conv = rec = 0
    kind = ""
    for sub in layer.modules():
        cls = type(sub).__name__.lower()
        if isinstance(sub, torch.nn.Conv1d):
            conv += sub.in_channels * sub.kernel_size[0]
            kind = kind or "conv"
        if "deltanet" in cls or "linearattention" in cls.replace("_", ""):
            kind = "linear_attention"
            if all(hasattr(sub, a) for a in ("num_v_heads", "head_k_dim", "head_v_dim")):
                rec += sub.num_v_heads * sub.head_k_dim * sub.head_v_dim
        elif "mamba" in cls or ("mixer" in cls and hasattr(sub, "ssm_state_size")):
            kind = "mamba"
            if all(hasattr(sub, a) for a in ("num_heads", "head_dim", "ssm_state_size")):
                rec += sub.num_heads * sub.head_dim * sub.ssm_state_size
            elif hasattr(sub, "A_log") and sub.A_log.dim() == 2:
                rec += sub.A_log.numel()
    return conv + rec, kind


def _windows(text_cfg: Any, n_layers: int) -> list[int | None]:
    """Each layer's window as transformers' own cache lays it out (None: full)."""
    try:
        from transformers.cache_utils import get_layer_types_and_kwargs

        types, kwargs = get_layer_types_and_kwargs(text_cfg)
        return [kw.get("sliding_window") if t in ("sliding_attention", "chunked_attention", "hybrid_sliding")
                else None for t, kw in zip(types, kwargs, strict=True)]
    except Exception:  # noqa: BLE001  (older transformers, or a config without per-layer info)
        types = getattr(text_cfg, "layer_types", None) or [None] * n_layers
        w = getattr(text_cfg, "sliding_window", None)
        return [w if t == "sliding_attention" else None for t in types]


def _shared_kv(text_cfg: Any, n_layers: int) -> list[bool]:
    """Layers that reuse another layer's cache (Gemma 3n's KV sharing): they cache nothing themselves."""
    shared = getattr(text_cfg, "num_kv_shared_layers", 0) or 0
    modes = getattr(text_cfg, "kv_sharing_modes", None)
    if modes is not None:
        return [m == "reuse" for m in modes]
    return [i >= n_layers - shared for i in range(n_layers)]


def describe(raw: dict[str, Any]) -> EngineModel:
    """The model ``raw`` (a parsed ``config.json``) describes, as transformers builds it on the meta device.

    Raises :class:`EngineError` (one line) for a config transformers cannot build.
    """
    if not isinstance(raw, dict):
        raise EngineError(f"a config must be a JSON object, got {type(raw).__name__}")
    cfg, model, notes = _build(raw)
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    n_layers = int(text.num_hidden_layers)
    prefix, layers = _decoder_layers(model, n_layers)

    top_k = next((getattr(text, k) for k in _TOP_K if isinstance(getattr(text, k, None), int)), None)
    total = active = language = 0
    seen: set[int] = set()
    experts_size: dict[str, int] = {}
    for name, mod in model.named_modules():
        if name.endswith("experts") and not name.endswith("shared_experts"):
            import torch

            if isinstance(mod, torch.nn.ModuleList):
                experts_size[name] = len(mod)
            else:
                p = next((p for p in mod.parameters(recurse=False) if p.dim() == 3), None)
                if p is not None:
                    experts_size[name] = int(p.shape[0])
    for name, p in model.named_parameters(remove_duplicate=True):
        if id(p) in seen:
            continue
        seen.add(id(p))
        n = p.numel()
        total += n
        if not _NOT_TEXT.search(name):
            language += n
        m = _ROUTED.search(name)
        if m and top_k:
            owner = name[: m.end() - 1]
            e = experts_size.get(owner)
            if e:
                active += n * top_k // e
                if (n * top_k) % e:
                    raise EngineError(f"{name}: {n} parameters do not split into {e} equal experts")
                continue
        active += n

    windows = _windows(text, n_layers)
    shared = _shared_kv(text, n_layers)
    out = []
    for i, layer in enumerate(layers):
        kv, latent, sinks = _attention_kv(layer, text)
        state, rkind = _recurrent_state(layer)
        if shared[i]:
            kv = 0
        if kv and state:
            kind = "hybrid"
        elif kv:
            kind = "latent" if latent else ("window" if windows[i] else "full")
        else:
            kind = rkind or "feed-forward only"
        out.append(Layer(kind=kind, kv_per_token=kv, window=windows[i] if kv else None, state=state, sinks=sinks))
    return EngineModel(model_type=str(raw.get("model_type")), config_class=type(cfg).__name__, total=total,
                       active=active, language_total=language, layers=tuple(out), notes=tuple(notes))


def kv_bytes_per_token(m: EngineModel, kv_dtype: str = "bf16") -> float:
    """Bytes one token adds to the cache of every layer that caches per token (windows not applied)."""
    return sum(layer.kv_per_token for layer in m.layers) * bytes_per_element(kv_dtype)


def kv_bytes_per_sequence(m: EngineModel, context: int, kv_dtype: str = "bf16") -> float:
    """Bytes of one sequence's per-token cache at ``context`` tokens, each layer holding at most its window."""
    context = as_count(context, "context")
    return sum(layer.kv_per_token * (min(context, layer.window) if layer.window else context)
               for layer in m.layers) * bytes_per_element(kv_dtype)


def state_bytes_per_sequence(m: EngineModel, dtype: str = "bf16") -> float:
    """Bytes of the fixed per-sequence state of the recurrent layers, at the cache dtype."""
    return sum(layer.state for layer in m.layers) * bytes_per_element(dtype)


def layer_summary(m: EngineModel) -> str:
    """e.g. ``"24 layers: 12 full, 12 window 128 (sinks)"``."""
    counts: dict[str, int] = {}
    for layer in m.layers:
        label = f"window {layer.window}" if layer.kind == "window" else layer.kind
        if layer.kind == "hybrid" and layer.window:
            label = f"hybrid, window {layer.window}"
        if layer.sinks:
            label += " (sinks)"
        counts[label] = counts.get(label, 0) + 1
    return f"{len(m.layers)} layers: " + ", ".join(f"{n} {k}" for k, n in counts.items())
