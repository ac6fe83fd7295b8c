r"""Memory and compute of one training step: weights, gradients, optimizer states, activations, FLOPs.

Four kinds of memory live on a GPU during a training step:

.. math::
    M = \underbrace{N_\text{params}\,(w + g + o)}_\text{model states} + A
    \qquad\text{(eq. train-memory)}

with ``w``, ``g``, ``o`` the bytes per parameter of the weights, their gradients and the optimizer's states
(:data:`RECIPES`), and ``A`` the activations autograd keeps for the backward pass.

Activations are derived op by op and checked by counting: :func:`count_saved_bytes` runs a forward pass under
``torch.autograd.graph.saved_tensors_hooks`` and adds up every tensor autograd saves. The rule for adding them
up: autograd saves *references*, so two saved tensors that are views of one storage (a reshape, a transpose,
the same normalised input saved by the Q, K and V projections, the rotary ``cos`` table saved by every layer)
hold that storage once. Each distinct storage is counted once, at its full size in bytes (the allocator holds
all of it while any view is alive), and the parameters' storages are left out (they are the weights, counted
in the model states). The storage identity works on the meta device too, so a 405B-parameter model can be
counted without memory.

Closed forms:

* :func:`book_decoder_layer_bytes`, :func:`book_encoder_layer_bytes`, :func:`book_model_activation_bytes`:
  the book's encoder-decoder (:mod:`lib.pt.model`), equal to the counted bytes exactly;
* :func:`llama_layer_bytes`, :func:`llama_activation_bytes`: transformers' Llama-style decoder (RMSNorm, RoPE,
  SwiGLU, GQA; Mistral, Qwen2, Qwen3), eager or a tiled (flash) kernel, full training or LoRA (a frozen
  projection keeps no input), with activation checkpointing: what the forward pass keeps, equal to the count;
* :func:`llama_peak_bytes`: the peak of the step, following the backward pass layer by layer (the layers below,
  the layer being differentiated and its backward's temporaries, the loss's fp32 gradients), checked against
  the peak :func:`measure_activation_peak` reads from torch's memory profiler;
* :func:`korthikanti_layer_bytes`: Korthikanti et al. (2022), eq. 2, ``s b h (34 + 5 a s / h)``.

Model states: :func:`state_bytes`, sharded over GPUs by :func:`shard_states` (the ZeRO rule's one home, stages
0-3, Rajbhandari et al. 2020; :func:`zero_state_bytes` applies it); 8-bit Adam (:func:`adam8bit_state_bytes`) and
an NF4 base (:func:`nf4_tensor_bytes`, :func:`quantized_base_bytes`) as bitsandbytes stores them. LoRA:
:func:`lora_parameters`. Compute: :func:`training_flops_per_token` (``6 N`` plus attention) and
:func:`gpu_hours`. The published estimators the chapter compares with are :func:`deepspeed_zero2_bytes`,
:func:`deepspeed_zero3_bytes` and :func:`accelerate_training_bytes`, written from their documented formulas.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RECIPES",
    "Recipe",
    "state_bytes",
    "adam8bit_state_bytes",
    "BNB_QMAP_BYTES",
    "zero_state_bytes",
    "shard_states",
    "nf4_tensor_bytes",
    "quantized_base_bytes",
    "SavedTensors",
    "count_saved_bytes",
    "measure_activation_peak",
    "book_encoder_layer_bytes",
    "book_decoder_layer_bytes",
    "book_model_activation_bytes",
    "book_model_flops",
    "LlamaShape",
    "llama_shape",
    "llama_layer_bytes",
    "llama_activation_bytes",
    "llama_peak_bytes",
    "checkpointed_layers",
    "recompute_flops_per_token",
    "korthikanti_layer_bytes",
    "meta_model",
    "meta_saved",
    "meta_saved_bytes",
    "lora_parameters",
    "training_flops_per_token",
    "gpu_hours",
    "deepspeed_zero2_bytes",
    "deepspeed_zero3_bytes",
    "accelerate_training_bytes",
]


# --------------------------------------------------------------------------------------------------------------
# Model states: weights, gradients, optimizer states
# --------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Recipe:
    """Bytes per parameter of one way to train: ``weights + gradients + optimizer`` (eq. train-memory).

    ``optimizer`` includes an fp32 master copy of the weights where the recipe keeps one.
    """

    name: str
    weights: float
    gradients: float
    optimizer: float
    what: str

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


#: The recipes the book sizes. Mixed-precision AdamW: bf16 weights and gradients (2 + 2), an fp32 master copy
#: and fp32 first and second moments (4 + 4 + 4): 16 bytes per parameter.
RECIPES: dict[str, Recipe] = {
    "adamw": Recipe("adamw", 2, 2, 12, "bf16 weights and gradients; fp32 master copy, m and v"),
    "adamw-bf16": Recipe("adamw-bf16", 2, 2, 4, "bf16 weights, gradients, m and v; no master copy"),
    "adamw-fp32": Recipe("adamw-fp32", 4, 4, 8, "fp32 weights, gradients, m and v"),
    "sgd": Recipe("sgd", 2, 2, 8, "bf16 weights and gradients; fp32 master copy and momentum"),
    "adamw8bit": Recipe("adamw8bit", 2, 2, 4 + 2 + 8 / 256,
                        "bf16 weights and gradients; fp32 master copy; m and v in int8, blockwise"
                        " (256 values share one fp32 scale each)"),
}

#: bitsandbytes' 8-bit optimizers (``Optimizer2State.init_state`` in ``bitsandbytes/optim/optimizer.py``,
#: release 0.50.2) quantise each moment in blocks of 256 values with one fp32 absmax per block, keep tensors under
#: 4096 elements (``min_8bit_size``) in fp32, and share two 256-entry fp32 code books (``qmap1`` signed for m,
#: ``qmap2`` unsigned for v) between all parameters: 2 KiB per optimizer.
BNB_BLOCK = 256
BNB_MIN_8BIT_SIZE = 4096
BNB_QMAP_BYTES = 2 * 256 * 4


def _recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise ValueError(f"unknown optimizer recipe {name!r}; known: {', '.join(RECIPES)}")
    return RECIPES[name]


def _count(n: Any, name: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"{name} must be a non-negative int, got {n!r}")
    return n


def adam8bit_state_bytes(numels: Iterable[int], include_maps: bool = False) -> int:
    """Bytes of 8-bit Adam's two moment states for tensors of the given sizes (bitsandbytes' layout).

    A tensor of ``k >= 4096`` elements keeps ``m`` and ``v`` as uint8 plus one fp32 absmax per block of 256 for
    each: ``2 k + 2 * 4 * ceil(k / 256)``; a smaller one keeps both in fp32, ``8 k``. ``include_maps`` adds the
    two shared code books (:data:`BNB_QMAP_BYTES`, once, if any tensor is quantised). The fp32 master copy is
    not included.
    """
    total, quantised = 0, False
    for k in numels:
        k = _count(k, "numel")
        if k >= BNB_MIN_8BIT_SIZE:
            total += 2 * k + 8 * math.ceil(k / BNB_BLOCK)
            quantised = True
        else:
            total += 8 * k
    return total + (BNB_QMAP_BYTES if include_maps and quantised else 0)


def state_bytes(n_params: int, recipe: str = "adamw", trainable: int | None = None) -> dict[str, float]:
    """Weights, gradients and optimizer bytes of a model with ``n_params`` parameters of which ``trainable``
    are trained (default: all). Frozen parameters have weights only: no gradient, no optimizer state.
    """
    n = _count(n_params, "n_params")
    t = n if trainable is None else _count(trainable, "trainable")
    if t > n:
        raise ValueError(f"trainable={t} exceeds n_params={n}")
    r = _recipe(recipe)
    return {"weights": r.weights * n, "gradients": r.gradients * t, "optimizer": r.optimizer * t}


def shard_states(weights: float, gradients: float, optimizer: float, stage: int = 0, dp: int = 1,
                 mp: int = 1) -> dict[str, float]:
    """The ZeRO rule (Rajbhandari et al. 2020), its one home: the bytes of model states ONE GPU holds.

    Tensor and pipeline parallelism (``mp = tp * pp``) split every model state; over the ``dp`` data-parallel
    ranks, ZeRO stage 1 shards the optimizer states, stage 2 also the gradients, stage 3 also the weights
    (FSDP's full sharding); stage 0 replicates them.
    """
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage!r}")
    for name, v in (("dp", dp), ("mp", mp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    return {"weights": weights / (mp * (dp if stage >= 3 else 1)),
            "gradients": gradients / (mp * (dp if stage >= 2 else 1)),
            "optimizer": optimizer / (mp * (dp if stage >= 1 else 1))}


def zero_state_bytes(n_params: int, recipe: str = "adamw", stage: int = 0, gpus: int = 1,
                     trainable: int | None = None) -> dict[str, float]:
    """Model-state bytes held by ONE GPU under ZeRO data parallelism over ``gpus`` ranks
    (:func:`shard_states` applied to :func:`state_bytes`)."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus must be a positive int, got {gpus!r}")
    s = state_bytes(n_params, recipe, trainable)
    return shard_states(s["weights"], s["gradients"], s["optimizer"], stage, gpus)


