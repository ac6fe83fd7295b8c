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
    "VLLM_BANDS",
    "vllm_band",
    "vllm_batch_defaults",
    "non_torch_bytes",
    "reserved_tokens",
    "SAMPLER_BYTES_PER_LOGIT",
    "MODEL_ERROR_BYTES",
    "kv_available_plan",
    "fit_verdict",
    "sequence_range",
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


#: The vLLM release bands whose start-up accounting the planner models, newest first (``--vllm-version``): what
#: changed between them is the sampler's warm-up in the profiling run (below) and, for the V0 engine, how many
#: tokens the profiling forward pass holds. The newest band is the default.
VLLM_BANDS = {
    "0.12": "vLLM 0.12 and later (V1 engine; validated on logs of early 2026 and 0.24)",
    "0.10": "vLLM 0.10 to 0.11 (V1 engine; validated on logs of 0.10.1 and July 2025)",
    "v0": "vLLM's V0 engine (before 0.10; not validated: its logs are kept, outside the bands claimed)",
}
DEFAULT_BAND = "0.12"

#: Bytes the V1 sampler's warm-up holds per logit (``max_num_seqs`` rows of the vocabulary) at its peak, from vLLM
#: 0.12 on: the model's bf16 logits (2 B), their fp32 copy (4 B), the sort of the fp32 logits over the vocabulary
#: for top-k/top-p (values 4 B and int64 indices 8 B), and the radix sort's own double buffers for keys and indices
#: (about 20 B): 38 B by that count, 38.4 B fitted to five H100 logs of five models (9.6 times the fp32 logits).
SAMPLER_BYTES_PER_LOGIT = 38.4

#: Memory outside PyTorch's allocator that V1 counts per GPU (the increase in the device's used memory beyond torch's
#: reservations after its start-up snapshot: cuBLAS workspaces, the CUDA graph pool's bookkeeping), by whether the
#: GPU talks to others (NCCL communicators and vLLM's custom all-reduce buffers): H100 logs show 0.13-0.14 GiB
#: alone and 0.54-0.55 GiB at tensor-parallel 2.
NON_TORCH_ALONE = round(0.14 * GiB)
NON_TORCH_PARALLEL = round(0.55 * GiB)

#: The planner's error per GPU on the memory it subtracts before the KV cache (activation peak + non-torch +
#: weights), the largest seen in the validation set's claimed bands (tests/test_vllm_validation.py keeps it so): a
#: plan with less room to spare than this "fits within the model's error".
MODEL_ERROR_BYTES = round(0.75 * GiB)


def vllm_band(version: str | None = None) -> str:
    """The band of :data:`VLLM_BANDS` a vLLM version belongs to: ``"0.12"`` for 0.12 and later (also ``None``, the
    default), ``"0.10"`` for 0.10 and 0.11 (and older V1 releases, not validated), ``"v0"`` for the V0 engine
    (``"v0"``, ``"V0"``)."""
    if version is None:
        return DEFAULT_BAND
    text = str(version).strip().lower().removeprefix("vllm").strip().removeprefix("v")
    if text in VLLM_BANDS:
        return text
    if text == "0" or str(version).strip().lower() in ("v0", "vllm v0"):
        return "v0"
    parts = text.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ValueError(f"--vllm-version: expected a release such as 0.11.0, 0.12 or v0, got {version!r}") from None
    return "0.12" if (major, minor) >= (0, 12) else "0.10"


def non_torch_bytes(gpus_in_group: int = 1) -> int:
    """Non-torch memory per GPU as vLLM's V1 engine counts it (:data:`NON_TORCH_ALONE`, or
    :data:`NON_TORCH_PARALLEL` when the replica spans several GPUs)."""
    return NON_TORCH_ALONE if as_count(gpus_in_group, "gpus_in_group") == 1 else NON_TORCH_PARALLEL


