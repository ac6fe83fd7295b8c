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

import copy
import hashlib
import json
import os
import re
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .units import as_count, bytes_per_element

__all__ = ["EngineError", "Layer", "EngineModel", "available", "describe", "cache_dir",
           "CACHE_ENV", "kv_bytes_per_token", "weight_bytes", "kv_bytes_per_sequence", "state_bytes_per_sequence",
           "layer_summary", "layer_kinds", "forward_flops", "crossover_context"]


class EngineError(ValueError):
    """A configuration transformers cannot build (the message says why, in one line)."""


@dataclass(frozen=True)
class Layer:
    """One decoder layer as a serving engine sees it."""

    kind: str  #: "full", "window", "latent", "linear_attention", "mamba", "conv", "hybrid", "shared cache" (attends
    #: over an earlier layer's cache), "feed-forward only"
    kv_per_token: int  #: elements cached per token (K + V, or the latent and indexer keys)
    window: int | None = None  #: tokens a windowed layer keeps (None: the whole context)
    state: int = 0  #: elements of fixed per-sequence state (convolution + recurrent)
    sinks: bool = False  #: attention with learned sink logits
    params: int = 0  #: parameters of the layer (what a pipeline stage holding it stores)
    active: int = 0  #: of which one token uses (routed experts: top-k of E)
    kv_projection: int = 0  #: parameters of its key and value projections (replicated when tensor parallelism
    #: exceeds the key/value heads)
    widest: int = 0  #: outputs per token of its widest block (attention or the rest), for the activation estimate
    kv_heads: int = 0  #: key/value heads of its attention (0: none; MiMo-V2-Flash's full and sliding layers differ)
    score_width: int = 0  #: query width plus the attention output's input width: a cached key costs the token
    #: ``2 x score_width`` FLOPs (scores and the weighted sum of values); 0 for a layer without self-attention
    attn_matmul: int = 0  #: weights of the self-attention's matrices (each costs 2 FLOPs per token)
    ffn_matmul: int = 0  #: weights of every other matrix one token uses (routed experts: top-k of E; the router
    #: left out, as the hand-written formulas leave it out)
    conv_channels: int = 0  #: channels of its causal convolutions: transformers keeps ``kernel`` columns of each
    #: (counted in ``state``), vLLM ``kernel - 1`` (``MambaStateShapeCalculator``), so vLLM holds this many fewer
    cross_kv_per_token: int = 0  #: an encoder-decoder's cross-attention: elements cached per source token (K and V
    #: of the encoder's output, computed once per request; included in ``state`` at the model's source length)


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
    d_model: int = 0
    vocab_size: int = 0
    n_heads: int = 0  #: query heads of the attention layers (tensor-parallel degrees must divide them)
    n_kv_heads: int = 0  #: key/value heads (latent attention: as many as query heads)
    first_params: int = 0  #: parameters before the decoder layers (embeddings, a vision or audio tower)
    last_params: int = 0  #: parameters after them (final norm, an untied output head)
    tied_head: int = 0  #: parameters of an output head tied to the input table (a separate last pipeline stage
    #: needs its own copy)
    max_positions: int = 0  #: max_position_embeddings as built (0: unknown)
    encoder_params: int = 0  #: an encoder-decoder's encoder (speech, image or text), part of ``first_params``
    source_tokens: int = 0  #: source positions the cross-attention caches per request (Whisper: 1,500 per 30-second
    #: window; an image encoder: its patches; a text encoder: its longest input), 0 for a decoder-only model
    tensors: tuple[tuple[str, tuple[int, ...], bool, int], ...] = ()  #: every parameter once: (name, shape, is a
    #: linear layer's weight or a fused expert tensor, its decoder layer or -1 before the layers, -2 after), what
    #: :func:`weight_bytes` counts as a checkpoint stores it


def available() -> bool:
    """Whether ``transformers`` and ``torch`` are installed (found, not imported: importing them takes seconds, and a
    cached description needs neither)."""
    from importlib.util import find_spec

    return find_spec("torch") is not None and find_spec("transformers") is not None


#: Environment variable naming the folder of cached descriptions (empty: no cache). Default: the user's cache
#: folder (``platformdirs.user_cache_dir``, ``$XDG_CACHE_HOME`` or ``~/.cache``) / ``transformer-book-planner``.
CACHE_ENV = "LIB_SIZING_CACHE_DIR"