#: bitsandbytes' NF4 storage (``quantize_4bit`` in ``bitsandbytes/functional.py``): two 4-bit codes per byte, one
#: absmax per block of 64 weights; with double quantisation (``compress_statistics``, QLoRA's recipe) the
#: absmax values, less their mean (one fp32 ``offset``), are quantised again to 8 bits in blocks of 256 with one
#: fp32 absmax each and a 256-entry fp32 code book; the NF4 code book has 16 fp32 entries.
NF4_BLOCK = 64
NF4_NESTED_BLOCK = 256


def nf4_tensor_bytes(numel: int, double_quant: bool = True) -> int:
    """Bytes of one weight tensor of ``numel`` elements stored in NF4 by bitsandbytes, constants included."""
    k = _count(numel, "numel")
    blocks = math.ceil(k / NF4_BLOCK)
    packed, nf4_code = math.ceil(k / 2), 16 * 4
    if not double_quant:
        return packed + 4 * blocks + nf4_code
    return packed + blocks + 4 * math.ceil(blocks / NF4_NESTED_BLOCK) + 256 * 4 + 4 + nf4_code


def quantized_base_bytes(linear_numels: Iterable[int], other_params: int, dtype: str,
                         double_quant: bool = True) -> int:
    """Weight bytes of a frozen base whose linear layers are quantised (``dtype`` int4: NF4 as bitsandbytes
    stores it, :func:`nf4_tensor_bytes`; int8 or fp8: one byte per weight, scales not counted) and whose
    other parameters (embedding, LM head, norms) stay in bf16, as quantised checkpoints keep them."""
    numels = [_count(k, "numel") for k in linear_numels]
    if dtype == "int4":
        q = sum(nf4_tensor_bytes(k, double_quant) for k in numels)
    elif dtype in ("int8", "fp8"):
        q = sum(numels)
    else:
        raise ValueError(f"dtype must be int4, int8 or fp8, got {dtype!r}")
    return q + 2 * _count(other_params, "other_params")


