"""lib.speed: arithmetic intensity, the roofline, decode and prefill steps of published configs, the experts a
batch touches, the knee fit, and the CPU probes (run small; no assertion on a time)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from lib import speed
from lib.planner import forward_flops, model_kv_bytes_per_sequence, parameter_count
from lib.planner.config import load_config

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def llama():
    return load_config(FIXTURES / "Llama-2-7b-hf.config.json")


@pytest.fixture(scope="module")
def mixtral():
    return load_config(FIXTURES / "Mixtral-8x7B-v0.1.config.json")


# ------------------------------------------------------------------------------------------------ intensity

@pytest.mark.parametrize("m,k,n,p", [(1, 4096, 4096, 2), (7, 3, 5, 4), (2048, 4096, 11008, 1), (3, 3, 3, 0.5)])
def test_matmul_counts_match_real_tensors(m, k, n, p):
    dtype = {4: torch.float32, 2: torch.bfloat16, 1: torch.int8}.get(p)
    assert speed.matmul_flops(m, k, n) == 2 * m * k * n
    if dtype is not None and m * k * n < 10**7:
        a, b = torch.zeros(m, k, dtype=dtype), torch.zeros(k, n, dtype=dtype)
        c = torch.zeros(m, n, dtype=dtype)
        assert speed.matmul_bytes(m, k, n, p) == a.nbytes + b.nbytes + c.nbytes
    assert speed.matmul_intensity(m, k, n, p) == pytest.approx(2 * m * k * n / (p * (m * k + k * n + m * n)))


def test_matmul_intensity_tends_to_2m_over_p_for_a_thin_batch():
    for m in (1, 2, 8):
        i = speed.matmul_intensity(m, 10**6, 10**6, 2)
        assert i == pytest.approx(m, rel=1e-4) and i < m  # just under: the x and y bytes
    # and grows without bound only as m does: a square product of side s has intensity 2s/(3p)
    assert speed.matmul_intensity(4096, 4096, 4096, 2) == pytest.approx(4096 / 3)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_matmul_refuses_bad_sizes(bad):
    with pytest.raises((ValueError, TypeError), match="m must be"):
        speed.matmul_flops(bad, 2, 2)


def test_attention_intensity_is_independent_of_the_context():
    for h, h_kv, p in [(32, 32, 2), (32, 8, 2), (64, 8, 1), (16, 1, 2)]:
        for n, d_k in [(1, 64), (100, 128), (4096, 128)]:
            flops = 2 * 2 * n * h * d_k  # q K^T and a V
            nbytes = 2 * n * h_kv * d_k * p
            assert speed.attention_decode_intensity(h, h_kv, p) == pytest.approx(flops / nbytes)
    with pytest.raises(ValueError, match="multiple"):
        speed.attention_decode_intensity(32, 6, 2)


# ------------------------------------------------------------------------------------------------ roofline

def test_roofline_time_is_the_larger_bound_and_the_ridge_separates_them():
    peak, bw = 1e12, 1e11
    assert speed.ridge_point(peak, bw) == 10
    assert speed.roofline_time(1e12, 1e9, peak, bw) == 1.0  # compute-bound
    assert speed.roofline_time(1e9, 1e11, peak, bw) == 1.0  # memory-bound
    for intensity in (1, 5, 10, 20, 100):
        nbytes = 1e9
        t = speed.roofline_time(intensity * nbytes, nbytes, peak, bw)
        memory_bound = t == nbytes / bw
        assert memory_bound == (intensity <= 10)
    with pytest.raises(ValueError):
        speed.roofline_time(-1, 1, peak, bw)
    with pytest.raises(ValueError, match="bandwidth"):
        speed.ridge_point(1, 0)


@pytest.mark.parametrize("p", [0.5, 1, 2, 4])
def test_the_knee_batch_balances_a_weight_product(p):
    peak, bw, n_weights = 989.5e12, 3.35e12, 7e9
    b = speed.decode_knee_batch(peak, bw, p)
    assert 2 * b * n_weights / peak == pytest.approx(p * n_weights / bw)
    assert speed.decode_knee_batch(peak, bw, 2) == pytest.approx(speed.ridge_point(peak, bw))


# ------------------------------------------------------------------------------------------------ experts

def test_expected_distinct_experts_limits_and_simulation():
    assert speed.expected_distinct_experts(8, 2, 0) == 0
    assert speed.expected_distinct_experts(8, 2, 1) == pytest.approx(2)
    assert speed.expected_distinct_experts(128, 8, 10**4) == pytest.approx(128)
    assert speed.expected_distinct_experts(4, 4, 3) == 4
    rng = np.random.default_rng(1)
    for e, k, b in [(8, 2, 3), (64, 6, 10), (256, 8, 32)]:
        hits = [len(np.unique(np.argsort(rng.random((b, e)), axis=1)[:, :k])) for _ in range(3000)]
        assert speed.expected_distinct_experts(e, k, b) == pytest.approx(np.mean(hits), rel=0.02)
    with pytest.raises(ValueError, match="top_k"):
        speed.expected_distinct_experts(4, 5, 1)
    with pytest.raises(ValueError, match="batch"):
        speed.expected_distinct_experts(4, 2, -1)


# ------------------------------------------------------------------------------------------------ model steps

def test_decode_step_of_a_dense_model(llama):
    pc = parameter_count(llama)
    for b, n in [(1, 1), (3, 2048), (64, 4096)]:
        s = speed.decode_step(llama, b, n)
        assert s.weight_bytes == 2 * (pc.total - pc.embedding)  # the untied input table is only looked up
        assert s.cache_bytes == b * model_kv_bytes_per_sequence(llama, n, "bf16")
        assert s.flops == b * forward_flops(llama, n).total
        assert s.intensity == pytest.approx(s.flops / (s.weight_bytes + s.cache_bytes))
    assert speed.decode_step(llama, 1, 2048, "int4", "bf16").weight_bytes == (pc.total - pc.embedding) / 2
    assert speed.decode_step(llama, 1, 2048, "bf16", "fp8").cache_bytes == 2048 * 2 * 32 * 4096


def test_decode_step_of_a_tied_model_reads_its_table():
    cfg = load_config(FIXTURES / "gemma-7b.config.json")
    assert cfg.tie_embeddings
    pc = parameter_count(cfg)
    assert speed.decode_step(cfg, 1, 16).weight_bytes == 2 * pc.active


def test_decode_step_of_a_mixture_of_experts(mixtral):
    pc = parameter_count(mixtral)
    one = speed.decode_step(mixtral, 1, 128)
    assert one.weight_bytes == pytest.approx(2 * (pc.active - pc.embedding))
    every = speed.decode_step(mixtral, 1, 128, expert_fraction=1.0)
    assert every.weight_bytes == pytest.approx(2 * (pc.total - pc.embedding))
    big = speed.decode_step(mixtral, 10**4, 128)
    assert big.weight_bytes == pytest.approx(every.weight_bytes)
    steps = [speed.decode_step(mixtral, b, 128).weight_bytes for b in (1, 2, 4, 8, 16)]
    assert all(x < y for x, y in zip(steps, steps[1:], strict=False))


def test_prefill_step_is_the_causal_sum(llama):
    n = 300
    s = speed.prefill_step(llama, n)
    lin = forward_flops(llama, 1, include_lm_head=False)
    per_key = lin.attention  # one key at context 1
    head = forward_flops(llama, 1).total - lin.total
    expected = n * (lin.total - per_key) + per_key * n * (n + 1) // 2 + head
    assert s.flops == pytest.approx(expected, rel=1e-12)
    assert s.cache_bytes == model_kv_bytes_per_sequence(llama, n, "bf16")
    assert s.weight_bytes == speed.decode_step(llama, 1, n).weight_bytes


def test_knee_with_a_cache(llama, mixtral):
    peak, bw = 989.5e12, 3.35e12
    b = speed.decode_knee_batch_with_cache(llama, 16, peak, bw)
    s = speed.decode_step(llama, 1, 16)
    assert b * s.flops / peak == pytest.approx((s.weight_bytes + b * s.cache_bytes) / bw)
    assert b > speed.decode_knee_batch(peak, bw, 2)  # the cache delays the knee
    assert speed.decode_knee_batch_with_cache(llama, 4096, peak, bw) == math.inf
    with pytest.raises(ValueError, match="mixture of experts"):
        speed.decode_knee_batch_with_cache(mixtral, 16, peak, bw)


# ------------------------------------------------------------------------------------------------ the fit

@pytest.mark.parametrize("knee", [3.0, 20.0, 90.0])
def test_fit_roofline_recovers_a_knee(knee):
    batches = [1, 2, 4, 8, 16, 32, 64, 128]
    flat = 0.04
    times = np.maximum(flat, flat / knee * np.array(batches, dtype=float))
    fit = speed.fit_roofline(batches, times)
    assert fit.knee == pytest.approx(knee, rel=0.01)
    assert fit.flat == pytest.approx(flat, rel=0.01)
    np.testing.assert_allclose(fit(batches), times, rtol=0.02)
    noisy = times * np.exp(np.random.default_rng(0).normal(0, 0.05, len(times)))
    assert speed.fit_roofline(batches, noisy).knee == pytest.approx(knee, rel=0.3)


def test_fit_roofline_refuses_bad_input():
    with pytest.raises(ValueError, match="at least 3"):
        speed.fit_roofline([1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        speed.fit_roofline([1, 2, 4], [1.0, 0.0, 2.0])


# ------------------------------------------------------------------------------------------------ probes

def test_probes_run_small_and_restore_threads():
    before = torch.get_num_threads()
    assert speed.copy_bandwidth(2**20, repeats=1) > 0
    assert speed.matmul_peak(64, repeats=1) > 0
    weights = speed.decode_weights(3 * 4 * 64 * 64 - 1, width=64)
    assert len(weights) == 3 and all(w.shape == (64, 64) and w.dtype == torch.float32 for w in weights)
    times = speed.time_decode(weights, [1, 4, 16], repeats=2)
    assert times.shape == (2, 3) and np.all(times >= 0)
    assert torch.get_num_threads() == before
    with speed.threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="at least one"):
        speed.time_decode([], [1])


def test_decode_step_agrees_with_the_planners_roofline(llama, mixtral):
    """The chapter's step (lib.speed) and the planner's (lib.planner.speed) count the same FLOPs and bytes, except
    that the planner also reads the untied input table each step (it counts every stored weight as read)."""
    from lib.planner import speed as planner_speed
    from lib.planner.cli import report
    from lib.planner.gpus import GPUS
    from lib.planner.serving import ServingAssumptions

    mem = GPUS["H100-80GB"].plan_bytes
    for cfg, b, n in [(llama, 1, 2048), (llama, 16, 512), (mixtral, 8, 1024)]:
        engine = ServingAssumptions.vllm_defaults(mem, "H100-80GB")
        r = report(cfg, context=n + 1, users=1, gpu_memory_bytes=mem, dtype="bf16", kv_dtype="bf16", engine=engine)
        m = planner_speed.describe(r, cfg)
        theirs = planner_speed.decode_step_seconds(m, b, n - 1, 1, planner_speed.ROOFLINES["H100-80GB"])
        ours = speed.decode_step(cfg, b, n)
        assert theirs["flops"] == pytest.approx(ours.flops, rel=1e-12)
        table = 2 * parameter_count(cfg).embedding
        assert theirs["bytes"] == pytest.approx(ours.bytes + table, rel=1e-9)
