"""lib.planner.engine against transformers, the oracle, on every published fixture: parameters (total, active per
token), KV bytes per token, the KV cache of an 8192-token sequence in fp16 and, for hybrids, the per-sequence
recurrent state; and the hand-written readers against the engine for every family they cover.

The engine reads the modules of the model transformers builds (projection widths, experts, convolution kernels);
the oracle reads the config the way transformers' own cache lays it out (tests/hf_oracle.py). Meta device only.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from hf_oracle import hf_cache, hf_counts

from lib.planner import engine
from lib.planner.cache import model_kv_bytes_per_sequence, model_kv_bytes_per_token
from lib.planner.cli import normalised, read_model
from lib.planner.config import SUPPORTED_MODEL_TYPES
from lib.planner.counts import parameter_count
from lib.planner.serving import engine_plan, plan_gpus

FIXTURES = Path(__file__).parent / "fixtures"
FILES = sorted(FIXTURES.glob("*.config.json"))
IDS = [f.name.removesuffix(".config.json") for f in FILES]
HAND = [f for f in FILES if json.loads(f.read_text()).get("model_type") in SUPPORTED_MODEL_TYPES]


@cache
def _engine(path: Path) -> engine.EngineModel:
    """The engine's reading of a fixture, built once per test session (the oracle caches its own models)."""
    return engine.describe(json.loads(path.read_text()))


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_engine_equals_transformers(path: Path) -> None:
    m = _engine(path)
    assert (m.total, m.active) == hf_counts(str(path))
    layers, state = hf_cache(str(path))
    per_token = sum(e for e, _ in layers) * 2
    at_8192 = sum(e * (min(8192, w) if w else 8192) for e, w in layers) * 2
    assert engine.kv_bytes_per_token(m, "fp16") == per_token
    assert engine.kv_bytes_per_sequence(m, 8192, "fp16") == at_8192
    assert engine.state_bytes_per_sequence(m, "fp16") == state * 2
    assert [layer.window for layer in m.layers if layer.kv_per_token] == [w for e, w in layers if e]


@pytest.mark.parametrize("path", HAND, ids=[f.name.removesuffix(".config.json") for f in HAND])
def test_hand_readers_agree_with_the_engine(path: Path) -> None:
    cfg, m = read_model(path)[0], _engine(path)  # falcon-40b: read after transformers checked multi_query
    counts = parameter_count(cfg)
    assert (counts.total, counts.active) == (m.total, m.active)
    assert model_kv_bytes_per_token(cfg, "fp16") == engine.kv_bytes_per_token(m, "fp16")
    assert model_kv_bytes_per_sequence(cfg, 8192, "fp16") == engine.kv_bytes_per_sequence(m, 8192, "fp16")
    assert engine.state_bytes_per_sequence(m) == 0
    # the in-page calculator's per-layer description is the same whichever reader made it
    hand, built = normalised(cfg), normalised(m, cfg.name)
    assert {k: hand[k] for k in PER_LAYER_KEYS} == {k: built[k] for k in PER_LAYER_KEYS}
    # the serving plans agree too: the engine's per-layer parameters and caches stage for stage
    for work in (dict(users=64, context=8192, max_pp=1), dict(users=256, context=32768, max_pp=8, kv_dtype="fp8")):
        assert _plan_or_refusal(plan_gpus, cfg, work) == _plan_or_refusal(engine_plan, m, work)


PER_LAYER_KEYS = ("layers", "layer_kinds", "windows", "layer_kv_elements", "layer_state_elements", "layer_params",
                  "layer_active_params", "layer_kv_projection", "first_params", "last_params", "tied_head", "latent",
                  "parameters")


