"""lib.sizing and lib.planner.config: published parameter counts, hand-checked KV bytes for every attention
variant, FLOPs against lib.flops and against 2 x (matmul weights), the GPU plan's rules, and bad inputs."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lib.constants import GB, GiB, KiB
from lib.flops import crossover_length, forward_flops_per_token
from lib.planner.config import (
    SUPPORTED_MODEL_TYPES,
    ConfigError,
    UnsupportedConfigError,
    config_from_dict,
    load_config,
)
from lib.sizing import (
    bytes_per_element,
    cached_tokens,
    forward_flops,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    mha_kv_cache_bytes_per_token,
    mla_cache_bytes_per_token,
    model_crossover_length,
    model_kv_bytes_per_token,
    model_kv_cache_bytes,
    naive_gpu_count,
    parameter_count,
    parse_bytes,
    plan_gpus,
    planner_html,
    tp_layout,
    valid_tp_degrees,
    weight_bytes,
)

FIXTURES = Path(__file__).parent / "fixtures"

# Published parameter counts (see tests/fixtures/README.md for each source):
#  Llama-2-7b-hf, Mistral-7B-v0.1: the fixtures' README (the checkpoints' counts).
#  gpt2: GPT2LMHeadModel("gpt2").num_parameters() = 124,439,808, the "124M" model.
#  Mixtral-8x7B-v0.1: 46,702,792,704 on the checkpoint's model page (46.7B in Mistral AI's announcement).
#  DeepSeek-V2-Lite: 15,706,484,224 BF16 parameters on the checkpoint's model page (15.7B in the paper).
#  Falcon-7B: 6,921,720,704, the count transformers reports for tiiuae/falcon-7b ("7B" in the announcement).
PUBLISHED = {
    "Llama-2-7b-hf": 6_738_415_616,
    "Mistral-7B-v0.1": 7_241_732_096,
    "gpt2": 124_439_808,
    "Mixtral-8x7B-v0.1": 46_702_792_704,
    "DeepSeek-V2-Lite": 15_706_484_224,
    "Falcon-7B": 6_921_720_704,
}
# Rounded figures the model authors published, which the exact counts must round to.
PUBLISHED_ROUNDED_B = {"Mixtral-8x7B-v0.1": 46.7, "DeepSeek-V2-Lite": 15.7, "gpt2": 0.124}


def cfg(name: str):
    return load_config(FIXTURES / f"{name}.config.json")


LLAMA = {
    "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
    "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 100,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts_exactly(name: str) -> None:
    assert parameter_count(cfg(name)).total == PUBLISHED[name]


@pytest.mark.parametrize("name", sorted(PUBLISHED_ROUNDED_B))
def test_counts_round_to_the_published_figures(name: str) -> None:
    digits = 3 if PUBLISHED_ROUNDED_B[name] < 1 else 1
    assert round(parameter_count(cfg(name)).total / 1e9, digits) == PUBLISHED_ROUNDED_B[name]


def test_mixture_of_experts_active_parameters() -> None:
    mixtral = parameter_count(cfg("Mixtral-8x7B-v0.1"))
    assert mixtral.active == 12_879_925_248  # 12.9B per token (Mistral AI)
    assert round(mixtral.active / 1e9, 1) == 12.9
    # Active = total minus the 6 idle experts of width 14336 (3 matrices each) in each of 32 layers.
    assert mixtral.total - mixtral.active == 32 * 6 * 3 * 4096 * 14336
    ds = parameter_count(cfg("DeepSeek-V2-Lite"))
    # 26 MoE layers, 64 - 6 idle routed experts of width 1408.
    assert ds.total - ds.active == 26 * 58 * 3 * 2048 * 1408
    for dense in ("Llama-2-7b-hf", "gpt2", "Falcon-7B"):
        p = parameter_count(cfg(dense))
        assert p.active == p.total


def test_config_fields_read() -> None:
    m = cfg("Mistral-7B-v0.1")
    assert (m.n_layers, m.d_model, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff) == (32, 4096, 32, 8, 128, 14336)
    assert m.sliding_window == 4096 and m.attention_kind == "grouped-query" and not m.tie_embeddings
    assert cfg("Llama-2-7b-hf").attention_kind == "multi-head"
    assert cfg("Falcon-7B").attention_kind == "multi-query" and cfg("Falcon-7B").n_kv_heads == 1
    ds = cfg("DeepSeek-V2-Lite")
    assert ds.attention_kind == "latent" and ds.n_moe_layers == 26 and not ds.is_moe_layer(0)
    g = cfg("gpt2")
    assert (g.n_layers, g.d_model, g.d_ff, g.n_positions) == (12, 768, 3072, 1024)
    assert g.tie_embeddings and not g.gated
    assert cfg("Mixtral-8x7B-v0.1").sliding_window is None  # "sliding_window": null


def test_gpt_bigcode_multi_query_and_head_dim_field() -> None:
    big = config_from_dict({"model_type": "gpt_bigcode", "n_layer": 2, "n_embd": 64, "n_head": 4,
                            "vocab_size": 10, "n_positions": 8, "multi_query": True})
    assert big.n_kv_heads == 1 and big.attention_kind == "multi-query"
    # c_attn maps 64 -> 64 + 2*16 with bias; hand count of the whole model:
    layer = 2 * 2 * 64 + (64 * 96 + 96) + (64 * 64 + 64) + (64 * 256 + 256) + (256 * 64 + 64)
    assert parameter_count(big).total == 10 * 64 + 8 * 64 + 2 * layer + 2 * 64
    wide = config_from_dict({**LLAMA, "head_dim": 32})  # h * head_dim = 128 != d_model = 64 is allowed
    assert wide.head_dim == 32
    assert parameter_count(wide).attention == 2 * (64 * 128 + 2 * 64 * 64 + 128 * 64)


# ------------------------------------------------------------------------------------------------ KV cache


def test_issue_a_numbers() -> None:
    b = mha_kv_cache_bytes_per_token(32, 4096, 32, "fp16")  # 2 L d_model p
    assert b == kv_cache_bytes_per_token(32, 32, 128, "fp16")
    assert b == 2 * 32 * 4096 * 2 == 524_288 and b / KiB == 512
    per_conv = kv_cache_bytes(b, 2048)
    assert per_conv == GiB
    assert kv_cache_bytes(b, 2048, 200) == 200 * GiB
    w = weight_bytes(7 * 10**9, "fp16")
    assert w == 14 * GB and round(w / GiB, 2) == 13.04
    total = 200 * GiB + w
    assert naive_gpu_count(total, 80 * GB) == 3  # 228.7 GB on 240 GB: fits, before any serving rule
    assert total > 2 * 80 * GB


@pytest.mark.parametrize(
    "name, expected",
    [
        ("Llama-2-7b-hf", 2 * 32 * 32 * 128 * 2),  # multi-head: 2 L h d_k p = 524,288
        ("Mistral-7B-v0.1", 2 * 32 * 8 * 128 * 2),  # grouped-query: 8 of 32 heads, 131,072
        ("Mixtral-8x7B-v0.1", 2 * 32 * 8 * 128 * 2),  # experts do not change the cache
        ("Falcon-7B", 2 * 32 * 1 * 64 * 2),  # multi-query: one head of 64, 8,192
        ("DeepSeek-V2-Lite", 27 * (512 + 64) * 2),  # latent: L (d_c + d_R) p, no factor 2, 31,104
        ("gpt2", 2 * 12 * 768 * 2),  # 36,864
    ],
)
def test_kv_bytes_per_token_hand_checked(name: str, expected: int) -> None:
    assert model_kv_bytes_per_token(cfg(name), "bf16") == expected


def test_kv_dtype_and_sliding_window() -> None:
    m = cfg("Mistral-7B-v0.1")
    assert model_kv_bytes_per_token(m, "fp8") == model_kv_bytes_per_token(m, "bf16") / 2 == 65_536
    assert model_kv_bytes_per_token(m, "int4") == 32_768
    # The window caps cached tokens: 32k context holds 4096 tokens, as does 4096; 1000 holds 1000.
    assert model_kv_cache_bytes(m, 32_768, 1, "bf16") == model_kv_cache_bytes(m, 4096, 1, "bf16") == 131_072 * 4096
    assert model_kv_cache_bytes(m, 1000, 3, "bf16") == 131_072 * 1000 * 3
    assert cached_tokens(10, None) == 10 and cached_tokens(10, 4) == 4
    assert mla_cache_bytes_per_token(27, 512, 64, "fp8") == 27 * 576


@given(
    n_layers=st.integers(1, 96), h_kv=st.integers(1, 16), group=st.integers(1, 8), d_k=st.sampled_from([32, 64, 128]),
    n=st.integers(1, 10**6), dtype=st.sampled_from(["fp32", "bf16", "fp8", "int4"]),
)
def test_kv_bytes_invariants(n_layers, h_kv, group, d_k, n, dtype) -> None:
    mha = kv_cache_bytes_per_token(n_layers, h_kv * group, d_k, dtype)
    gqa = kv_cache_bytes_per_token(n_layers, h_kv, d_k, dtype)
    assert mha == group * gqa  # grouped-query saves exactly h / h_kv
    assert kv_cache_bytes(gqa, n) == n * gqa
    assert kv_cache_bytes(gqa, n, 1, sliding_window=4096) == min(n, 4096) * gqa
    assert gqa == 2 * n_layers * h_kv * d_k * bytes_per_element(dtype)


# ------------------------------------------------------------------------------------------------ FLOPs


@pytest.mark.parametrize("name", ["Llama-2-7b-hf", "Mistral-7B-v0.1", "gpt2", "Falcon-7B"])
def test_dense_flops_are_lib_flops(name: str) -> None:
    c = cfg(name)
    for n in (1, 100, 5000):
        keys = min(n, c.sliding_window or n)
        want = forward_flops_per_token(keys, c.d_model, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.d_ff,
                                       c.gated, c.vocab_size)
        assert forward_flops(c, n) == want


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_matmul_flops_are_twice_the_active_weights(name: str) -> None:
    """Each weight is one multiply-add per token: projections + FFN = 2 x (active non-embedding matrices)."""
    c = cfg(name)
    p = parameter_count(c)
    f = forward_flops(c, 1)
    biases_and_norms = 0
    if c.norm_bias or c.mlp_bias or c.qkv_bias:  # gpt2-family and falcon: subtract biases by recounting
        no_bias = replace(c, qkv_bias=False, o_bias=False, mlp_bias=False)
        biases_and_norms = p.attention + p.ffn_active - parameter_count(no_bias).attention - parameter_count(
            no_bias).ffn_active
    routers = c.n_moe_layers * c.d_model * c.n_routed_experts
    mla_norms = c.n_layers * ((c.kv_lora_rank or 0) + (c.q_lora_rank or 0))
    matrices = p.attention + p.ffn_active - biases_and_norms - routers - mla_norms
    assert f.projections + f.ffn == 2 * matrices
    assert f.lm_head == 2 * c.d_model * c.vocab_size


def test_mla_attention_flops_by_hand() -> None:
    ds = cfg("DeepSeek-V2-Lite")
    f = forward_flops(ds, 1000)
    assert f.attention == 27 * (2 * 1000 * 16 * 192 + 2 * 1000 * 16 * 128)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_crossover_balances_attention_and_ffn(name: str) -> None:
    c = replace(cfg(name), sliding_window=None)
    n_star = model_crossover_length(c)
    # per layer of the dominant kind, attention(n) is linear in n: attention(n*) = ffn
    moe = c.n_moe_layers > c.n_layers // 2
    layers = c.n_moe_layers if moe else c.n_layers - c.n_moe_layers
    one = forward_flops(replace(c, n_layers=layers, first_dense_layers=0 if moe else c.first_dense_layers), 1)
    assert one.attention * n_star == pytest.approx(one.ffn, rel=1e-12)
    if c.kv_lora_rank is None and not moe:
        assert n_star == crossover_length(c.d_model, c.d_ff, gated=c.gated, n_heads=c.n_heads, head_dim=c.head_dim)
    if name == "gpt2":
        assert n_star == 4 * 768  # plain block, d_ff = 4 d_model


# ------------------------------------------------------------------------------------------------ GPU plan


def test_tp_degrees_divide_heads() -> None:
    assert valid_tp_degrees(32, 32, 64) == [1, 2, 4, 8, 16, 32]
    assert valid_tp_degrees(32, 8, 64) == [1, 2, 4, 8, 16, 32]
    assert valid_tp_degrees(71, 1, 128) == [1, 71]  # Falcon-7B: 71 heads
    assert valid_tp_degrees(12, 4, 64) == [1, 2, 4, 12]  # 6 divides 12 but neither divides nor is divided by 4
    with pytest.raises(ValueError, match="tensor-parallel degree 3 is impossible"):
        tp_layout(cfg("Llama-2-7b-hf"), 3)


def test_kv_heads_replicated_beyond_their_count() -> None:
    m = cfg("Mistral-7B-v0.1")
    tok = model_kv_bytes_per_token(m, "bf16")
    assert tp_layout(m, 8).kv_bytes_per_token_per_gpu == tok / 8 and tp_layout(m, 8).kv_replication == 1
    lay = tp_layout(m, 16)  # 8 kv heads on 16 GPUs: each head on 2 GPUs, so each GPU still holds 1/8
    assert lay.kv_replication == 2 and lay.kv_bytes_per_token_per_gpu == tok / 8
    p = parameter_count(m)
    assert lay.weight_bytes_per_gpu == (p.total + p.kv_projection) * 2 / 16
    assert tp_layout(m, 4).weight_bytes_per_gpu == p.total * 2 / 4
    assert tp_layout(m, 4, replicate_weights=True).weight_bytes_per_gpu == p.total * 2
    ds = cfg("DeepSeek-V2-Lite")  # the latent is needed in full on every GPU
    assert tp_layout(ds, 4).kv_bytes_per_token_per_gpu == model_kv_bytes_per_token(ds, "bf16")


def test_plan_issue_a_scenario() -> None:
    llama = cfg("Llama-2-7b-hf")
    plan = plan_gpus(llama, users=200, context=2048, gpu_memory_bytes=80 * GB, dtype="fp16")
    assert plan.naive_gpus == 3
    # Hand check: 72 GB usable, 13.48 GB weights per GPU at t=1, 1 GiB per sequence -> 54 sequences.
    assert plan.sequences_per_replica == math.floor((0.9 * 80 * GB - 6_738_415_616 * 2) / GiB) == 54
    assert plan.gpus == 4
    # Every GPU holds what it must and no more than it may.
    assert plan.weight_bytes_per_gpu + plan.kv_bytes_per_gpu <= plan.usable_bytes_per_gpu
    # 5 GB of runtime overhead per GPU: with a full copy of the weights on each GPU, room for 49 sequences each,
    # so four GPUs hold 196 and five are needed ...
    kw = dict(users=200, context=2048, gpu_memory_bytes=80 * GB, dtype="fp16", overhead_bytes=5 * GB)
    dp = plan_gpus(llama, **kw, replicate_weights=True)
    assert (dp.gpus, dp.sequences_per_replica) == (5, math.floor((67 * GB - 6_738_415_616 * 2) / GiB)) == (5, 49)
    # ... but splitting the weights over pairs (tensor-parallel 2) frees room for 112 per pair: four suffice.
    tp = plan_gpus(llama, **kw)
    assert (tp.gpus, tp.tp_degree, tp.replicas) == (4, 2, 2)
    assert tp.sequences_per_replica == math.floor((67 * GB - 6_738_415_616) / (GiB / 2)) == 112


@given(users=st.integers(1, 500), context=st.integers(1, 65_536), frac=st.floats(0.5, 1.0),
       name=st.sampled_from(sorted(PUBLISHED)))
def test_plan_is_feasible_and_not_below_naive(users, context, frac, name) -> None:
    c = cfg(name)
    try:
        plan = plan_gpus(c, users=users, context=context, gpu_memory_bytes=80 * GB, memory_fraction=frac)
    except ValueError as err:
        assert "does not fit" in str(err)
        return
    assert plan.gpus == plan.replicas * plan.tp_degree
    assert plan.replicas * plan.sequences_per_replica >= users
    assert plan.weight_bytes_per_gpu + plan.kv_bytes_per_gpu <= plan.usable_bytes_per_gpu * (1 + 1e-12)
    # Usable memory never exceeds the card, and every byte is stored at least once: never below the naive count.
    assert plan.gpus >= plan.naive_gpus
    # Brute force: no valid layout with fewer GPUs holds every sequence.
    usable = frac * 80 * GB
    n_cached = cached_tokens(context, c.sliding_window)
    for t in valid_tp_degrees(c.n_heads, c.n_kv_heads, 64):
        lay = tp_layout(c, t)
        per_seq = lay.kv_bytes_per_token_per_gpu * n_cached
        seqs = max(0, int((usable - lay.weight_bytes_per_gpu) // per_seq))
        replicas_that_fit = (plan.gpus - 1) // t
        assert replicas_that_fit * seqs < users


def test_plan_no_fit_and_bad_arguments() -> None:
    m = cfg("Mixtral-8x7B-v0.1")
    with pytest.raises(ValueError, match="does not fit"):
        plan_gpus(m, users=1, context=10, gpu_memory_bytes=10 * GB, max_tp=1)
    with pytest.raises(ValueError, match="memory_fraction must be a number in"):
        plan_gpus(m, users=1, context=10, gpu_memory_bytes=80 * GB, memory_fraction=1.5)
    with pytest.raises(ValueError, match="users must be positive, got 0"):
        plan_gpus(m, users=0, context=10, gpu_memory_bytes=80 * GB)
    with pytest.raises(ValueError, match="nothing is left per GPU"):
        plan_gpus(m, users=1, context=10, gpu_memory_bytes=80 * GB, overhead_bytes=90 * GB)


# ------------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: kv_cache_bytes_per_token(0, 32, 128), "n_layers must be positive, got 0"),
        (lambda: kv_cache_bytes_per_token(32, -1, 128), "n_kv_heads must be positive, got -1"),
        (lambda: kv_cache_bytes_per_token(32, 32, 128.0), "head_dim must be an int, got float"),
        (lambda: kv_cache_bytes_per_token(True, 32, 128), "n_layers must be an int, got bool"),
        (lambda: kv_cache_bytes_per_token(32, 32, 128, "fp12"), "unknown dtype 'fp12'"),
        (lambda: kv_cache_bytes(-5.0, 10), "bytes_per_token must be a finite, non-negative"),
        (lambda: kv_cache_bytes(5.0, 10, sliding_window=0), "sliding_window must be positive, got 0"),
        (lambda: cached_tokens(-3), "context must be positive, got -3"),
        (lambda: weight_bytes(-7, "fp16"), "n_params must be positive"),
        (lambda: naive_gpu_count(1e12, 0), "gpu_memory_bytes must be positive"),
        (lambda: parse_bytes("80"), "has no unit"),
        (lambda: parse_bytes("80 XB"), "unknown unit 'XB'"),
        (lambda: parse_bytes("lots"), "cannot read memory size"),
        (lambda: parse_bytes("0GB"), "must be positive"),
        (lambda: valid_tp_degrees(32, 5), "n_heads=32 is not divisible by n_kv_heads=5"),
        (lambda: mha_kv_cache_bytes_per_token(32, 4096, 30), "d_model=4096 is not divisible by n_heads=30"),
        (lambda: mha_kv_cache_bytes_per_token(0, 4096, 32), "n_layers must be positive, got 0"),
        (lambda: mha_kv_cache_bytes_per_token(32, -4096, 32), "d_model must be positive, got -4096"),
        (lambda: planner_html({}), "presets must name at least one"),
    ],
)
def test_bad_arguments(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_units() -> None:
    assert parse_bytes("80GB") == 80 * GB and parse_bytes("80 GiB") == 80 * GiB and parse_bytes("0.5kib") == 512
    assert parse_bytes("0GB", allow_zero=True) == 0
    assert bytes_per_element("bfloat16") == 2 and bytes_per_element("float32") == 4 and bytes_per_element("int4") == 0.5


@pytest.mark.parametrize(
    "change, match",
    [
        ({"num_hidden_layers": 0}, "'num_hidden_layers' must be positive, got 0"),
        ({"hidden_size": -64}, "'hidden_size' must be positive, got -64"),
        ({"hidden_size": "64"}, "'hidden_size' must be an integer, got str '64'"),
        ({"num_attention_heads": 4.5}, "'num_attention_heads' must be an integer, got float"),
        ({"num_attention_heads": True}, "'num_attention_heads' must be an integer, got bool"),
        ({"num_attention_heads": 5}, "hidden size 64 is not divisible by 5 attention heads"),
        ({"num_key_value_heads": 3}, "4 attention heads are not divisible by 3 key/value heads"),
        ({"num_key_value_heads": 8}, "4 attention heads are not divisible by 8 key/value heads"),
        ({"tie_word_embeddings": "no"}, "'tie_word_embeddings' must be true or false"),
        ({"model_type": "mistral", "sliding_window": 0}, "'sliding_window' must be positive, got 0"),
        ({"model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 3},
         "num_experts_per_tok=3 exceeds the 2 routed experts"),
    ],
)
def test_bad_config_fields(change: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        config_from_dict({**LLAMA, **change}, "tiny")


def test_missing_fields_all_named() -> None:
    raw = {k: v for k, v in LLAMA.items() if k not in ("hidden_size", "vocab_size")}
    with pytest.raises(ConfigError, match=r"missing required fields 'hidden_size', 'vocab_size' in tiny"):
        config_from_dict(raw, "tiny")
    with pytest.raises(ConfigError, match="'n_embd'"):
        config_from_dict({"model_type": "gpt2", "n_layer": 2, "n_head": 2, "vocab_size": 5, "n_positions": 4})
    with pytest.raises(ConfigError, match="must be a JSON object, got list"):
        config_from_dict([1, 2])


def test_unknown_model_type_is_refused_naming_it_and_the_supported_ones() -> None:
    with pytest.raises(UnsupportedConfigError) as err:
        config_from_dict({**LLAMA, "model_type": "my_llama"}, "x")
    msg = str(err.value)
    assert "unsupported model_type 'my_llama' in x" in msg and "\n" not in msg
    assert all(t in msg for t in SUPPORTED_MODEL_TYPES)
    with pytest.raises(UnsupportedConfigError, match="unsupported model_type None"):
        config_from_dict({"n_layer": 2, "n_embd": 8, "n_head": 2, "vocab_size": 5, "n_positions": 4})


def test_assumed_family_proceeds_and_records_it() -> None:
    c = config_from_dict({**LLAMA, "model_type": "my_llama"}, assume_family="llama")
    assert c.n_kv_heads == 2 and c.family == "llama"
    assert c.assumptions == ("model_type 'my_llama' read as 'llama' (assumed, not checked)",)
    assert config_from_dict(LLAMA).assumptions == ()  # a known type read exactly: nothing assumed
    with pytest.raises(ConfigError, match="unknown family 'lama'"):
        config_from_dict(LLAMA, assume_family="lama")


@pytest.mark.parametrize("field, value", [
    ("num_experts", 8), ("qk_layernorm", True), ("sliding_window", 4096), ("layer_types", ["full_attention"] * 2),
    ("shared_expert_intermediate_size", 64), ("kv_lora_rank", 16),
])
def test_unread_count_changing_field_is_refused(field: str, value) -> None:
    """A field that changes the count in some family, on a reader that does not read it (here Llama's)."""
    with pytest.raises(UnsupportedConfigError, match=f"config field {field}=.* the 'llama' reader does not read it"):
        config_from_dict({**LLAMA, field: value})
    c = config_from_dict({**LLAMA, field: value}, assume_family="llama")
    assert any(a.startswith(f"field {field}=") for a in c.assumptions)
    assert config_from_dict({**LLAMA, field: None}).assumptions == ()  # null: absent


def test_load_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"model_type": "llama",\n "hidden_size": }')
    with pytest.raises(ConfigError, match=r"bad.json is not valid JSON: .* at line 2 column"):
        load_config(bad)
    good = tmp_path / "tiny.config.json"
    good.write_text(json.dumps(LLAMA))
    assert load_config(good).name == "tiny"


