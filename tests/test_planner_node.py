"""lib/planner/web/planner.js under Node against lib.sizing, on Hypothesis-drawn normalised configurations: the in-page
calculator applies only the generic formulas to the descriptions Python normalises, and must agree exactly
(parameters, KV bytes per sequence with per-layer windows, the tensor-parallel plan). Seconds, no browser."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lib.constants import BYTES_PER_DTYPE, GB, GiB
from lib.planner.config import SUPPORTED_MODEL_TYPES, load_config
from lib.sizing import model_kv_bytes_per_sequence, normalised, parameter_count, plan_gpus

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
# the fixtures the hand-written readers read (the in-page calculator applies their normalised description)
FIXTURES = sorted(f for f in (ROOT / "tests" / "fixtures").glob("*.config.json")
                  if json.loads(f.read_text()).get("model_type") in SUPPORTED_MODEL_TYPES
                  and f.name != "falcon-40b.config.json")  # read only after a check by transformers
CONFIGS = [load_config(f) for f in FIXTURES]

RUNNER = """
const planner = require(process.argv[1]);
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const P = planner(cases.bytes_per_dtype);
const out = cases.cases.map(({c, o}) => {
  const p = P.parameterCount(c);
  let plan = null;
  try {
    const r = P.planGpus(c, o).plan;
    plan = [r.gpus, r.tpDegree, r.replicas, r.sequencesPerReplica, r.naive];
  }
  catch (e) { plan = String(e.message); }
  return {total: p.total, active: p.active, kvSeq: P.kvBytesPerSequence(c, o.context, o.kvDtype), plan: plan};
});
process.stdout.write(JSON.stringify(out));
"""


def run_node(cases: list[dict]) -> list[dict]:
    out = subprocess.run([NODE, "-e", RUNNER, str(ROOT / "lib" / "planner" / "web" / "planner.js")],
                         input=json.dumps({"bytes_per_dtype": BYTES_PER_DTYPE, "cases": cases}),
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


@st.composite
def workloads(draw):
    cfg = draw(st.sampled_from(CONFIGS))
    divisors = [k for k in range(1, cfg.n_heads + 1) if cfg.n_heads % k == 0]
    changes = {}
    if cfg.kv_lora_rank is None:
        changes["n_kv_heads"] = draw(st.sampled_from(divisors))
    changes["d_ff"] = draw(st.integers(1, 60_000))
    changes["vocab_size"] = draw(st.integers(1, 300_000))
    window = draw(st.sampled_from([None, 1, 512, 4096]))
    if cfg.layer_windows is not None:
        changes["layer_windows"] = tuple(window if w else None for w in cfg.layer_windows)
        changes["sliding_window"] = window if window and any(cfg.layer_windows) else None
        if changes["sliding_window"] is None:
            changes["layer_windows"] = None
    elif cfg.kv_lora_rank is None:
        changes["sliding_window"] = window
    cfg = replace(cfg, **changes)
    o = dict(context=draw(st.integers(1, 200_000)), users=draw(st.integers(1, 2_000)),
             memoryFraction=draw(st.sampled_from([0.5, 0.9, 1.0])),
             gpuMemoryBytes=draw(st.sampled_from([24 * GiB, 80 * GB, 81_559 * 2**20, 196_608 * 2**20])),
             overheadBytes=draw(st.sampled_from([0, GiB, 3 * GiB])),
             dtype=draw(st.sampled_from(["bf16", "fp8", "int4"])), kvDtype=draw(st.sampled_from(["bf16", "fp8"])))
    return cfg, o


@pytest.mark.skipif(NODE is None, reason="node is not installed (Debian: apt-get install nodejs)")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(workloads(), min_size=1, max_size=8))
def test_planner_js_equals_lib_sizing(batch) -> None:
    got = run_node([{"c": normalised(c), "o": o} for c, o in batch])
    for (cfg, o), js in zip(batch, got, strict=True):
        p = parameter_count(cfg)
        assert (js["total"], js["active"]) == (p.total, p.active), cfg.name
        assert js["kvSeq"] == model_kv_bytes_per_sequence(cfg, o["context"], o["kvDtype"])
        try:
            plan = plan_gpus(cfg, users=o["users"], context=o["context"], gpu_memory_bytes=o["gpuMemoryBytes"],
                             memory_fraction=o["memoryFraction"], overhead_bytes=o["overheadBytes"],
                             dtype=o["dtype"], kv_dtype=o["kvDtype"])
        except ValueError:
            assert isinstance(js["plan"], str)
            continue
        assert js["plan"] == [plan.gpus, plan.tp_degree, plan.replicas, plan.sequences_per_replica, plan.naive_gpus]


def test_node_runner_sees_every_fixture_exactly() -> None:
    """Sanity: with no drawn changes, every published fixture's count in JavaScript is transformers' count."""
    if NODE is None:
        pytest.skip("node is not installed")
    o = dict(context=8192, users=8, memoryFraction=0.9, gpuMemoryBytes=81_559 * 2**20, overheadBytes=0,
             dtype="bf16", kvDtype="bf16")
    got = run_node([{"c": normalised(c), "o": o} for c in CONFIGS])
    assert [g["total"] for g in got] == [parameter_count(c).total for c in CONFIGS]