def test_normalised_engine_description_adds_up() -> None:
    """The keys the calculator renders for a model only transformers knows reproduce the engine's totals."""
    for name in ("gpt-oss-20b", "Qwen3-Coder-Next", "gemma-3-4b-it"):
        m = _engine(FIXTURES / f"{name}.config.json")
        d = normalised(m, name)
        assert d["first_params"] + sum(d["layer_params"]) + d["last_params"] == m.total == d["parameters"]["total"]
        assert sum(d["layer_kv_elements"]) * 2 == engine.kv_bytes_per_token(m, "fp16")
        assert sum(d["layer_state_elements"]) * 2 == engine.state_bytes_per_sequence(m, "fp16")
        assert json.loads(json.dumps(d)) == d
    assert normalised(_engine(FIXTURES / "gpt-oss-20b.config.json"))["layer_kinds"][:2] == [
        "window 128 (sinks)", "full (sinks)"]


def _plan_or_refusal(planner, model, work: dict):
    try:
        return planner(model, gpu_memory_bytes=80 * 10**9, overhead_bytes=3 * 10**9, **work)
    except ValueError as err:
        return str(err)


def test_every_hand_family_and_at_least_the_newest_have_fixtures() -> None:
    types = {json.loads(f.read_text())["model_type"] for f in FILES}
    assert set(SUPPORTED_MODEL_TYPES) <= types
    assert {"gpt_oss", "qwen3_next", "smollm3", "exaone4", "nemotron_h", "falcon_h1", "phi", "gemma3", "gemma3n_text",
            "kimi_k2", "jamba", "llama4", "llama4_text", "granite", "glm4_moe", "ernie4_5_moe", "hunyuan_v1_moe",
            "minimax_m2", "seed_oss", "qwen3_5_text", "qwen3_5_moe_text", "deepseek_v32"} <= types
    assert len(FILES) >= 45


def test_layer_kinds_named() -> None:
    gpt_oss = _engine(FIXTURES / "gpt-oss-20b.config.json")
    assert engine.layer_summary(gpt_oss) == "24 layers: 12 window 128 (sinks), 12 full (sinks)"
    # the 128-token window is on 12 layers, not all 24: the cache is the full layers' plus 128 tokens of the rest
    per_layer = 2 * 8 * 64 * 2
    assert engine.kv_bytes_per_sequence(gpt_oss, 8192, "fp16") == per_layer * (12 * 8192 + 12 * 128)
    nxt = _engine(FIXTURES / "Qwen3-Coder-Next.config.json")
    assert engine.layer_summary(nxt) == "48 layers: 36 linear_attention, 12 full"
    nemo = _engine(FIXTURES / "Nemotron-H-geometry-56L.config.json")
    assert engine.layer_summary(nemo) == "56 layers: 27 mamba, 25 feed-forward only, 4 full"


def test_lightning_attention_holds_a_state_not_a_cache() -> None:
    """MiniMax's linear ("lightning") attention sits in ``self_attn`` with a fused ``qkv_proj``, the shape of
    attention's projections, but caches nothing per token: transformers keeps one heads x d x d state per
    sequence for it. A small MiniMax built from transformers' own defaults (every 4th layer full attention)."""
    from transformers import MiniMaxConfig

    cfg = MiniMaxConfig(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
                        head_dim=64, num_hidden_layers=8, num_local_experts=4, num_experts_per_tok=2,
                        vocab_size=1000, layer_types=["linear_attention"] * 3 + ["full_attention"]
                        + ["linear_attention"] * 3 + ["full_attention"])
    m = engine.describe(cfg.to_dict())
    assert engine.layer_summary(m) == "8 layers: 6 linear_attention, 2 full"
    assert [layer.kv_per_token for layer in m.layers if layer.kind == "full"] == [2 * 2 * 64] * 2
    assert [layer.state for layer in m.layers if layer.kind == "linear_attention"] == [4 * 64 * 64] * 6