# --------------------------------------------------------------------------------------------------------------
# Counting what autograd saves
# --------------------------------------------------------------------------------------------------------------

@dataclass
class SavedTensors:
    """What one forward pass saved for the backward pass.

    ``bytes``: activation bytes, each distinct non-parameter storage once at its full size; ``records``: one
    ``(shape, dtype, storage bytes, kind)`` per save, kind ``"new"``, ``"shared"`` (a storage already counted)
    or ``"parameter"``; ``output``: what the forward function returned.
    """

    bytes: int
    records: list[tuple[tuple[int, ...], str, int, str]]
    output: Any


def _storage_key(t: Any) -> int:
    return t.untyped_storage()._cdata  # the StorageImpl's address: one per storage, on any device (meta too)


def count_saved_bytes(fn: Callable[[], Any], parameters: Iterable[Any] = ()) -> SavedTensors:
    """Run ``fn()`` under ``saved_tensors_hooks`` and count the bytes autograd keeps for the backward pass.

    Each distinct storage is counted once, at ``untyped_storage().nbytes()``; storages of ``parameters`` are
    left out. Works with real tensors and on the meta device.
    """
    import torch

    param_keys = {_storage_key(p) for p in parameters}
    seen: set[int] = set()
    records: list[tuple[tuple[int, ...], str, int, str]] = []
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        key, nbytes = _storage_key(t), t.untyped_storage().nbytes()
        kind = "parameter" if key in param_keys else ("shared" if key in seen else "new")
        if kind == "new":
            seen.add(key)
            total += nbytes
        records.append((tuple(t.shape), str(t.dtype).removeprefix("torch."), nbytes, kind))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return SavedTensors(total, records, out)


def measure_activation_peak(step: Callable[[], Any], parameters: Iterable[Any] = ()) -> int:
    """Run ``step()`` (a forward and backward pass, on the CPU) under torch's memory profiler and return the
    highest total of bytes allocated during it and still held at that moment, leaving out the gradients of
    ``parameters`` (the allocation that became each ``.grad``), which the model states count.

    Every allocation and free of the step is replayed in time order; an allocation whose address ends as a
    parameter's gradient is skipped.
    """
    import contextlib
    import os

    from torch.profiler import ProfilerActivity, profile

    @contextlib.contextmanager
    def quiet_stderr() -> Any:  # the profiler's C++ layer logs its start and stop to file descriptor 2
        saved = os.dup(2)
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                os.close(saved)

    params = list(parameters)
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        if hasattr(e.extra_fields, "alloc_size"):
            events.append((e.start_time_ns, e.extra_fields.ptr, e.extra_fields.alloc_size))
        stack.extend(e.children)
    events.sort()
    last = {ptr: i for i, (_, ptr, size) in enumerate(events) if size > 0}
    grads = {q.grad.data_ptr() for q in params if q.grad is not None}
    skip = {last[ptr] for ptr in grads if ptr in last}
    live: dict[int, int] = {}
    now = peak = 0
    for i, (_, ptr, size) in enumerate(events):
        if i in skip:
            continue
        if size > 0:
            live[ptr] = size
            now += size
        elif ptr in live:
            now -= live.pop(ptr)
        peak = max(peak, now)
    return peak


# --------------------------------------------------------------------------------------------------------------
# The book's encoder-decoder (lib.pt.model), op by op
# --------------------------------------------------------------------------------------------------------------

def _layer_norm_bytes(tokens: int, d: int, p: int, stat: int) -> int:
    """lib.pt.norms.layer_norm saves x - mu (twice, once counted), rsqrt(var + eps) and x_hat (for gamma):
    ``tokens (d stat + stat + d p)``; ``stat`` = 4 for 16-bit input (statistics in fp32), else ``p``."""
    return tokens * (d * stat + stat + d * p)


def _book_attention_bytes(b: int, n_q: int, n_k: int, d: int, h: int, p: int, shared_kv_input: bool) -> int:
    """Multi-head attention of lib.pt.multihead: Q/K/V input (one storage when self-attention), Q, Kᵀ, the
    softmax output A (b h n_q n_k), V, and the merged heads (input of W_O)."""
    q_in = b * n_q * d
    kv_in = 0 if shared_kv_input else b * n_k * d  # cross-attention: the encoder output, counted once per model
    return p * (q_in + kv_in + b * n_q * d + b * n_k * d + b * h * n_q * n_k + b * n_k * d + b * n_q * d)


def book_encoder_layer_bytes(b: int, n: int, d: int, h: int, d_ff: int, p: int = 4, *,
                             dropout: bool = False, mask_bytes: int | None = None) -> int:
    """Bytes a Pre-LN encoder layer of :mod:`lib.pt.blocks` keeps, ``p`` bytes per activation.

    Two LayerNorms, self-attention, the FFN's input, its ReLU output (saved once: by the ReLU and by
    ``linear2``), and with ``dropout`` one mask per sub-layer of ``mask_bytes`` per element (CPU's fallback
    keeps it in the activations' dtype, ``p``; CUDA's fused kernel a 1-byte bool).
    """
    stat = 4 if p < 4 else p
    t = b * n
    total = 2 * _layer_norm_bytes(t, d, p, stat) + _book_attention_bytes(b, n, n, d, h, p, True)
    total += p * (t * d + t * d_ff)
    if dropout:
        total += 2 * t * d * (p if mask_bytes is None else mask_bytes)
    return total


