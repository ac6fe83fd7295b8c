"""``--train``: the memory and compute of one training step, for the planner's command line and JSON.

:func:`add_train_arguments` adds the options to the planner's parser; :func:`training_report` turns a
``config.json`` (as a dict) and the parsed options into the JSON ``training`` object:

``weights_bytes``, ``gradients_bytes``, ``optimizer_bytes``, ``activation_bytes``, ``total_bytes_per_gpu``
(all per GPU, integers), ``trainable_parameters``, ``parameters``, ``flops_per_token``, ``flops_per_step``,
``parallelism`` {``gpus``, ``tp``, ``pp``, ``dp``, ``zero``}, ``activation_method``, ``assumptions`` (list of
strings), and with ``--tokens``: ``tokens``, ``mfu``, ``peak_flops_per_gpu``, ``gpu_hours``.

Activations: the peak of one step. The Llama-style families (llama, mistral, qwen2, qwen3) by
:func:`lib.planner.training.llama_peak_bytes`, which follows the backward pass over what
:func:`lib.planner.training.llama_activation_bytes` keeps (equal to autograd's saved tensors byte for byte) and
agrees with torch's memory profiler on small models; every other family that transformers builds from
autograd's saved tensors counted on the meta device (:func:`lib.planner.training.meta_saved_bytes`). The ZeRO
rule is :func:`lib.planner.training.shard_states`. The mathematics is in :mod:`lib.planner.training`.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from . import training as T

__all__ = ["add_train_arguments", "training_report", "language_model_config", "training_text",
           "meta_activation_bytes", "TrainingInputError", "TRAINING_KEYS"]

#: Keys of the ``training`` object, each with its meaning.
TRAINING_KEYS = {
    "weights_bytes": "bytes of weights per GPU",
    "gradients_bytes": "bytes of gradients per GPU (trained parameters only)",
    "optimizer_bytes": "bytes of optimizer state per GPU, fp32 master copy included",
    "activation_bytes": "peak bytes of activations and backward temporaries per GPU (one micro-batch)",
    "total_bytes_per_gpu": "sum of the four",
    "trainable_parameters": "parameters that receive gradients",
    "parameters": "all parameters",
    "flops_per_token": "training FLOPs per token (forward and backward, recomputation included)",
    "flops_per_step": "flops_per_token x micro-batch x context x data-parallel degree",
    "parallelism": "gpus, tp, pp, dp (= gpus / (tp pp)) and the ZeRO stage",
    "activation_method": "'closed form' or 'meta-device count'",
    "assumptions": "list of strings",
    "gpu_hours": "with --tokens: tokens x flops_per_token / (peak x mfu) / 3600",
}

OPTIMIZERS = ("adamw", "adamw8bit", "sgd")
ACT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
QUANTIZED_BASE = {"fp8": 1, "int8": 1, "int4": 0.5}
#: Model types whose decoder layers all have the same shapes, so that a model built with one and with two
#: layers gives the per-layer bytes exactly (others are built whole on the meta device).
UNIFORM = {"llama", "mistral", "qwen2", "qwen3", "falcon", "gpt2", "gpt_bigcode", "gpt_neox", "gemma", "gemma2",
           "gemma3_text", "olmo2", "phi3", "starcoder2", "mixtral", "exaone4"}
HETEROGENEOUS_FIELDS = ("first_k_dense_replace", "mlp_only_layers", "hybrid_override_pattern", "layers_block_type",
                        "no_rope_layers", "moe_layer_freq")
#: Families whose eager attention does not repeat K and V to every query head (their own MQA/GQA paths).
NO_REPEAT_KV = {"falcon", "gpt_bigcode"}
DEFAULT_PEAK_TFLOPS = 989.0  # NVIDIA H100 SXM, dense bf16 tensor cores (data sheet)


class TrainingInputError(ValueError):
    """A ``--train`` option that cannot be planned, with what was wrong."""


def _tokens(text: str) -> int:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens such as 2e12, got {text!r}") from None
    if not math.isfinite(v) or v <= 0 or v != int(v):
        raise argparse.ArgumentTypeError(f"expected a positive whole number of tokens, got {text!r}")
    return int(v)


def _checkpointing(text: str) -> str:
    try:
        T.checkpointed_layers(text, 1)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_train_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the training options (a group headed ``training``) to the planner's ``parser``. Whole numbers and
    fractions are checked by the command line's own validators (one home, one wording)."""
    # imported here: command imports this module at its top, so a module-level import would be circular
    from .command import _fraction_arg, _positive_int

    g = parser.add_argument_group("training (--train)", "memory per GPU and compute of one training step;"
                                  " --context is the sequence length, --dtype the weights' and activations' format")
    g.add_argument("--train", action="store_true", help="also plan one training step: memory per GPU and FLOPs")
    g.add_argument("--micro-batch", type=_positive_int, default=1, help="sequences per GPU per step")
    g.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw",
                   help="adamw: bf16 weights and gradients, fp32 master, m, v (16 B/param); adamw8bit: m and v"
                        " in 8 bits, blockwise; sgd: momentum")
    g.add_argument("--attention", choices=("eager", "flash"), default="flash",
                   help="eager keeps the n x n probabilities; flash a tiled kernel's row statistics")
    g.add_argument("--checkpointing", type=_checkpointing, default="none", metavar="{none,full,every:K}",
                   help="full: every layer keeps only its input and recomputes its forward pass in the backward;"
                        " every:K: the same for layers 0, K, 2K, ... (ceil(L/K) of L)")
    g.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0,
                   help="ZeRO stage over the data-parallel GPUs: 1 optimizer, 2 + gradients, 3 + weights")
    g.add_argument("--gpus", type=_positive_int, default=1, help="GPUs in all (= tp x pp x data parallel)")
    g.add_argument("--tp", type=_positive_int, default=1, help="tensor-parallel degree")
    g.add_argument("--pp", type=_positive_int, default=1, help="pipeline-parallel degree")
    g.add_argument("--lora-rank", type=_positive_int, default=None, help="train a LoRA adapter of this rank")
    g.add_argument("--lora-targets", default="q_proj,v_proj",
                   help="comma-separated linear layers to adapt")
    g.add_argument("--tokens", type=_tokens, default=None, help="training tokens, for GPU-hours (e.g. 2e12)")
    g.add_argument("--mfu", type=_fraction_arg, default=0.4, help="model-FLOPs utilisation for GPU-hours")
    g.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_TFLOPS,
                   help="peak dense TFLOP/s per GPU for GPU-hours; the default is an H100 SXM's in bf16")
    return parser


