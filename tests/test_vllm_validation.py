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
* the engine-behaviour terms (activation peak, non-torch memory, KV GiB, KV tokens, concurrency), modelled per
  release band from vLLM's profiling run (lib.planner.serving), meet the issue's bar in the bands the planner
  claims (0.12 and later, 0.10-0.11): KV tokens from scratch within 3 % at the median and 10 % at worst, the
  KV budget within MODEL_ERROR_BYTES per GPU (the error the plans quote), and no case where the planner says a
  sequence fits and vLLM refused; every term also stays within its measured worst (regression guards);
* ``--kv-available``: planning from the KV memory a log prints gives the log's own concurrency.

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
    MODEL_ERROR_BYTES,
    VLLM_BANDS,
    ServingAssumptions,
    _engine_stage_loads,
    _stage_loads,
    activation_peak_bytes,
    engine_activation_peak_bytes,
    kv_available_plan,
    non_torch_bytes,
    pp_layer_partition,
    vllm_batch_defaults,
)
from lib.planner.units import GiB

ROOT = Path(__file__).resolve().parents[1]
CASES_DIR = ROOT / "tests" / "fixtures" / "vllm_logs"
TERMS = ("weights", "activation", "non_torch", "kv_gib", "kv_tokens", "concurrency")
#: The release bands the planner claims (VLLM_BANDS); a case of another band (V0, V1 before 0.10) is planned with
#: the nearest band's model and reported apart.
CLAIMED = ("0.12", "0.10")


def load_cases() -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(CASES_DIR.glob("*.json"))]


def _dtype(case: dict) -> str:
    return "fp16" if (case["settings"].get("dtype") or "").startswith("float16") else "bf16"


def _kv_dtype(case: dict) -> str:
    kv = case["settings"].get("kv_cache_dtype") or "auto"
    return _dtype(case) if kv == "auto" else ("fp8" if kv.startswith("fp8") else kv)


def gpu_total_bytes(case: dict) -> int | None:
    """The total vLLM multiplies by its utilization: the log's own figure where printed, else the figure the case's
    runs imply (``gpu_total_gib_implied``, with its derivation), else the preset's."""
    logged = case["logged"].get("total_gpu_gib") or case.get("gpu_total_gib_implied")
    if logged is not None:
        return round(logged * GiB)
    card = GPUS.get(case["gpu"] or "")
    return None if card is None else card.plan_bytes


def model_band(case: dict) -> str:
    """The band whose model plans the case: its own, or 0.10's for a V1 release before 0.10."""
    return case["vllm_band"] if case["vllm_band"] in VLLM_BANDS else "0.10"


def predict(case: dict) -> dict:
    """The planner's figures for ``case``, per GPU of each pipeline stage (the engine takes the minimum number of
    blocks over its workers), with the case's release band."""
    s, lg = case["settings"], case["logged"]
    cfg, em, _ = read_model(ROOT / case["config"])
    tp, pp = s["tensor_parallel_size"] or 1, s["pipeline_parallel_size"] or 1
    dtype, kv_dtype = _dtype(case), _kv_dtype(case)
    total = gpu_total_bytes(case)
    util = s["gpu_memory_utilization"] or 0.9
    t_def, s_def = vllm_batch_defaults(total or 80 * GiB, case["gpu"] or "", s.get("entry") or "server")
    tokens_batch = s["max_num_batched_tokens"] or t_def
    seqs = s["max_num_seqs"] or s_def
    band = model_band(case)
    mml = s["max_model_len"] or lg.get("concurrency_tokens")
    non_torch = non_torch_bytes(tp * pp)
    if cfg is not None:
        stages = pp_layer_partition(cfg.n_layers, pp)
        loads = _stage_loads(cfg, tp, stages, 1, dtype, kv_dtype, False)
        windowed = any(w is not None for w in cfg.windows)

        def act(last: bool) -> float:
            return activation_peak_bytes(cfg, tokens_batch, seqs, dtype, tp, logits=last, band=band,
                                         max_model_len=mml)
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
            return engine_activation_peak_bytes(em, tokens_batch, seqs, dtype, tp, logits=last, band=band,
                                                max_model_len=mml)

    block = s["block_size"] or 16
    per_stage = []
    for w, kv_tok, last in loads:
        a = act(last)
        kv = None if total is None else util * total - w - a - non_torch
        per_stage.append({"weights": w, "kv_token": kv_tok, "activation": a, "kv_bytes": kv})
    out = {"stages": per_stage, "non_torch": non_torch, "block": block, "windowed": windowed,
           "batched_tokens": tokens_batch, "seqs": seqs, "total": total, "band": band}
    if total is not None and not windowed:
        def tokens(kv_bytes_by_stage: list[float]) -> int:
            return min(max(0, math.floor(b / (st["kv_token"] * block))) for b, st in
                       zip(kv_bytes_by_stage, per_stage, strict=True)) * block
        out["kv_tokens"] = tokens([st["kv_bytes"] for st in per_stage])
        out["concurrency"] = None if not mml else out["kv_tokens"] / mml
        if mml:  # the verdict: does one max_model_len sequence fit, and by more than the model's error?
            low = tokens([st["kv_bytes"] - MODEL_ERROR_BYTES for st in per_stage])
            out["verdict"] = "refused" if out["kv_tokens"] < mml else "edge" if low < mml else "fits"
    return out