def book_decoder_layer_bytes(b: int, n: int, m: int, d: int, h: int, d_ff: int, p: int = 4, *,
                             dropout: bool = False, mask_bytes: int | None = None) -> int:
    """Bytes a Pre-LN decoder layer of :mod:`lib.pt.blocks` keeps (``n`` target, ``m`` source tokens).

    Three LayerNorms; masked self-attention; cross-attention whose K and V inputs are the encoder output
    (shared by every decoder layer, so counted once in :func:`book_model_activation_bytes`, not here); the FFN.
    """
    stat = 4 if p < 4 else p
    t = b * n
    total = 3 * _layer_norm_bytes(t, d, p, stat) + _book_attention_bytes(b, n, n, d, h, p, True)
    total += _book_attention_bytes(b, n, m, d, h, p, False) - p * b * m * d  # memory itself: per model
    total += p * (t * d + t * d_ff)
    if dropout:
        total += 3 * t * d * (p if mask_bytes is None else mask_bytes)
    return total


def book_model_activation_bytes(b: int, n_src: int, n_tgt: int, d: int, h: int, d_ff: int, n_layers: int,
                                vocab: int, p: int = 4, *, dropout: bool = False,
                                mask_bytes: int | None = None) -> dict[str, int]:
    """Every byte the book's Pre-LN :class:`~lib.pt.model.Seq2SeqTransformer` keeps for one step with
    ``cross_entropy``, by part (sum: ``"total"``).

    Token ids: the source ``(b, n_src)`` and the target ``(b, n_tgt + 1)`` whose first ``n_tgt`` columns are
    the decoder's input (a view: the whole storage is kept) and whose last ``n_tgt`` are the labels (copied
    when flattened). Masks: every attention call fills ``~mask`` (a new boolean tensor, one byte per element)
    and keeps it: per layer ``b n_src`` (encoder), ``b n_tgt^2`` (decoder) and ``b n_src`` (cross).
    """
    stat = 4 if p < 4 else p
    parts = {
        "token ids": 8 * b * (n_src + n_tgt + 1),
        "masks": n_layers * (2 * b * n_src + b * n_tgt * n_tgt),
        "encoder layers": n_layers * book_encoder_layer_bytes(b, n_src, d, h, d_ff, p, dropout=dropout,
                                                              mask_bytes=mask_bytes),
        "encoder output": _layer_norm_bytes(b * n_src, d, p, stat) + p * b * n_src * d,
        "decoder layers": n_layers * book_decoder_layer_bytes(b, n_tgt, n_src, d, h, d_ff, p, dropout=dropout,
                                                              mask_bytes=mask_bytes),
        "final norm and logits input": _layer_norm_bytes(b * n_tgt, d, p, stat) + p * b * n_tgt * d,
        "log-probabilities and targets": p * b * n_tgt * vocab + 8 * b * n_tgt + p,
    }
    parts["total"] = sum(parts.values())
    return parts


def book_model_flops(b: int, n_src: int, n_tgt: int, d: int, h: int, d_ff: int, n_layers: int,
                     vocab: int) -> dict[str, int]:
    """Matmul FLOPs of one training step of the book's model (2 per multiply-add): ``forward``, ``backward``
    (twice the forward: every matmul needs the gradient of both inputs) and ``total``."""
    fwd = _book_forward_flops(b, n_src, n_tgt, d, h, d_ff, n_layers, vocab)
    return {"forward": fwd, "backward": 2 * fwd, "total": 3 * fwd}


def _book_forward_flops(b: int, n_src: int, n_tgt: int, d: int, h: int, d_ff: int, n_layers: int,
                        vocab: int) -> int:
    ts, tt = b * n_src, b * n_tgt
    enc = 2 * ts * (4 * d * d + 2 * d * d_ff) + 4 * b * n_src * n_src * d
    self_attn = 2 * tt * 4 * d * d + 4 * b * n_tgt * n_tgt * d
    cross = 2 * tt * 2 * d * d + 2 * ts * 2 * d * d + 4 * b * n_tgt * n_src * d
    dec = self_attn + cross + 2 * tt * 2 * d * d_ff
    return n_layers * (enc + dec) + 2 * tt * d * vocab


# --------------------------------------------------------------------------------------------------------------
# transformers' Llama-style decoder (RMSNorm, RoPE, SwiGLU, GQA), op by op
# --------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LlamaShape:
    """The sizes a Llama-style decoder's activations depend on (read from a config.json by
    :func:`llama_shape`)."""

    d: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    n_layers: int
    vocab: int
    qk_norm: bool = False  # Qwen3: an RMSNorm on each head's query and key
    qkv_bias: bool = False  # Qwen2: biases on the Q, K, V projections
    tied: bool = False  # the LM head shares the embedding table

    def layer_parameters(self) -> int:
        """Parameters of one decoder layer: Q, K, V, O, gate, up, down, two RMSNorms (and Q/K norms, biases)."""
        q, kv = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        n = self.d * (q + 2 * kv) + q * self.d + 3 * self.d * self.d_ff + 2 * self.d
        return n + (q + 2 * kv if self.qkv_bias else 0) + (2 * self.head_dim if self.qk_norm else 0)

    def parameters(self) -> int:
        """All parameters (a tied embedding counted once)."""
        return (self.n_layers * self.layer_parameters() + self.vocab * self.d * (1 if self.tied else 2)
                + self.d)

    def linear_numels(self) -> list[int]:
        """Sizes of the layers' weight matrices (Q, K, V, O, gate, up, down per layer; not the embedding, the
        LM head or the norms): the weights a quantised base stores in its low-bit format."""
        q, kv = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        per = [self.d * q, self.d * kv, self.d * kv, q * self.d, self.d * self.d_ff, self.d * self.d_ff,
               self.d_ff * self.d]
        return per * self.n_layers

    def matmul_parameters(self) -> int:
        """Parameters that multiply activations (every weight matrix, the LM head included; not the embedding
        lookup, norms or biases): the ``N`` of ``6 N`` FLOPs per token."""
        q, kv = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        per_layer = self.d * (q + 2 * kv) + q * self.d + 3 * self.d * self.d_ff
        return self.n_layers * per_layer + self.vocab * self.d