def _get(args: Any, name: str, default: Any) -> Any:
    return getattr(args, name, default)


def _n_layers_key(config: dict[str, Any]) -> str:
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        if key in config:
            return key
    raise TrainingInputError("config.json has no num_hidden_layers (nor n_layer, num_layers)")


def _meta_model(config: dict[str, Any], dtype: str) -> Any:
    import torch

    return T.meta_model(config, None, "eager", getattr(torch, {"bf16": "bfloat16", "fp16": "float16",
                                                              "fp32": "float32"}[dtype]))


def _linear_shapes(model: Any) -> list[tuple[str, int, int]]:
    """(name, d_in, d_out) of every linear map of the model (nn.Linear and GPT-2's Conv1D)."""
    import torch

    out = []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear):
            out.append((name, mod.in_features, mod.out_features))
        elif type(mod).__name__ == "Conv1D" and hasattr(mod, "nx"):
            out.append((name, mod.nx, mod.nf))
    return out


def _active_matmul_parameters(model: Any, linears: list[tuple[str, int, int]], config: dict[str, Any]) -> int:
    """Parameters that multiply each token's activations: every linear map, and of a mixture of experts' routed
    experts (stacked ``(E, ...)`` weights, or linear maps under ``.experts.``) the ``k`` of ``E`` a token uses."""
    k = config.get("num_experts_per_tok") or config.get("experts_per_token") or 0
    n_experts = (config.get("num_local_experts") or config.get("num_experts") or config.get("n_routed_experts")
                 or 0)
    total = 0.0
    for name, i, o in linears:
        routed = ".experts." in f".{name}." and n_experts and k
        total += i * o * (k / n_experts if routed else 1)
    for name, prm in model.named_parameters():
        if prm.ndim == 3 and ".experts." in f".{name}" and k:
            total += prm.numel() / prm.shape[0] * k
    for mod in model.modules():  # routers that hold their (E, d) weight directly rather than in a linear map
        kind = type(mod).__name__
        if "Router" in kind or kind.endswith("Gate"):
            total += sum(q.numel() for q in mod.parameters(recurse=False) if q.ndim == 2)
    return int(round(total))