def test_planner_html_embeds_script_and_presets() -> None:
    import html as html_lib

    page = planner_html({"m": cfg("Mistral-7B-v0.1")}, "calc")
    assert page.startswith("<style>#calc form") and '<div id="calc"' in page and page.rstrip().endswith("</script>")
    data = json.loads(html_lib.unescape(re.search(r'data-planner="([^"]*)"', page).group(1)))
    assert data["presets"]["m"]["n_kv_heads"] == 8 and data["bytes_per_dtype"]["int4"] == 0.5
    assert "function planGpus" in page and page.count("<script>") == 1
    with pytest.raises(ValueError, match="element_id must be a simple HTML id"):
        planner_html({"m": cfg("gpt2")}, 'x" onload="alert(1)')


def test_family_quirks() -> None:
    # Qwen2: the window counts only when use_sliding_window is true; q/k/v projections carry biases.
    qwen = config_from_dict({**LLAMA, "model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": False})
    assert qwen.sliding_window is None and qwen.qkv_bias and not qwen.o_bias
    assert parameter_count(qwen).attention == 2 * (64 * 64 + 64 + 2 * (64 * 32 + 32) + 64 * 64)
    # Falcon's older files say n_head / n_layer; the same model either way.
    falcon = json.loads((FIXTURES / "Falcon-7B.config.json").read_text())
    old = {k: v for k, v in falcon.items() if k not in ("num_attention_heads", "num_hidden_layers")}
    old.update(n_head=71, n_layer=32)
    assert parameter_count(config_from_dict(old)).total == PUBLISHED["Falcon-7B"]
    # A whole number written as a float is accepted; NaN is not.
    assert config_from_dict({**LLAMA, "hidden_size": 64.0}).d_model == 64
    with pytest.raises(ConfigError, match="'hidden_size' must be an integer, got float nan"):
        config_from_dict({**LLAMA, "hidden_size": float("nan")})
    # model_type of the wrong type
    with pytest.raises(ConfigError, match="'model_type' must be a string"):
        config_from_dict({**LLAMA, "model_type": 7})