LLAMA_STYLE = ("llama", "mistral", "qwen2", "qwen3")


def llama_shape(config: dict[str, Any]) -> LlamaShape:
    """Read a Llama-style ``config.json`` (``model_type`` llama, mistral, qwen2 or qwen3)."""
    mt = config.get("model_type")
    if mt not in LLAMA_STYLE:
        raise ValueError(f"the Llama-style closed form covers model_type {', '.join(LLAMA_STYLE)}, got {mt!r}")
    try:
        d, h, L = config["hidden_size"], config["num_attention_heads"], config["num_hidden_layers"]
        f, v = config["intermediate_size"], config["vocab_size"]
    except KeyError as e:
        raise ValueError(f"config.json lacks {e.args[0]!r}, needed for the activation closed form") from None
    hd = config.get("head_dim") or d // h
    return LlamaShape(d, h, config.get("num_key_value_heads") or h, hd, f, L, v, qk_norm=mt == "qwen3",
                      qkv_bias=mt == "qwen2" or bool(config.get("attention_bias")),
                      tied=bool(config.get("tie_word_embeddings", False)))


def _rms_norm_bytes(tokens: int, width: int, p: int) -> int:
    """transformers' RMSNorm: the fp32 copy of its input (kept by ``pow``), the fp32 ``rsqrt`` per row, and the
    normalised input in the model's dtype (kept by the ``weight *``). In fp32 the copy is the input itself."""
    return tokens * (4 * width + 4 + p * width) if p < 4 else tokens * (4 * width + 4 + 4 * width)


def _lora_set(lora_rank: int | None, lora_targets: Iterable[str]) -> frozenset[str]:
    if lora_rank is None:
        return frozenset()
    if isinstance(lora_rank, bool) or not isinstance(lora_rank, int) or lora_rank < 1:
        raise ValueError(f"LoRA rank must be a positive int, got {lora_rank!r}")
    targets = frozenset(lora_targets)
    if not targets or targets - LORA_TARGETS:
        raise ValueError(f"LoRA targets must be among {', '.join(sorted(LORA_TARGETS))}, got {sorted(targets)!r}")
    return targets


def llama_layer_bytes(s: LlamaShape, b: int, n: int, p: int = 2, attention: str = "eager", *,
                      lora_rank: int | None = None, lora_targets: Iterable[str] = ("q_proj", "v_proj"),
                      first_layer: bool = False) -> dict[str, int]:
    """Bytes one decoder layer of transformers' Llama-style model keeps, by op (sum: ``"total"``).

    ``attention="eager"``: ``softmax(..., dtype=float32)`` keeps its fp32 output (``4 b h n^2``) and the
    probabilities cast back to the model's dtype are kept by the ``P V`` matmul (``p b h n^2``; the same tensor
    when ``p = 4``); K and V are kept after ``repeat_kv`` (expanded to all ``h`` heads).
    ``attention="flash"``: a tiled kernel keeps Q, K, V (not expanded), its output and one fp32 log-sum-exp
    per row and head (``4 b h n``), never an ``n x n`` matrix; it writes its output in ``(b, n, h, head_dim)``
    order, so the merged heads that ``W_O`` keeps are a view of it (one storage).

    With ``lora_rank`` (LoRA on ``lora_targets``, every other weight frozen) a frozen projection keeps no input
    (it needs no weight gradient): the input of an adapted projection is kept by the adapter's ``A``, and each
    adapter keeps its rank-``r`` intermediate ``x A^T`` (``p r`` per token); the norms keep no normalised input
    (their weights are frozen); SwiGLU's product is kept only when ``down_proj`` is adapted. The first layer
    (``first_layer``) of a LoRA model has an input that needs no gradient, so its attention norm keeps nothing.
    """
    if attention not in ("eager", "flash"):
        raise ValueError(f"attention must be 'eager' or 'flash', got {attention!r}")
    lora = _lora_set(lora_rank, lora_targets)
    t, h, hk, hd = b * n, s.n_heads, s.n_kv_heads, s.head_dim
    # which weights receive a gradient (full training: all; LoRA: the adapters of lora), and which tensors need
    # one: an op keeps a tensor only when a gradient it computes needs it
    trained = (lambda name: name in lora) if lora else (lambda name: True)
    x_grad = not (lora and first_layer)

    def norm(rows: int, width: int, grad_in: bool) -> int:  # RMSNorm: fp32 copy and rsqrt; normalised input
        if not grad_in:
            return 0
        return rows * (4 * width + 4 + (0 if lora else p * width))

    q_g, k_g, v_g = (x_grad or trained(f"{c}_proj") for c in "qkv")
    parts = {"attention norm": norm(t, s.d, x_grad),
             "Q/K/V input": p * t * s.d if any(trained(f"{c}_proj") for c in "qkv") else 0}
    if s.qk_norm:
        parts["Q/K norms"] = norm(t * h, hd, q_g) + norm(t * hk, hd, k_g)
    scores_g = q_g or k_g
    if attention == "eager":
        parts["Q, K, V (K and V per query head)"] = p * t * hd * h * ((1 if k_g else 0) + (1 if q_g else 0)
                                                                  + (1 if scores_g else 0))
        parts["softmax output (fp32)"] = 4 * b * h * n * n if scores_g else 0
        if p < 4:
            parts["probabilities (model dtype)"] = p * b * h * n * n if v_g else 0
        out_g = scores_g or v_g
        parts["W_O input"] = p * t * h * hd if trained("o_proj") else 0
    else:
        out_g = q_g or k_g or v_g
        parts["Q, K, V"] = p * t * hd * (h + 2 * hk) if out_g else 0
        parts["log-sum-exp (fp32)"] = 4 * b * h * n if out_g else 0
        parts["kernel output = W_O input"] = p * t * h * hd if (out_g or trained("o_proj")) else 0
    h_g = x_grad or out_g or trained("o_proj")
    parts["MLP norm"] = norm(t, s.d, h_g)
    parts["gate/up input"] = p * t * s.d if (trained("gate_proj") or trained("up_proj")) else 0
    gate_g, up_g = h_g or trained("gate_proj"), h_g or trained("up_proj")
    parts["gate, SiLU(gate), up, product"] = p * t * s.d_ff * (
        (1 if gate_g else 0) + (1 if up_g else 0) + (1 if gate_g else 0) + (1 if trained("down_proj") else 0))
    if lora:
        parts["LoRA intermediates x A^T"] = p * t * lora_rank * len(lora)
    parts["total"] = sum(parts.values())
    return parts