def test_a_declared_recurrent_layer_counted_as_attention_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were the engine to miss a linear-attention module (as it once did MiniMax's), the config's own
    ``layer_types`` contradicts the kinds it found, and it refuses instead of planning a cache that is not there."""
    from transformers import MiniMaxConfig

    monkeypatch.setattr(engine, "_is_linear_attention", lambda sub: False)
    cfg = MiniMaxConfig(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
                        head_dim=64, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
                        vocab_size=1000, layer_types=["linear_attention", "full_attention"])
    with pytest.raises(engine.EngineError, match="layer 0: the config declares 'linear_attention'"):
        engine.describe(cfg.to_dict())


def test_unknown_type_refused_in_one_line() -> None:
    with pytest.raises(engine.EngineError) as err:
        engine.describe({"model_type": "no_such_model", "architectures": ["NoSuchForCausalLM"]})
    assert "\n" not in str(err.value) and "no_such_model" in str(err.value)


def test_hub_type_mapped_through_architectures() -> None:
    raw = json.loads((FIXTURES / "DeepSeek-V3.config.json").read_text())
    m = engine.describe({**raw, "model_type": "kimi_k2"})  # Kimi-K2 ships DeepSeek-V3's architecture
    assert m.notes and "deepseek_v3" in m.notes[0]
    assert (m.total, m.active) == hf_counts(str(FIXTURES / "DeepSeek-V3.config.json"))


def test_wrapper_counts_the_whole_checkpoint_and_names_the_language_share() -> None:
    """An image-text-to-text checkpoint is built whole (its vision tower is in the weights a server loads); the
    language model's share is reported beside it."""
    g3 = _engine(FIXTURES / "gemma-3-4b-it.config.json")
    assert g3.total == 4_300_079_472 and g3.language_total < g3.total  # the card: 4.3B
    assert engine.layer_summary(g3) == "34 layers: 29 window 1024, 5 full"


def test_published_value_transformers_refuses_is_refused_in_one_line() -> None:
    """Llama 4 Scout's release writes attn_temperature_tuning as 4; transformers 5.24 validates it as a bool and
    refuses to build the config. The engine says so in one line rather than guessing."""
    raw = json.loads((FIXTURES / "Llama-4-Scout-17B-16E.config.json").read_text())
    raw["text_config"] = {**raw["text_config"], "attn_temperature_tuning": 4}
    with pytest.raises(engine.EngineError) as err:
        engine.describe(raw)
    assert "\n" not in str(err.value) and "attn_temperature_tuning" in str(err.value)


def test_per_layer_top_k_and_shared_kv_layers() -> None:
    hunyuan = _engine(FIXTURES / "Hunyuan-A13B.config.json")  # moe_topk is a list, one per layer
    assert hunyuan.active < hunyuan.total / 6
    g3n = _engine(FIXTURES / "gemma-3n-E4B-text.config.json")  # the last 15 layers reuse earlier caches
    assert sum(1 for layer in g3n.layers if layer.kv_per_token == 0) == 15


def test_routed_experts_without_a_top_k_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mixture of experts whose top-k field the engine does not know is refused, not counted as dense."""
    monkeypatch.setattr(engine, "_TOP_K", ("no_such_field",))
    raw = json.loads((FIXTURES / "Mixtral-8x7B-v0.1.config.json").read_text())
    with pytest.raises(engine.EngineError, match="top-k"):
        engine.describe(raw)


def test_every_fixture_is_planned() -> None:
    """Every published config gets a serving plan from the engine's description (vLLM's accounting, 64 users of
    8192 tokens on H100s), no fewer GPUs than the naive count, and weights plus cache within the budget."""
    from lib.planner.gpus import GPUS

    memory = GPUS["H100-80GB"].plan_bytes
    for path in FILES:
        m = _engine(path)
        plan = engine_plan(m, users=64, context=8192, gpu_memory_bytes=memory, max_pp=8)
        assert plan.gpus >= plan.naive_gpus >= 1, path.name
        assert plan.weight_bytes_per_gpu + plan.kv_bytes_per_gpu <= plan.usable_bytes_per_gpu, path.name


def test_recurrent_state_as_vllm_holds_it() -> None:
    """Issue 31 item 11: vLLM keeps conv_kernel - 1 columns of convolution state (its MambaStateShapeCalculator),
    transformers the whole kernel: Qwen3-Coder-Next 37.6875 MiB per sequence in bf16 against 38.25, Jamba 1.5 Mini
    the cache of 532 tokens against 560. The planner's report and plans use vLLM's figure."""
    from lib.planner.cli import report

    MiB = 2**20
    nxt = _engine(FIXTURES / "Qwen3-Coder-Next.config.json")
    assert engine.state_bytes_per_sequence(nxt, "bf16") == 38.25 * MiB
    assert engine.state_bytes_per_sequence(nxt, "bf16", layout="vllm") == 37.6875 * MiB
    jamba = _engine(FIXTURES / "AI21-Jamba-1.5-Mini.config.json")
    per_token = engine.kv_bytes_per_token(jamba, "bf16")
    assert engine.state_bytes_per_sequence(jamba, "bf16") == 560 * per_token
    assert engine.state_bytes_per_sequence(jamba, "bf16", layout="vllm") == 532 * per_token
    raw = json.loads((FIXTURES / "Qwen3-Coder-Next.config.json").read_text())
    assert report(nxt, raw)["state_bytes_per_sequence"] == 37.6875 * MiB
    with pytest.raises(ValueError, match="layout"):
        engine.state_bytes_per_sequence(nxt, "bf16", layout="sglang")


@pytest.mark.parametrize("path", HAND, ids=[f.name.removesuffix(".config.json") for f in HAND])
def test_engine_flops_equal_the_hand_formulas(path: Path) -> None:
    """Issue 33 item 5: FLOPs per token for every model, engine-read ones included, in the hand-written formulas'
    convention; for every hand family the two agree (Qwen2-MoE: within 1e-5, its shared expert's one-output gate
    is a matrix the hand formula leaves out), and the crossover too (DeepSeek-V2-Lite: within 0.2 %, the hand
    formula takes the kind of layer most layers are, the engine every layer)."""
    from lib.planner.flops import forward_flops, model_crossover_length

    cfg, m = read_model(path)[0], _engine(path)
    for context in (1, 8192):
        hand, built = forward_flops(cfg, context), engine.forward_flops(m, context)
        for part in ("attention", "projections", "ffn", "lm_head", "total"):
            assert built[part] == pytest.approx(getattr(hand, part), rel=1e-5, abs=0), part
    assert engine.crossover_context(m) == pytest.approx(model_crossover_length(cfg), rel=2e-3)


def test_engine_flops_for_models_only_the_engine_reads() -> None:
    """gpt-oss-20b by hand: 2 FLOPs per weight of its attention matrices and of 4 of 32 experts (router left out),
    2 x 64 heads x (64 + 64) per cached key (each layer its window), 2 d V for the head."""
    m = _engine(FIXTURES / "gpt-oss-20b.config.json")
    f = engine.forward_flops(m, 4096)
    d, v = 2880, 201088
    attn_weights = d * 64 * 64 + 2 * d * 8 * 64 + 64 * 64 * d
    assert f["projections"] == 24 * 2 * attn_weights
    assert f["ffn"] == 24 * 2 * 4 * (d * 2 * 2880 + 2880 * d)
    assert f["attention"] == 2 * 64 * 128 * (12 * 128 + 12 * 4096)
    assert f["lm_head"] == 2 * d * v
    hybrid = _engine(FIXTURES / "Nemotron-H-geometry-56L.config.json")  # 4 attention layers among Mamba's
    assert engine.crossover_context(hybrid) > engine.crossover_context(m) > 0


def test_the_tests_temporary_cache_is_the_planners() -> None:
    """conftest.py names the planner's cache variable rather than importing it: the two must agree, or every
    test would write the engine's descriptions to the user's cache folder."""
    import ast
    import os

    # read from the file: ``import conftest`` finds whichever conftest.py (tests/ or tests/browser/) came first
    tree = ast.parse((Path(__file__).parent / "conftest.py").read_text(encoding="utf-8"))
    names = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
             if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}
    assert names["PLANNER_CACHE_ENV"] == engine.CACHE_ENV
    assert os.environ[engine.CACHE_ENV].endswith("planner-cache")
