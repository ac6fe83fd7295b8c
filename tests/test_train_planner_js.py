"""The page's training form (planner.js) against the Python planner by value: the ZeRO rule, whose one home is
lib.planner.training.shard_states; LoRA's activations for any set of adapted projections; an NF4 base."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from lib.constants import BYTES_PER_DTYPE
from lib.planner import training as T
from lib.planner.config import load_config
from lib.planner.train_cli import training_report
from lib.sizing import normalised

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
LLAMA = ROOT / "tests" / "fixtures" / "Llama-2-7b-hf.config.json"
RUNNER = """
const planner = require(process.argv[1]);
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const P = planner(input.bytes_per_dtype);
process.stdout.write(JSON.stringify(input.calls.map(([fn, args]) => {
  try { return P[fn](...args); } catch (e) { return String(e.message); }
})));
"""
BASE = dict(dtype="bf16", context=2048, microBatch=1, optimizer="adamw", attention="eager", checkpointing="none",
            zero=0, gpus=1, tp=1, pp=1, loraRank=0, loraTargets=["q_proj", "v_proj"], tokens=None, mfu=0.4,
            peakTflops=989.0)


def node(calls: list) -> list:
    assert NODE, "node is part of the test set-up"
    out = subprocess.run([NODE, "-e", RUNNER, str(ROOT / "lib" / "planner" / "web" / "planner.js")],
                         input=json.dumps({"bytes_per_dtype": BYTES_PER_DTYPE, "calls": calls}),
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def _args(o: dict) -> argparse.Namespace:
    return argparse.Namespace(
        dtype=o["dtype"], context=o["context"], micro_batch=o["microBatch"], optimizer=o["optimizer"],
        attention=o["attention"], checkpointing=o["checkpointing"], zero=o["zero"], gpus=o["gpus"], tp=o["tp"],
        pp=o["pp"], lora_rank=o["loraRank"] or None, lora_targets=",".join(o["loraTargets"]),
        tokens=o["tokens"], mfu=o["mfu"], peak_tflops=o["peakTflops"])


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_rule_by_value(stage):
    """Llama 2 7B, mixed-precision AdamW, 8 data-parallel GPUs: weights 2N, gradients 2N, optimizer 12N bytes,
    each divided by 8 from the stage that shards it (3, 2, 1). Written out here, checked against the rule's
    home, the CLI and the page: a broken stage in any of them fails."""
    raw = json.loads(LLAMA.read_text())
    N = T.llama_shape(raw).parameters()
    want = {"weights": 2 * N / (8 if stage >= 3 else 1), "gradients": 2 * N / (8 if stage >= 2 else 1),
            "optimizer": 12 * N / (8 if stage >= 1 else 1)}
    assert T.shard_states(2 * N, 2 * N, 12 * N, stage, 8) == want
    assert T.zero_state_bytes(N, "adamw", stage, 8) == want
    o = {**BASE, "zero": stage, "gpus": 8}
    r = training_report(raw, _args(o))
    c = normalised(load_config(LLAMA))
    js_shard, js_plan = node([["shardStates", [2 * N, 2 * N, 12 * N, stage, 8, 1]], ["trainingPlan", [c, o]]])
    assert js_shard == want
    for key, name in (("weights", "weights_bytes"), ("gradients", "gradients_bytes"), ("optimizer", "optimizer_bytes")):
        assert r[name] == js_plan[key] == -(-want[key] // 1)


@pytest.mark.parametrize("targets", [["q_proj", "v_proj"], ["o_proj", "down_proj"], ["gate_proj"],
                                     ["k_proj", "up_proj"]])
@pytest.mark.parametrize("attention", ["eager", "flash"])
def test_lora_activations_and_nf4_base_on_the_page(targets, attention):
    """LoRA's peak and an NF4 base: the page's numbers equal the CLI's, which equal the closed forms."""
    raw = json.loads(LLAMA.read_text())
    s = T.llama_shape(raw)
    c = normalised(load_config(LLAMA))
    o = {**BASE, "dtype": "int4", "loraRank": 16, "loraTargets": targets, "attention": attention,
         "checkpointing": "every:4"}
    r = training_report(raw, _args(o))
    (js,) = node([["trainingPlan", [c, o]]])
    assert r["activation_bytes"] == js["activation"] == T.llama_peak_bytes(
        s, 1, 2048, 2, attention, "every:4", lora_rank=16, lora_targets=targets)["peak"]
    lin = s.linear_numels()
    base = T.quantized_base_bytes(lin, s.parameters() - sum(lin), "int4")
    assert r["weights_bytes"] == js["weights"] == base + 2 * T.lora_parameters(s, 16, targets)