def checkpointed_layers(spec: str, n_layers: int) -> list[int]:
    """The layers (0-based) a checkpointing ``spec`` recomputes: ``"none"`` none, ``"full"`` all, ``"every:K"``
    layers ``0, K, 2K, ...`` (``ceil(L / K)`` of them; ``every:1`` is ``full``).

    A checkpointed layer keeps only its input during the forward pass and runs its forward pass again in the
    backward pass; the others keep everything autograd saves.
    """
    if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"n_layers must be a positive int, got {n_layers!r}")
    if spec == "none":
        return []
    if spec == "full":
        return list(range(n_layers))
    if isinstance(spec, str) and spec.startswith("every:"):
        k = spec.removeprefix("every:")
        if k.isdigit() and int(k) >= 1:
            return list(range(0, n_layers, int(k)))
    raise ValueError(f"checkpointing must be 'none', 'full' or 'every:K' with K a positive integer, got {spec!r}")


def llama_activation_bytes(s: LlamaShape, b: int, n: int, p: int = 2, attention: str = "eager",
                           checkpointing: str = "none", *, lora_rank: int | None = None,
                           lora_targets: Iterable[str] = ("q_proj", "v_proj")) -> dict[str, int]:
    """Activation bytes autograd keeps at the end of the forward pass of a Llama-style model with the loss.

    Outside the layers: the token ids (int64), RoPE's ``cos`` and ``sin`` tables (``(1, 1, n, head_dim)``
    each, kept once for all layers), the final norm, the LM head's input, the log-probabilities in fp32
    (transformers upcasts the logits before the loss: ``4 b n V``) and the labels, padded by one and shifted
    (with ``b = 1`` a view of the padded ``n + 1`` storage, else a copy of ``b n``; on the meta device the copy
    keeps ``b (n + 1)``, 8 b bytes more). Under LoRA the frozen embedding and LM head keep nothing.

    ``checkpointing`` (:func:`checkpointed_layers`): each of the ``c`` checkpointed layers keeps only its input
    (``p b n d``), the other ``L - c`` keep :func:`llama_layer_bytes`. This is what is kept when the backward
    pass starts, not the peak: :func:`llama_peak_bytes` follows the backward pass.
    """
    lora = _lora_set(lora_rank, lora_targets)
    ck = set(checkpointed_layers(checkpointing, s.n_layers))
    t = b * n
    kw = dict(lora_rank=lora_rank, lora_targets=lora_targets)
    layer = llama_layer_bytes(s, b, n, p, attention, **kw)["total"]
    first = llama_layer_bytes(s, b, n, p, attention, first_layer=True, **kw)["total"]
    layers = sum(p * t * s.d if i in ck else (first if i == 0 else layer) for i in range(s.n_layers))
    final = _rms_norm_bytes(t, s.d, p) if not lora else (t * (4 * s.d + 4) if p < 4 else t * (4 * s.d + 4))
    parts = {
        "token ids": 0 if lora else 8 * t,
        "RoPE cos and sin": 2 * p * n * s.head_dim,
        "layers": layers,
        "final norm": final,
        "LM head input": 0 if lora else p * t * s.d,
        "log-probabilities (fp32)": 4 * t * s.vocab,
        "labels": 8 * (b * n + 1) if b == 1 else 8 * b * n,
        "loss normaliser": 4,
    }
    parts["total"] = sum(parts.values())
    return parts