def logged_kv_tokens(case: dict, p: dict) -> tuple[float | None, bool]:
    """(the KV tokens vLLM had, whether derived): the printed count, else the printed KV GiB of the tightest stage
    over the planner's exact bytes per token, in whole blocks (the count vLLM prints; windowed models excluded)."""
    lg = case["logged"]
    if lg.get("kv_cache_tokens") is not None:
        return lg["kv_cache_tokens"], False
    if lg.get("kv_cache_gib") is None or p["windowed"] or lg["kv_cache_gib"] <= 0:
        return None, False
    by_stage = lg.get("kv_cache_gib_by_stage") or [lg["kv_cache_gib"]] * len(p["stages"])
    return min(math.floor(g * GiB / (st["kv_token"] * p["block"])) for g, st in
               zip(by_stage, p["stages"], strict=True)) * p["block"], True


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
        "kv_tokens": (logged_kv_tokens(case, p)[0], p.get("kv_tokens")),
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
                bands.setdefault((term, case["vllm_band"]), []).append(e)
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


#: Each planned case's worst engine-behaviour error as measured with the band models (regression guards), all cases:
#: activation +38.5 % (V0 RTX 4090 at 131k, a log marked inconsistent), non-torch +120 % (the same log, 0.25 GiB
#: against V1's 0.55 GiB at TP 2; V0's H100 dev build counts 1.79 GiB), KV tokens and concurrency +27.3 % (the
#: V1 log of April 2025 on an L40S, before the bands claimed, whose settings the log does not show), KV GiB
#: +12.0 % (V0 RTX 3090 at 29k).
BOUNDS = {"activation": 0.40, "non_torch": 1.25, "kv_gib": 0.13, "kv_tokens": 0.28, "concurrency": 0.28}

#: 16-bit weights are exact to 1 % except here (measured): V0's figure for this TP 2 run is 0.19 GiB above the
#: parameters' bytes (-1.4 %); the cause is not in the log.
WEIGHT_EXCEPTIONS = {"r1-distill-qwen-14b_rtx4090x2_tp2_v0": 0.015}


def in_band(case: dict) -> bool:
    return case["vllm_band"] in CLAIMED


def test_kv_tokens_from_scratch_meet_the_bar_in_the_claimed_bands(results):
    """Issue #34's bar: predicted KV tokens (the printed count, or the printed GiB in whole blocks) within 3 % at
    the median and 10 % at worst, for every planned case of a claimed band."""
    errs = {cid: rel(*rows(case, p)["kv_tokens"]) for cid, (case, p) in results.items() if in_band(case)}
    errs = {cid: e for cid, e in errs.items() if e is not None}
    assert len(errs) >= 10, errs
    assert statistics.median(map(abs, errs.values())) <= 0.03, errs
    assert max(map(abs, errs.values())) <= 0.10, errs


