"""The in-page calculator's time and throughput (issue #35), driven in Chromium on a page made of
lib.planner.cli.planner_html alone (the book's chapter embeds the same HTML): the figures it shows equal
lib.planner.speed's for the plan it shows, and bad input is refused in one line, with no script error."""

from __future__ import annotations

import json
import math
from pathlib import Path

from lib.planner import speed as sp
from lib.planner.cli import planner_html, read_model, report
from lib.planner.gpus import ROOFLINES
from lib.planner.serving import GPUPlan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NAMES = ["Llama-2-7b-hf", "Mixtral-8x7B-v0.1", "Qwen3.5-4B"]


def _models() -> dict:
    out = {}
    for name in NAMES:
        cfg, em, _ = read_model(FIXTURES / f"{name}.config.json", cache=True)
        out[name] = cfg if cfg is not None else em
    return out


def _value(page, key: str) -> float:
    return float(page.get_attribute(f"#planner-out-speed-{key}", "data-value"))


def test_speed_rows_equal_python(page) -> None:
    models = _models()
    page.set_content("<html><body>" + planner_html(models) + "</body></html>")
    page.wait_for_selector("#planner-out-speed-user")
    page.fill("#planner-users", "64")
    page.fill("#planner-context", "4096")
    page.select_option("#planner-speed-card", "A100-80GB")
    assert page.text_content("#planner-out-speed-error") == ""
    cfg = models["Llama-2-7b-hf"]
    r = report(cfg, context=4096, users=64, max_pp=1)  # the page's plan: the CLI's on its default H100-80GB
    plan = GPUPlan(**r["serving"]["tensor_parallel"])
    s = sp.serve(sp.describe(r, cfg), ROOFLINES["A100-80GB"], tp=plan.tp_degree,
                 batch=math.ceil(64 / plan.replicas), n_in=3840, n_out=256)
    assert math.isclose(_value(page, "prefill"), s["prefill_seconds"], rel_tol=1e-9)
    assert math.isclose(_value(page, "step"), s["decode_step_seconds"], rel_tol=1e-9)
    assert math.isclose(_value(page, "token"), s["seconds_per_output_token"], rel_tol=1e-9)
    assert math.isclose(_value(page, "user"), s["tokens_per_second_per_user"], rel_tol=1e-9)
    per_gpu = plan.replicas * s["tokens_per_second_per_replica"] / plan.gpus
    assert math.isclose(_value(page, "gpu"), per_gpu, rel_tol=1e-9)
    assert "3840 prompt + 256 generated tokens" in page.text_content("#planner-out-speed-assumed")
    # an engine-read hybrid: its own serving plan (the CLI's) and verdict, timed on that plan
    page.select_option("#planner-preset", "Qwen3.5-4B")
    assert page.text_content("#planner-out-speed-error") == "" and _value(page, "user") > 0
    raw = json.loads((FIXTURES / "Qwen3.5-4B.config.json").read_text())
    r = report(models["Qwen3.5-4B"], raw, name="Qwen3.5-4B", context=4096, users=64, max_pp=1)
    tp = r["serving"]["tensor_parallel"]
    assert page.text_content("#planner-out-verdict") == r["serving"]["verdict"]
    assert float(page.get_attribute("#planner-out-gpus", "data-value")) == tp["gpus"]
    assert f"tensor-parallel {tp['tp_degree']}; prefill" in page.text_content("#planner-out-speed-assumed")
    assert "one GPU assumed" not in page.text_content("#planner-out-speed-assumed")
    assert not [e for e in page.book_errors if e.startswith(("pageerror", "console.error"))]


def test_speed_refusals(page) -> None:
    page.set_content("<html><body>" + planner_html(_models()) + "</body></html>")
    page.wait_for_selector("#planner-out-speed-user")
    page.fill("#planner-context", "1024")
    page.fill("#planner-speed-input_tokens", "2000")
    assert "exceed the context 1024" in page.text_content("#planner-out-speed-error")
    assert page.get_attribute("#planner-out-speed-user", "data-value") is None
    page.fill("#planner-speed-input_tokens", "0")
    page.fill("#planner-n_layers", "10")  # an edited shape: the preset's description no longer applies
    assert "preset's own shape" in page.text_content("#planner-out-speed-error")
    assert not [e for e in page.book_errors if e.startswith(("pageerror", "console.error"))]
