"""lib/planner/web/planner.js under Node against lib.sizing, on Hypothesis-drawn normalised configurations: the in-page
calculator applies only the generic formulas to the descriptions Python normalises, and must agree exactly
(parameters, KV bytes per sequence with per-layer windows, the tensor-parallel plan). Seconds, no browser."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lib.constants import BYTES_PER_DTYPE, GB, GiB
from lib.planner.config import SUPPORTED_MODEL_TYPES, UnsupportedConfigError, load_config
from lib.sizing import model_kv_bytes_per_sequence, normalised, parameter_count, plan_gpus

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
# the fixtures the hand-written readers read (the in-page calculator applies their normalised description)


def _hand_read(path: Path):
    """The hand-written reader's description, or None where it refuses (transformers decides those)."""
    try:
        return load_config(path)
    except UnsupportedConfigError:
        return None


FIXTURES = sorted(f for f in (ROOT / "tests" / "fixtures").glob("*.config.json")
                  if json.loads(f.read_text()).get("model_type") in SUPPORTED_MODEL_TYPES
                  and _hand_read(f) is not None)
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


@pytest.fixture(scope="module", autouse=True)
def _node_is_installed() -> None:
    """Node is part of the test set-up (tools/setup.sh --test installs it): without it these tests fail, not skip."""
    if NODE is None:
        pytest.fail("node is not installed: `bash tools/setup.sh --test` installs it (Debian: apt-get install nodejs)",
                    pytrace=False)


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
    o = dict(context=8192, users=8, memoryFraction=0.9, gpuMemoryBytes=81_559 * 2**20, overheadBytes=0,
             dtype="bf16", kvDtype="bf16")
    got = run_node([{"c": normalised(c), "o": o} for c in CONFIGS])
    assert [g["total"] for g in got] == [parameter_count(c).total for c in CONFIGS]


# ---- the training mode: planner.js's trainingPlan against lib.planner.train_cli.training_report ----

TRAIN_RUNNER = """
const planner = require(process.argv[1]);
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const P = planner(cases.bytes_per_dtype);
process.stdout.write(JSON.stringify(cases.cases.map(({c, o}) => {
  try { return P.trainingPlan(c, o); } catch (e) { return String(e.message); }
})));
"""
LLAMA_FIXTURES = ["Llama-2-7b-hf", "Mistral-7B-v0.1", "Qwen2.5-7B-Instruct", "Qwen3-8B"]
TRAIN_CONFIGS = {name: (json.loads((ROOT / "tests" / "fixtures" / f"{name}.config.json").read_text()),
                        load_config(ROOT / "tests" / "fixtures" / f"{name}.config.json")) for name in LLAMA_FIXTURES}


