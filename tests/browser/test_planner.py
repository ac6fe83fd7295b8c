"""The in-page capacity planner (chapters/capacity_planner.html), driven in Chromium and checked against lib.sizing.

The calculator is plain JavaScript (lib/planner/web/planner.js) with no kernel; these tests fill in its form the way a
reader would, read the numbers it shows (each output cell carries its exact value in ``data-value``), and
compare them with lib.sizing for the same inputs: every preset model on the command line's defaults (the same plan
and verdict), the max_num_seqs cap, a fixed overhead, edited architectures, other dtypes and units, and bad input.
One test opens the built chapter; the others a page made of lib.planner.cli.planner_html alone (the chapter embeds
the same HTML).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import urljoin

import pytest
from page_checks import without_math

from lib.constants import GB, GiB
from lib.planner.cli import planner_html, report
from lib.planner.config import load_config
from lib.sizing import model_kv_bytes_per_token, model_kv_cache_bytes, parameter_count, plan_gpus, weight_bytes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PAGE = "chapters/capacity_planner.html"
PRESETS = ["gpt2", "Llama-2-7b-hf", "Mistral-7B-v0.1", "Falcon-7B", "Mixtral-8x7B-v0.1", "DeepSeek-V2-Lite"]
# Script errors the book's pages raise on their own (see test_pages.py, which also checks every request).
HARMLESS = re.compile(r"THEBE_JS_URL|Got invalid theme mode")


def _script_errors(page) -> list[str]:
    return [e for e in page.book_errors if e.startswith(("pageerror", "console.error")) and not HARMLESS.search(e)]


def _open(page, site_url: str) -> None:
    without_math(page)  # the calculator is under test, not the chapter's formulas
    response = page.goto(urljoin(site_url, PAGE), wait_until="load")
    assert response is not None and response.ok, f"{PAGE}: HTTP {response.status if response else 'no response'}"
    page.wait_for_selector("#planner-app #planner-out-gpus", timeout=15_000)


def _value(page, key: str) -> float | None:
    v = page.get_attribute(f"#planner-out-{key}", "data-value")
    return None if v is None else float(v)


def _set(page, **fields: object) -> None:
    for name, value in fields.items():
        selector = f"#planner-{name}"
        if page.evaluate(f"document.querySelector('{selector}').tagName") == "SELECT":
            page.select_option(selector, str(value))
        else:
            page.fill(selector, str(value))


def _check(page, cfg, *, context: int, users: int, gpu_bytes: int, dtype: str, kv_dtype: str, frac: float,
           overhead_gib: float) -> None:
    """The page with a fixed overhead (the CLI's --overhead): lib.sizing.plan_gpus's plan."""
    error = page.text_content("#planner-out-error")
    assert error == "", f"{cfg.name}: the calculator reports {error!r}"
    p = parameter_count(cfg)
    plan = plan_gpus(cfg, users=users, context=context, gpu_memory_bytes=gpu_bytes, memory_fraction=frac,
                     overhead_bytes=overhead_gib * GiB, dtype=dtype, kv_dtype=kv_dtype)
    want = {
        "params_total": p.total,
        "params_active": p.active,
        "kv_token": model_kv_bytes_per_token(cfg, kv_dtype),
        "weights": weight_bytes(p.total, dtype),
        "kv_total": model_kv_cache_bytes(cfg, context, users, kv_dtype),
        "naive": plan.naive_gpus,
        "gpus": plan.gpus,
        "layout": plan.tp_degree,
    }
    got = {key: _value(page, key) for key in want}
    assert got == pytest.approx(want, rel=1e-12, abs=0), cfg.name
    # The text a reader sees says the same, with both units labelled.
    assert page.text_content("#planner-out-gpus") == str(plan.gpus)
    weights_text = page.text_content("#planner-out-weights")
    assert f"{want['weights'] / GB:,.2f} GB" in weights_text and f"{want['weights'] / GiB:,.2f} GiB" in weights_text
    assert "given" in page.text_content("#planner-out-overhead")


def _page_with_presets(page) -> None:
    """The calculator as planner_html builds it for the chapter's presets (the chapter embeds the same HTML)."""
    models = {name: load_config(FIXTURES / f"{name}.config.json") for name in PRESETS}
    page.set_content("<html><body>" + planner_html(models) + "</body></html>")
    page.wait_for_selector("#planner-app #planner-out-gpus", timeout=15_000)


def test_page_embeds_the_calculator_with_the_cli_verdict(page, site_url: str) -> None:
    """The chapter's calculator opens on the chapter's question (Mixtral, 64 users of 8,192 tokens, the CLI's
    H100 defaults), says what the CLI says for it, and shows no training form (that is train_memory's)."""
    _open(page, site_url)
    cfg = load_config(FIXTURES / "Mixtral-8x7B-v0.1.config.json")
    assert page.input_value("#planner-gpu") == "H100-80GB"
    assert page.input_value("#planner-preset") == "Mixtral-8x7B-v0.1"
    assert (page.input_value("#planner-users"), page.input_value("#planner-context")) == ("64", "8192")
    r = report(cfg, users=64, context=8192, max_pp=1)
    assert page.text_content("#planner-out-verdict") == r["serving"]["verdict"]
    assert _value(page, "gpus") == r["serving"]["tensor_parallel"]["gpus"]
    assert page.query_selector("#planner-train-gpus") is None
    assert not _script_errors(page), _script_errors(page)


def test_start_and_training_options(page) -> None:
    """planner_html's start= opens the form on a preset and a workload; training=False drops the second form."""
    models = {name: load_config(FIXTURES / f"{name}.config.json") for name in PRESETS}
    start = {"preset": "Mixtral-8x7B-v0.1", "users": 64, "context": 8192}
    page.set_content("<html><body>" + planner_html(models, start=start, training=False) + "</body></html>")
    page.wait_for_selector("#planner-app #planner-out-gpus", timeout=15_000)
    r = report(models["Mixtral-8x7B-v0.1"], users=64, context=8192, max_pp=1)
    assert page.text_content("#planner-out-error") == ""
    assert _value(page, "gpus") == r["serving"]["tensor_parallel"]["gpus"]
    assert page.text_content("#planner-out-verdict") == r["serving"]["verdict"]
    assert page.query_selector("#planner-train-gpus") is None and "training step" not in page.inner_text("#planner-app")
    # at 1280 px every input stays inside its form
    page.set_viewport_size({"width": 1280, "height": 900})
    out = page.evaluate("""() => Array.from(document.querySelectorAll('#planner-app form')).flatMap((f) => {
        const r = f.getBoundingClientRect();
        return Array.from(f.querySelectorAll('input, select')).filter((i) =>
            i.getBoundingClientRect().right > r.right + 0.5).map((i) => i.name); })""")
    assert out == [], out
    assert not _script_errors(page), _script_errors(page)


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_open_on_the_cli_plan(page, preset: str) -> None:
    """Each preset, untouched but for the workload: the CLI's plan (H100-80GB at the engine's total, vLLM's
    activation peak and non-torch memory, vLLM's window reservation) and its verdict, word for word."""
    _page_with_presets(page)
    _set(page, preset=preset)
    _set(page, context=8192, users=64, kv_dtype="fp8")
    cfg = load_config(FIXTURES / f"{preset}.config.json")
    assert int(page.input_value("#planner-n_layers")) == cfg.n_layers
    assert page.text_content("#planner-out-error") == ""
    r = report(cfg, context=8192, users=64, kv_dtype="fp8", max_pp=1)
    tp = r["serving"]["tensor_parallel"]
    assert (_value(page, "gpus"), _value(page, "layout"), _value(page, "weights")) == (
        tp["gpus"], tp["tp_degree"], r["weights_bytes"])
    assert page.text_content("#planner-out-verdict") == r["serving"]["verdict"]
    assert _value(page, "overhead") == pytest.approx(tp["overhead_bytes_per_gpu"], abs=1)
    assert "activation peak" in page.text_content("#planner-out-overhead")
    assert not _script_errors(page), _script_errors(page)


def test_max_num_seqs_caps_and_users_wait(page) -> None:
    """1,500 users of Mistral at 512 tokens on an H200: the cache holds more than vLLM runs at once; the page
    counts max_num_seqs per replica and says how many users would wait, as the CLI does."""
    _page_with_presets(page)
    _set(page, preset="Mistral-7B-v0.1", gpu="H200")
    _set(page, context=512, users=1500)
    r = report(load_config(FIXTURES / "Mistral-7B-v0.1.config.json"), context=512, users=1500, gpu_name="H200",
               max_pp=1)
    tp = r["serving"]["tensor_parallel"]
    assert tp["waiting_users"] > 0 and _value(page, "concurrency") == tp["sequences_per_replica"] == 1024
    assert f"{tp['waiting_users']:,} users would wait" in page.text_content("#planner-out-concurrency")
    assert _value(page, "gpus") == tp["gpus"]


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_with_a_fixed_overhead_match_lib(page, preset: str) -> None:
    _page_with_presets(page)
    _set(page, preset=preset)
    workload = dict(context=8192, users=64, gpu="custom", gpu_unit="GB", gpu_memory=80, memory_fraction=0.9,
                    overhead=1.5, dtype="bf16", kv_dtype="fp8")
    _set(page, **workload)
    cfg = load_config(FIXTURES / f"{preset}.config.json")
    _check(page, cfg, context=8192, users=64, gpu_bytes=80 * GB, dtype="bf16", kv_dtype="fp8", frac=0.9,
           overhead_gib=1.5)
    assert not _script_errors(page), _script_errors(page)


def test_edited_architecture_and_units(page) -> None:
    """A reader turns Llama 2 7B into a grouped-query model with a window, on 141 GiB cards in fp16/int8."""
    _page_with_presets(page)
    _set(page, preset="Llama-2-7b-hf")
    _set(page, n_kv_heads=8, sliding_window=1024, context=32768, users=300, gpu="custom", gpu_unit="GiB",
         gpu_memory=141, memory_fraction=0.85, overhead=0, dtype="fp16", kv_dtype="int8")
    cfg = replace(load_config(FIXTURES / "Llama-2-7b-hf.config.json"), n_kv_heads=8, sliding_window=1024)
    _check(page, cfg, context=32768, users=300, gpu_bytes=141 * GiB, dtype="fp16", kv_dtype="int8", frac=0.85,
           overhead_gib=0)
    # and the GQA saving is the one the chapter states: 4x fewer bytes per token than the multi-head preset
    assert _value(page, "kv_token") == 2 * 32 * 8 * 128 * 1


def test_bad_input_is_reported_not_computed(page) -> None:
    _page_with_presets(page)
    _set(page, preset="Mistral-7B-v0.1")
    _set(page, n_kv_heads=5)
    assert "not divisible by 5 key/value heads" in page.text_content("#planner-out-error")
    assert _value(page, "gpus") is None and page.text_content("#planner-out-gpus") == ""
    _set(page, n_kv_heads=8, users=0)
    assert "users must be a positive whole number" in page.text_content("#planner-out-error")
    _set(page, users=1, gpu="custom", gpu_unit="GB", gpu_memory=0.1)  # 100 MB cards: nothing fits
    assert "does not fit" in page.text_content("#planner-out-error")
    _set(page, gpu_memory=80)
    assert page.text_content("#planner-out-error") == "" and _value(page, "gpus") == 1
    assert not _script_errors(page), _script_errors(page)


def test_javascript_formulas_match_lib_on_random_models(page) -> None:
    """The page's planner functions, called directly, against lib.sizing on 60 random variations of the presets."""
    import random
    from dataclasses import asdict

    from lib.sizing import bytes_per_element

    _page_with_presets(page)
    rng = random.Random(0)
    dtypes = ["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
    checked = 0
    for _ in range(60):
        base = load_config(FIXTURES / f"{rng.choice(PRESETS)}.config.json")
        h_kv = rng.choice([d for d in (1, 2, 4, 8, base.n_heads) if base.n_heads % d == 0])
        cfg = replace(base, n_layers=rng.randint(1, 96), n_kv_heads=base.n_kv_heads if base.kv_lora_rank else h_kv,
                      sliding_window=rng.choice([None, 512, 4096]), vocab_size=rng.randint(1000, 200_000))
        o = dict(context=rng.randint(1, 131_072), users=rng.randint(1, 512),
                 gpu_memory_bytes=rng.choice([24, 80, 141]) * GB,
                 memory_fraction=rng.choice([0.5, 0.8, 0.9, 1.0]), overhead_bytes=rng.choice([0, 2 * GB]),
                 dtype=rng.choice(dtypes), kv_dtype=rng.choice(dtypes))
        js = page.evaluate(
            """([c, o]) => {
                const P = document.getElementById('planner-app').planner;
                let plan = null, error = null;
                try {
                    plan = P.planGpus(c, {context: o.context, users: o.users, gpuMemoryBytes: o.gpu_memory_bytes,
                        memoryFraction: o.memory_fraction, overheadBytes: o.overhead_bytes, dtype: o.dtype,
                        kvDtype: o.kv_dtype});
                } catch (e) { error = String(e.message); }
                return {params: P.parameterCount(c), kv: P.kvBytesPerToken(c, o.kv_dtype), plan: plan, error: error};
            }""",
            [asdict(cfg), o],
        )
        p = parameter_count(cfg)
        assert (js["params"]["total"], js["params"]["active"]) == (p.total, p.active)
        assert js["kv"] == model_kv_bytes_per_token(cfg, o["kv_dtype"])
        try:
            plan = plan_gpus(cfg, **o)
        except ValueError as err:
            assert "does not fit" in str(err) and js["error"] and "does not fit" in js["error"]
            continue
        assert js["error"] is None, js["error"]
        got = js["plan"]["plan"]
        assert (got["gpus"], got["tpDegree"], got["replicas"], got["sequencesPerReplica"], got["naive"]) == (
            plan.gpus, plan.tp_degree, plan.replicas, plan.sequences_per_replica, plan.naive_gpus)
        assert js["plan"]["weightsBytes"] == p.total * bytes_per_element(o["dtype"])
        checked += 1
    assert checked >= 30  # most random workloads fit somewhere; the rest were compared as "does not fit"