def llama_peak_bytes(s: LlamaShape, b: int, n: int, p: int = 2, attention: str = "eager",
                     checkpointing: str = "none", *, lora_rank: int | None = None,
                     lora_targets: Iterable[str] = ("q_proj", "v_proj"),
                     cpu_bf16_matmul: bool = False) -> dict[str, int]:
    """The most activation memory live at any moment of one training step (forward, loss and backward pass),
    gradients of the weights left out. Returns the moments it compares and ``"peak"``, their maximum.

    The backward pass runs the layers top down. When it reaches layer ``i`` it holds what the layers below
    keep (a checkpointed layer: its input ``p b n d``; another: :func:`llama_layer_bytes`), what stays alive
    outside the layers until the end (token ids, RoPE's tables, the position ids, and with checkpointing and
    eager attention the ``(b, 1, n, n)`` additive mask that the recomputation needs), and layer ``i`` itself:
    everything it keeps (a checkpointed layer recomputes it, on top of its stored input) plus its backward's
    temporaries at their worst moment ``delta``, the larger of

    * the softmax's backward (eager): the gradient of the probabilities upcast to fp32 and the softmax
      backward's fp32 output (``8 b h n^2``), with the MLP's tensors, ``W_O``'s input, ``V`` and the bf16
      probabilities already freed; with a tiled kernel, the kernel's gradients of Q, K and V;
    * the MLP's backward: the gradient of ``down_proj``'s input (``p b n d_ff``) while all of the layer's tensors
      are alive (on the CPU, ``cpu_bf16_matmul``, the bf16 matrix product adds an fp32 buffer of its output,
      ``4 b n d_ff``);

    each with the pending gradient of the residual stream (``p b n d``). Before the layers: the loss's backward,
    which holds everything kept plus the fp32 gradient of the log-probabilities and of the logits
    (``8 b n V``), and the final norm's backward, with the log-probabilities freed and four fp32 temporaries of
    width ``d`` (``16 b n d``).
    """
    lora = _lora_set(lora_rank, lora_targets)
    kw = dict(lora_rank=lora_rank, lora_targets=lora_targets)
    ck = set(checkpointed_layers(checkpointing, s.n_layers))
    t = b * n
    kept = llama_activation_bytes(s, b, n, p, attention, checkpointing, **kw)["total"]
    lay = llama_layer_bytes(s, b, n, p, attention, **kw)
    mask = p * b * n * n if (attention == "eager" and ck) else 0
    alive = (0 if lora else 8 * t) + 2 * p * n * s.head_dim + 8 * n + mask
    g = p * t * s.d
    mlp = lay["MLP norm"] + lay["gate/up input"] + lay["gate, SiLU(gate), up, product"]
    if attention == "eager":
        freed = mlp + lay["W_O input"] + p * t * s.n_heads * s.head_dim + lay.get("probabilities (model dtype)", 0)
        d_attn = g + 8 * b * s.n_heads * n * n - freed
    else:
        d_attn = g + p * t * s.head_dim * (s.n_heads + 2 * s.n_kv_heads) - mlp
    d_mlp = g + p * t * s.d_ff + (4 * t * s.d_ff if cpu_bf16_matmul else 0)
    delta = max(d_attn, d_mlp)
    first = llama_layer_bytes(s, b, n, p, attention, first_layer=True, **kw)["total"]
    below = layers_peak = 0
    for i in range(s.n_layers):
        full = first if i == 0 else lay["total"]
        here = (p * t * s.d + full) if i in ck else full
        layers_peak = max(layers_peak, alive + below + here + delta)
        below += p * t * s.d if i in ck else full
    out = {"kept at the end of the forward pass": kept,
           "loss backward": kept + 8 * t * s.vocab,
           "final norm backward": kept - 4 * t * s.vocab + 16 * t * s.d,
           "layers' backward": layers_peak}
    out["peak"] = max(out.values())
    return out