def run_node_training(cases: list[dict]) -> list:
    out = subprocess.run([NODE, "-e", TRAIN_RUNNER, str(ROOT / "lib" / "planner" / "web" / "planner.js")],
                         input=json.dumps({"bytes_per_dtype": BYTES_PER_DTYPE, "cases": cases}),
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def _train_args(o: dict):
    import argparse

    return argparse.Namespace(
        dtype=o["dtype"], context=o["context"], micro_batch=o["microBatch"], optimizer=o["optimizer"],
        attention=o["attention"], checkpointing=o["checkpointing"], zero=o["zero"], gpus=o["gpus"], tp=o["tp"],
        pp=o["pp"], lora_rank=o["loraRank"] or None, lora_targets=",".join(o["loraTargets"]),
        tokens=o["tokens"], mfu=o["mfu"], peak_tflops=o["peakTflops"])


@st.composite
def training_workloads(draw):
    name = draw(st.sampled_from(LLAMA_FIXTURES))
    tp = draw(st.sampled_from([1, 2, 4]))
    pp = draw(st.sampled_from([1, 2]))
    rank = draw(st.sampled_from([0, 0, 8, 64]))
    o = dict(dtype=draw(st.sampled_from(["bf16", "fp32"] + (["int4", "fp8"] if rank else []))),
             context=draw(st.integers(1, 32_768)), microBatch=draw(st.integers(1, 8)),
             optimizer=draw(st.sampled_from(["adamw", "adamw8bit", "sgd"])),
             attention=draw(st.sampled_from(["eager", "flash"])),
             checkpointing=draw(st.sampled_from(["none", "full", "every:1", "every:3", "every:4", "every:100"])),
             zero=draw(st.sampled_from([0, 1] if pp > 1 else [0, 1, 2, 3])), tp=tp, pp=pp,
             gpus=tp * pp * draw(st.sampled_from([1, 3, 8])), loraRank=rank,
             loraTargets=draw(st.sampled_from([["q_proj", "v_proj"], ["q_proj", "k_proj", "v_proj", "o_proj",
                                                                       "gate_proj", "up_proj", "down_proj"]])),
             tokens=draw(st.sampled_from([None, 10**9, 2 * 10**12])), mfu=draw(st.sampled_from([0.3, 0.55])),
             peakTflops=draw(st.sampled_from([989.0, 312.0])))
    return name, o


def _assert_training_equal(name: str, o: dict, js) -> None:
    from lib.planner.train_cli import training_report

    raw, _ = TRAIN_CONFIGS[name]
    r = training_report(raw, _train_args(o))
    assert isinstance(js, dict), (name, o, js)
    got = {k: js[k] for k in ("weights", "gradients", "optimizer", "activation", "total", "trainable", "parameters",
                              "flopsPerToken")}
    want = {"weights": r["weights_bytes"], "gradients": r["gradients_bytes"], "optimizer": r["optimizer_bytes"],
            "activation": r["activation_bytes"], "total": r["total_bytes_per_gpu"],
            "trainable": r["trainable_parameters"], "parameters": r["parameters"],
            "flopsPerToken": r["flops_per_token"]}
    assert got == want, (name, o)
    assert js["flopsPerStep"] == pytest.approx(r["flops_per_step"], rel=1e-15)  # beyond 2^53 a double rounds
    assert ("gpuHours" in js) == ("gpu_hours" in r)
    if "gpu_hours" in r:
        assert js["gpuHours"] == pytest.approx(r["gpu_hours"], rel=1e-15)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(training_workloads(), min_size=1, max_size=8))
def test_planner_js_training_equals_training_report(batch) -> None:
    got = run_node_training([{"c": normalised(TRAIN_CONFIGS[name][1]), "o": o} for name, o in batch])
    for (name, o), js in zip(batch, got, strict=True):
        _assert_training_equal(name, o, js)


BASE_TRAIN = dict(dtype="bf16", context=2048, microBatch=1, optimizer="adamw", attention="eager",
                  checkpointing="none", zero=0, gpus=1, tp=1, pp=1, loraRank=0, loraTargets=["q_proj", "v_proj"],
                  tokens=None, mfu=0.4, peakTflops=989.0)


@pytest.mark.parametrize("name", LLAMA_FIXTURES)
def test_planner_js_training_fixed_settings(name) -> None:
    """Named settings on every Llama-style fixture: eager, no checkpointing (the activations the book counts on
    the meta device), flash with checkpointing every 4 layers under ZeRO 3 on 16 GPUs, QLoRA in int4."""
    settings_ = [BASE_TRAIN,
                 {**BASE_TRAIN, "attention": "flash", "checkpointing": "every:4", "zero": 3, "gpus": 16, "tp": 2,
                  "tokens": 10**12},
                 {**BASE_TRAIN, "dtype": "int4", "loraRank": 16, "optimizer": "adamw8bit", "checkpointing": "full"}]
    got = run_node_training([{"c": normalised(TRAIN_CONFIGS[name][1]), "o": o} for o in settings_])
    for o, js in zip(settings_, got, strict=True):
        _assert_training_equal(name, o, js)


def test_planner_js_training_refusals() -> None:
    """What the Python planner refuses, the page refuses with a line; a family the page cannot count is named."""
    c = normalised(TRAIN_CONFIGS["Llama-2-7b-hf"][1])
    gpt2 = normalised(load_config(ROOT / "tests" / "fixtures" / "gpt2.config.json"))
    cases = [{"c": c, "o": {**BASE_TRAIN, "dtype": "int4"}}, {"c": c, "o": {**BASE_TRAIN, "gpus": 3, "tp": 2}},
             {"c": c, "o": {**BASE_TRAIN, "checkpointing": "every:0"}},
             {"c": c, "o": {**BASE_TRAIN, "pp": 2, "gpus": 2, "zero": 2}}, {"c": gpt2, "o": BASE_TRAIN}]
    got = run_node_training(cases)
    assert all(isinstance(g, str) for g in got), got
    assert "LoRA" in got[0] and "multiple" in got[1] and "every:K" in got[2] and "pipeline" in got[3]
    assert "gpt2" in got[4] and "--train" in got[4]