def _check(args: Any) -> tuple[str, int, int, int, int, int]:
    dtype = _get(args, "dtype", "bf16")
    lora = _get(args, "lora_rank", None)
    if dtype not in ACT_BYTES and not (lora and dtype in QUANTIZED_BASE):
        quant = ", ".join(QUANTIZED_BASE)
        raise TrainingInputError(f"--dtype {dtype} cannot be trained: use bf16, fp16 or fp32 (a frozen base in"
                                 f" {quant} needs --lora-rank)")
    gpus, tp, pp = _get(args, "gpus", 1), _get(args, "tp", 1), _get(args, "pp", 1)
    if gpus % (tp * pp):
        raise TrainingInputError(f"--gpus {gpus} is not a multiple of --tp {tp} x --pp {pp}")
    zero = _get(args, "zero", 0)
    if zero and pp > 1 and zero > 1:
        raise TrainingInputError(f"--zero {zero} with pipeline parallelism (--pp {pp}) is not planned:"
                                 " DeepSpeed allows only ZeRO stage 0 or 1 with pipelines")
    try:
        T.checkpointed_layers(_get(args, "checkpointing", "none"), 1)
    except ValueError as e:
        raise TrainingInputError(f"--checkpointing: {e}") from None
    n = _get(args, "context", 4096)
    return dtype, gpus, tp, pp, gpus // (tp * pp), n