def recompute_flops_per_token(layer_matmul_params: float, n: int, attn_width: int, recomputed: int,
                              causal_half: bool = False) -> int:
    """Extra FLOPs per token of checkpointing: one more forward pass of each of the ``recomputed`` layers,
    ``2`` per matrix parameter of the layer plus attention's forward ``4 n d_attn`` (``QK^T`` and ``A V``;
    half for a kernel that skips the masked half). The LM head and the loss are not recomputed."""
    attn = 4 * n * attn_width
    return int(recomputed * (2 * layer_matmul_params + (attn // 2 if causal_half else attn)))


def korthikanti_layer_bytes(s: int, b: int, h: int, a: int) -> float:
    """Korthikanti et al. (2022), eq. 2: activation bytes per layer ``s b h (34 + 5 a s / h)`` (16-bit
    activations, 1-byte dropout masks, GPT-style layer with a 4h MLP, no parallelism)."""
    return s * b * h * (34 + 5 * a * s / h)


# --------------------------------------------------------------------------------------------------------------
# Any transformers model, counted on the meta device
# --------------------------------------------------------------------------------------------------------------

def _layers_key(config: dict[str, Any]) -> str:
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        if key in config:
            return key
    raise ValueError("config.json has no num_hidden_layers (nor n_layer, num_layers)")


def meta_model(config: dict[str, Any], n_layers: int | None = None, attention: str = "eager",
               dtype: Any = None) -> Any:
    """transformers' causal-LM model for ``config`` built on the meta device (no memory), in training mode,
    with ``n_layers`` layers (default: the config's), ``dtype`` a torch dtype (default bfloat16)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    key = _layers_key(config)
    fields = {k: v for k, v in config.items() if k not in ("architectures", "transformers_version", "auto_map")}
    if n_layers is not None:
        fields[key] = n_layers
        for per_layer in ("layer_types",):
            if isinstance(fields.get(per_layer), list):
                fields[per_layer] = fields[per_layer][:n_layers]
    cfg = AutoConfig.for_model(**fields)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype or torch.bfloat16, attn_implementation=attention)
    return model.train()


_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def meta_saved(config: dict[str, Any], n_layers: int | None = None, n: int = 2048, b: int = 1,
               dtype: str = "bf16", attention: str = "eager") -> dict[str, int]:
    """One forward pass with labels of :func:`meta_model`, counted by :func:`count_saved_bytes`: ``bytes`` in
    all and ``nxn``, the part held by tensors whose last two axes are ``(n, n)`` (attention's probabilities,
    scores and masks) or ``(n, n + 1)`` (the same with one sink column appended, as gpt-oss's attention
    keeps them)."""
    import torch

    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
    model = meta_model(config, n_layers, attention, getattr(torch, _DTYPES[dtype]))
    ids = torch.zeros(b, n, dtype=torch.long, device="meta")
    try:
        saved = count_saved_bytes(lambda: model(input_ids=ids, labels=ids), model.parameters())
    except RuntimeError as e:  # a model that inspects position ids for packed sequences calls .item(): pass
        if "meta" not in str(e):  # an explicit all-ones mask instead (it changes nothing that is kept)
            raise
        mask = torch.ones(b, n, dtype=torch.long, device="meta")
        saved = count_saved_bytes(lambda: model(input_ids=ids, labels=ids, attention_mask=mask),
                                  model.parameters())
    nxn = sum(nb for shape, _, nb, kind in saved.records
              if kind == "new" and len(shape) >= 2 and shape[-2] == n and shape[-1] in (n, n + 1))
    return {"bytes": saved.bytes, "nxn": nxn}


def meta_saved_bytes(config: dict[str, Any], n: int = 2048, b: int = 1, attention: str = "eager",
                     dtype: str = "bf16", n_layers: int | None = None) -> dict[str, int]:
    """Bytes autograd keeps for a forward pass with labels of transformers' own model, built on the meta
    device from ``config`` (no memory is allocated), counted by :func:`count_saved_bytes`.

    With ``n_layers=None`` the model is built with 1 and with 2 layers: the difference is one layer's bytes
    and the full model's are ``outside + L * per_layer`` (exact when every layer has the same shape, as in the
    dense families). Returns ``per_layer``, ``outside`` and ``total``.
    """
    L = config[_layers_key(config)]
    if n_layers is not None:
        return {"total": meta_saved(config, n_layers, n, b, dtype, attention)["bytes"]}
    one, two = (meta_saved(config, k, n, b, dtype, attention)["bytes"] for k in (1, 2))
    per_layer = two - one
    return {"per_layer": per_layer, "outside": one - per_layer, "total": one - per_layer + L * per_layer}


# --------------------------------------------------------------------------------------------------------------
# LoRA, FLOPs, time
# --------------------------------------------------------------------------------------------------------------

LORA_TARGETS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def lora_parameters(s: LlamaShape, rank: int, targets: Iterable[str] = ("q_proj", "v_proj")) -> int:
    """Trainable parameters of LoRA (Hu et al. 2021) on a Llama-style model: each adapted ``d_in -> d_out``
    linear map gains ``A (r, d_in)`` and ``B (d_out, r)``, ``r (d_in + d_out)`` parameters, in every layer."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"LoRA rank must be a positive int, got {rank!r}")
    targets = list(targets)
    bad = [t for t in targets if t not in LORA_TARGETS]
    if bad or not targets:
        raise ValueError(f"LoRA targets must be among {', '.join(sorted(LORA_TARGETS))}, got {targets!r}")
    q, kv = s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim
    shapes = {"q_proj": (s.d, q), "k_proj": (s.d, kv), "v_proj": (s.d, kv), "o_proj": (q, s.d),
              "gate_proj": (s.d, s.d_ff), "up_proj": (s.d, s.d_ff), "down_proj": (s.d_ff, s.d)}
    return s.n_layers * sum(rank * sum(shapes[t]) for t in set(targets))


def training_flops_per_token(n_matmul_params: int, n_layers: int, n: int, attn_width: int,
                             causal_half: bool = False) -> int:
    """FLOPs of one training step per token: ``6 N`` for the matrices (2 forward, 4 backward per parameter
    and token) plus the attention scores and weighted sum, ``3 * 4 n d_attn`` per layer (``QKᵀ`` and ``A V``,
    each ``2 n d_attn`` forward per token and twice that backward). ``causal_half`` halves the attention term
    (a kernel that skips the masked half)."""
    attn = 12 * n_layers * n * attn_width
    return 6 * n_matmul_params + (attn // 2 if causal_half else attn)


def gpu_hours(flops: float, peak_flops: float, mfu: float) -> float:
    """Hours of GPU time to perform ``flops`` at model-FLOPs utilisation ``mfu`` of ``peak_flops`` per second."""
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu must lie in (0, 1], got {mfu!r}")
    if peak_flops <= 0:
        raise ValueError(f"peak_flops must be positive, got {peak_flops!r}")
    return flops / (peak_flops * mfu) / 3600


# --------------------------------------------------------------------------------------------------------------
# Published estimators, written from their documented formulas (for the chapter's side-by-side)
# --------------------------------------------------------------------------------------------------------------

def deepspeed_zero2_bytes(total_params: int, gpus: int, cpu_offload: bool = False) -> dict[str, float]:
    """DeepSpeed's ``estimate_zero2_model_states_mem_needs`` (no offload): per GPU
    ``4 P + 16 P / gpus`` bytes; with optimizer offload ``2 P`` on the GPU. Model states only."""
    gpu = 2 * total_params if cpu_offload else 4 * total_params + 16 * total_params / gpus
    return {"gpu": gpu}


def deepspeed_zero3_bytes(total_params: int, largest_layer_params: int, gpus: int) -> dict[str, float]:
    """DeepSpeed's ``estimate_zero3_model_states_mem_needs`` (no offload): per GPU
    ``4 * largest_layer + 18 P / gpus`` bytes. Model states only."""
    return {"gpu": 4 * largest_layer_params + 18 * total_params / gpus}


def accelerate_training_bytes(total_params: int, dtype: str = "float32") -> float:
    """accelerate's ``estimate-memory``, "training using Adam", for one ``dtype`` row: four times the model's
    size in that dtype (weights, gradients and two moments at the dtype's width): ``16 P`` bytes for float32,
    ``8 P`` for float16 or bfloat16. Activations are not included."""
    width = {"float32": 4, "float16": 2, "bfloat16": 2}
    if dtype not in width:
        raise ValueError(f"dtype must be one of {', '.join(width)}, got {dtype!r}")
    return 4 * width[dtype] * total_params