def test_mi300x_preset_is_rocm_smis_total() -> None:
    """Issue 31 item 10: rocm-smi --showmeminfo vram prints 205,822,885,888 B on an MI300X = 196,288 MiB, 320 MiB
    under the data sheet's 8 x 24 GiB; torch's total is the same figure there."""
    from lib.planner.gpus import GPUS

    card = GPUS["MI300X"]
    assert card.memory_bytes == card.plan_bytes == 205_822_885_888 == 196_288 * 2**20


def test_pipeline_split_pinned_by_value() -> None:
    """Issue 33 item 6: vLLM's get_pp_indices gives every stage n // pp layers and the remainder one apiece to the
    stages just before the last (the last holds the head): pinned here, not only in a chapter."""
    from lib.planner.serving import pp_layer_partition

    assert pp_layer_partition(32, 3) == [range(0, 11), range(11, 22), range(22, 32)]
    # DeepSeek-V3's 61 layers on 8 stages: 7 each, the remaining 5 to stages 2-6 (the first and last keep 7)
    assert pp_layer_partition(61, 8) == [range(0, 7), range(7, 14), range(14, 22), range(22, 30), range(30, 38),
                                         range(38, 46), range(46, 54), range(54, 61)]
    assert pp_layer_partition(80, 4) == [range(0, 20), range(20, 40), range(40, 60), range(60, 80)]
    assert pp_layer_partition(5, 5) == [range(i, i + 1) for i in range(5)]
    with pytest.raises(ValueError, match="stage needs at least one layer"):
        pp_layer_partition(4, 5)