def test_planner_js_layer_kinds() -> None:
    """The per-layer line equals lib.planner.cli.layer_kinds for every fixture; a description's own list of
    kinds, when present, is counted as given."""
    from lib.planner.cli import layer_kinds

    runner = """
const P = require(process.argv[1])({});
const cs = JSON.parse(require('fs').readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(cs.map((c) => P.layerKinds(c))));
"""
    descs = [normalised(c) for c in CONFIGS]
    assert all(d.get("layers", layer_kinds(c)) == layer_kinds(c) for d, c in zip(descs, CONFIGS, strict=True))
    for d in descs[::2]:  # older descriptions without the summary line: counted from the labels or the windows
        d.pop("layers", None)
    for d in descs[::4]:
        d.pop("layer_kinds", None)
    own = {**descs[0], "n_layers": 4, "layer_kinds": ["full", "linear", "linear", "full"]}
    own.pop("layers", None)
    out = subprocess.run([NODE, "-e", runner, str(ROOT / "lib" / "planner" / "web" / "planner.js")],
                         input=json.dumps(descs + [own]), capture_output=True, text=True, timeout=60, check=True)
    got = json.loads(out.stdout)
    assert got[:-1] == [layer_kinds(c) for c in CONFIGS]
    assert got[-1] == "4 layers: 2 full, 2 linear"


def test_planner_js_engine_read_models_cache_and_parameters() -> None:
    """Models only transformers reads reach the page as per-layer descriptions: the page's cache per token, per
    sequence (windows applied) and recurrent state equal lib.planner.engine's, for every such fixture."""
    pytest.importorskip("transformers")
    from lib.planner import engine as eng
    from lib.planner.cli import read_model

    models = {}
    for f in sorted((ROOT / "tests" / "fixtures").glob("*.config.json")):
        try:
            cfg, em, _ = read_model(f)
        except Exception:  # noqa: BLE001 - a fixture neither reader takes is not the page's business
            continue
        if cfg is None and em is not None:
            models[f.name.removesuffix(".config.json")] = em
    assert models, "no fixture is read by transformers alone"
    runner = """
const P = require(process.argv[1])(JSON.parse(process.argv[2]));
const cs = JSON.parse(require('fs').readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(cs.map(([c, n, dt]) => P.engineCache(c, n, dt))));
"""
    cases = [(normalised(em, name), n, dt) for name, em in models.items() for n, dt in ((1, "bf16"), (8192, "fp8"),
                                                                                         (131_072, "bf16"))]
    out = subprocess.run([NODE, "-e", runner, str(ROOT / "lib" / "planner" / "web" / "planner.js"),
                          json.dumps(BYTES_PER_DTYPE)], input=json.dumps(cases), capture_output=True, text=True,
                         timeout=60, check=True)
    got = json.loads(out.stdout)
    ems = [em for em in models.values() for _ in range(3)]
    for (desc, n, dt), em, js in zip(cases, ems, got, strict=True):
        assert js["perToken"] == eng.kv_bytes_per_token(em, dt), desc["name"]
        assert js["perSequence"] == eng.kv_bytes_per_sequence(em, n, dt), (desc["name"], n)
        assert js["state"] == eng.state_bytes_per_sequence(em, dt), desc["name"]
        assert desc["parameters"]["total"] == em.total


# ---- the serving plan the page shows by default: the command line's (vLLM's accounting), same verdict ----

