"""Pitfalls of cost and scale: FLOPs, the KV cache, and how long a sequence fits with or without tiling.

GPU memory is the CUDA runtime's total (``torch.cuda.mem_get_info``), the planner's :attr:`GPU.plan_bytes`, as
everywhere in the book: 81,089 MiB for an H100 80GB, not nvidia-smi's 81,559.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np

import lib.attention as att
import lib.flops as fl
import lib.sizing as sz
from lib.book.fmt import agree, count, fixed, percent
from lib.constants import BYTES_PER_DTYPE, FLOPS_PER_MAC, GB, GiB, KiB
from lib.planner import training as T
from lib.planner.config import load_config
from lib.planner.gpus import GPUS
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
    memory, but the model does not split evenly over three: tensor parallelism must divide the 32 heads, and a
    three-stage pipeline puts 11 of the 32 layers on one card. An engine keeping 90% of each card needs four."""
    llama = load_config(LLAMA)
    cache = sz.kv_cache_bytes(int(sz.mha_kv_cache_bytes_per_token(32, 4096, 32, "fp16")), 2048, sequences=200)
    total = cache + sz.weight_bytes(llama_params(), "fp16")
    base = dict(users=200, context=2048, gpu_memory_bytes=H100, dtype="fp16")
    engine = sz.ServingAssumptions()
    plan = sz.serving_plan(llama, **base, assumptions=engine)
    assert sz.naive_gpu_count(total, H100) == 3 and total < 3 * engine.gpu_memory_utilization * H100
    assert sz.plan_gpus(llama, **base, memory_fraction=1.0, max_pp=8).gpus == 3  # all of each card: a pipeline
    assert sz.plan_gpus(llama, **base, memory_fraction=engine.gpu_memory_utilization, max_pp=8).gpus == 4
    assert plan.gpus == 4 and 3 not in sz.valid_tp_degrees(32, 32)
    stage = math.ceil(llama.n_layers / 3)
    assert stage / llama.n_layers * total > engine.gpu_memory_utilization * H100  # that card's share of the bytes
    return {"users": count(base["users"]), "context": count(base["context"]),
            "total": fixed(total / GiB, 2), "gpu": fixed(H100 / GiB, 2), "heads": count(32),
            "stage": count(stage), "layers": count(llama.n_layers),
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


@pitfall("train-memory")
def training_length() -> dict[str, str]:
    """The n x n weights are not what limits training: every layer's, beside Llama 2 7B's fp16 weights, fill an
    H100 only at 5,910 tokens, while the model states (mixed-precision AdamW, sharded by ZeRO-3 over eight GPUs)
    and the other eager activations of one sequence leave room for 2,950."""
    shape = T.llama_shape(json.loads(LLAMA.read_text()))
    n_params = shape.parameters()
    states = sum(T.state_bytes(n_params, "adamw").values())
    free = H100 - sum(T.zero_state_bytes(n_params, "adamw", 3, 8).values())
    lo, hi = 1, 1 << 17  # activations grow with n: the longest n that fits, by bisection
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if T.llama_activation_bytes(shape, 1, mid, 2, "eager")["total"] <= free else (lo, mid)
    stored = longest_stored_n(32 * 32, BYTES_PER_DTYPE["fp16"], H100, llama_weight_bytes())
    assert states > H100 and 2_000 < lo < 4_000 and 5_000 < stored < 8_000
    return {"states": fixed(states / GB, 1), "zero3": count(lo), "stored": count(stored)}


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
    return {"heads": count(heads), "heads32": count(fits[heads]), "head1": count(fits[1])}
