"""The capacity planner against public vLLM start-up logs (issue #34, item 1).

Each file in ``tests/fixtures/vllm_logs/`` is one start-up: the settings its command and log show, the figures the
log prints (weights, activation peak, non-torch memory, KV-cache GiB and tokens, concurrency; null where the log
does not print them), the quoted lines and the source (``SOURCES.md`` there). This module reruns the planner with
each case's settings (tensor and pipeline degrees as logged, not searched) and prints a per-term table.

What is asserted:

* the exact parts: where a log prints both the KV-cache GiB and the token count (and the case is not marked
  inconsistent), the planner's KV bytes per token on the GPU with the least room times the logged tokens equals
  the logged GiB to its printed precision plus one block; the logged concurrency is tokens / max_model_len;
  16-bit weights within 1 % of the logged figure (the one exception, measured, is pinned separately);
* the engine-behaviour terms (activation peak, non-torch memory, KV GiB, KV tokens, concurrency) are pinned at
  today's worst error as upper bounds: a regression guard with the measured figure beside it, to be tightened as
  the modelling improves (issue #34, item 2), never a claim of accuracy.

A case is skipped only when the planner refuses its config; a case without a config in this repository is listed
as not planned (its log is kept for a later session).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from lib.planner import engine as eng_mod
from lib.planner.cli import ConfigError, read_model
from lib.planner.gpus import GPUS
from lib.planner.quant import read_quantisation
from lib.planner.serving import (
    ServingAssumptions,
    _engine_stage_loads,
    _stage_loads,
    activation_peak_bytes,
    engine_activation_peak_bytes,
    pp_layer_partition,
    vllm_batch_defaults,
)
from lib.planner.units import GiB

ROOT = Path(__file__).resolve().parents[1]
CASES_DIR = ROOT / "tests" / "fixtures" / "vllm_logs"
TERMS = ("weights", "activation", "non_torch", "kv_gib", "kv_tokens", "concurrency")

def load_cases() -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(CASES_DIR.glob("*.json"))]


def _dtype(case: dict) -> str:
    return "fp16" if (case["settings"].get("dtype") or "").startswith("float16") else "bf16"


def _kv_dtype(case: dict) -> str:
    kv = case["settings"].get("kv_cache_dtype") or "auto"
    return _dtype(case) if kv == "auto" else ("fp8" if kv.startswith("fp8") else kv)


def gpu_total_bytes(case: dict) -> int | None:
    """The total vLLM multiplies by its utilization: the log's own figure where printed, else the preset's."""
    logged = case["logged"].get("total_gpu_gib")
    if logged is not None:
        return round(logged * GiB)
    card = GPUS.get(case["gpu"] or "")
    return None if card is None else card.plan_bytes


def predict(case: dict) -> dict:
    """The planner's figures for ``case``, per GPU of the tightest pipeline stage (the engine takes the minimum
    number of blocks over its workers)."""
    s, lg = case["settings"], case["logged"]
    cfg, em, _ = read_model(ROOT / case["config"])
    tp, pp = s["tensor_parallel_size"] or 1, s["pipeline_parallel_size"] or 1
    dtype, kv_dtype = _dtype(case), _kv_dtype(case)
    total = gpu_total_bytes(case)
    util = s["gpu_memory_utilization"] or 0.9
    t_def, s_def = vllm_batch_defaults(total or 80 * GiB, case["gpu"] or "", s.get("entry") or "server")
    tokens_batch = s["max_num_batched_tokens"] or t_def
    seqs = s["max_num_seqs"] or s_def
    non_torch = ServingAssumptions().non_torch_bytes
    if cfg is not None:
        stages = pp_layer_partition(cfg.n_layers, pp)
        loads = _stage_loads(cfg, tp, stages, 1, dtype, kv_dtype, False)
        windowed = any(w is not None for w in cfg.windows)

        def act(last: bool) -> float:
            return activation_peak_bytes(cfg, tokens_batch, seqs, dtype, tp, logits=last)
    else:
        q = read_quantisation({"quantization_config": case["quantization_config"]}) \
            if case.get("quantization_config") else None
        stored = None
        if q is not None:
            _, per_layer, before, after = eng_mod.weight_bytes(em, q, 2.0)
            stored = (per_layer, before, after)
        stages = pp_layer_partition(len(em.layers), pp)
        loads = _engine_stage_loads(em, tp, stages, 1, dtype, kv_dtype, stored)
        windowed = any(layer.window for layer in em.layers)

        def act(last: bool) -> float:
            return engine_activation_peak_bytes(em, tokens_batch, seqs, dtype, tp, logits=last)

    block = s["block_size"] or 16
    per_stage = []
    for w, kv_tok, last in loads:
        a = act(last)
        kv = None if total is None else util * total - w - a - non_torch
        per_stage.append({"weights": w, "kv_token": kv_tok, "activation": a, "kv_bytes": kv})
    out = {"stages": per_stage, "non_torch": non_torch, "block": block, "windowed": windowed,
           "batched_tokens": tokens_batch, "seqs": seqs, "total": total}
    if total is not None and not windowed:
        blocks = min(max(0, math.floor(st["kv_bytes"] / (st["kv_token"] * block))) for st in per_stage)
        out["kv_tokens"] = blocks * block
        mml = s["max_model_len"] or lg.get("concurrency_tokens")
        out["concurrency"] = None if not mml else out["kv_tokens"] / mml
        out["refused"] = bool(mml) and out["kv_tokens"] < mml
    return out


def logged_activation(lg: dict) -> float | None:
    if lg.get("activation_peak_gib") is not None:
        return lg["activation_peak_gib"]
    if lg.get("peak_torch_memory_gib") is not None and lg.get("weights_gib") is not None:
        return round(lg["peak_torch_memory_gib"] - lg["weights_gib"], 4)  # V0: the peak includes the weights
    return None


def rows(case: dict, p: dict) -> dict[str, tuple[float | None, float | None]]:
    """term -> (logged, predicted), GiB for memory, tokens, and x for concurrency; stage 0's per-GPU figures."""
    lg, st = case["logged"], p["stages"][0]
    return {
        "weights": (lg.get("weights_gib"), st["weights"] / GiB),
        "activation": (logged_activation(lg), max(s["activation"] for s in p["stages"]) / GiB),
        "non_torch": (lg.get("non_torch_gib"), p["non_torch"] / GiB),
        "kv_gib": (lg.get("kv_cache_gib"), None if st["kv_bytes"] is None else st["kv_bytes"] / GiB),
        "kv_tokens": (lg.get("kv_cache_tokens"), p.get("kv_tokens")),
        "concurrency": (lg.get("max_concurrency"), p.get("concurrency")),
    }