SERVING_RUNNER = """
const planner = require(process.argv[1]);
const inp = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const P = planner(inp.bytes_per_dtype, inp.serving);
process.stdout.write(JSON.stringify(inp.cases.map(([c, f]) => {
  try { return P.servingPlan(c, f); } catch (e) { return String(e.message); }
})));
"""
# (model, users, context, --gpu or a size in bytes, --dtype, --kv-dtype, --vllm-version, --overhead in bytes,
# --max-num-seqs): the CLI's defaults first, then windows, experts, latent caches, learned positions, quantised
# weights, the max_num_seqs cap with users waiting, a card outside vLLM's large defaults, older bands, a fixed
# overhead and a size entered by hand
SERVING_CASES = [
    ("Llama-2-7b-hf", 1, 4096, "H100-80GB", "bf16", "bf16", "0.12", None, 0),
    ("Llama-2-7b-hf", 1500, 4096, "H200", "bf16", "bf16", "0.12", None, 0),
    ("Llama-2-7b-hf", 300, 8192, "H100-80GB", "bf16", "fp8", "0.12", None, 0),
    ("Mistral-7B-v0.1", 1500, 512, "H200", "bf16", "bf16", "0.12", None, 0),
    ("Qwen3-8B", 1000, 1024, "H100-80GB", "bf16", "fp8", "0.12", None, 256),
    ("Mistral-7B-v0.1", 64, 32768, "H100-80GB", "bf16", "bf16", "0.12", None, 0),
    ("Mistral-7B-v0.1", 3000, 8192, "H200", "fp8", "fp8", "0.12", None, 0),
    ("Mixtral-8x7B-v0.1", 64, 8192, "H100-80GB", "bf16", "bf16", "0.12", None, 0),
    ("Mixtral-8x7B-v0.1", 64, 8192, "A100-80GB", "int4", "bf16", "0.10", None, 0),
    ("DeepSeek-V2-Lite", 100, 16384, "H100-80GB", "bf16", "bf16", "0.12", None, 0),
    ("DeepSeek-V2-Lite", 8, 8192, "L40S", "int8", "fp8", "v0", None, 0),
    ("gpt2", 500, 1024, "T4", "fp32", "fp16", "0.12", None, 0),
    ("Falcon-7B", 20, 2048, "RTX-4090", "bf16", "bf16", "0.10", None, 0),
    ("Qwen3-8B", 64, 8192, "H100-80GB", "bf16", "bf16", "0.12", 3 * GiB, 0),
    ("Qwen3-8B", 64, 8192, 48 * GB, "bf16", "bf16", "0.12", None, 0),
]


def _page_inputs(users, context, card, dtype, kv_dtype, band, overhead, seqs) -> dict:
    preset = isinstance(card, str)
    return dict(context=context, users=users, gpu=card if preset else None, gpuMemoryBytes=None if preset else card,
                memoryFraction=0.9, dtype=dtype, kvDtype=kv_dtype, overheadBytes=overhead, band=band,
                maxNumSeqs=seqs, maxNumBatchedTokens=0)


def test_planner_js_serving_plan_equals_the_command_line() -> None:
    """For every case, the page's plan is lib.planner.cli.report's tensor-parallel plan under the same settings:
    GPUs, degree, replicas, sequences per replica (after max_num_seqs), users waiting, weights, KV cache per GPU,
    the activation peak, and the verdict word for word (a fixed overhead: no verdict, as the CLI gives none)."""
    from lib.planner.cli import report
    from lib.planner.serving import ServingAssumptions

    models = {n: load_config(ROOT / "tests" / "fixtures" / f"{n}.config.json") for n, *_ in SERVING_CASES}
    got = run_node_serving([(normalised(models[n]), _page_inputs(*rest)) for n, *rest in SERVING_CASES])
    verdicts, waiting = 0, 0
    for (name, users, context, card, dtype, kv_dtype, band, overhead, seqs), js in zip(SERVING_CASES, got,
                                                                                       strict=True):
        preset = isinstance(card, str)
        settings_ = {"vllm_version": band, **({"max_num_seqs": seqs} if seqs else {})}
        engine = ServingAssumptions.vllm_defaults(card if not preset else _plan_bytes(card),
                                                  card if preset else "", **settings_)
        r = report(models[name], context=context, users=users, gpu_name=card if preset else None,
                   gpu_memory_bytes=None if preset else card, dtype=dtype, kv_dtype=kv_dtype, engine=engine,
                   overhead_bytes=overhead, max_pp=1)
        s, tp = r["serving"], r["serving"]["tensor_parallel"]
        assert isinstance(js, dict), (name, js)
        p = js["plan"]
        assert (p["gpus"], p["tpDegree"], p["replicas"], p["sequencesPerReplica"], p["waitingUsers"]) == (
            tp["gpus"], tp["tp_degree"], tp["replicas"], tp["sequences_per_replica"], tp["waiting_users"]), name
        assert p["cacheSequencesPerReplica"] == tp["cache_sequences_per_replica"], name
        assert js["weightsBytes"] == r["weights_bytes"], name
        assert math.ceil(p["kvBytesPerGpu"]) == tp["kv_bytes_per_gpu"], name
        assert math.ceil(p["overheadBytesPerGpu"]) == tp["overhead_bytes_per_gpu"], name
        assert js["verdict"] == s["verdict"], name
        if overhead is None:
            assert math.ceil(js["activationBytes"]) == s["activation_peak_bytes"], name
            assert js["engine"]["maxNumSeqs"] == s["max_num_seqs"], name
            assert js["nonTorchBytes"] == s["non_torch_bytes"], name
            verdicts += 1
        if tp["waiting_users"]:
            assert js["limit"] is not None and f"{tp['waiting_users']:,} users would wait" in js["limit"]
            assert js["limit"] == s["max_num_seqs_limit"], name
            waiting += 1
    assert verdicts == len(SERVING_CASES) - 1 and waiting >= 2