def test_kv_budget_within_the_quoted_model_error(results):
    """The error every plan quotes (MODEL_ERROR_BYTES per GPU) covers the claimed bands' worst KV-budget error,
    and is not more than 0.1 GiB above it (it is that worst, rounded up)."""
    worst = 0.0
    for _cid, (case, p) in results.items():
        lgv, pv = rows(case, p)["kv_gib"]
        if in_band(case) and lgv is not None and pv is not None:
            worst = max(worst, abs(pv - lgv) * GiB)
    assert worst <= MODEL_ERROR_BYTES < worst + 0.1 * GiB, (worst / GiB, MODEL_ERROR_BYTES / GiB)


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
    """Where the log says whether vLLM started: the planner never says "fits" (one max_model_len sequence with more
    than the model's error to spare) where vLLM refused, and never refuses where vLLM started."""
    checked = 0
    for cid, (case, p) in results.items():
        if "verdict" not in p or case["logged"].get("refused") is None:
            continue
        refused = case["logged"]["refused"]
        assert not (refused and p["verdict"] == "fits"), (cid, p["kv_tokens"])
        assert not (not refused and p["verdict"] == "refused"), (cid, p["kv_tokens"])
        checked += 1
    assert checked >= 12, checked


def test_planning_from_the_logged_kv_memory_gives_the_logged_concurrency(results):
    """--kv-available: the sequences a replica's cache holds, from the printed "Available KV cache memory" alone,
    are the whole part of the printed concurrency (to a block's rounding), in every band."""
    checked = 0
    for cid, (case, p) in results.items():
        lg, s = case["logged"], case["settings"]
        if lg.get("max_concurrency") is None or lg.get("kv_cache_gib") is None or p["windowed"] \
                or case["inconsistent"]:
            continue
        cfg, em, _ = read_model(ROOT / case["config"])
        by_stage = lg.get("kv_cache_gib_by_stage") or [lg["kv_cache_gib"]] * (s["pipeline_parallel_size"] or 1)
        args = dict(users=1, context=lg["concurrency_tokens"], tp=s["tensor_parallel_size"] or 1,
                    pp=s["pipeline_parallel_size"] or 1, kv_dtype=_kv_dtype(case),
                    assumptions=ServingAssumptions(max_num_seqs=10**6))
        model = cfg if cfg is not None else em
        if lg["max_concurrency"] < 1:  # vLLM refused: so does the plan, with the reason
            with pytest.raises(ValueError, match="holds no sequence"):
                kv_available_plan(model, [g * GiB for g in by_stage], **args)
        else:
            plan = kv_available_plan(model, [g * GiB for g in by_stage], **args)
            assert plan.cache_sequences_per_replica == math.floor(lg["max_concurrency"]), (cid, plan)
        checked += 1
    assert checked >= 8, checked


# --- the engine's rules, one at a time -------------------------------------------------------------------------


def test_release_bands_by_version():
    from lib.planner.serving import vllm_band

    assert [vllm_band(v) for v in (None, "0.24.0", "0.12", "0.11.0", "0.10.1.1", "0.8.5", "v0", "V0")] == [
        "0.12", "0.12", "0.12", "0.10", "0.10", "0.10", "v0", "v0"]
    with pytest.raises(ValueError, match="--vllm-version"):
        vllm_band("latest")


def test_sliding_window_reservation_is_vllms():
    """SlidingWindowSpec.max_memory_usage_bytes: min(w - 1 + max_num_batched_tokens, max_model_len) tokens rounded
    up to blocks, plus one block; a full layer reserves the context."""
    from lib.planner.serving import reserved_tokens

    assert reserved_tokens(8192, None, 8192, 16) == 8192
    assert reserved_tokens(8192, 4096, 8192, 16) == 8192 + 16  # the window plus a batch exceeds the context
    assert reserved_tokens(32768, 4096, 8192, 16) == 4095 + 8192 + 1 + 16  # 12,287 -> 768 blocks, + 1
    assert reserved_tokens(32768, 128, 2048, 128) == (math.ceil(2175 / 128) + 1) * 128