def language_model_config(config: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The config to train: ``config`` itself, or for a multimodal wrapper (a ``text_config`` and no layer count
    at the top) its language model, with the wrapper's ``tie_word_embeddings`` where the text part has none.
    Returns the config and a note (None when nothing was unwrapped)."""
    if not isinstance(config.get("text_config"), dict) or any(
            k in config for k in ("num_hidden_layers", "n_layer", "num_layers")):
        return config, None
    text = dict(config["text_config"])
    text.setdefault("model_type", f"{config.get('model_type')}_text")
    if "tie_word_embeddings" in config and "tie_word_embeddings" not in text:
        text["tie_word_embeddings"] = config["tie_word_embeddings"]
    return text, (f"{config.get('model_type')}: a multimodal wrapper; its language model ({text['model_type']},"
                  " text_config) is planned, the vision tower is not")


def training_report(config: dict[str, Any], args: Any) -> dict[str, Any]:
    """The JSON ``training`` object for ``config`` (a parsed config.json) and the parsed options ``args``.

    Raises :class:`TrainingInputError` (a ValueError) with one line naming the bad input.
    """
    if not isinstance(config, dict) or "model_type" not in config:
        raise TrainingInputError("config must be a parsed config.json with a model_type")
    config, wrapper_note = language_model_config(config)
    dtype, gpus, tp, pp, dp, n = _check(args)
    heads = next((config[k] for k in ("num_attention_heads", "n_head") if isinstance(config.get(k), int)), None)
    if heads and heads % tp:
        raise TrainingInputError(f"--tp {tp} does not divide the model's {heads} attention heads: tensor"
                                 " parallelism gives each GPU a whole number of heads")
    b = _get(args, "micro_batch", 1)
    attention = _get(args, "attention", "flash")
    ckpt = _get(args, "checkpointing", "none")
    optimizer = _get(args, "optimizer", "adamw")
    zero = _get(args, "zero", 0)
    rank = _get(args, "lora_rank", None)
    targets = [t.strip() for t in str(_get(args, "lora_targets", "q_proj,v_proj")).split(",") if t.strip()]
    p = ACT_BYTES.get(dtype, 2)  # a quantised frozen base computes in bf16
    mt = config["model_type"]
    assumptions: list[str] = [wrapper_note] if wrapper_note else []
    lora_kw = {"lora_rank": rank, "lora_targets": targets} if rank else {}
    if rank and mt in T.LLAMA_STYLE:
        try:
            T.lora_parameters(T.llama_shape(config), rank, targets)
        except ValueError as e:
            raise TrainingInputError(f"--lora-targets: {e}") from None
    if mt in T.LLAMA_STYLE:
        shape = T.llama_shape(config)
        n_params, n_matmul = shape.parameters(), shape.matmul_parameters()
        L, d, attn_width, heads = shape.n_layers, shape.d, shape.n_heads * shape.head_dim, shape.n_heads
        linears = None
        linear_numels = shape.linear_numels()
        peak = T.llama_peak_bytes(shape, b, n, p, attention, ckpt, **lora_kw)["peak"]
        method = "closed form"
        assumptions.append("activations: the peak of the step (the loss's fp32 gradients, or the layers below"
                           " with the layer being differentiated and its backward's temporaries)")
    else:
        model = _meta_model(config, dtype if dtype in ACT_BYTES else "bf16")
        params = {id(q): q.numel() for q in model.parameters()}
        n_params = sum(params.values())
        linears = _linear_shapes(model)
        linear_numels = [i * o for name, i, o in linears if not name.endswith("lm_head")]
        n_matmul = _active_matmul_parameters(model, linears, config)
        cfg = model.config
        L = config[_n_layers_key(config)]
        d = cfg.hidden_size
        heads = cfg.num_attention_heads
        try:  # a config with per-layer head widths refuses the global attribute
            head_dim = getattr(cfg, "head_dim", None)
        except Exception:  # noqa: BLE001 - transformers' own error type
            head_dim = config.get("head_dim")
        attn_width = heads * (head_dim or d // heads)
        counted = meta_activation_bytes(config, b, n, dtype if dtype in ACT_BYTES else "bf16", heads, attention)
        layer_bytes, outside = counted["per_layer"], counted["outside"]
        method = "meta-device count"
        assumptions += counted["assumptions"]
        ck = set(T.checkpointed_layers(ckpt, L))
        kept = outside + sum(p * b * n * d if i in ck else layer_bytes for i in range(L))
        below = walk = 0  # the layers' backward: those below, plus the one being differentiated
        for i in range(L):
            walk = max(walk, below + (p * b * n * d if i in ck else 0) + layer_bytes)
            below += p * b * n * d if i in ck else layer_bytes
        vocab = config.get("vocab_size") or 0
        peak = max(kept + 8 * b * n * vocab, walk)
        assumptions.append("activations: the peak of the step (what is kept with the loss's fp32 gradients, or the"
                           " layers below with the layer being differentiated; no backward temporaries)")
        if rank:
            assumptions.append("LoRA: activations as for full training (the closed form in which a frozen"
                               " projection keeps no input covers the Llama-style families)")
    # parallelism: TP with sequence parallelism splits every activation, PP gives each stage L/pp layers and,
    # under 1F1B, pp micro-batches in flight on the first stage: L layers' worth in all
    activation = peak / tp
    if tp > 1:
        assumptions.append(f"tensor parallelism {tp} with sequence parallelism: activations / {tp} (without it the"
                           " norms' inputs stay whole on every GPU)")
    if pp > 1:
        assumptions.append(f"pipeline parallelism {pp} with 1F1B: the first stage keeps {pp} micro-batches of its"
                           f" {L}/{pp} layers, i.e. all layers' activations of one micro-batch")
    # parameters and model states
    if rank:
        if linears is None:
            trainable = T.lora_parameters(shape, rank, targets)
        else:
            hit = [(i, o) for name, i, o in linears if name.rsplit(".", 1)[-1] in set(targets)]
            if not hit:
                raise TrainingInputError(f"--lora-targets {','.join(targets)} match no linear layer of this"
                                         f" model_type {mt}")
            trainable = sum(rank * (i + o) for i, o in hit)
        assumptions.append(f"LoRA rank {rank} on {','.join(targets)}: {trainable} trained parameters; the frozen"
                           " base keeps weights only (no gradients, no optimizer state)")
    else:
        trainable = n_params
    recipe = {"adamw": "adamw" if p == 2 else "adamw-fp32", "adamw8bit": "adamw8bit", "sgd": "sgd"}[optimizer]
    if optimizer == "sgd" and p == 4:
        recipe = "sgd"
        assumptions.append("sgd in fp32 planned as the mixed-precision recipe (fp32 master and momentum)")
    states = T.state_bytes(trainable, recipe, trainable)
    if rank and dtype in QUANTIZED_BASE:
        base_w = T.quantized_base_bytes(linear_numels, n_params - sum(linear_numels), dtype)
        assumptions.append({"int4": "frozen base in NF4 as bitsandbytes stores it: blocks of 64, double-quantised"
                                    " absmax (8 bits, fp32 per 256 blocks); embedding, LM head, norms in bf16",
                            "int8": "frozen base: linear layers one byte per weight (scales not counted);"
                                    " embedding, LM head and norms in bf16",
                            "fp8": "frozen base: linear layers one byte per weight (scales not counted);"
                                   " embedding, LM head and norms in bf16"}[dtype])
    else:
        base_w = n_params * ACT_BYTES[dtype] if rank else states["weights"]
    lora_w = states["weights"] if rank else 0
    shard = T.shard_states(base_w + lora_w, states["gradients"], states["optimizer"], zero, dp, tp * pp)
    weights, grads, opt = shard["weights"], shard["gradients"], shard["optimizer"]
    assumptions.append(f"optimizer {optimizer}: {T.RECIPES[recipe].what}")
    if zero:
        assumptions.append(f"ZeRO stage {zero} over {dp} data-parallel GPUs")
    assumptions.append(f"activations in {dtype if dtype in ACT_BYTES else 'bf16'}, {attention} attention,"
                       f" checkpointing {ckpt}, micro-batch {b} of {n} tokens; {method}")
    # FLOPs per token: matrices 2 forward + 2 input-gradient + 2 weight-gradient per parameter (frozen: no
    # weight gradient); attention 12 L n d_attn (half for a flash kernel that skips the masked half)
    attn = 12 * L * n * attn_width
    if attention == "flash":
        attn //= 2
    dense = (6 if not rank else 4) * n_matmul + (6 * trainable if rank else 0)
    flops_token = dense + attn
    recomputed = len(T.checkpointed_layers(ckpt, L))
    if recomputed:  # one more forward pass of each checkpointed layer (not of the LM head)
        vocab = config.get("vocab_size") or 0
        flops_token += T.recompute_flops_per_token((n_matmul - vocab * d) / L, n, attn_width, recomputed,
                                                   attention == "flash")
        assumptions.append(f"checkpointing {ckpt}: {recomputed} of {L} layers keep only their input and run"
                           " their forward pass again in the backward pass")
    out: dict[str, Any] = {
        "weights_bytes": int(math.ceil(weights)),
        "gradients_bytes": int(math.ceil(grads)),
        "optimizer_bytes": int(math.ceil(opt)),
        "activation_bytes": int(math.ceil(activation)),
        "trainable_parameters": int(trainable),
        "parameters": int(n_params),
        "flops_per_token": int(flops_token),
        "flops_per_step": int(flops_token * b * n * dp),
        "parallelism": {"gpus": gpus, "tp": tp, "pp": pp, "dp": dp, "zero": zero},
        "activation_method": method,
        "assumptions": assumptions,
    }
    out["total_bytes_per_gpu"] = (out["weights_bytes"] + out["gradients_bytes"] + out["optimizer_bytes"]
                                  + out["activation_bytes"])
    tokens = _get(args, "tokens", None)
    if tokens:
        mfu, peak = _get(args, "mfu", 0.4), _get(args, "peak_tflops", DEFAULT_PEAK_TFLOPS) * 1e12
        if peak <= 0:
            raise TrainingInputError(f"--peak-tflops must be positive, got {peak / 1e12:g}")
        out.update({"tokens": tokens, "mfu": mfu, "peak_flops_per_gpu": peak,
                    "gpu_hours": T.gpu_hours(flops_token * tokens, peak, mfu)})
        out["assumptions"].append(f"GPU-hours at MFU {mfu:g} of {peak / 1e12:g} TFLOP/s per GPU")
    return out


def meta_activation_bytes(config: dict[str, Any], b: int, n: int, dtype: str, heads: int,
                           attention: str) -> dict[str, Any]:
    """Per-layer and outside-the-layers bytes counted on the meta device (eager), with the ``n x n`` tensors
    replaced by a tiled kernel's row statistics for ``attention="flash"``."""
    mt = config["model_type"]
    key = _n_layers_key(config)
    L = config[key]
    uniform = mt in UNIFORM and not any(config.get(f) for f in HETEROGENEOUS_FIELDS)
    assumptions = []
    try:
        if uniform:
            one, two = (T.meta_saved(config, k, n, b, dtype) for k in (1, 2))
            per_layer = {k: two[k] - one[k] for k in ("bytes", "nxn")}
            outside = {k: one[k] - per_layer[k] for k in ("bytes", "nxn")}
        else:
            full = T.meta_saved(config, L, n, b, dtype)
            per_layer = {k: full[k] / L for k in ("bytes", "nxn")}
            outside = {"bytes": 0, "nxn": 0}
            assumptions.append(f"{mt}: layers differ, so the whole model was counted and 'per layer' is the mean")
    except Exception as e:  # noqa: BLE001 - transformers' own error, reported in one line
        raise TrainingInputError(f"activations of model_type {mt} cannot be counted on the meta device:"
                                 f" {type(e).__name__}: {str(e).splitlines()[0][:160]}") from None
    if attention == "flash":
        per_layer = {"bytes": per_layer["bytes"] - per_layer["nxn"] + 4 * b * heads * n, "nxn": 0}
        note = ("flash: the n x n tensors autograd keeps in eager attention replaced by one fp32 log-sum-exp per"
                " row and head")
        kv_heads = config.get("num_key_value_heads")
        head_dim = config.get("head_dim") or config.get("hidden_size", 0) // heads
        if kv_heads and kv_heads < heads and mt not in NO_REPEAT_KV:
            p = ACT_BYTES[dtype]  # eager keeps K and V repeated to every query head, a tiled kernel does not
            per_layer["bytes"] -= 2 * p * b * n * (heads - kv_heads) * head_dim
            note += f"; K and V kept for {kv_heads} key/value heads, not repeated to {heads}"
        assumptions.append(note)
    drops = {k: v for k, v in config.items() if "dropout" in k or k.endswith("_pdrop")}
    if any(isinstance(v, (int, float)) and v > 0 for v in drops.values()):
        assumptions.append("dropout masks counted as PyTorch keeps them off the GPU (in the activations' dtype);"
                           " CUDA's fused dropout keeps one byte per element")
    if config.get("num_local_experts") or config.get("num_experts") or config.get("n_routed_experts"):
        assumptions.append("mixture of experts: transformers' grouped expert kernel keeps b n k routed rows,"
                           " whatever the spread of tokens over experts, so the count does not depend on routing;"
                           " FLOPs count the k routed experts a token uses, shared experts and routers always")
    return {"per_layer": per_layer["bytes"], "outside": outside["bytes"], "assumptions": assumptions}


def training_text(report: dict[str, Any]) -> str:
    """The ``training`` object as the lines the planner prints (GB = 10^9 bytes, GiB = 2^30 bytes)."""
    from ..constants import GB, GiB

    def size(x: int) -> str:
        return f"{x / GB:,.2f} GB ({x / GiB:,.2f} GiB)"

    par = report["parallelism"]
    lines = [
        f"training, per GPU ({par['gpus']} GPUs: tp {par['tp']}, pp {par['pp']}, data parallel {par['dp']},"
        f" ZeRO {par['zero']}):",
        f"  weights      {size(report['weights_bytes'])}",
        f"  gradients    {size(report['gradients_bytes'])}",
        f"  optimizer    {size(report['optimizer_bytes'])}",
        f"  activations  {size(report['activation_bytes'])}  [{report['activation_method']}]",
        f"  total        {size(report['total_bytes_per_gpu'])}",
        f"  trained parameters {report['trainable_parameters']:,} of {report['parameters']:,}",
        f"  FLOPs per token {report['flops_per_token']:.4g}, per step {report['flops_per_step']:.4g}",
    ]
    if "gpu_hours" in report:
        lines.append(f"  {report['tokens']:.4g} tokens: {report['gpu_hours']:,.0f} GPU-hours at MFU"
                     f" {report['mfu']:g}")
    lines += [f"  assumption: {a}" for a in report["assumptions"]]
    return "\n".join(lines)