def _plan_bytes(card: str) -> int:
    from lib.planner.gpus import GPUS

    return GPUS[card].plan_bytes


def test_planner_js_starts_from_the_command_lines_defaults() -> None:
    """The page's defaults are the CLI's (planner_html embeds them): H100-80GB at the engine's total, vLLM's
    newest band, context 4,096, one user, utilization 0.9; and vLLM's max_num_seqs rule for the cards."""
    from lib.planner.cli import serving_web_data
    from lib.planner.command import _parser
    from lib.planner.gpus import GPUS
    from lib.planner.serving import DEFAULT_BAND, vllm_batch_defaults

    sv = serving_web_data()
    args = _parser().parse_args(["x.json"])
    assert (sv["default_gpu"], sv["context"], sv["users"], sv["gpu_memory_utilization"], sv["block_size"]) == (
        GPUS[args.gpu].name, args.context, args.users, args.utilization, args.block_size)
    assert sv["default_band"] == DEFAULT_BAND and sv["gpus"]["H100-80GB"] == GPUS["H100-80GB"].plan_bytes
    runner = """
const P = require(process.argv[1])({}, JSON.parse(process.argv[2]));
const cs = JSON.parse(require('fs').readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(cs.map(([b, n]) => P.batchDefaults(b, n))));
"""
    cards = [(g.plan_bytes, name) for name, g in GPUS.items()] + [(48 * GB, ""), (75 * GiB, ""), (70 * GiB - 1, "")]
    out = subprocess.run([NODE, "-e", runner, str(ROOT / "lib" / "planner" / "web" / "planner.js"), json.dumps(sv)],
                         input=json.dumps(cards), capture_output=True, text=True, timeout=60, check=True)
    assert [tuple(x) for x in json.loads(out.stdout)] == [vllm_batch_defaults(b, n) for b, n in cards]


# models only transformers reads (the chapter's newest presets): (name, users, context, --gpu, --kv-dtype, band,
# --overhead in bytes)
ENGINE_SERVING_CASES = [
    ("gpt-oss-20b", 64, 8192, "H100-80GB", "bf16", "0.12", None),
    ("gpt-oss-20b", 1500, 2048, "H200", "fp8", "0.12", None),
    ("gemma-3-4b-it", 200, 32768, "H100-80GB", "bf16", "0.12", None),
    ("AI21-Jamba-1.5-Mini", 64, 16384, "H100-80GB", "bf16", "0.10", None),
    ("Qwen3-Coder-Next", 32, 8192, "H200", "bf16", "0.12", None),
    ("DeepSeek-V3.2", 16, 8192, "B200", "fp8", "0.12", None),
    ("gemma-3n-E4B-text", 8, 4096, "L4", "bf16", "v0", None),
    ("Llama-4-Scout-17B-16E", 64, 8192, "H100-80GB", "bf16", "0.12", 4 * GiB),
]


