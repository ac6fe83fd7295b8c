"""Pitfalls of cost and scale: FLOPs, the KV cache, decode speed, planning a deployment, and how long a sequence
fits with or without tiling.

GPU memory is the CUDA runtime's total (``torch.cuda.mem_get_info``), the planner's :attr:`GPU.plan_bytes`, as
everywhere in the book: 81,089 MiB for an H100 80GB, not nvidia-smi's 81,559.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction

import numpy as np

import lib.attention as att
import lib.flops as fl
import lib.sizing as sz
import lib.speed as speed
from lib.book.fmt import agree, count, fixed, percent
from lib.constants import BYTES_PER_DTYPE, FLOPS_PER_MAC, GB, GiB, KiB
from lib.planner import training as T
from lib.planner.config import load_config
from lib.planner.gpus import GPUS, roofline
from lib.tiled import tiled_attention

from . import FIXTURES, TOL, longest_stored_n, pitfall

H100 = GPUS["H100-80GB"].plan_bytes
LLAMA = FIXTURES / "Llama-2-7b-hf.config.json"

# Compute


@pitfall("flops")
def macs_not_flops() -> dict[str, str]:
    """2 n^2 d and 8 n d^2 count multiply-adds; in FLOPs both double, and the crossover n = 4d stays."""
    n, d = 2048, 4096
    lf = fl.layer_flops(n, d, 32, 4 * d)
    assert lf.scores == FLOPS_PER_MAC * 2 * n**2 * d and lf.ffn == FLOPS_PER_MAC * 8 * n * d**2
    assert fl.crossover_length(d) == 4 * d
    return {"crossover": count(fl.crossover_length(d))}


@pitfall("flops")
def projections_count() -> dict[str, str]:
    """Counting the projections, attention overtakes the FFN at n = 2d, and doubling n from 2,048 to 4,096
    multiplies the sub-layer by exactly 12/5 at d = 4096, not 4 (the flops chapter's numbers)."""
    d, lo, hi = 4096, 2048, 4096
    lf = {n: fl.layer_flops(n, d, 32, 4 * d) for n in (lo, hi)}
    with_proj = fl.crossover_length(d, include_projections=True)
    ratio = Fraction(int(lf[hi].attention), int(lf[lo].attention))
    assert with_proj == 2 * d and lf[hi].scores == 4 * lf[lo].scores and ratio == Fraction(12, 5)
    return {"scores_only": count(fl.crossover_length(d)), "with_proj": count(with_proj),
            "ratio": fixed(float(ratio), 1), "scores_ratio": count(lf[hi].scores // lf[lo].scores),
            "lo": count(lo), "hi": count(hi)}


# The KV cache


def llama_params() -> int:
    return sz.parameter_count(load_config(LLAMA)).total


@pitfall("kv-cache")
def seven_billion() -> dict[str, str]:
    """Llama 2 7B has 6,738,415,616 parameters: 12.55 GiB in fp16, not the 13.04 of a round 7e9."""
    n = llama_params()
    assert n == 6_738_415_616 and fixed(sz.weight_bytes(7 * 10**9, "fp16") / GiB, 2) == "13.04"
    return {"params": count(n), "gib": fixed(sz.weight_bytes(n, "fp16") / GiB, 2)}


@pitfall("kv-cache")
def even_split() -> dict[str, str]:
    """Weights plus the cache of 200 conversations of 2,048 tokens, 212.55 GiB, are less than three H100s'
    memory, yet an engine keeping 90% of each card needs four: tensor parallelism must divide the 32 heads (3 does
    not), and a three-stage pipeline splits the 32 layers 11, 11, 10, its 11-layer stage needing 73.06 GiB of the
    bytes against the 71.27 GiB the engine keeps (the kv_cache chapter's reasoning and numbers)."""
    llama = load_config(LLAMA)
    cache = sz.kv_cache_bytes(int(sz.mha_kv_cache_bytes_per_token(32, 4096, 32, "fp16")), 2048, sequences=200)
    total = cache + sz.weight_bytes(llama_params(), "fp16")
    base = dict(users=200, context=2048, gpu_memory_bytes=H100, dtype="fp16")
    engine = sz.ServingAssumptions()
    kept = engine.gpu_memory_utilization * H100
    plan = sz.serving_plan(llama, **base, assumptions=engine)
    assert sz.naive_gpu_count(total, H100) == 3 and total < 3 * kept
    assert sz.plan_gpus(llama, **base, memory_fraction=1.0, max_pp=8).gpus == 3  # all of each card: a pipeline
    assert sz.plan_gpus(llama, **base, memory_fraction=engine.gpu_memory_utilization, max_pp=8).gpus == 4
    assert plan.gpus == 4 and 3 not in sz.valid_tp_degrees(32, 32)
    stages = [len(range(i, llama.n_layers, 3)) for i in range(3)]  # the layers dealt out as evenly as they go
    assert stages == [11, 11, 10] and sum(stages) == llama.n_layers
    stage_bytes = max(stages) / llama.n_layers * total  # the busiest card's share of weights and cache
    assert stage_bytes > kept > min(stages) / llama.n_layers * total  # only the 11-layer stages overflow
    return {"users": count(base["users"]), "context": count(base["context"]),
            "total": fixed(total / GiB, 2), "gpu": fixed(H100 / GiB, 2), "heads": count(llama.n_heads),
            "layers": count(llama.n_layers), "split": ", ".join(count(k) for k in stages),
            "stage": count(max(stages)), "stage_gib": fixed(stage_bytes / GiB, 2), "kept_gib": fixed(kept / GiB, 2),
            "util": percent(engine.gpu_memory_utilization, 0), "gpus": count(plan.gpus)}


@pitfall("kv-cache")
def shared_kv_heads() -> dict[str, str]:
    """The per-token cache is 2 L d_model bytes-per-value only when every query head has its own K and V."""
    mha = int(sz.mha_kv_cache_bytes_per_token(32, 4096, 32, "fp16"))
    gqa = int(sz.kv_cache_bytes_per_token(32, 8, 128, "fp16"))  # Mistral 7B: 8 KV heads of 128
    assert mha == 4 * gqa == 512 * KiB
    return {"gqa_kib": count(gqa // KiB), "ratio": count(mha // gqa)}


@pitfall("kv-cache")
def int8_scales() -> dict[str, str]:
    """An int8 cache at 4,096 tokens equals fp16 at 2,048 only if no scales are stored (Llama 2 7B: 32 heads of
    d_k = 128, 32 layers, 200 sequences)."""
    total = sz.kv_cache_bytes(sz.mha_kv_cache_bytes_per_token(32, 4096, 32, "int8"), 4096, sequences=200)
    fp16 = sz.kv_cache_bytes(sz.mha_kv_cache_bytes_per_token(32, 4096, 32, "fp16"), 2048, sequences=200)
    scales = 200 * 4096 * 2 * 32 * 32 * BYTES_PER_DTYPE["fp16"]  # one fp16 scale per head, token, layer, K and V
    assert total == fp16 == 200 * GiB
    assert scales / total == 2 / 128  # one 2-byte scale per 128 one-byte values
    return {"extra": percent(scales / total, 2), "d_k": count(128)}


# How long a sequence fits


def llama_weight_bytes() -> int:
    return llama_params() * BYTES_PER_DTYPE["fp16"]


def longest_sequence(peak: Callable[[int], float], free: float) -> int:
    """The longest n whose step peak ``peak(n)`` (growing with n) fits in ``free`` bytes, by bisection."""
    lo, hi = 1, 1 << 17
    assert peak(lo) <= free < peak(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if peak(mid) <= free else (lo, mid)
    return lo


@pitfall("train-memory")
def training_length() -> dict[str, str]:
    """Eager attention keeps every score twice, the softmax's fp32 output and the bf16 probabilities (6 bytes,
    not 2): at the 2,931 tokens the step's peak allows one sequence of Llama 2 7B on an H100 (model states sharded
    by ZeRO-3 over eight GPUs, the train_memory chapter's peak), those n x n terms are three quarters of each
    layer's activations; a tiled kernel keeps none of them and the limit rises to 11,205 tokens."""
    shape = T.llama_shape(json.loads(LLAMA.read_text()))
    free = H100 - sum(T.zero_state_bytes(shape.parameters(), "adamw", 3, 8).values())
    eager, tiled = (longest_sequence(lambda n, a=a: T.llama_peak_bytes(shape, 1, n, 2, a)["peak"], free)
                    for a in ("eager", "flash"))
    layer = T.llama_layer_bytes(shape, 1, eager, 2, "eager")
    squares = layer["softmax output (fp32)"] + layer["probabilities (model dtype)"]
    per_score = Fraction(squares, shape.n_heads * eager**2)
    assert per_score == BYTES_PER_DTYPE["fp32"] + BYTES_PER_DTYPE["bf16"] == 6
    share = squares / layer["total"]
    flash = T.llama_layer_bytes(shape, 1, eager, 2, "flash")
    assert not any("softmax" in k or "probabilities" in k for k in flash)  # no n x n tensor kept
    # the limit the kept activations alone would give is longer: the peak comes in the backward pass
    kept = longest_sequence(lambda n: T.llama_activation_bytes(shape, 1, n, 2, "eager")["total"], free)
    assert 0.7 < share < 0.8 and eager < kept and 3.5 * eager < tiled
    return {"naive": count(BYTES_PER_DTYPE["bf16"]), "bytes": count(int(per_score)), "eager": count(eager),
            "share": percent(share, 0),
            "tiled": count(tiled)}


@pitfall("tiled-attention")
def quadratic_memory() -> dict[str, str]:
    """Time grows as n^2; memory only when the n x n weights are stored. At n = 10^4 one head's fp32 weights take
    0.4 GB; a tiled kernel holds 128 keys' scores at a time."""
    n, block = 10_000, 128
    d = 512
    assert fl.attention_score_flops(4096, d) == 4 * fl.attention_score_flops(2048, d)
    rng = np.random.default_rng(43)
    q, k, v = (rng.standard_normal((1024, 64)) for _ in range(3))
    agree(tiled_attention(q, k, v, block_size=block)[0], att.attention(q, k, v)[0], TOL)
    stored, tile = n * n, n * block
    assert tile < stored
    return {"n": count(n), "stored_gb": fixed(stored * BYTES_PER_DTYPE["fp32"] / GB, 1), "tile": count(tile),
            "block": count(block)}


@pitfall("tiled-attention")
def inference_length() -> dict[str, str]:
    """In inference only one layer's n x n weights are held at a time: beside Llama 2 7B's fp16 weights, its 32
    heads' weights fit an H100 up to n = 33,436, one head's up to 189,144."""
    heads = load_config(LLAMA).n_heads  # one layer's heads, 32
    fits = {h: longest_stored_n(h, BYTES_PER_DTYPE["fp16"], H100, llama_weight_bytes()) for h in (heads, 1)}
    assert fits[heads] == 33_436 and fits[1] == 189_144
    return {"bytes": count(BYTES_PER_DTYPE["fp16"]), "heads": count(heads), "heads32": count(fits[heads]),
            "head1": count(fits[1])}


# How fast


@pitfall("speed")
def decode_by_flops() -> dict[str, str]:
    """A decode step priced by its FLOPs: Llama 2 7B for one user at 2,048 tokens on an H100 does 14.3 GFLOP,
    about 14 us at the bf16 peak, but reads 14.3 GB, 4.3 ms at the bandwidth, about 300 times longer: bytes, not
    FLOPs, set the step (the speed chapter's opening numbers)."""
    llama = load_config(LLAMA)
    card = roofline("H100")
    pi, beta = card.peak("bf16"), card.bandwidth
    step = speed.decode_step(llama, 1, 2048)
    by_flops, by_bytes = step.flops / pi, step.bytes / beta
    assert step.time(pi, beta) == by_bytes > 100 * by_flops  # memory-bound, by two orders of magnitude
    assert step.intensity < speed.ridge_point(pi, beta) / 100
    return {"context": count(2048), "gflop": fixed(step.flops / 1e9, 1),
            "flops_us": fixed(1e6 * by_flops, 0), "gb": fixed(step.bytes / GB, 1), "ms": fixed(1e3 * by_bytes, 1),
            "ratio": count(round(by_bytes / by_flops, -1))}


# Planning a deployment: the capacity planner chapter's question (Mixtral 8x7B, 64 users of 8,192 tokens, bf16)

MIXTRAL = FIXTURES / "Mixtral-8x7B-v0.1.config.json"


@pitfall("capacity-planner")
def moe_active_memory() -> dict[str, str]:
    """A mixture of experts sized by its active parameters: Mixtral 8x7B runs 12.9 billion per token, but all
    46.7 billion sit in memory, 86.99 GiB in bf16, more than the 79.19 GiB an H100 gives a process."""
    params = sz.parameter_count(load_config(MIXTRAL))
    weights = sz.weight_bytes(params.total, "bf16")
    active = sz.weight_bytes(params.active, "bf16")
    assert params.total == 46_702_792_704 and params.active == 12_879_925_248
    assert active < H100 < weights  # the active parameters would fit one card; the stored ones do not
    return {"active": fixed(params.active / 1e9, 1), "total": fixed(params.total / 1e9, 1),
            "gib": fixed(weights / GiB, 2), "gpu": fixed(H100 / GiB, 2)}


@pitfall("capacity-planner")
def equal_gpus_equal_speed() -> dict[str, str]:
    """Two groups of two GPUs and one group of four cost the same, but not the same speed: serving the 64 users,
    each gets 7.7 tokens/s from the planner's two pairs and 9.8 from one group of four, where every GPU reads a
    quarter of the weights per step, not half (the capacity planner chapter's roofline and efficiencies)."""
    from lib.planner.cli import report
    from lib.planner.speed import describe, serve

    mixtral, users, context = load_config(MIXTRAL), 64, 8192
    r = report(mixtral, context=context, users=users, gpu_name="H100-80GB")
    assert r["speed"]["plan"] == {"tp_degree": 2, "pp_degree": 1, "replicas": 2, "sequences_per_replica": 32}
    sm, card = describe(r, mixtral), roofline("H100-80GB")
    n_in, n_out = r["speed"]["input_tokens"], r["speed"]["output_tokens"]
    tps = {t: serve(sm, card, tp=t, batch=users // (4 // t), n_in=n_in, n_out=n_out)["tokens_per_second_per_user"]
           for t in (2, 4)}  # four GPUs either way: two groups of 2 with 32 users each, or one group of 4 with 64
    assert tps[2] == r["speed"]["tokens_per_second_per_user"] and tps[4] > 1.2 * tps[2]
    return {"users": count(users), "pairs": fixed(tps[2], 1), "four": fixed(tps[4], 1)}