def reserved_tokens(context: int, window: int | None = None, batched_tokens: int = 8192, block: int = 16) -> int:
    """Tokens vLLM reserves per sequence in one layer's cache when it admits a request (``KVCacheSpec``'s
    ``max_memory_usage_bytes``): ``context`` for full attention; for a sliding window of ``w`` tokens,
    ``min(w - 1 + max_num_batched_tokens, context)`` rounded up to blocks, plus one block (the window need not
    start on a block's edge; ``SlidingWindowSpec``). A chunk of prefill keeps the last ``w - 1`` tokens and the
    new ones."""
    context = as_count(context, "context")
    if window is None:
        return context
    need = min(as_count(window, "window") - 1 + as_count(batched_tokens, "batched_tokens"), context)
    block = as_count(block, "block")
    return (math.ceil(need / block) + 1) * block


def _profile_tokens(tokens: int, band: str, max_model_len: int | None) -> int:
    """Tokens in the profiling forward pass: ``max_num_batched_tokens`` under V1; V0 without chunked prefill (its
    default up to 32,768 tokens of context) profiles ``max(max_model_len, max_num_batched_tokens)``."""
    if band == "v0" and max_model_len is not None and max_model_len <= 32768:
        return max(tokens, max_model_len)
    return tokens


def _sampler_peak(tokens: int, sequences: int, d_model: int, vocab: int, p: float, band: str) -> tuple[float, bool]:
    """(bytes of the sampler's warm-up beyond the forward pass, whether it stands alone): from 0.12 the sort of
    :data:`SAMPLER_BYTES_PER_LOGIT` per logit next to the kept hidden states (``T d`` elements), a peak of its own;
    before, the fp32 logits (``4 S V``) added to the forward pass's peak."""
    s = min(sequences, tokens)
    if band == "0.12":
        return tokens * d_model * p + SAMPLER_BYTES_PER_LOGIT * s * vocab, True
    return 4 * s * vocab, False


