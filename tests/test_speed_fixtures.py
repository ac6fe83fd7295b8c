"""Published serving-speed measurements (issue #35, item 3): the fixtures are well formed and match their quotes.

Each file in ``tests/fixtures/speed/`` is one published measurement (MLPerf Inference summary logs, vLLM / SGLang /
TensorRT-LLM benchmark outputs posted in GitHub issues and pull requests) with its settings, the figures it prints
(null where a figure is not printed), the lines quoted from the source and the source's address (``SOURCES.md``
there). Nothing here predicts a speed; this module only guards the data a speed model will be checked against:

* every record has the same keys, with the types declared below, a source URL and at least one quoted line;
* every figure it records appears in a quoted line (as printed, or in nanoseconds for an MLPerf latency kept in ms);
* the units agree: total tokens/s is at least output tokens/s, no p99 is below its median, and an MLPerf Server
  run (marked valid) has its p99 TTFT and TPOT under the limits the log prints;
* where a record prints the request throughput, the output throughput and the total generated tokens over the
  number of requests, request throughput x mean output length equals the output throughput within 5 % (plus the
  rounding of the printed request rate); likewise per-GPU throughput x GPUs equals the total where both are given.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import pytest

SPEED = Path(__file__).parent / "fixtures" / "speed"
FIXTURES = Path(__file__).parent / "fixtures"

FIGURE_KEYS = (
    "output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "output_tokens_per_s_per_gpu",
    "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
)
WORKLOAD_TYPES = {
    "scenario": (str,), "max_concurrency": (int, type(None)), "request_rate": (int, float, str, type(None)),
    "max_num_seqs": (int, type(None)), "input_len": (int, type(None)), "output_len": (int, type(None)),
    "length_distribution": (str, type(None)), "fixed_lengths": (bool, type(None)),
    "num_prompts": (int, type(None)), "total_input_tokens": (int, type(None)),
    "total_output_tokens": (int, type(None)),
}
OPT_STR = (str, type(None))
OPT_INT = (int, type(None))
TOP_TYPES = {
    "id": (str,), "source_kind": (str,), "source_url": (str,), "source_path": OPT_STR, "source_commit": OPT_STR,
    "model": (str,), "hub_id": OPT_STR, "config_fixture": OPT_STR, "architecture": (str,),
    "gpu": (str,), "gpu_count": OPT_INT, "tensor_parallel": OPT_INT, "pipeline_parallel": OPT_INT,
    "expert_parallel": OPT_INT, "engine": OPT_STR, "engine_version": OPT_STR, "dtype": OPT_STR,
    "kv_cache_dtype": OPT_STR, "workload": (dict,), "figures": (dict,), "constraints": (dict,),
    "quote": (list,), "notes": (str,),
}
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")


def load_all() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(SPEED.glob("*.json"))}


def numbers_in(lines: list[str]) -> list[float]:
    return [float(m) for line in lines for m in NUMBER.findall(line.replace(",", ""))]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def problems(rec: dict) -> list[str]:
    """Everything wrong with one record (an empty list when it is sound)."""
    out: list[str] = []
    if set(rec) != set(TOP_TYPES):
        out.append(f"keys differ: missing {set(TOP_TYPES) - set(rec)}, extra {set(rec) - set(TOP_TYPES)}")
        return out
    for key, types in TOP_TYPES.items():
        if not isinstance(rec[key], types) or isinstance(rec[key], bool) and bool not in types:
            out.append(f"{key} has type {type(rec[key]).__name__}")
    if out:
        return out
    if rec["source_kind"] not in ("mlperf", "github_issue", "github_pr", "paper"):
        out.append(f"source_kind {rec['source_kind']!r}")
    if not rec["source_url"].startswith("https://"):
        out.append("source_url is not an https address")
    if rec["architecture"] not in ("dense", "moe"):
        out.append(f"architecture {rec['architecture']!r}")
    if rec["config_fixture"] is not None:
        cfg_path = FIXTURES / rec["config_fixture"]
        if not cfg_path.is_file():
            out.append(f"config_fixture {rec['config_fixture']} is not in tests/fixtures")
        elif not {"hidden_size", "num_hidden_layers"} <= set(json.loads(cfg_path.read_text())):
            out.append(f"config_fixture {rec['config_fixture']} has no hidden_size / num_hidden_layers")
    for key in ("gpu_count", "tensor_parallel", "pipeline_parallel", "expert_parallel"):
        if rec[key] is not None and rec[key] < 1:
            out.append(f"{key} < 1")
    if rec["gpu_count"] and rec["tensor_parallel"] and rec["gpu_count"] % rec["tensor_parallel"]:
        out.append("gpu_count is not a multiple of tensor_parallel")

    wl, figs = rec["workload"], rec["figures"]
    if set(wl) != set(WORKLOAD_TYPES):
        out.append(f"workload keys differ: {set(WORKLOAD_TYPES) ^ set(wl)}")
    else:
        for key, types in WORKLOAD_TYPES.items():
            if not isinstance(wl[key], types) or (isinstance(wl[key], bool) and bool not in types):
                out.append(f"workload.{key} has type {type(wl[key]).__name__}")
    if set(figs) != set(FIGURE_KEYS):
        out.append(f"figure keys differ: {set(FIGURE_KEYS) ^ set(figs)}")
        return out
    for key, value in figs.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            out.append(f"figures.{key} = {value!r} is not a positive number")
    if out:
        return out
    if all(v is None for v in figs.values()):
        out.append("no figure recorded")

    # each figure appears in the quoted lines
    if not rec["quote"] or not all(isinstance(q, str) and q.strip() for q in rec["quote"]):
        out.append("quote is empty or has a blank line")
    quoted = numbers_in(rec["quote"])
    for key, value in figs.items():
        if value is None:
            continue
        found = any(_close(q, value) for q in quoted)
        if not found and key.endswith("_ms"):
            found = any(_close(q, round(value * 1e6)) for q in quoted)  # MLPerf prints nanoseconds
        if not found:
            out.append(f"figures.{key} = {value} is in no quoted line")
    for key in ("ttft_limit_ms", "tpot_limit_ms"):
        value = rec["constraints"].get(key)
        if value is not None and not any(_close(q, value * 1e6) or _close(q, value) for q in quoted):
            out.append(f"constraints.{key} = {value} is in no quoted line")

    # units agree
    out_tps, tot_tps, rps = figs["output_tokens_per_s"], figs["total_tokens_per_s"], figs["requests_per_s"]
    if out_tps is not None and tot_tps is not None and tot_tps < out_tps:
        out.append(f"total tokens/s {tot_tps} < output tokens/s {out_tps}")
    for kind in ("ttft", "tpot", "itl"):
        med, p99 = figs[f"median_{kind}_ms"], figs[f"p99_{kind}_ms"]
        if med is not None and p99 is not None and p99 < med:
            out.append(f"p99 {kind} {p99} < median {med}")
    for kind, limit in (("ttft", "ttft_limit_ms"), ("tpot", "tpot_limit_ms")):
        lim = rec["constraints"].get(limit)
        # MLPerf's constraint is on the p99: a valid server run keeps its p99 under the limit
        if lim is not None and rec["workload"]["scenario"] == "server" and figs[f"p99_{kind}_ms"] is not None:
            if figs[f"p99_{kind}_ms"] > lim:
                out.append(f"p99 {kind} {figs[f'p99_{kind}_ms']} ms above the run's limit {lim} ms")

    n, total_out = wl.get("num_prompts"), wl.get("total_output_tokens")
    if rps is not None and out_tps is not None and n and total_out:
        mean_out = total_out / n
        tol = 0.05 * out_tps + 0.005 * mean_out  # 5 % plus half a unit of the request rate's last printed digit
        if abs(rps * mean_out - out_tps) > tol:
            out.append(f"requests/s x mean output {rps * mean_out:.1f} != output tokens/s {out_tps}")
    if rps is not None and out_tps is not None and wl.get("fixed_lengths") and wl.get("output_len"):
        if abs(rps * wl["output_len"] - out_tps) > 0.05 * out_tps + 0.005 * wl["output_len"]:
            out.append("requests/s x fixed output length != output tokens/s")
    if wl.get("fixed_lengths") and wl.get("input_len") and wl.get("output_len") and n and total_out is not None:
        if total_out != n * wl["output_len"]:
            out.append("fixed output length x requests != total generated tokens")
    per_gpu, gpus = figs["output_tokens_per_s_per_gpu"], rec["gpu_count"]
    if per_gpu is not None and out_tps is not None and gpus:
        # tables print per-GPU figures rounded to a whole token
        if abs(per_gpu * gpus - out_tps) > 0.01 * out_tps + gpus:
            out.append(f"per-GPU throughput x {gpus} GPUs != output throughput")
    return out


RECORDS = load_all()


def test_enough_measurements_with_a_spread():
    assert len(RECORDS) >= 20
    archs = {r["architecture"] for r in RECORDS.values()}
    gpus = {r["gpu"].split()[0].split("-")[0] for r in RECORDS.values()}
    assert archs == {"dense", "moe"}
    assert {"H100", "MI300X", "GH200"} <= gpus
    # some low-concurrency decode and some saturated throughput runs
    assert any(r["workload"]["max_concurrency"] == 1 for r in RECORDS.values())
    assert any(r["workload"]["scenario"] == "offline" for r in RECORDS.values())


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_record_is_sound(name):
    rec = RECORDS[name]
    assert rec["id"] == name
    assert problems(rec) == []


def test_sources_lists_every_record():
    text = (SPEED / "SOURCES.md").read_text()
    missing = [name for name in RECORDS if name not in text]
    assert missing == []


def _one(predicate):
    return next(copy.deepcopy(r) for r in RECORDS.values() if predicate(r))


def test_the_checks_catch_corrupted_records(tmp_path):
    """A tmp copy of real records, each damaged in one way, is refused for that reason."""
    mlperf_server = _one(lambda r: r["source_kind"] == "mlperf" and r["workload"]["scenario"] == "server")
    vllm = _one(lambda r: r["figures"]["total_tokens_per_s"] and r["workload"]["total_output_tokens"])
    per_gpu = _one(lambda r: r["figures"]["output_tokens_per_s_per_gpu"] and r["gpu_count"])

    def damaged_copy(rec, change):
        rec = copy.deepcopy(rec)
        change(rec)
        return rec

    def scale(section, key, factor):
        return lambda r: r[section].__setitem__(key, r[section][key] * factor)

    def halve_total(r):
        r["figures"]["total_tokens_per_s"] = r["figures"]["output_tokens_per_s"] / 2
        r["quote"].append(f"Total Token throughput (tok/s): {r['figures']['total_tokens_per_s']}")

    def over_limit(r):
        r["figures"]["p99_tpot_ms"] = 250.0
        r["quote"].append("99.00 percentile time to output token (ns)   : 250000000")

    def double_gpus(r):
        r["gpu_count"] *= 2
        r["tensor_parallel"] = r["gpu_count"]

    damaged = [
        ("figures.output_tokens_per_s", damaged_copy(vllm, scale("figures", "output_tokens_per_s", 1.2))),
        ("requests/s x mean output", damaged_copy(vllm, scale("workload", "total_output_tokens", 2))),
        ("total tokens/s", damaged_copy(vllm, halve_total)),
        ("figures.mean_ttft_ms", damaged_copy(mlperf_server, scale("figures", "mean_ttft_ms", 1000))),
        ("above the run's limit", damaged_copy(mlperf_server, over_limit)),
        ("per-GPU", damaged_copy(per_gpu, double_gpus)),
        ("keys differ", damaged_copy(vllm, lambda r: r.pop("source_url"))),
        ("quote is empty", damaged_copy(vllm, lambda r: r.__setitem__("quote", []))),
        ("gpu_count has type", damaged_copy(vllm, lambda r: r.__setitem__("gpu_count", "one"))),
        ("is not in tests/fixtures", damaged_copy(vllm, lambda r: r.__setitem__("config_fixture", "nope.json"))),
    ]
    for i, (reason, rec) in enumerate(damaged):
        path = tmp_path / f"bad{i}.json"
        path.write_text(json.dumps(rec))
        found = problems(json.loads(path.read_text()))
        assert any(reason in p for p in found), (reason, found)
    # and the untouched copies pass
    for rec in (mlperf_server, vllm, per_gpu):
        assert problems(rec) == []