def test_planner_js_engine_read_presets_plan_as_the_command_line() -> None:
    """The calculator's plan for a model only transformers reads (its per-layer description: windows, recurrent
    state, latent caches, experts) is lib.planner.cli.report's for the same model and settings, verdict included."""
    pytest.importorskip("transformers")
    from lib.planner.cli import read_model, report
    from lib.planner.serving import ServingAssumptions

    models, raws = {}, {}
    for name, *_ in ENGINE_SERVING_CASES:
        path = ROOT / "tests" / "fixtures" / f"{name}.config.json"
        cfg, em, _ = read_model(path, cache=True)
        assert cfg is None and em is not None, name
        models[name], raws[name] = em, json.loads(path.read_text())
    got = run_node_serving([(normalised(models[n], n), _page_inputs(u, ctx, card, "bf16", kv, band, over, 0))
                            for n, u, ctx, card, kv, band, over in ENGINE_SERVING_CASES])
    for (name, users, context, card, kv, band, over), js in zip(ENGINE_SERVING_CASES, got, strict=True):
        engine = ServingAssumptions.vllm_defaults(_plan_bytes(card), card, vllm_version=band)
        r = report(models[name], raws[name], name=name, context=context, users=users, gpu_name=card, kv_dtype=kv,
                   engine=engine, overhead_bytes=over, max_pp=1)
        s, tp = r["serving"], r["serving"]["tensor_parallel"]
        assert isinstance(js, dict), (name, js)
        p = js["plan"]
        assert (p["gpus"], p["tpDegree"], p["replicas"], p["sequencesPerReplica"], p["waitingUsers"], p["naive"]) == (
            tp["gpus"], tp["tp_degree"], tp["replicas"], tp["sequences_per_replica"], tp["waiting_users"],
            tp["naive_gpus"]), name
        assert js["weightsBytes"] == r["weights_bytes"], name
        assert math.ceil(p["kvBytesPerGpu"]) == tp["kv_bytes_per_gpu"], name
        assert math.ceil(p["weightBytesPerGpu"]) == tp["weight_bytes_per_gpu"], name
        assert math.ceil(p["overheadBytesPerGpu"]) == tp["overhead_bytes_per_gpu"], name
        assert js["verdict"] == s["verdict"] and js["limit"] == s["max_num_seqs_limit"], name
        if over is None:
            assert math.ceil(js["activationBytes"]) == s["activation_peak_bytes"], name
    refused = run_node_serving([(normalised(models["gpt-oss-20b"], "gpt-oss-20b"),
                                 _page_inputs(1, 4096, "H100-80GB", "int4", "bf16", "0.12", None, 0))])
    assert "python -m lib.sizing CONFIG --dtype int4" in refused[0]


def run_node_serving(cases: list) -> list:
    from lib.planner.cli import serving_web_data

    out = subprocess.run([NODE, "-e", SERVING_RUNNER, str(ROOT / "lib" / "planner" / "web" / "planner.js")],
                         input=json.dumps({"bytes_per_dtype": BYTES_PER_DTYPE, "serving": serving_web_data(),
                                           "cases": cases}),
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_planner_html_start_and_training_options() -> None:
    """planner_html's start= is embedded for the page to open on (checked, counts as integers) and training=False
    is passed on; a start the page could not honour is refused in Python, not left to the script."""
    import html as html_mod
    import re

    from lib.planner.cli import planner_html

    models = {n: load_config(ROOT / "tests" / "fixtures" / f"{n}.config.json") for n in ("gpt2", "Mixtral-8x7B-v0.1")}

    def data(**kw):
        page = planner_html(models, **kw)
        return json.loads(html_mod.unescape(re.search(r'data-planner="([^"]*)"', page).group(1)))

    d = data(start={"preset": "Mixtral-8x7B-v0.1", "users": 64, "context": 8192}, training=False)
    assert (d["start"], d["training"]) == ({"preset": "Mixtral-8x7B-v0.1", "users": 64, "context": 8192}, False)
    assert (data()["start"], data()["training"]) == ({}, True)
    for bad in ({"preset": "Llama-2-7b-hf"}, {"gpu": "H200"}, {"users": 0}, {"context": 1.5}):
        with pytest.raises((ValueError, TypeError)):
            planner_html(models, start=bad)