def test_activation_peak_pinned_by_value() -> None:
    """Issue 33 item 6: the serving activation estimate by value, not only > 0. Llama 2 7B, 8192 batched tokens,
    256 sampled sequences, bf16: the residual stream and its normalised copy (2 x 4096) plus the wider of the
    attention intermediates (4 x 4096) and the feed-forward ones (3 x 11008), 2 B each, plus fp32 logits of 256
    tokens over 32000 entries; at tp = 2 the intermediates halve; without logits they go."""
    from lib.planner.config import load_config
    from lib.planner.serving import activation_peak_bytes

    cfg = load_config(Path(__file__).parent / "fixtures" / "Llama-2-7b-hf.config.json")
    forward = 8192 * (2 * 4096 + 3 * 11008) * 2
    # vLLM 0.10-0.11: the forward pass plus fp32 logits of the sampled rows
    assert activation_peak_bytes(cfg, 8192, 256, "bf16", band="0.10") == forward + 4 * 256 * 32000 == 708_050_944
    assert activation_peak_bytes(cfg, 8192, 256, "bf16", tp=2, band="0.10") == \
        8192 * (2 * 4096 + 3 * 11008 / 2) * 2 + 4 * 256 * 32000
    assert activation_peak_bytes(cfg, 2048, 4096, "bf16", logits=False, band="0.10") == \
        2048 * (2 * 4096 + 3 * 11008) * 2
    # 0.12 and later: the larger of the forward pass and the sampler's warm-up (38.4 B per logit of its rows)
    sampler = 8192 * 4096 * 2 + 38.4 * 256 * 32000
    assert activation_peak_bytes(cfg, 8192, 256, "bf16") == pytest.approx(max(forward, sampler), rel=1e-12)
    big_vocab = 8192 * 4096 * 2 + 38.4 * 1024 * 32000  # at 1,024 rows the sampler decides
    assert big_vocab > forward
    assert activation_peak_bytes(cfg, 8192, 1024, "bf16") == pytest.approx(big_vocab, rel=1e-12)