def cache_dir() -> Path | None:
    """The folder :func:`describe` caches descriptions in (None: caching off)."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return Path(env) if env else None
    try:
        from platformdirs import user_cache_dir

        return Path(user_cache_dir("transformer-book-planner", appauthor=False))
    except ImportError:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "transformer-book-planner"


def _cache_key(raw: dict[str, Any]) -> str:
    """The config's digest with what could change the description: transformers' and torch's versions and this
    module's source."""
    from importlib.metadata import version

    parts = [json.dumps(raw, sort_keys=True, separators=(",", ":")), version("transformers"), version("torch"),
             Path(__file__).read_text(encoding="utf-8")]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _to_json(m: EngineModel) -> str:
    return json.dumps(asdict(m), separators=(",", ":"))


def _from_json(text: str) -> EngineModel:
    d = json.loads(text)
    d["layers"] = tuple(Layer(**la) for la in d["layers"])
    d["notes"] = tuple(d["notes"])
    d["tensors"] = tuple((n, tuple(shape), bool(lin), int(w)) for n, shape, lin, w in d["tensors"])
    return EngineModel(**d)


_DROP = ("architectures", "transformers_version", "torch_dtype", "dtype", "auto_map", "quantization_config",
         "_name_or_path", "model_type")
_TOP_K = ("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token", "moe_k", "top_k",
          "top_k_experts")
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
                              f"{type(err).__name__}: {_message(err)}") from None
        errors = []
        autos = [AutoModelForCausalLM, getattr(transformers, "AutoModelForImageTextToText", None)]
        if getattr(cfg, "vision_config", None) is not None:  # the whole checkpoint, not its text decoder alone
            autos.reverse()
        if getattr(cfg, "is_encoder_decoder", False):  # the whole model: encoder, decoder, cross-attention
            autos = [getattr(transformers, "AutoModelForSeq2SeqLM", None),
                     getattr(transformers, "AutoModelForSpeechSeq2Seq", None), *autos]
        for auto in autos:
            if auto is None:
                continue
            try:
                with torch.device("meta"):
                    return cfg, auto.from_config(cfg), notes
            except Exception as err:  # noqa: BLE001
                errors.append(f"{type(err).__name__}: {_message(err)}")
    raise EngineError(f"transformers cannot instantiate a {model_type!r} model from it ({'; '.join(errors)})")


def _decoder_layers(model: Any, n_layers: int, seq2seq: bool = False) -> tuple[str, Any]:
    import torch

    found = [(name, mod) for name, mod in model.named_modules()
             if isinstance(mod, torch.nn.ModuleList) and len(mod) == n_layers and not _NOT_TEXT.search(name)
             and not name.endswith("experts") and (not seq2seq or "decoder" in name)]
    if not found:
        raise EngineError(f"no list of {n_layers} decoder layers found in {type(model).__name__}")
    return min(found, key=lambda x: len(x[0]))


def _out(mod: Any) -> int:
    for attr in ("out_features", "nf"):
        if hasattr(mod, attr):
            return int(getattr(mod, attr))
    return int(mod.weight.shape[0])


def _params(mod: Any) -> int:
    return sum(p.numel() for p in mod.parameters())


def _attr(cfg: Any, name: str, default: Any = None) -> Any:
    """``getattr`` that also survives a config whose attribute varies per layer (Gemma 4's ``head_dim`` raises
    rather than answer for the whole model): ``default`` then."""
    try:
        return getattr(cfg, name, default)
    except Exception:  # noqa: BLE001
        return default