def rel(logged: float | None, pred: float | None) -> float | None:
    if logged is None or pred is None or logged == 0:
        return None
    return (pred - logged) / abs(logged)


def _fmt(v: float | None, term: str) -> str:
    return "-" if v is None else (f"{v:,.0f}" if term == "kv_tokens" else f"{v:.3f}")


def quantised(case: dict) -> bool:
    return bool(case["settings"].get("quantization"))


PLANNED = [c for c in load_cases() if c["config"]]
REFUSED: dict[str, str] = {}  #: case id -> the planner's one-line refusal (none today)
UNPLANNED = [c for c in load_cases() if not c["config"]]


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[dict, dict]]:
    out = {}
    for case in PLANNED:
        try:
            out[case["id"]] = (case, predict(case))
        except ConfigError as err:  # the planner refuses the model: counted, not planned
            REFUSED[case["id"]] = str(err)
    return out


def test_the_set_is_what_it_says():
    cases = load_cases()
    assert len(cases) >= 25, len(cases)
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids))
    for c in cases:
        assert c["source_url"] and c["log_lines"], c["id"]
        assert c["config"] is None or (ROOT / c["config"]).is_file(), c["id"]
        if c["config"] is None:
            assert c["config_note"], c["id"]  # says why it is not planned


def test_print_table(results, capsys):
    """The per-term table (run with -s to see it): logged vs predicted and the relative error."""
    errs: dict[str, list[float]] = {t: [] for t in TERMS}
    bands: dict[tuple[str, str], list[float]] = {}
    lines = [f"{'case':38} {'term':11} {'logged':>12} {'planner':>12} {'error':>8}"]
    for cid, (case, p) in results.items():
        for term, (lgv, pv) in rows(case, p).items():
            e = rel(lgv, pv)
            if e is not None:
                errs[term].append(e)
                bands.setdefault((term, case["engine"] or "?"), []).append(e)
            if lgv is None and pv is None:
                continue
            lines.append(f"{cid:38} {term:11} {_fmt(lgv, term):>12} {_fmt(pv, term):>12} "
                         f"{'' if e is None else f'{100 * e:+.1f}%':>8}")
    lines.append("")
    for term, es in errs.items():
        if es:
            lines.append(f"{term:11} n={len(es):2}  median |err| {100 * statistics.median(map(abs, es)):6.1f}%"
                         f"  worst {100 * max(es, key=abs):+7.1f}%")
    for (term, band), es in sorted(bands.items()):
        lines.append(f"  {term:11} {band}: n={len(es):2}  median |err| {100 * statistics.median(map(abs, es)):6.1f}%"
                     f"  worst {100 * max(es, key=abs):+7.1f}%")
    lines.append(f"refused by the planner: {len(REFUSED)} {sorted(REFUSED)}")
    lines.append(f"not planned (no config in this repository): {', '.join(c['id'] for c in UNPLANNED)}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert any(errs.values())


#: Each planned case's worst engine-behaviour error as measured when this file was written (regression guards).
#: activation: worst -89.4 % (V0 RTX 3090 at 29k, whose profile ran max_model_len tokens); non-torch: worst
#: +669 % (the planner's flat 1 GiB against 0.13 GiB logged at TP 1 on H100); KV GiB +71.2 %, KV tokens +71.3 %,
#: concurrency +70.4 % (both V0 RTX 3090 cases, where the activation error lands on a thin remainder).
BOUNDS = {"activation": 0.90, "non_torch": 6.70, "kv_gib": 0.75, "kv_tokens": 0.75, "concurrency": 0.75}

#: 16-bit weights are exact to 1 % except here (measured): V0's figure for this TP 2 run is 0.19 GiB above the
#: parameters' bytes (-1.4 %); the cause is not in the log.
WEIGHT_EXCEPTIONS = {"r1-distill-qwen-14b_rtx4090x2_tp2_v0": 0.015}

#: Where the planner's verdict differs from the engine's (measured): it says the 29,000-token context fits on the
#: RTX 3090 (40,512 tokens predicted), vLLM refused (23,648): V0 profiled max_model_len tokens, the planner 2,048.
VERDICT_FLIPS = {"llama-3.1-8b_rtx3090_v0_29k"}


def _binding(case: dict, p: dict) -> tuple[float, float] | None:
    """(logged KV bytes, planner's KV bytes per token) of the GPU with the least room in tokens, or None."""
    lg = case["logged"]
    by_stage = lg.get("kv_cache_gib_by_stage") or ([lg["kv_cache_gib"]] * len(p["stages"])
                                                   if lg.get("kv_cache_gib") is not None else None)
    if by_stage is None:
        return None
    pairs = [(g * GiB, st["kv_token"]) for g, st in zip(by_stage, p["stages"], strict=True)]
    return min(pairs, key=lambda t: t[0] / t[1])


def test_kv_bytes_per_token_times_logged_tokens_is_the_logged_kv_memory(results):
    """The mathematics: tokens x bytes per token = the logged KV memory, to 0.005 GiB (its print) plus a block."""
    checked = 0
    for cid, (case, p) in results.items():
        lg = case["logged"]
        if lg.get("kv_cache_tokens") is None or lg.get("kv_cache_gib") is None or p["windowed"]:
            continue
        kv_bytes, b = _binding(case, p)
        implied = kv_bytes / b
        slack = p["block"] + 0.005 * GiB / b
        if case["inconsistent"]:
            assert abs(implied - lg["kv_cache_tokens"]) > slack, cid  # still inconsistent as described
            continue
        assert abs(implied - lg["kv_cache_tokens"]) <= slack, (cid, implied, lg["kv_cache_tokens"])
        checked += 1
    assert checked >= 10, checked


def test_logged_concurrency_is_tokens_over_max_model_len():
    for case in load_cases():
        lg = case["logged"]
        if lg.get("max_concurrency") is None or lg.get("kv_cache_tokens") is None:
            continue
        if case["hybrid_kv"]:  # sliding + full layers: the concurrency counts each KV group's own need
            assert lg["kv_cache_tokens"] / lg["concurrency_tokens"] < lg["max_concurrency"], case["id"]
            continue
        assert round(lg["kv_cache_tokens"] / lg["concurrency_tokens"], 2) == pytest.approx(
            lg["max_concurrency"], abs=0.005), case["id"]


def test_16_bit_weights_within_one_percent(results):
    checked = 0
    for cid, (case, p) in results.items():
        lgv, pv = rows(case, p)["weights"]
        if lgv is None or quantised(case):
            continue
        assert abs(rel(lgv, pv)) <= WEIGHT_EXCEPTIONS.get(cid, 0.01), (cid, lgv, pv)
        checked += 1
    assert checked >= 14, checked


def test_engine_terms_no_worse_than_today(results):
    """Regression guard: each engine-behaviour term's error stays within today's measured worst (BOUNDS)."""
    for cid, (case, p) in results.items():
        for term, (lgv, pv) in rows(case, p).items():
            e = rel(lgv, pv)
            if term in BOUNDS and e is not None:
                assert abs(e) <= BOUNDS[term], (cid, term, lgv, pv, e)


def test_fit_verdicts(results):
    """Where the log says whether vLLM started, the planner's verdict agrees except the pinned flips."""
    flips = set()
    for cid, (case, p) in results.items():
        if "refused" in p and (case["settings"]["max_model_len"] or case["logged"].get("kv_cache_tokens")):
            if p["refused"] != case["logged"]["refused"]:
                flips.add(cid)
    assert flips == VERDICT_FLIPS