def test_gemma2_concurrency_uses_the_reservation():
    """Gemma-2-9B (every other layer a 4,096-token window) at 8,192 tokens: vLLM reserves 8,208 tokens in a windowed
    layer, not 4,096, so the sequences a replica holds are about 1/1.5 of the old count (issue #34: 36 % over)."""
    from lib.planner.config import load_config
    from lib.planner.serving import ServingAssumptions, serving_plan

    cfg = load_config(ROOT / "tests" / "fixtures" / "gemma-2-9b.config.json")
    a = ServingAssumptions()
    plan = serving_plan(cfg, users=1, context=8192, gpu_memory_bytes=round(79.18 * GiB), assumptions=a, max_tp=1)
    per_layer = 2 * cfg.n_kv_heads * cfg.head_dim * 2
    n_window = sum(w is not None for w in cfg.windows)
    full = (cfg.n_layers - n_window) * 8192 + n_window * (8192 + 16)
    assert plan.kv_bytes_per_sequence_per_gpu == per_layer * full
    old = (cfg.n_layers - n_window) * 8192 + n_window * 4096
    assert 1.3 < full / old < 1.4


def test_max_num_seqs_caps_a_replica_and_names_the_waiting():
    """Issue #34 item 4: Llama-3.1-8B on one H200 at 1,024 tokens holds more sequences than vLLM's 1,024 runs at
    once; the plan counts 1,024 per replica, and 1,500 users need two replicas (on one, 476 would wait)."""
    from lib.planner.config import load_config
    from lib.planner.serving import ServingAssumptions, serving_plan

    cfg = load_config(ROOT / "tests" / "fixtures" / "vllm_logs" / "configs" / "Llama-3.1-8B.config.json")
    h200 = GPUS["H200"].plan_bytes
    a = ServingAssumptions.vllm_defaults(h200, "H200")
    plan = serving_plan(cfg, users=1500, context=512, gpu_memory_bytes=h200, assumptions=a)
    assert plan.cache_sequences_per_replica > 1500 > plan.sequences_per_replica == a.max_num_seqs == 1024
    assert (plan.replicas, plan.gpus, plan.waiting_users) == (2, 2, 1500 - 1024)


def test_verdict_near_the_edge_says_so():
    from lib.planner.serving import GPUPlan, fit_verdict, sequence_range

    kv = 2 * GiB
    tight = GPUPlan(1, 1, 1, 10, 0, 0, 10 * kv, 1, spare_bytes_per_gpu=0.3 * GiB, kv_bytes_per_sequence_per_gpu=kv,
                    cache_sequences_per_replica=10)
    roomy = GPUPlan(1, 1, 1, 10, 0, 0, 10 * kv, 1, spare_bytes_per_gpu=1.5 * GiB, kv_bytes_per_sequence_per_gpu=kv,
                    cache_sequences_per_replica=10)
    assert fit_verdict(tight).startswith("fits with 0.30 GiB to spare per GPU: within the model's error")
    assert sequence_range(tight) == (9, 10)
    assert "within the model's error" not in fit_verdict(roomy) and sequence_range(roomy) == (10, 11)


def test_kv_available_on_the_command_line(capsys):
    """--kv-available 51.38 (the H100 log of Llama-3.1-8B at 16,000 tokens): 51.38 GiB / (16,000 x 128 KiB) = 26
    sequences per replica, so 100 users need 4 replicas."""
    from lib.planner.command import main

    cfg = ROOT / "tests" / "fixtures" / "vllm_logs" / "configs" / "Llama-3.1-8B.config.json"
    assert main([str(cfg), "--context", "16000", "--users", "100", "--kv-available", "51.38", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["serving"]["from_kv_available"]
    assert (got["sequences_per_replica"], got["replicas"], got["gpus"]) == (26, 4, 4)
    assert got["sequences_per_replica"] == math.floor(51.38 * GiB / (16000 * 131072))