def _attention_kv(layer: Any, text_cfg: Any) -> tuple[int, bool, bool, int, int, int]:
    """(elements cached per token, latent?, sinks?, key/value projection parameters, attention parameters,
    key/value heads) of one decoder layer's self-attention (zeros when it has none)."""
    for name, sub in layer.named_modules():
        if re.search(r"(linear_attn|mamba|conv|cross)", name) or _CROSS.search(name) or _is_linear_attention(sub):
            continue
        kv = _key_value(sub)
        if kv is not None and not hasattr(sub, "k_proj"):  # T5's k/v, BERT-style key/value (BLIP's decoder)
            (k, k_params), (v, v_params) = kv
            head_dim = (_attr(sub, "key_value_proj_dim") or _attr(sub, "attention_head_size")
                        or _attr(sub, "head_dim") or _attr(text_cfg, "d_kv")
                        or text_cfg.hidden_size // text_cfg.num_attention_heads)
            return k + v, False, False, k_params + v_params, _params(sub), k // int(head_dim)
        sinks = getattr(sub, "sinks", None) is not None
        if hasattr(sub, "kv_a_proj_with_mqa"):
            kv = _out(sub.kv_a_proj_with_mqa)
            indexer = getattr(sub, "indexer", None)
            if indexer is not None and hasattr(indexer, "wk"):
                kv += _out(indexer.wk)
            return kv, True, sinks, 0, _params(sub), 0
        if getattr(sub, "k_proj", None) is not None and hasattr(sub, "v_proj"):
            k = _out(sub.k_proj)
            # Gemma 4's full layers with attention_k_eq_v have no v_proj: V is the (normalised) K, cached beside it
            v = _out(sub.v_proj) if sub.v_proj is not None else k
            head_dim = _attr(sub, "head_dim") or _attr(text_cfg, "head_dim") or (
                text_cfg.hidden_size // text_cfg.num_attention_heads)
            kv_proj = _params(sub.k_proj) + (_params(sub.v_proj) if sub.v_proj is not None else 0)
            return k + v, False, sinks, kv_proj, _params(sub), k // int(head_dim)
        for fused in ("query_key_value", "c_attn", "qkv_proj", "Wqkv", "qkv"):
            if hasattr(sub, fused) and hasattr(getattr(sub, fused), "weight"):
                heads = text_cfg.num_attention_heads
                head_dim = _attr(text_cfg, "head_dim") or text_cfg.hidden_size // heads
                rows = _out(getattr(sub, fused))
                kv = rows - heads * head_dim
                return kv, False, sinks, _params(getattr(sub, fused)) * kv // rows, _params(sub), kv // (2 * head_dim)
    return 0, False, False, 0, 0, 0


#: names of cross-attention modules (BART/Whisper ``encoder_attn``, T5 ``EncDecAttention``, BLIP ``crossattention``)
_CROSS = re.compile(r"(^|\.)(encoder_attn|EncDecAttention|crossattention|cross_attn|cross_attention)(\.|$)")


def _key_value(sub: Any) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """((key width, its parameters), (value width, its parameters)) of an attention module whose projections are
    called ``k_proj``/``v_proj``, ``k``/``v`` or ``key``/``value``; None for any other module."""
    import torch

    for kn, vn in (("k_proj", "v_proj"), ("k", "v"), ("key", "value")):
        k, v = getattr(sub, kn, None), getattr(sub, vn, None)
        if isinstance(k, torch.nn.Linear) and isinstance(v, torch.nn.Linear):
            return (_out(k), _params(k)), (_out(v), _params(v))
    return None


def _cross_kv(layer: Any) -> int:
    """Elements one decoder layer's cross-attention caches per source token (its K and V of the encoder output)."""
    for name, sub in layer.named_modules():
        if _CROSS.search(name):
            kv = _key_value(sub)
            if kv is not None:
                return kv[0][0] + kv[1][0]
    return 0


def _source_tokens(cfg: Any, text: Any) -> int:
    """Source positions an encoder-decoder's cross-attention holds per request: Whisper's ``max_source_positions``
    (one 30-second window), an image encoder's patches (+ a class token), else the encoder's longest input."""
    if getattr(cfg, "max_source_positions", None):
        return int(cfg.max_source_positions)
    vision = getattr(cfg, "vision_config", None)
    if vision is not None and getattr(vision, "image_size", None) and getattr(vision, "patch_size", None):
        return (int(vision.image_size) // int(vision.patch_size)) ** 2 + 1
    for key in ("max_position_embeddings", "n_positions"):
        v = _attr(cfg, key) or _attr(text, key)
        if isinstance(v, int) and v > 0:
            return v
    return 0


#: ``config.layer_types`` entries of layers that hold a fixed state and no per-token cache.
_RECURRENT_TYPES = {"linear_attention", "mamba", "conv"}


def _is_linear_attention(sub: Any) -> bool:
    """A linear-attention mixer (gated DeltaNet, MiniMax's lightning attention): a fixed state, no per-token
    cache, even where its projections look like attention's (MiniMax's ``self_attn.qkv_proj``)."""
    cls = type(sub).__name__.lower().replace("_", "")
    return "deltanet" in cls or "linearattention" in cls or "lightningattention" in cls


def _recurrent_state(layer: Any) -> tuple[int, str, int]:
    """(elements of per-sequence state as transformers' cache holds it, kind, convolution channels) of one decoder
    layer's recurrent mixer (zeros when it has none)."""
    import torch

    conv = rec = channels = 0
    kind = ""
    for sub in layer.modules():
        cls = type(sub).__name__.lower()
        if isinstance(sub, torch.nn.Conv1d):
            conv += sub.in_channels * sub.kernel_size[0]
            channels += sub.in_channels
            kind = kind or "conv"
        if _is_linear_attention(sub):
            kind = "linear_attention"
            if all(hasattr(sub, a) for a in ("num_v_heads", "head_k_dim", "head_v_dim")):
                rec += sub.num_v_heads * sub.head_k_dim * sub.head_v_dim
            elif "lightning" in cls and all(hasattr(sub, a) for a in ("num_attention_heads", "head_dim")):
                rec += sub.num_attention_heads * sub.head_dim * sub.head_dim  # MiniMax: heads x d x d
            else:
                raise EngineError(f"{type(sub).__name__}: a linear-attention layer whose state size is not known"
                                  " to this planner; refusing rather than guessing it")
        elif "mamba" in cls or ("mixer" in cls and hasattr(sub, "ssm_state_size")):
            kind = "mamba"
            if all(hasattr(sub, a) for a in ("num_heads", "head_dim", "ssm_state_size")):
                rec += sub.num_heads * sub.head_dim * sub.ssm_state_size
            elif hasattr(sub, "A_log") and sub.A_log.dim() == 2:
                rec += sub.A_log.numel()
    return conv + rec, kind, channels


def _matmul_flops_parts(layer: Any, text_cfg: Any, top_k: int, experts: int) -> tuple[int, int, int]:
    """(score width, self-attention matrix weights, other matrix weights one token uses) of one decoder layer, for
    the FLOPs of a token: matrices cost 2 FLOPs per weight, a cached key 2 x score width."""
    import torch

    attn_name = ""
    for name, sub in layer.named_modules():
        if not name or re.search(r"(linear_attn|mamba|conv|cross)", name) or _CROSS.search(name) \
                or _is_linear_attention(sub):
            continue
        if _key_value(sub) is not None or hasattr(sub, "kv_a_proj_with_mqa") or any(
                hasattr(sub, f) for f in ("query_key_value", "c_attn", "qkv_proj", "Wqkv")):
            attn_name = name
            break
    score = 0
    if attn_name:
        sub = layer.get_submodule(attn_name)
        q = next((getattr(sub, n) for n in ("q_proj", "q", "query", "q_b_proj") if isinstance(
            getattr(sub, n, None), torch.nn.Linear)), None)
        heads = _attr(text_cfg, "num_attention_heads") or 1
        head_dim = _attr(sub, "head_dim") or _attr(text_cfg, "head_dim") or text_cfg.hidden_size // heads
        q_width = _out(q) if q is not None else int(heads) * int(head_dim)
        o = next((getattr(sub, n) for n in ("o_proj", "out_proj", "o", "dense", "c_proj") if getattr(
            sub, n, None) is not None and hasattr(getattr(sub, n), "weight")), None)
        o_in = (o.in_features if isinstance(o, torch.nn.Linear) else int(o.weight.shape[0])) if o is not None \
            else q_width
        score = q_width + o_in
        if attn_name.endswith(".self"):  # BERT-style: the output projection is a sibling of .self
            attn_name = attn_name.rsplit(".", 1)[0]
    attn = rest = 0
    for name, mod in layer.named_modules():
        weight = getattr(mod, "weight", None) if isinstance(mod, torch.nn.Linear) or type(mod).__name__ == "Conv1D" \
            else None
        params = [(name, weight)] if weight is not None else []
        if name.endswith("experts") and not isinstance(mod, torch.nn.ModuleList):
            params = [(name, p) for p in mod.parameters(recurse=False) if p.dim() == 3]
        for pname, p in params:
            n = p.numel()
            routed = bool(_ROUTED.search(pname + ".")) or pname.endswith("experts")
            if routed and experts:
                n = n * top_k // experts
            elif experts and isinstance(mod, torch.nn.Linear) and mod.out_features == experts:
                continue  # the router
            if attn_name and (pname == attn_name or pname.startswith(attn_name + ".")):
                attn += n
            else:
                rest += n
    return score, attn, rest


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


def describe(raw: dict[str, Any], *, cache: bool = False) -> EngineModel:
    """The model ``raw`` (a parsed ``config.json``) describes, as transformers builds it on the meta device.

    ``cache=True`` (the command line's choice) keeps the description in :func:`cache_dir`, keyed by the config's
    digest, the transformers and torch versions and this module's source, and answers from it the next time
    without importing torch or transformers (benchmarks/bench_planner_cache.py measures the difference). Raises
    :class:`EngineError` (one line) for a config transformers cannot build; a refusal is never cached.
    """
    if not isinstance(raw, dict):
        raise EngineError(f"a config must be a JSON object, got {type(raw).__name__}")
    folder = cache_dir() if cache else None
    path = None
    if folder is not None:
        try:
            path = folder / f"{_cache_key(raw)}.json"
            if path.is_file():
                return _from_json(path.read_text(encoding="utf-8"))
        except Exception:  # noqa: BLE001  (an unreadable or stale cache entry: describe afresh)
            pass
    m = _describe_or_refuse(copy.deepcopy(raw))  # transformers edits nested fields in place (rope settings)
    if path is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(_to_json(m), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:  # a read-only home: answer anyway
            pass
    return m


def _describe_or_refuse(raw: dict[str, Any]) -> EngineModel:
    try:
        return _describe(raw)
    except EngineError:
        raise
    except Exception as err:  # noqa: BLE001  (transformers raises its own kinds: one line naming the model)
        raise EngineError(f"transformers built a {raw.get('model_type')!r} model but reading it failed:"
                          f" {type(err).__name__}: {_message(err)}") from None


def _message(err: BaseException, limit: int = 240) -> str:
    """An exception's message on one line: its first two non-empty lines (transformers often puts the field on
    the first and the reason on the second), shortened to ``limit`` characters."""
    text = " ".join([line.strip() for line in str(err).splitlines() if line.strip()][:2])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(raw: dict[str, Any]) -> EngineModel:
    cfg, model, notes = _build(raw)
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    seq2seq = bool(getattr(cfg, "is_encoder_decoder", False)) or any(
        _CROSS.search(name) for name, _ in model.named_modules())
    n_layers = int((_attr(text, "decoder_layers") or _attr(text, "num_decoder_layers") or text.num_hidden_layers)
                   if seq2seq else text.num_hidden_layers)
    prefix, layers = _decoder_layers(model, n_layers, seq2seq)

    top_k = _top_k(text, n_layers)
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
    if experts_size and top_k is None:
        raise EngineError(f"{type(model).__name__} has routed experts but the config names no top-k among"
                          f" {', '.join(_TOP_K)}: active parameters per token unknown")
    layer_of = re.compile(re.escape(prefix) + r"\.(\d+)\.")
    import torch

    linear_ids = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear)}
    tensors: list[tuple[str, tuple[int, ...], bool, int]] = []
    total = active = language = first = last = 0
    per_layer = [[0, 0] for _ in range(n_layers)]  # parameters, active
    seen: set[int] = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            continue
        seen.add(id(p))
        n = a = p.numel()
        m = _ROUTED.search(name)
        if m and top_k:
            e = experts_size.get(name[: m.end() - 1])
            if e:
                k = top_k[int(layer_of.match(name).group(1))] if layer_of.match(name) else top_k[0]
                if (n * k) % e:
                    raise EngineError(f"{name}: {n} parameters do not split into {e} equal experts")
                a = n * k // e
        total, active = total + n, active + a
        language += 0 if _NOT_TEXT.search(name) else n
        i = layer_of.match(name)
        if i:
            per_layer[int(i.group(1))][0] += n
            per_layer[int(i.group(1))][1] += a
            where = int(i.group(1))
        elif any(per_layer[j][0] for j in range(n_layers)):
            last += n
            where = -2
        else:
            first += n
            where = -1
        linear = id(p) in linear_ids or (p.dim() == 3 and bool(_ROUTED.search(name)))
        tensors.append((name, tuple(int(x) for x in p.shape), linear, where))

    windows = _windows(text, n_layers)
    shared = _shared_kv(text, n_layers)
    heads = int(_attr(text, "decoder_attention_heads") or getattr(text, "num_attention_heads", 0) or 0)
    d_model = int(getattr(text, "hidden_size", 0) or 0)
    out, kv_heads = [], 0
    types_declared = getattr(text, "layer_types", None)
    if not (isinstance(types_declared, (list, tuple)) and len(types_declared) == n_layers):
        types_declared = None
    for i, layer in enumerate(layers):
        kv, latent, sinks, kv_proj, attn, layer_kv_heads = _attention_kv(layer, text)
        state, rkind, channels = _recurrent_state(layer)
        cross = _cross_kv(layer) if seq2seq else 0
        n_experts = next((e for name, e in experts_size.items() if name.startswith(f"{prefix}.{i}.")), 0)
        score, attn_mm, rest_mm = _matmul_flops_parts(layer, text, top_k[i] if top_k else 0, n_experts)
        if latent:
            layer_kv_heads = heads
        if shared[i]:
            layer_kv_heads = 0
        if layer_kv_heads:  # the fewest key/value heads of any layer: what tensor parallelism must respect
            kv_heads = min(kv_heads, layer_kv_heads) if kv_heads else layer_kv_heads
        reuses = bool(shared[i])  # Gemma 3n: attention over an earlier layer's keys and values
        if shared[i]:
            kv = 0
        if reuses:
            kind = "shared cache"  # attention over another layer's cache: nothing cached here
        elif kv and state:
            kind = "hybrid"
        elif kv:
            kind = "latent" if latent else ("window" if windows[i] else "full")
        else:
            kind = rkind or "feed-forward only"
        declared = types_declared[i] if types_declared else None
        if declared in _RECURRENT_TYPES and kind in ("full", "window", "latent"):
            raise EngineError(f"layer {i}: the config declares {declared!r} but the built module looks like"
                              f" {kind} attention to this planner; refusing rather than counting a cache it"
                              " does not hold")
        params, act = per_layer[i]
        widest = max(attn, act - attn) // d_model if d_model else 0
        out.append(Layer(kind=kind, kv_per_token=kv, window=windows[i] if kv else None, state=state, sinks=sinks,
                         params=params, active=act, kv_projection=kv_proj, widest=widest, kv_heads=layer_kv_heads,
                         cross_kv_per_token=cross, conv_channels=channels,
                         score_width=score if kv or reuses else 0, attn_matmul=attn_mm, ffn_matmul=rest_mm))
    encoder = source = 0
    if seq2seq:  # the cross-attention cache is computed once per request: a fixed state at the source length
        source = _source_tokens(cfg, text)
        out = [replace(la, state=la.state + la.cross_kv_per_token * source) for la in out]
        enc = model.get_encoder() if hasattr(model, "get_encoder") else None
        if enc is not None and enc is not model:
            encoder = _params(enc)
        else:  # an image-to-text model: its vision tower
            encoder = sum(p.numel() for name, p in model.named_parameters() if _NOT_TEXT.search(name))
    embed = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    tied = (embed is not None and head is not None and getattr(head, "weight", None) is not None
            and head.weight is embed.weight)
    mpe = getattr(text, "max_position_embeddings", 0)
    return EngineModel(model_type=str(raw.get("model_type")), config_class=type(cfg).__name__, total=total,
                       active=active, language_total=language, layers=tuple(out), notes=tuple(notes),
                       d_model=d_model, vocab_size=int(getattr(text, "vocab_size", 0) or 0), n_heads=heads,
                       n_kv_heads=kv_heads or heads, first_params=first, last_params=last,
                       tied_head=embed.weight.numel() if tied else 0,
                       max_positions=mpe if isinstance(mpe, int) else 0, tensors=tuple(tensors),
                       encoder_params=encoder, source_tokens=source)


def _top_k(text: Any, n_layers: int) -> list[int] | None:
    """Experts each token runs, per layer (a config may give one number or one per layer); None: not stated."""
    for key in _TOP_K:
        k = getattr(text, key, None)
        if isinstance(k, int) and not isinstance(k, bool) and k > 0:
            return [k] * n_layers
        if isinstance(k, (list, tuple)) and len(k) == n_layers and all(isinstance(x, int) for x in k):
            return list(k)
    return None


def kv_bytes_per_token(m: EngineModel, kv_dtype: str = "bf16") -> float:
    """Bytes one token adds to the cache of every layer that caches per token (windows not applied)."""
    return sum(layer.kv_per_token for layer in m.layers) * bytes_per_element(kv_dtype)


def kv_bytes_per_sequence(m: EngineModel, context: int, kv_dtype: str = "bf16") -> float:
    """Bytes of one sequence's per-token cache at ``context`` tokens, each layer holding at most its window."""
    context = as_count(context, "context")
    return sum(layer.kv_per_token * (min(context, layer.window) if layer.window else context)
               for layer in m.layers) * bytes_per_element(kv_dtype)


def state_bytes_per_sequence(m: EngineModel, dtype: str = "bf16", layout: str = "transformers") -> float:
    """Bytes of the fixed per-sequence state (recurrent layers; an encoder-decoder's cross-attention cache), at the
    cache dtype. ``layout="transformers"``: as transformers' cache holds it (each causal convolution's full kernel);
    ``"vllm"``: as vLLM holds it, ``kernel - 1`` columns per convolution channel (its
    ``MambaStateShapeCalculator``: Mamba-1, Mamba-2, short convolutions, gated DeltaNet alike)."""
    if layout not in ("transformers", "vllm"):
        raise ValueError(f"layout must be 'transformers' or 'vllm', got {layout!r}")
    conv = sum(layer.conv_channels for layer in m.layers) if layout == "vllm" else 0
    return (sum(layer.state for layer in m.layers) - conv) * bytes_per_element(dtype)


def layer_kinds(m: EngineModel) -> list[str]:
    """Each layer's kind as the summary names it: ``"full"``, ``"window 128"``, ``"latent"``,
    ``"linear_attention"``, ``"mamba"``, ``"hybrid, window 4096"``, ``"shared cache"``, ``"feed-forward only"``;
    `` (sinks)`` added for attention with sink logits."""
    out = []
    for layer in m.layers:
        label = f"window {layer.window}" if layer.kind == "window" else layer.kind
        if layer.kind == "hybrid" and layer.window:
            label = f"hybrid, window {layer.window}"
        out.append(label + (" (sinks)" if layer.sinks else ""))
    return out


def layer_summary(m: EngineModel) -> str:
    """e.g. ``"24 layers: 12 window 128 (sinks), 12 full (sinks)"`` (kinds in order of first appearance)."""
    counts: dict[str, int] = {}
    for label in layer_kinds(m):
        counts[label] = counts.get(label, 0) + 1
    return f"{len(m.layers)} layers: " + ", ".join(f"{n} {k}" for k, n in counts.items())


def weight_bytes(m: EngineModel, quant: Any = None, other_bytes: float = 2.0) -> tuple[float, list[float], float,
                                                                                      float]:
    """(total, per decoder layer, before the layers, after them) bytes of ``m``'s weights as a checkpoint stores
    them: the matrices ``quant`` (a :class:`lib.planner.quant.Quantisation`, or None) quantises with their scales,
    every other tensor at ``other_bytes`` per element."""
    from .quant import stored_bytes

    per_layer = [0.0] * len(m.layers)
    first = last = 0.0
    for name, shape, linear, where in m.tensors:
        b = stored_bytes([(name, shape, linear)], quant, other_bytes)
        if where >= 0:
            per_layer[where] += b
        elif where == -1:
            first += b
        else:
            last += b
    return first + sum(per_layer) + last, per_layer, first, last


def forward_flops(m: EngineModel, context: int) -> dict[str, int]:
    """Forward matmul FLOPs of one token attending to ``context`` positions, from the engine's per-layer
    description, in the hand-written formulas' convention (:func:`lib.planner.flops.forward_flops`): each matrix
    weight costs 2 FLOPs (routed experts: top-k of E; routers left out), each cached key ``2 x score_width``
    (scores and the weighted sum of values, each layer's window applied), plus the output head ``2 d V``.
    Recurrent mixers count their matrices; their recurrence (a few FLOPs per state element) is left out."""
    context = as_count(context, "context")
    attention = sum(2 * la.score_width * (min(context, la.window) if la.window else context) for la in m.layers)
    projections = sum(2 * la.attn_matmul for la in m.layers)
    ffn = sum(2 * la.ffn_matmul for la in m.layers)
    head = 2 * m.d_model * m.vocab_size
    return {"attention": attention, "projections": projections, "ffn": ffn, "lm_head": head,
            "total": attention + projections + ffn + head}


def crossover_context(m: EngineModel) -> float | None:
    """Context at which a token's attention-score FLOPs equal its feed-forward FLOPs (windows ignored, as in
    :func:`lib.planner.flops.model_crossover_length`); None for a model without self-attention."""
    per_key = sum(2 * la.score_width for la in m.layers)
    return sum(2 * la.ffn_matmul for la in m.layers) / per_key if per_key else None