def activation_peak_bytes(cfg: ModelConfig, tokens: int = 8192, sequences: int = 256, dtype: str = "bf16",
                          tp: int = 1, *, logits: bool = True, band: str = DEFAULT_BAND,
                          max_model_len: int | None = None) -> float:
    r"""The activation peak of vLLM's profiling run (``gpu_model_runner.profile_run``) over ``tokens`` batched
    tokens (``max_num_batched_tokens``) and ``sequences`` sampled rows (``max_num_seqs``) on one GPU of a
    tensor-parallel group of ``tp``, for the release band ``band`` (:data:`VLLM_BANDS`).

    The forward pass: the largest set of tensors alive at once in one layer, the residual stream and its normalised
    copy (:math:`2 T d_\text{model}`) plus the wider of the attention intermediates (q, k, v and the attention
    output, :math:`T (2h + 2h_{kv}) d_k / t`), a dense feed-forward block's (gate and up outputs and the activated
    product, :math:`3 T w / t`) and, in a mixture-of-experts layer, the fused-MoE kernel's workspaces (per token
    and routed expert: the gate/up output or the down output, whichever is wider, :math:`\max(2N, d)`, and the
    activated :math:`N`, ``N`` the expert width over ``t``), times the bytes per element.

    With ``logits`` (the last pipeline stage), the sampler's warm-up over :math:`S = \min(\text{sequences},
    T)` rows of the vocabulary (``_dummy_sampler_run``): from 0.12, a peak of its own,
    :math:`T d_\text{model} p + 38.4\,S\,n_\text{vocab}` (:data:`SAMPLER_BYTES_PER_LOGIT`), against which the
    forward pass's peak is compared; in 0.10-0.11 and V0 the fp32 logits :math:`4 S n_\text{vocab}` on top of the
    forward pass. V0 profiles ``max(max_model_len, tokens)`` tokens when chunked prefill is off.
    """
    tokens, sequences, tp = as_count(tokens, "tokens"), as_count(sequences, "sequences"), as_count(tp, "tp")
    if band not in VLLM_BANDS:
        raise ValueError(f"band must be one of {sorted(VLLM_BANDS)}, got {band!r}")
    p = bytes_per_element(dtype)
    if cfg.kv_lora_rank is not None:
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        attn = cfg.n_heads * (qk + cfg.qk_nope_head_dim + 2 * cfg.v_head_dim) + cfg.kv_lora_rank
    else:
        attn = (2 * cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim
    widest = attn / tp
    for i in range(cfg.n_layers):
        if cfg.is_moe_layer(i):
            n = cfg.moe_d_ff / tp
            moe = cfg.n_experts_per_tok * (max(2 * n, cfg.d_model) + n) + 3 * cfg.shared_d_ff / tp
            widest = max(widest, moe)
        else:
            widest = max(widest, 3 * cfg.d_ff / tp)
    t_fwd = _profile_tokens(tokens, band, max_model_len)
    forward = t_fwd * (2 * cfg.d_model + widest) * p
    if not logits:
        return forward
    sampler, alone = _sampler_peak(tokens, sequences, cfg.d_model, cfg.vocab_size, p, band)
    return max(forward, sampler) if alone else forward + sampler


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
    cache_sequences_per_replica: int = 0  #: full-length sequences one replica's cache holds (before max_num_seqs)
    max_num_seqs: int | None = None  #: the engine's limit on sequences running at once (None: not applied)
    waiting_users: int = 0  #: users left waiting on the replicas the cache alone would call for (max_num_seqs)
    spare_bytes_per_gpu: float = 0.0  #: room left on the busiest GPU once the busiest replica's cache is held
    kv_bytes_per_sequence_per_gpu: float = 0.0  #: what one sequence reserves on that GPU


def _stage_loads(cfg: ModelConfig, t: int, stages: list[range], context: int, dtype: str, kv_dtype: str,
                 replicate_weights: bool, layer_rate: float | None = None,
                 tokens_for: Callable[[int | None], int] | None = None) -> list[tuple[float, float, bool]]:
    """Per stage: (weight bytes per GPU, KV bytes per sequence per GPU, is last stage). ``layer_rate``: bytes per
    parameter of the decoder layers when they are stored quantised (the token table and head then stay at
    ``dtype``). ``tokens_for(window)``: the tokens a layer with that window caches per sequence (default
    :func:`~lib.planner.cache.cached_tokens`; vLLM's admission uses :func:`reserved_tokens`)."""
    if tokens_for is None:
        def tokens_for(w: int | None) -> int:
            return cached_tokens(context, w)
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
        kv = per_layer_kv * share * sum(tokens_for(windows[i]) for i in layers)
        out.append((w, kv, last))
    return out


#: (weight bytes per GPU, cache bytes per sequence per GPU, is last stage) of each pipeline stage
StageLoads = Callable[[int, list[range]], list[tuple[float, float, bool]]]


def _search(*, n_layers: int, tp_degrees: list[int], loads: StageLoads, total_bytes: float, users: int,
            context: int, gpu_memory_bytes: int, fraction: float, overhead: Callable[[int, bool], float],
            max_tp: int, max_pp: int, seq_cap: int | None = None, overhead_pp: Callable | None = None) -> GPUPlan:
    """The fewest GPUs over every valid (tp, pp); ``overhead(t, last_stage)`` gives the bytes subtracted per GPU and
    ``loads(t, stages)`` what each stage holds. Shared by the hand-written description and the engine's.
    ``seq_cap``: the engine's ``max_num_seqs``, the most sequences a replica runs at once, whatever its cache
    holds. ``overhead_pp(t, pp, last_stage)``, where given, replaces ``overhead`` (non-torch memory depends on
    whether a replica spans several GPUs)."""
    naive = naive_gpu_count(total_bytes, gpu_memory_bytes)
    best: GPUPlan | None = None
    for pp in range(1, min(max_pp, n_layers) + 1):
        stages = pp_layer_partition(n_layers, pp)
        for t in tp_degrees:
            seqs, worst = None, None
            for w, kv, last in loads(t, stages):
                over = overhead_pp(t, pp, last) if overhead_pp is not None else overhead(t, last)
                room = fraction * gpu_memory_bytes - over - w
                if room < kv or kv <= 0:
                    seqs = 0
                    break
                s = int(room // kv)
                if seqs is None or s < seqs:
                    seqs, worst = s, (w, kv, over, room)
            if not seqs:
                continue
            cache_seqs = seqs
            if seq_cap is not None:
                seqs = min(seqs, seq_cap)
            replicas = math.ceil(users / seqs)
            busiest = math.ceil(users / replicas)
            w, kv, over, room = worst
            waiting = max(0, users - math.ceil(users / cache_seqs) * seqs)
            plan = GPUPlan(replicas * t * pp, t, replicas, seqs, fraction * gpu_memory_bytes - over, w,
                           busiest * kv, naive, pp, over, cache_seqs, seq_cap, waiting, room - busiest * kv, kv)
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
          layer_rate: float | None = None, weights_bytes: float | None = None,
          tokens_for: Callable[[int | None], int] | None = None, seq_cap: int | None = None,
          overhead_pp: Callable | None = None) -> GPUPlan:
    """:func:`_search` over the hand-written description ``cfg``."""
    w = parameter_count(cfg).total * bytes_per_element(dtype) if weights_bytes is None else weights_bytes
    total = w + model_kv_cache_bytes(cfg, context, users, kv_dtype)
    return _search(n_layers=cfg.n_layers, tp_degrees=valid_tp_degrees(cfg.n_heads, cfg.n_kv_heads, max_tp),
                   loads=lambda t, stages: _stage_loads(cfg, t, stages, context, dtype, kv_dtype, replicate_weights,
                                                        layer_rate, tokens_for),
                   total_bytes=total, users=users, context=context, gpu_memory_bytes=gpu_memory_bytes,
                   fraction=fraction, overhead=overhead, max_tp=max_tp, max_pp=max_pp, seq_cap=seq_cap,
                   overhead_pp=overhead_pp)


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


#: The vLLM release band whose defaults and accounting the plans follow unless told (``--vllm-version``).
VLLM_VERSION = VLLM_BANDS[DEFAULT_BAND]
_BIG_GPU = 70 * GiB  #: vLLM's threshold for its larger batch defaults (device total, by torch)


def vllm_batch_defaults(device_total_bytes: int, device_name: str = "", entry: str = "server") -> tuple[int, int]:
    """vLLM's defaults ``(max_num_batched_tokens, max_num_seqs)`` for a card, as the V1 engine sets them (0.9 on).

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
    """The engine settings a serving plan assumes, each named in the report. The defaults are the newest band's
    (:data:`VLLM_BANDS`) for its API server on a card of at least 70 GiB other than an A100 (an H100, H200,
    B200); :meth:`vllm_defaults` gives them for any card."""

    gpu_memory_utilization: float = 0.9  #: vLLM --gpu-memory-utilization (default 0.9)
    max_num_batched_tokens: int = 8192  #: vLLM --max-num-batched-tokens: tokens in the profiling forward pass
    max_num_seqs: int = 1024  #: vLLM --max-num-seqs: sampled rows profiled, and the most sequences run at once
    #: memory outside PyTorch per GPU; None: vLLM's V1 figure for the replica's size (:func:`non_torch_bytes`)
    non_torch_bytes: int | None = None
    vllm_version: str = DEFAULT_BAND  #: release band (:data:`VLLM_BANDS`); any release name is mapped to its band
    block_size: int = 16  #: vLLM --block-size (tokens per cache block; a sliding window reserves one block more)
    max_model_len: int | None = None  #: vLLM --max-model-len (V0 profiles that many tokens); None: the context

    @property
    def band(self) -> str:
        return vllm_band(self.vllm_version)

    def non_torch(self, gpus_in_group: int = 1) -> int:
        """The non-torch bytes per GPU for a replica of ``gpus_in_group`` GPUs."""
        return non_torch_bytes(gpus_in_group) if self.non_torch_bytes is None else self.non_torch_bytes

    @classmethod
    def vllm_defaults(cls, device_total_bytes: int, device_name: str = "", entry: str = "server",
                      **settings: object) -> ServingAssumptions:
        """vLLM's batch defaults for this card (:func:`vllm_batch_defaults`), other settings as given."""
        tokens, seqs = vllm_batch_defaults(device_total_bytes, device_name, entry)
        return cls(**{"max_num_batched_tokens": tokens, "max_num_seqs": seqs, **settings})

    def describe(self) -> list[str]:
        nt = (f"non-torch memory {self.non_torch_bytes / GiB:.2f} GiB per GPU (given)" if self.non_torch_bytes
              is not None else f"non-torch memory {NON_TORCH_ALONE / GiB:.2f} GiB per GPU alone,"
              f" {NON_TORCH_PARALLEL / GiB:.2f} GiB when a replica spans several GPUs (vLLM's V1 figures on H100)")
        return [
            f"gpu_memory_utilization {self.gpu_memory_utilization} bounds weights + activations + non-torch memory"
            " + KV cache together (vLLM's accounting)",
            f"activation peak of vLLM's profiling run for {VLLM_BANDS[self.band]}: a forward pass of"
            f" {self.max_num_batched_tokens} batched tokens and the sampler's warm-up over {self.max_num_seqs}"
            " rows of the vocabulary",
            nt,
            f"at most max_num_seqs = {self.max_num_seqs} sequences run at once per replica; a sliding-window layer"
            f" reserves min(window - 1 + {self.max_num_batched_tokens}, context) tokens plus a block of"
            f" {self.block_size} per sequence",
            "CUDA graphs: before vLLM 0.21 outside this budget, captured after the cache is sized (-0.9 to +1.0"
            " GiB in the H100 logs): leave that headroom below 1 - gpu_memory_utilization; from 0.21 vLLM estimates"
            " them while profiling and takes them out of the budget (not modelled here)",
            f"the validation logs put these terms within {MODEL_ERROR_BYTES / GiB:.2f} GiB per GPU of vLLM's own;"
            " quantised weights counted with their scales as the checkpoint stores them",
        ]


def serving_plan(cfg: ModelConfig, *, users: int, context: int, gpu_memory_bytes: int, dtype: str = "bf16",
                 kv_dtype: str | None = None, assumptions: ServingAssumptions | None = None, max_tp: int = 64,
                 max_pp: int = 1, layer_rate: float | None = None, weights_bytes: float | None = None) -> GPUPlan:
    """The fewest GPUs under vLLM's memory accounting (module docstring): per GPU, ``utilization × memory`` minus
    the weights, :func:`activation_peak_bytes` (the sampler on the last pipeline stage only) and the non-torch
    memory (:func:`non_torch_bytes`) is the KV budget; each sequence reserves ``context`` tokens in a full layer
    and :func:`reserved_tokens` in a sliding-window layer, and a replica runs at most ``max_num_seqs`` sequences.
    ``max_pp=1``: tensor parallelism only; larger: tensor × pipeline plans too."""
    a = assumptions or ServingAssumptions()
    as_fraction(a.gpu_memory_utilization, "gpu_memory_utilization")
    users, context = as_count(users, "users"), as_count(context, "context")
    gpu_memory_bytes = as_count(gpu_memory_bytes, "gpu_memory_bytes")
    max_tp, max_pp = as_count(max_tp, "max_tp"), as_count(max_pp, "max_pp")
    kv_dtype = dtype if kv_dtype is None else kv_dtype
    bytes_per_element(kv_dtype)
    band, mml = a.band, a.max_model_len or context

    def overhead_pp(t: int, pp: int, last: bool) -> float:
        act = activation_peak_bytes(cfg, a.max_num_batched_tokens, a.max_num_seqs, dtype, t, logits=last,
                                    band=band, max_model_len=mml)
        return act + a.non_torch(t * pp)

    return _plan(cfg, users=users, context=context, gpu_memory_bytes=gpu_memory_bytes,
                 fraction=a.gpu_memory_utilization, overhead=lambda t, last: overhead_pp(t, 1, last), dtype=dtype,
                 kv_dtype=kv_dtype, replicate_weights=False, max_tp=max_tp, max_pp=max_pp, layer_rate=layer_rate,
                 weights_bytes=weights_bytes, seq_cap=a.max_num_seqs, overhead_pp=overhead_pp,
                 tokens_for=lambda w: reserved_tokens(context, w, a.max_num_batched_tokens, a.block_size))


def _engine_stage_loads(em: EngineModel, t: int, stages: list[range], context: int, dtype: str,
                        kv_dtype: str, stored: tuple[list[float], float, float] | None = None,
                        tokens_for: Callable[[int | None], int] | None = None) -> list[tuple[float, float, bool]]:
    """Per stage of the engine's description: (weight bytes per GPU, cache bytes per sequence per GPU, is last).

    The same rules as the hand-written description's: every matrix split ``t`` ways, key/value projections and
    their cache replicated on ``t / n_kv_heads`` GPUs when ``t`` exceeds the key/value heads, a latent cached whole
    on every GPU; a recurrent layer's fixed state split like its heads. ``stored``: (bytes of each layer, before
    the layers, after them) as a quantised checkpoint stores them (:func:`lib.planner.engine.weight_bytes`)."""
    p, p_kv = bytes_per_element(dtype), bytes_per_element(kv_dtype)
    latent = any(layer.kind == "latent" for layer in em.layers)
    if tokens_for is None:
        def tokens_for(w: int | None) -> int:
            return cached_tokens(context, w)

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
        kv = sum(layer.kv_per_token * tokens_for(layer.window) * (1.0 if latent else rep(layer) / t)
                 for layer in layers) * p_kv
        kv += sum(layer.state - layer.conv_channels for layer in layers) * p_kv / t  # vLLM: kernel - 1 columns
        out.append((n / t, kv, last))
    return out


def engine_activation_peak_bytes(em: EngineModel, tokens: int = 8192, sequences: int = 256, dtype: str = "bf16",
                                 tp: int = 1, *, logits: bool = True, band: str = DEFAULT_BAND,
                                 max_model_len: int | None = None) -> float:
    r"""The activation estimate of :func:`activation_peak_bytes` for a model read by the engine: the residual stream
    and its normalised copy (:math:`2 T d_\text{model}`) plus the widest block of any layer, its active parameters
    divided by :math:`d_\text{model}` (the outputs per token of its matrices: :math:`(2h + 2h_{kv}) d_k` for
    attention, :math:`3w` for a gated feed-forward block of width :math:`w`), split over ``tp``; plus, on the last
    stage, the sampler's warm-up as :func:`activation_peak_bytes` models it for ``band``."""
    tokens, sequences, tp = as_count(tokens, "tokens"), as_count(sequences, "sequences"), as_count(tp, "tp")
    if band not in VLLM_BANDS:
        raise ValueError(f"band must be one of {sorted(VLLM_BANDS)}, got {band!r}")
    p = bytes_per_element(dtype)
    inner = max(layer.widest for layer in em.layers) / tp
    forward = _profile_tokens(tokens, band, max_model_len) * (2 * em.d_model + inner) * p
    if not logits:
        return forward
    sampler, alone = _sampler_peak(tokens, sequences, em.d_model, em.vocab_size, p, band)
    return max(forward, sampler) if alone else forward + sampler


def engine_plan(em: EngineModel, *, users: int, context: int, gpu_memory_bytes: int, dtype: str = "bf16",
                kv_dtype: str | None = None, assumptions: ServingAssumptions | None = None,
                overhead_bytes: float | None = None, max_tp: int = 64, max_pp: int = 1,
                stored: tuple[list[float], float, float] | None = None) -> GPUPlan:
    """:func:`serving_plan` (or, with ``overhead_bytes``, :func:`plan_gpus`) for a model the engine read: the same
    search over tensor-parallel degrees (which must divide the attention heads) and pipeline stages, each stage
    holding its layers' parameters, per-token cache (each layer with its window: vLLM's reservation,
    :func:`reserved_tokens`, under vLLM's accounting) and recurrent state."""
    a = assumptions or ServingAssumptions()
    fraction = as_fraction(a.gpu_memory_utilization, "gpu_memory_utilization")
    users, context = as_count(users, "users"), as_count(context, "context")
    gpu_memory_bytes = as_count(gpu_memory_bytes, "gpu_memory_bytes")
    max_tp, max_pp = as_count(max_tp, "max_tp"), as_count(max_pp, "max_pp")
    kv_dtype = dtype if kv_dtype is None else kv_dtype
    p_kv = bytes_per_element(kv_dtype)
    band, mml = a.band, a.max_model_len or context
    if overhead_bytes is None:
        def overhead_pp(t: int, pp: int, last: bool) -> float:
            act = engine_activation_peak_bytes(em, a.max_num_batched_tokens, a.max_num_seqs, dtype, t, logits=last,
                                               band=band, max_model_len=mml)
            return act + a.non_torch(t * pp)

        def tokens_for(w: int | None) -> int:
            return reserved_tokens(context, w, a.max_num_batched_tokens, a.block_size)
        cap = a.max_num_seqs
    else:
        fixed = as_nonneg_bytes(overhead_bytes, "overhead_bytes")

        def overhead_pp(t: int, pp: int, last: bool) -> float:
            return fixed

        def tokens_for(w: int | None) -> int:
            return cached_tokens(context, w)
        cap = None
    per_seq = sum(layer.kv_per_token * tokens_for(layer.window) + layer.state - layer.conv_channels
                  for layer in em.layers)
    weights = em.total * bytes_per_element(dtype) if stored is None else sum(stored[0]) + stored[1] + stored[2]
    total = weights + users * per_seq * p_kv
    degrees = valid_tp_degrees(em.n_heads, em.n_kv_heads, max_tp) if em.n_heads else [1]
    return _search(n_layers=len(em.layers), tp_degrees=degrees,
                   loads=lambda t, stages: _engine_stage_loads(em, t, stages, context, dtype, kv_dtype, stored,
                                                               tokens_for),
                   total_bytes=total, users=users, context=context, gpu_memory_bytes=gpu_memory_bytes,
                   fraction=fraction, overhead=lambda t, last: overhead_pp(t, 1, last), max_tp=max_tp,
                   max_pp=max_pp, seq_cap=cap, overhead_pp=overhead_pp)


def kv_available_plan(model: ModelConfig | EngineModel, kv_available_bytes: float | list[float], *, users: int,
                      context: int,
                      tp: int = 1, pp: int = 1, kv_dtype: str = "bf16",
                      assumptions: ServingAssumptions | None = None) -> GPUPlan:
    """A plan from the "Available KV cache memory" a running vLLM printed for one GPU of a replica of ``tp`` ×
    ``pp`` GPUs: no weights, activation or non-torch estimate, only the cache each sequence reserves on the busiest
    stage (:func:`reserved_tokens` for windowed layers) and the ``max_num_seqs`` limit. The per-GPU figures other
    than the cache are zero (the log's number already has them taken out). With pipeline stages, one figure per
    stage may be given (each worker prints its own; the engine takes the fewest blocks)."""
    a = assumptions or ServingAssumptions()
    by_stage = [as_nonneg_bytes(b, "kv_available_bytes") for b in
                (kv_available_bytes if isinstance(kv_available_bytes, (list, tuple)) else [kv_available_bytes] * pp)]
    if len(by_stage) != pp:
        raise ValueError(f"{len(by_stage)} KV figures for {pp} pipeline stages")
    users, context = as_count(users, "users"), as_count(context, "context")
    tp, pp = as_count(tp, "tp"), as_count(pp, "pp")

    def tokens_for(w: int | None) -> int:
        return reserved_tokens(context, w, a.max_num_batched_tokens, a.block_size)
    if isinstance(model, EngineModel):
        stages = pp_layer_partition(len(model.layers), pp)
        loads = _engine_stage_loads(model, tp, stages, context, kv_dtype, kv_dtype, None, tokens_for)
    else:
        _check_tp(model, tp)
        stages = pp_layer_partition(model.n_layers, pp)
        loads = _stage_loads(model, tp, stages, context, kv_dtype, kv_dtype, False, None, tokens_for)
    (kv_available_bytes, kv), cache_seqs = min(
        (((b, kv_seq), int(b // kv_seq) if kv_seq > 0 else 0) for b, (_, kv_seq, _) in zip(by_stage, loads,
                                                                                           strict=True)),
        key=lambda t: t[1])
    if cache_seqs < 1:
        raise ValueError(f"{kv_available_bytes / GiB:.2f} GiB of KV cache per GPU holds no sequence of {context}"
                         f" tokens ({kv / GiB:.3f} GiB per sequence per GPU): vLLM refuses this max_model_len")
    seqs = min(cache_seqs, a.max_num_seqs)
    replicas = math.ceil(users / seqs)
    busiest = math.ceil(users / replicas)
    waiting = max(0, users - math.ceil(users / cache_seqs) * seqs)
    return GPUPlan(replicas * tp * pp, tp, replicas, seqs, kv_available_bytes, 0.0, busiest * kv,
                   replicas * tp * pp, pp, 0.0, cache_seqs, a.max_num_seqs, waiting,
                   kv_available_bytes - busiest * kv, kv)


def sequence_range(plan: GPUPlan, error_bytes: float = MODEL_ERROR_BYTES) -> tuple[int, int]:
    """The sequences one replica's cache holds if the subtracted terms are off by ``error_bytes`` per GPU either
    way (before ``max_num_seqs``)."""
    kv = plan.kv_bytes_per_sequence_per_gpu
    if kv <= 0:
        return plan.cache_sequences_per_replica, plan.cache_sequences_per_replica
    room = plan.spare_bytes_per_gpu + plan.kv_bytes_per_gpu
    return max(0, int((room - error_bytes) // kv)), int((room + error_bytes) // kv)


def fit_verdict(plan: GPUPlan, error_bytes: float = MODEL_ERROR_BYTES) -> str:
    """One line on how sure the plan is: the room it leaves on the busiest GPU against the model's error per GPU
    (:data:`MODEL_ERROR_BYTES`): "fits with X GiB to spare" when the spare room exceeds the error, "...: within
    the model's error" when it does not (vLLM may hold fewer sequences, or refuse), with the range of sequences
    per replica the error allows."""
    spare = plan.spare_bytes_per_gpu
    lo, hi = sequence_range(plan, error_bytes)
    text = f"fits with {spare / GiB:,.2f} GiB to spare per GPU"
    if spare < error_bytes:
        text += ": within the model's error"
    if lo != hi:
        text += (f"; the cache holds {lo:,} to {hi:,} sequences per replica within"
                 f" {error_bytes / GiB:.2f} GiB per GPU")
    return text
