r"""How many GPUs serve a workload, under a serving engine's rules: tensor-parallel degrees, pipeline stages, and
vLLM's memory accounting.

vLLM's ``gpu_memory_utilization`` :math:`u` (default 0.9) bounds *everything* vLLM allocates on a GPU of reported
total memory :math:`M`; the KV cache gets what is left after the weights, the activation peak of a profiling
forward pass and the memory outside PyTorch's allocator (CUDA context, NCCL buffers):

.. math::
    \text{KV budget} = u\,M - (\text{weights} + \text{activation peak} + \text{non-torch})

(vLLM docs, "gpu_memory_utilization"; ``Worker.determine_available_memory``). The remaining :math:`(1-u)M` is
headroom vLLM leaves to other processes, not room for activations.

A model runs as ``replicas`` copies, each over ``tp`` × ``pp`` GPUs: tensor parallelism splits every matrix over
``tp`` GPUs (``tp`` must divide the query heads, and divide or be a multiple of the key/value heads), pipeline
parallelism splits the layers into ``pp`` stages (vLLM ``--pipeline-parallel-size``; any number of stages up to
the number of layers, so 3 GPUs can hold a model by layers even where no tensor-parallel degree of 3 exists).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..constants import GB, GiB
from .cache import cached_tokens, kv_elements_per_token_layer, model_kv_bytes_per_token, model_kv_cache_bytes
from .config import ModelConfig
from .counts import attention_parameters, layer_parameters, norm_parameters, parameter_count
from .engine import EngineModel
from .units import as_count, as_fraction, as_nonneg_bytes, bytes_per_element

__all__ = [
    "naive_gpu_count",
    "valid_tp_degrees",
    "TPLayout",
    "tp_layout",
    "pp_layer_partition",
    "activation_peak_bytes",
    "GPUPlan",
    "plan_gpus",
    "ServingAssumptions",
    "serving_plan",
    "engine_activation_peak_bytes",
    "engine_plan",
    "VLLM_VERSION",
    "vllm_batch_defaults",
]


def naive_gpu_count(total_bytes: float, gpu_memory_bytes: int) -> int:
    """The back-of-envelope count: ``ceil(total_bytes / gpu_memory_bytes)``, as if every byte of every GPU were
    usable and a model could be cut anywhere. :func:`plan_gpus` applies the serving constraints."""
    total_bytes = as_nonneg_bytes(total_bytes, "total_bytes")
    gpu_memory_bytes = as_count(gpu_memory_bytes, "gpu_memory_bytes")
    return max(1, math.ceil(total_bytes / gpu_memory_bytes))


def valid_tp_degrees(n_heads: int, n_kv_heads: int, max_degree: int = 64) -> list[int]:
    """Tensor-parallel degrees ``t`` a serving engine accepts (vLLM's rules): ``t`` divides the number of query
    heads, and either ``t`` divides the key/value heads or the key/value heads divide ``t`` (then each key/value
    head is replicated on ``t / n_kv_heads`` GPUs)."""
    n_heads = as_count(n_heads, "n_heads")
    n_kv_heads = as_count(n_kv_heads, "n_kv_heads")
    max_degree = as_count(max_degree, "max_degree")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
    return [
        t for t in range(1, max_degree + 1)
        if n_heads % t == 0 and (n_kv_heads % t == 0 or t % n_kv_heads == 0)
    ]


@dataclass(frozen=True)
class TPLayout:
    """What one GPU of a tensor-parallel group of ``degree`` GPUs holds."""

    degree: int
    weight_bytes_per_gpu: float  #: weights split over the group (key/value projections replicated if needed)
    kv_bytes_per_token_per_gpu: float  #: this GPU's share of one cached token (every layer caching it)
    kv_replication: int  #: how many GPUs hold each key/value head (1: no replication)


def _check_tp(cfg: ModelConfig, degree: int) -> None:
    valid = valid_tp_degrees(cfg.n_heads, cfg.n_kv_heads, max(degree, 1))
    if degree not in valid:
        raise ValueError(
            f"tensor-parallel degree {degree} is impossible for {cfg.n_heads} query heads and {cfg.n_kv_heads}"
            f" key/value heads; valid degrees up to {degree}: {valid}"
        )


def _kv_share(cfg: ModelConfig, degree: int) -> tuple[float, int]:
    """(fraction of a token's cache one GPU of the group holds, key/value replication)."""
    if cfg.kv_lora_rank is not None:
        return 1.0, degree  # one latent per token that every GPU needs
    rep = max(1, degree // cfg.n_kv_heads)
    return rep / degree, rep


def tp_layout(cfg: ModelConfig, degree: int, dtype: str = "bf16", kv_dtype: str = "bf16",
              *, replicate_weights: bool = False) -> TPLayout:
    r"""Split a model over a tensor-parallel group of ``degree`` GPUs.

    Weights: every matrix split ``degree`` ways (``replicate_weights=True``: each GPU holds a full copy, as in
    pure data parallelism); when ``degree`` exceeds the key/value heads, each key/value head (its projection
    weights and its cache) lives on ``degree / n_kv_heads`` GPUs. Latent attention's cache is one latent per
    token that every GPU needs, so it is held in full on each GPU. Norms are counted as split too (they are a
    few thousand numbers).
    """
    degree = as_count(degree, "degree")
    _check_tp(cfg, degree)
    params = parameter_count(cfg)
    p = bytes_per_element(dtype)
    share, rep = _kv_share(cfg, degree)
    kv_token = model_kv_bytes_per_token(cfg, kv_dtype) * share
    kv_rep = 1 if cfg.kv_lora_rank is not None else rep
    if replicate_weights:
        w = params.total * p
    else:
        w = (params.total - params.kv_projection + params.kv_projection * kv_rep) * p / degree
    return TPLayout(degree, w, kv_token, rep)


def pp_layer_partition(n_layers: int, pp: int) -> list[range]:
    """The layers of each of ``pp`` pipeline stages, as vLLM assigns them (``vllm.distributed.utils.get_pp_indices``):
    ``n_layers // pp`` each, the remainder one apiece to the stages just before the last."""
    n_layers, pp = as_count(n_layers, "n_layers"), as_count(pp, "pp")
    if pp > n_layers:
        raise ValueError(f"{pp} pipeline stages for {n_layers} layers: a stage needs at least one layer")
    sizes = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        sizes[-i] += 1
    starts = [sum(sizes[:s]) for s in range(pp)]
    return [range(a, a + n) for a, n in zip(starts, sizes, strict=True)]


def activation_peak_bytes(cfg: ModelConfig, tokens: int = 8192, sequences: int = 256, dtype: str = "bf16",
                          tp: int = 1, *, logits: bool = True) -> float:
    r"""An estimate of the activation peak of vLLM's profiling forward pass over ``tokens`` batched tokens
    (``max_num_batched_tokens``) on one GPU of a tensor-parallel group of ``tp``.

    The largest set of tensors alive at once in one layer: the residual stream and its normalised copy
    (:math:`2 T d_\text{model}`) plus the wider of the attention intermediates (q, k, v and the attention output,
    :math:`T (2h + 2h_{kv}) d_k / t`) and the feed-forward intermediates (gate and up outputs and the activated
    product, :math:`3 T w / t`, ``w`` the active width), times the bytes per element; plus, with ``logits``, the
    fp32 logits of the ``min(sequences, tokens)`` sampled tokens (:math:`4 S n_\text{vocab}`). An estimate from
    the model's dimensions, not vLLM's measurement: its log prints the measured peak at start-up.
    """
    tokens, sequences, tp = as_count(tokens, "tokens"), as_count(sequences, "sequences"), as_count(tp, "tp")
    p = bytes_per_element(dtype)
    if cfg.kv_lora_rank is not None:
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        attn = cfg.n_heads * (qk + cfg.qk_nope_head_dim + 2 * cfg.v_head_dim) + cfg.kv_lora_rank
    else:
        attn = (2 * cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim
    widths = [cfg.n_experts_per_tok * cfg.moe_d_ff + cfg.shared_d_ff if cfg.is_moe_layer(i) else cfg.d_ff
              for i in range(cfg.n_layers)]
    inner = max(attn, 3 * max(widths)) / tp
    peak = tokens * (2 * cfg.d_model + inner) * p
    if logits:
        peak += 4 * min(sequences, tokens) * cfg.vocab_size
    return peak


@dataclass(frozen=True)
class GPUPlan:
    """A way to serve a workload, and what it costs (per-GPU figures: the busiest pipeline stage)."""

    gpus: int  #: total GPUs = replicas * tp_degree * pp_degree
    tp_degree: int
    replicas: int
    sequences_per_replica: int  #: how many full-length sequences one replica's cache holds
    usable_bytes_per_gpu: float  #: fraction * memory - overhead (overhead: activations and non-torch memory)
    weight_bytes_per_gpu: float
    kv_bytes_per_gpu: float  #: cache each GPU holds at the full workload (busiest replica and stage)
    naive_gpus: int  #: ceil((weights + cache) / memory), no constraint applied
    pp_degree: int = 1
    overhead_bytes_per_gpu: float = 0.0  #: what was subtracted before the cache: activations + non-torch


def _stage_loads(cfg: ModelConfig, t: int, stages: list[range], context: int, dtype: str, kv_dtype: str,
                 replicate_weights: bool, layer_rate: float | None = None) -> list[tuple[float, float, bool]]:
    """Per stage: (weight bytes per GPU, KV bytes per sequence per GPU, is last stage). ``layer_rate``: bytes per
    parameter of the decoder layers when they are stored quantised (the token table and head then stay at
    ``dtype``)."""
    p, p_kv = bytes_per_element(dtype), bytes_per_element(kv_dtype)
    p_layer = p if layer_rate is None else layer_rate
    share, rep = _kv_share(cfg, t)
    kv_rep = 1 if cfg.kv_lora_rank is not None else rep
    _, kv_layer = attention_parameters(cfg)
    per_layer_kv = kv_elements_per_token_layer(cfg) * p_kv
    embed = cfg.vocab_size * cfg.d_model + cfg.n_positions * cfg.d_model
    head = cfg.vocab_size * cfg.d_model
    windows = cfg.windows
    out = []
    for s, layers in enumerate(stages):
        first, last = s == 0, s == len(stages) - 1
        norms = cfg.norms_per_layer * norm_parameters(cfg) * len(layers)  # norms stay at dtype when quantised
        n = (sum(layer_parameters(cfg, i) + kv_layer * (kv_rep - 1) for i in layers) - norms) * p_layer + norms * p
        n += embed * p if first else 0
        if last:  # final norm and output head; a tied head on a separate last stage still needs its own copy
            n += (norm_parameters(cfg) + (head if not cfg.tie_embeddings or not first else 0)) * p
        w = n if replicate_weights else n / t
        kv = per_layer_kv * share * sum(cached_tokens(context, windows[i]) for i in layers)
        out.append((w, kv, last))
    return out


#: (weight bytes per GPU, cache bytes per sequence per GPU, is last stage) of each pipeline stage
StageLoads = Callable[[int, list[range]], list[tuple[float, float, bool]]]


def _search(*, n_layers: int, tp_degrees: list[int], loads: StageLoads, total_bytes: float, users: int,
            context: int, gpu_memory_bytes: int, fraction: float, overhead: Callable[[int, bool], float],
            max_tp: int, max_pp: int) -> GPUPlan:
    """The fewest GPUs over every valid (tp, pp); ``overhead(t, last_stage)`` gives the bytes subtracted per GPU and
    ``loads(t, stages)`` what each stage holds. Shared by the hand-written description and the engine's."""
    naive = naive_gpu_count(total_bytes, gpu_memory_bytes)
    best: GPUPlan | None = None
    for pp in range(1, min(max_pp, n_layers) + 1):
        stages = pp_layer_partition(n_layers, pp)
        for t in tp_degrees:
            seqs, worst = None, None
            for w, kv, last in loads(t, stages):
                over = overhead(t, last)
                room = fraction * gpu_memory_bytes - over - w
                if room < kv or kv <= 0:
                    seqs = 0
                    break
                s = int(room // kv)
                if seqs is None or s < seqs:
                    seqs, worst = s, (w, kv, over)
            if not seqs:
                continue
            replicas = math.ceil(users / seqs)
            busiest = math.ceil(users / replicas)
            w, kv, over = worst
            plan = GPUPlan(replicas * t * pp, t, replicas, seqs, fraction * gpu_memory_bytes - over, w,
                           busiest * kv, naive, pp, over)
            if best is None or plan.gpus < best.gpus:
                best = plan
    if best is None:
        raise ValueError(
            f"the model does not fit: no tensor-parallel degree up to {max_tp}"
            f"{f' and no pipeline of up to {max_pp} stages' if max_pp > 1 else ''} leaves room for one sequence of"
            f" {context} tokens on GPUs of {gpu_memory_bytes / GB:.4g} GB ({gpu_memory_bytes / GiB:.4g} GiB)"
            f" with memory fraction {fraction} and overhead {overhead(1, True) / GB:.4g} GB per GPU"
        )
    return best


def _plan(cfg: ModelConfig, *, users: int, context: int, gpu_memory_bytes: int, fraction: float,
          overhead, dtype: str, kv_dtype: str, replicate_weights: bool, max_tp: int, max_pp: int,
          layer_rate: float | None = None, weights_bytes: float | None = None) -> GPUPlan:
    """:func:`_search` over the hand-written description ``cfg``."""
    w = parameter_count(cfg).total * bytes_per_element(dtype) if weights_bytes is None else weights_bytes
    total = w + model_kv_cache_bytes(cfg, context, users, kv_dtype)
    return _search(n_layers=cfg.n_layers, tp_degrees=valid_tp_degrees(cfg.n_heads, cfg.n_kv_heads, max_tp),
                   loads=lambda t, stages: _stage_loads(cfg, t, stages, context, dtype, kv_dtype, replicate_weights,
                                                        layer_rate),
                   total_bytes=total, users=users, context=context, gpu_memory_bytes=gpu_memory_bytes,
                   fraction=fraction, overhead=overhead, max_tp=max_tp, max_pp=max_pp)


def plan_gpus(
    cfg: ModelConfig,
    *,
    users: int,
    context: int,
    gpu_memory_bytes: int,
    memory_fraction: float = 0.9,
    overhead_bytes: float = 0,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    replicate_weights: bool = False,
    max_tp: int = 64,
    max_pp: int = 1,
    layer_rate: float | None = None,
    weights_bytes: float | None = None,
) -> GPUPlan:
    r"""The fewest GPUs that serve ``users`` concurrent sequences of ``context`` tokens, with a fixed
    ``overhead_bytes`` per GPU subtracted from ``memory_fraction`` of its memory before weights and cache.

    For every valid tensor-parallel degree ``t`` (and, with ``max_pp > 1``, every pipeline depth up to
    ``max_pp``), the cache room per GPU after the weights gives the sequences a replica holds (the tightest
    stage decides), :math:`s = \lfloor (u - w) / b_\text{seq} \rfloor`, and :math:`\lceil \text{users}/s \rceil`
    replicas; the smallest total wins (ties: fewer stages, then the smaller ``t``). :func:`serving_plan` applies
    vLLM's accounting instead of a fixed overhead. Raises ``ValueError`` if nothing fits even one sequence.

    Quantised weights: ``layer_rate`` bytes per decoder-layer parameter (scales included) with the token table and
    head at ``dtype``, and ``weights_bytes`` the whole model's bytes (:mod:`lib.planner.quant`).
    """
    users = as_count(users, "users")
    context = as_count(context, "context")
    gpu_memory_bytes = as_count(gpu_memory_bytes, "gpu_memory_bytes")
    memory_fraction = as_fraction(memory_fraction, "memory_fraction")
    overhead_bytes = as_nonneg_bytes(overhead_bytes, "overhead_bytes")
    max_tp, max_pp = as_count(max_tp, "max_tp"), as_count(max_pp, "max_pp")
    kv_dtype = dtype if kv_dtype is None else kv_dtype
    bytes_per_element(kv_dtype)
    if memory_fraction * gpu_memory_bytes <= overhead_bytes:
        raise ValueError(
            f"nothing is left per GPU: memory_fraction * gpu_memory_bytes = {memory_fraction * gpu_memory_bytes:.4g}"
            f" B is not more than overhead_bytes = {overhead_bytes:.4g} B"
        )
    return _plan(cfg, users=users, context=context, gpu_memory_bytes=gpu_memory_bytes, fraction=memory_fraction,
                 overhead=lambda t, last: overhead_bytes, dtype=dtype, kv_dtype=kv_dtype,
                 replicate_weights=replicate_weights, max_tp=max_tp, max_pp=max_pp, layer_rate=layer_rate,
                 weights_bytes=weights_bytes)


#: The vLLM release whose defaults the plans follow (V1 engine, ``EngineArgs.get_batch_defaults``).
VLLM_VERSION = "vLLM 0.9 to 0.11 (V1 engine)"
_BIG_GPU = 70 * GiB  #: vLLM's threshold for its larger batch defaults (device total, by torch)


def vllm_batch_defaults(device_total_bytes: int, device_name: str = "", entry: str = "server") -> tuple[int, int]:
    """vLLM's defaults ``(max_num_batched_tokens, max_num_seqs)`` for a card, as :data:`VLLM_VERSION` sets them.

    ``vllm/engine/arg_utils.py`` (``get_batch_defaults``): a device whose total (torch's, the engine's figure)
    is at least 70 GiB and whose name does not contain "a100" gets 8192 batched tokens for the API server
    (``entry="server"``, ``vllm serve``) or 16384 for the offline ``LLM`` class (``entry="offline"``), and 1024
    sequences for both; any other card gets 2048 (server) or 8192 (offline) tokens and 256 sequences. The A100
    is excluded because larger batches lowered its throughput (vLLM PR #17885, cited in that code). Then
    ``max_num_seqs`` is capped at ``max_num_batched_tokens``.
    """
    if entry not in ("server", "offline"):
        raise ValueError(f"entry must be 'server' or 'offline', got {entry!r}")
    big = as_count(device_total_bytes, "device_total_bytes") >= _BIG_GPU and "a100" not in device_name.lower()
    tokens = (8192 if entry == "server" else 16384) if big else (2048 if entry == "server" else 8192)
    seqs = 1024 if big else 256
    return tokens, min(seqs, tokens)


@dataclass(frozen=True)
class ServingAssumptions:
    """The engine settings a serving plan assumes, each named in the report. The defaults are
    :data:`VLLM_VERSION`'s for its API server on a card of at least 70 GiB other than an A100 (an H100, H200,
    B200); :meth:`vllm_defaults` gives them for any card."""

    gpu_memory_utilization: float = 0.9  #: vLLM --gpu-memory-utilization (default 0.9)
    max_num_batched_tokens: int = 8192  #: vLLM --max-num-batched-tokens: tokens in the profiling forward pass
    max_num_seqs: int = 1024  #: vLLM --max-num-seqs: sampled sequences whose logits are profiled
    non_torch_bytes: int = GiB  #: CUDA context, NCCL and cuBLAS buffers: an assumption; vLLM logs the measurement

    @classmethod
    def vllm_defaults(cls, device_total_bytes: int, device_name: str = "", entry: str = "server",
                      **settings: object) -> ServingAssumptions:
        """vLLM's batch defaults for this card (:func:`vllm_batch_defaults`), other settings as given."""
        tokens, seqs = vllm_batch_defaults(device_total_bytes, device_name, entry)
        return cls(**{"max_num_batched_tokens": tokens, "max_num_seqs": seqs, **settings})

    def describe(self) -> list[str]:
        return [
            f"gpu_memory_utilization {self.gpu_memory_utilization} bounds weights + activations + non-torch memory"
            " + KV cache together (vLLM's accounting)",
            f"activation peak estimated from the model's dimensions for a profiling pass of"
            f" {self.max_num_batched_tokens} batched tokens and {self.max_num_seqs} sampled sequences"
            f" (defaults of {VLLM_VERSION} for this card unless given)",
            f"non-torch memory {self.non_torch_bytes / GiB:.2f} GiB per GPU (assumed; vLLM measures it at start-up)",
            "CUDA-graph memory not modelled; quantised weights counted with their scales as the checkpoint stores"
            " them",
        ]


def serving_plan(cfg: ModelConfig, *, users: int, context: int, gpu_memory_bytes: int, dtype: str = "bf16",
                 kv_dtype: str | None = None, assumptions: ServingAssumptions | None = None, max_tp: int = 64,
                 max_pp: int = 1, layer_rate: float | None = None, weights_bytes: float | None = None) -> GPUPlan:
    """The fewest GPUs under vLLM's memory accounting (module docstring): per GPU, ``utilization × memory`` minus
    the weights, :func:`activation_peak_bytes` (logits on the last pipeline stage only) and the non-torch memory
    is the KV budget. ``max_pp=1``: tensor parallelism only; larger: tensor × pipeline plans too."""
    a = assumptions or ServingAssumptions()
    as_fraction(a.gpu_memory_utilization, "gpu_memory_utilization")
    users, context = as_count(users, "users"), as_count(context, "context")
    gpu_memory_bytes = as_count(gpu_memory_bytes, "gpu_memory_bytes")
    max_tp, max_pp = as_count(max_tp, "max_tp"), as_count(max_pp, "max_pp")
    kv_dtype = dtype if kv_dtype is None else kv_dtype
    bytes_per_element(kv_dtype)

    def overhead(t: int, last: bool) -> float:
        act = activation_peak_bytes(cfg, a.max_num_batched_tokens, a.max_num_seqs, dtype, t, logits=last)
        return act + a.non_torch_bytes

    return _plan(cfg, users=users, context=context, gpu_memory_bytes=gpu_memory_bytes,
                 fraction=a.gpu_memory_utilization, overhead=overhead, dtype=dtype, kv_dtype=kv_dtype,
                 replicate_weights=False, max_tp=max_tp, max_pp=max_pp, layer_rate=layer_rate,
                 weights_bytes=weights_bytes)


def _engine_stage_loads(em: EngineModel, t: int, stages: list[range], context: int, dtype: str,
                        kv_dtype: str, stored: tuple[list[float], float, float] | None = None
                        ) -> list[tuple[float, float, bool]]:
    """Per stage of the engine's description: (weight bytes per GPU, cache bytes per sequence per GPU, is last).

    The same rules as the hand-written description's: every matrix split ``t`` ways, key/value projections and
    their cache replicated on ``t / n_kv_heads`` GPUs when ``t`` exceeds the key/value heads, a latent cached whole
    on every GPU; a recurrent layer's fixed state split like its heads. ``stored``: (bytes of each layer, before
    the layers, after them) as a quantised checkpoint stores them (:func:`lib.planner.engine.weight_bytes`)."""
    p, p_kv = bytes_per_element(dtype), bytes_per_element(kv_dtype)
    latent = any(layer.kind == "latent" for layer in em.layers)

    def rep(layer) -> int:  # GPUs holding each key/value head: per layer (MiMo-V2-Flash's layers differ)
        return 1 if latent else max(1, t // max(layer.kv_heads or em.n_kv_heads, 1))

    out = []
    for s, stage in enumerate(stages):
        first, last = s == 0, s == len(stages) - 1
        layers = [em.layers[i] for i in stage]
        if stored is None:
            n = sum(layer.params + layer.kv_projection * (rep(layer) - 1) for layer in layers)
            n += em.first_params if first else 0
            if last:  # final norm and output head; a tied head on a separate last stage needs its own copy
                n += em.last_params + (em.tied_head if not first else 0)
            n *= p
        else:
            per_layer, before, after = stored
            n = sum(per_layer[i] + em.layers[i].kv_projection * (rep(em.layers[i]) - 1)
                    * per_layer[i] / max(em.layers[i].params, 1) for i in stage)
            n += before if first else 0
            if last:
                n += after + (em.tied_head * p if not first else 0)
        kv = sum(layer.kv_per_token * cached_tokens(context, layer.window) * (1.0 if latent else rep(layer) / t)
                 for layer in layers) * p_kv
        kv += sum(layer.state - layer.conv_channels for layer in layers) * p_kv / t  # vLLM: kernel - 1 columns
        out.append((n / t, kv, last))
    return out


def engine_activation_peak_bytes(em: EngineModel, tokens: int = 8192, sequences: int = 256, dtype: str = "bf16",
                                 tp: int = 1, *, logits: bool = True) -> float:
    r"""The activation estimate of :func:`activation_peak_bytes` for a model read by the engine: the residual stream
    and its normalised copy (:math:`2 T d_\text{model}`) plus the widest block of any layer, its active parameters
    divided by :math:`d_\text{model}` (the outputs per token of its matrices: :math:`(2h + 2h_{kv}) d_k` for
    attention, :math:`3w` for a gated feed-forward block of width :math:`w`), split over ``tp``; plus the fp32
    logits of the sampled tokens."""
    tokens, sequences, tp = as_count(tokens, "tokens"), as_count(sequences, "sequences"), as_count(tp, "tp")
    inner = max(layer.widest for layer in em.layers) / tp
    peak = tokens * (2 * em.d_model + inner) * bytes_per_element(dtype)
    if logits:
        peak += 4 * min(sequences, tokens) * em.vocab_size
    return peak


def engine_plan(em: EngineModel, *, users: int, context: int, gpu_memory_bytes: int, dtype: str = "bf16",
                kv_dtype: str | None = None, assumptions: ServingAssumptions | None = None,
                overhead_bytes: float | None = None, max_tp: int = 64, max_pp: int = 1,
                stored: tuple[list[float], float, float] | None = None) -> GPUPlan:
    """:func:`serving_plan` (or, with ``overhead_bytes``, :func:`plan_gpus`) for a model the engine read: the same
    search over tensor-parallel degrees (which must divide the attention heads) and pipeline stages, each stage
    holding its layers' parameters, per-token cache (each layer with its window) and recurrent state."""
    a = assumptions or ServingAssumptions()
    fraction = as_fraction(a.gpu_memory_utilization, "gpu_memory_utilization")
    users, context = as_count(users, "users"), as_count(context, "context")
    gpu_memory_bytes = as_count(gpu_memory_bytes, "gpu_memory_bytes")
    max_tp, max_pp = as_count(max_tp, "max_tp"), as_count(max_pp, "max_pp")
    kv_dtype = dtype if kv_dtype is None else kv_dtype
    p_kv = bytes_per_element(kv_dtype)
    if overhead_bytes is None:
        def overhead(t: int, last: bool) -> float:
            act = engine_activation_peak_bytes(em, a.max_num_batched_tokens, a.max_num_seqs, dtype, t, logits=last)
            return act + a.non_torch_bytes
    else:
        fixed = as_nonneg_bytes(overhead_bytes, "overhead_bytes")

        def overhead(t: int, last: bool) -> float:
            return fixed
    per_seq = sum(layer.kv_per_token * cached_tokens(context, layer.window) + layer.state - layer.conv_channels
                  for layer in em.layers)
    weights = em.total * bytes_per_element(dtype) if stored is None else sum(stored[0]) + stored[1] + stored[2]
    total = weights + users * per_seq * p_kv
    degrees = valid_tp_degrees(em.n_heads, em.n_kv_heads, max_tp) if em.n_heads else [1]
    return _search(n_layers=len(em.layers), tp_degrees=degrees,
                   loads=lambda t, stages: _engine_stage_loads(em, t, stages, context, dtype, kv_dtype, stored),
                   total_bytes=total, users=users, context=context, gpu_memory_bytes=gpu_memory_bytes,
                   fraction=fraction, overhead=overhead, max_tp=max_tp, max_pp=max_pp)
