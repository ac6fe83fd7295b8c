"""Every supported family against transformers, the oracle: parameter counts (total and active per token) of real
published configs and of their default-filled minimal forms, and each layer's sliding window.

transformers is a test dependency (requirements.txt); lib never imports it. Models are built on the meta device
(tests/hf_oracle.py): no weights are allocated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hf_oracle import hf_config, hf_counts

from lib.planner.cache import cached_token_layers, model_kv_cache_bytes
from lib.planner.config import SUPPORTED_MODEL_TYPES, UnsupportedConfigError, config_from_dict, load_config
from lib.planner.counts import parameter_count

FIXTURES = Path(__file__).parent / "fixtures"


def _hand_readable(f: Path) -> bool:
    try:
        load_config(f)
    except UnsupportedConfigError:
        return False
    return True


# the fixtures the hand-written readers read by themselves (the others: tests/test_engine.py, tests/test_cli.py)
FILES = sorted(f for f in FIXTURES.glob("*.config.json") if _hand_readable(f))
RAW = {f.name.removesuffix(".config.json"): json.loads(f.read_text()) for f in FILES}

# Published figures in billions (model cards: total, active), which cards round or truncate: ours within 0.06 B.
PUBLISHED_B = {"Qwen2-57B-A14B": (57.4, 14.2), "Qwen3-30B-A3B": (30.5, 3.3), "DeepSeek-V3": (671.0, 37.6),
               "gemma-2-9b": (9.2, 9.2), "Qwen3-8B": (8.2, 8.2), "Phi-3-mini-4k-instruct": (3.8, 3.8)}


def test_every_supported_family_has_a_published_fixture() -> None:
    assert {raw["model_type"] for raw in RAW.values()} == set(SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("path", FILES, ids=[f.name.removesuffix(".config.json") for f in FILES])
def test_count_equals_transformers(path: Path) -> None:
    ours = parameter_count(load_config(path))
    total, active = hf_counts(str(path))
    assert (ours.total, ours.active) == (total, active)


@pytest.mark.parametrize("name", sorted(PUBLISHED_B))
def test_counts_round_to_published_figures(name: str) -> None:
    p = parameter_count(load_config(FIXTURES / f"{name}.config.json"))
    total, active = PUBLISHED_B[name]
    assert abs(p.total / 1e9 - total) < 0.06 and abs(p.active / 1e9 - active) < 0.06


_REQUIRED = {"model_type", "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
             "intermediate_size", "vocab_size", "head_dim", "n_layer", "n_embd", "n_head", "n_positions",
             "num_local_experts", "num_experts", "num_experts_per_tok", "moe_intermediate_size", "n_routed_experts",
             "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank",
             "shared_expert_intermediate_size", "n_shared_experts", "first_k_dense_replace", "n_inner"}


@pytest.mark.parametrize("name", sorted(RAW))
def test_family_defaults_equal_transformers(name: str, tmp_path: Path) -> None:
    """Only the size fields kept: every other field (ties, biases, windows) takes the family's default, which
    must be transformers' default."""
    raw = {k: v for k, v in RAW[name].items() if k in _REQUIRED}
    f = tmp_path / f"{name}.config.json"
    f.write_text(json.dumps(raw))
    ours = parameter_count(load_config(f))
    assert (ours.total, ours.active) == hf_counts(str(f))


def _hf_windows(raw: dict) -> tuple:
    hf = hf_config(raw)
    n = hf.num_hidden_layers
    types = getattr(hf, "layer_types", None)
    window = getattr(hf, "sliding_window", None) or None
    if types is not None:
        return tuple(window if t == "sliding_attention" else None for t in types)
    return (window,) * n


WINDOW_CASES = {
    **RAW,
    "qwen2 windowed": {**RAW["Qwen2.5-7B-Instruct"], "use_sliding_window": True, "sliding_window": 4096,
                       "max_window_layers": 20},
    "qwen3 windowed": {**RAW["Qwen3-8B"], "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 30},
    "qwen2_moe windowed": {**RAW["Qwen2-57B-A14B"], "use_sliding_window": True, "sliding_window": 4096,
                           "max_window_layers": 21},
    "qwen3_moe windowed": {**RAW["Qwen3-30B-A3B"], "use_sliding_window": True, "sliding_window": 4096},
    "gemma3 pattern 4": {**RAW["gemma-3-1b-pt"], "sliding_window_pattern": 4},
    "gemma2 layer_types": {**RAW["gemma-2-9b"], "layer_types": ["full_attention"] * 40 + ["sliding_attention"] * 2},
}


@pytest.mark.parametrize("name", sorted(WINDOW_CASES))
def test_each_layer_window_equals_transformers(name: str) -> None:
    raw = WINDOW_CASES[name]
    assert config_from_dict(raw, name).windows == _hf_windows(raw)


def test_gemma_kv_summed_layer_by_layer() -> None:
    """Gemma 2 9B at 8,192 tokens: 21 local layers hold 4,096 tokens, 21 global ones 8,192: 25 % less than 42
    full layers (the issue's planner, reading every layer as global, overstated it by a third)."""
    g2 = load_config(FIXTURES / "gemma-2-9b.config.json")
    assert cached_token_layers(g2, 8192) == 21 * 4096 + 21 * 8192
    assert model_kv_cache_bytes(g2, 8192, 1, "bf16") == 2 * 8 * 256 * 2 * (21 * 4096 + 21 * 8192)
    g3 = load_config(FIXTURES / "gemma-3-1b-pt.config.json")  # 26 layers: 22 local (512), 4 global
    assert sum(w is None for w in g3.windows) == 4
    assert cached_token_layers(g3, 32768) == 22 * 512 + 4 * 32768
