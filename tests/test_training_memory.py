"""Memory and compute of a training step (lib.planner.training): every closed form against a count.

Oracles: the bytes autograd saves (``saved_tensors_hooks``), with real tensors on the book's model and on small
transformers models, and on the meta device for the published configs; the optimizer's own state tensors after
one step; ``FlopCounterMode`` for FLOPs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from lib.planner import training as T
from lib.planner.train_cli import (
    TrainingInputError,
    add_train_arguments,
    language_model_config,
    training_report,
)
from lib.pt.model import Seq2SeqTransformer, source_mask, target_mask

FIXTURES = Path(__file__).parent / "fixtures"
LLAMA_STYLE = ["Llama-2-7b-hf", "Mistral-7B-v0.1", "Qwen2.5-7B-Instruct", "Qwen3-8B"]

transformers = pytest.importorskip("transformers")


def _book_step(dtype: torch.dtype, dropout: float, b: int = 3, n_src: int = 7, n_tgt: int = 5,
               d: int = 16, h: int = 4, d_ff: int = 32, L: int = 2, V: int = 50):
    torch.manual_seed(0)
    model = Seq2SeqTransformer(V, d, h, d_ff, L, dropout=dropout).to(dtype).train()
    src = torch.randint(1, V, (b, n_src))
    tgt = torch.randint(1, V, (b, n_tgt + 1))
    tgt_in, labels = tgt[:, :-1], tgt[:, 1:]

    def loss():
        logits = model(src, tgt_in, source_mask(src, 0), target_mask(tgt_in, 0))
        return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))

    return model, loss, (b, n_src, n_tgt, d, h, d_ff, L, V)


@pytest.mark.parametrize("dtype,p", [(torch.float32, 4), (torch.bfloat16, 2)])
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_book_model_closed_form_equals_saved_tensors(dtype, p, dropout):
    model, loss, dims = _book_step(dtype, dropout)
    counted = T.count_saved_bytes(loss, model.parameters()).bytes
    assert counted == T.book_model_activation_bytes(*dims, p, dropout=dropout > 0)["total"]


def test_book_layers_closed_form_per_layer():
    """Adding one layer adds exactly one encoder and one decoder layer's bytes (and their masks)."""
    one = _book_step(torch.float32, 0.0, L=1)
    two = _book_step(torch.float32, 0.0, L=2)
    c1 = T.count_saved_bytes(one[1], one[0].parameters()).bytes
    c2 = T.count_saved_bytes(two[1], two[0].parameters()).bytes
    b, n_src, n_tgt, d, h, d_ff, _, _ = one[2]
    per_layer = (T.book_encoder_layer_bytes(b, n_src, d, h, d_ff) + T.book_decoder_layer_bytes(
        b, n_tgt, n_src, d, h, d_ff) + 2 * b * n_src + b * n_tgt * n_tgt)
    assert c2 - c1 == per_layer


def test_book_model_flops_equal_flop_counter():
    from torch.utils.flop_counter import FlopCounterMode

    model, loss, dims = _book_step(torch.float32, 0.0)
    with FlopCounterMode(display=False) as fc:
        loss().backward()
    assert fc.get_total_flops() == T.book_model_flops(*dims)["total"]


def _state_bytes(opt: torch.optim.Optimizer) -> int:
    return sum(v.numel() * v.element_size() for st in opt.state.values() for v in st.values()
               if isinstance(v, torch.Tensor))


def test_optimizer_states_counted_after_one_step():
    model, loss, _ = _book_step(torch.float32, 0.0)
    params = list(model.parameters())
    N, n_tensors = sum(p.numel() for p in params), len(params)
    adam = torch.optim.AdamW(params)
    loss().backward()
    adam.step()
    assert _state_bytes(adam) == 8 * N + 4 * n_tensors  # m, v (fp32) and a 0-d fp32 step per tensor
    sgd = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    sgd.step()
    assert _state_bytes(sgd) == 4 * N

    # mixed precision: bf16 model and gradients, fp32 master copy, AdamW on the master
    model16, loss16, _ = _book_step(torch.bfloat16, 0.0)
    master = [p.detach().float().requires_grad_() for p in model16.parameters()]
    opt = torch.optim.AdamW(master)
    loss16().backward()
    for m, p in zip(master, model16.parameters(), strict=True):
        m.grad = p.grad.float()
    opt.step()
    weights = sum(p.numel() * p.element_size() for p in model16.parameters())
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model16.parameters())
    masters = sum(m.numel() * m.element_size() for m in master)
    s = T.state_bytes(N, "adamw")
    assert (weights, grads, masters + _state_bytes(opt) - 4 * n_tensors) == (
        s["weights"], s["gradients"], s["optimizer"])
    assert s["weights"] + s["gradients"] + s["optimizer"] == 16 * N


def _tiny(model_type: str, attention: str, **extra):
    cfgd = {**dict(model_type=model_type, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=160, head_dim=16, num_hidden_layers=2, vocab_size=97,
                   max_position_embeddings=256), **extra}
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**cfgd)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16,
                                                          attn_implementation=attention).train()
    return model, T.llama_shape(cfgd)


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@pytest.mark.parametrize("b", [1, 2])
def test_llama_closed_form_equals_real_saved_tensors(model_type, attention, b):
    """With real bf16 tensors on the CPU, SDPA runs a tiled (flash) kernel: Q, K, V, its output and the
    row log-sum-exp are kept, no n x n matrix."""
    model, s = _tiny(model_type, attention)
    ids = torch.randint(0, 97, (b, 48))
    counted = T.count_saved_bytes(lambda: model(input_ids=ids, labels=ids), model.parameters()).bytes
    kind = "eager" if attention == "eager" else "flash"
    assert counted == T.llama_activation_bytes(s, b, 48, 2, kind)["total"]


def test_full_checkpointing_keeps_layer_inputs():
    model, s = _tiny("llama", "eager", use_cache=False)
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    ids = torch.randint(0, 97, (1, 48))
    counted = T.count_saved_bytes(lambda: model(input_ids=ids, labels=ids), model.parameters()).bytes
    parts = T.llama_activation_bytes(s, 1, 48, 2, "eager", checkpointing="full")
    # what the forward pass keeps: everything but the recomputed layer and RoPE's tables (held by the
    # checkpoint's arguments, not by autograd)
    assert counted == parts["total"] - parts["RoPE cos and sin"]
    assert parts["layers"] == s.n_layers * 2 * 48 * s.d


@pytest.mark.parametrize("name", LLAMA_STYLE)
def test_llama_closed_form_equals_meta_count(name):
    cfg = json.loads((FIXTURES / f"{name}.config.json").read_text())
    counted = T.meta_saved_bytes(cfg, 2048, 1, "eager")
    assert counted["total"] == T.llama_activation_bytes(T.llama_shape(cfg), 1, 2048, 2, "eager")["total"]


def test_probabilities_with_a_sink_column_count_as_n_by_n():
    # gpt-oss appends one sink logit per row: its eager attention keeps (n, n + 1) probabilities, which a tiled
    # kernel does not keep either. Missing them made --attention flash count eager's bytes (4.3x too many).
    cfg = json.loads((FIXTURES / "gpt-oss-20b.config.json").read_text())
    n = 256
    one = T.meta_saved(cfg, n_layers=1, n=n)
    heads = cfg["num_attention_heads"]
    assert one["nxn"] >= heads * n * (n + 1) * 2  # at least the bf16 probabilities of the one layer


def test_meta_layer_extrapolation_is_exact():
    cfg = json.loads((FIXTURES / "Llama-2-7b-hf.config.json").read_text())
    cfg = {**cfg, "num_hidden_layers": 3}
    assert T.meta_saved_bytes(cfg, 256, 1)["total"] == T.meta_saved_bytes(cfg, 256, 1, n_layers=3)["total"]


class _LoRALinear(torch.nn.Module):
    """A hand-built LoRA adapter: y = W x + B A x, W frozen, A (r, d_in) and B (d_out, r) trained."""

    def __init__(self, base: torch.nn.Linear, r: int):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.A = torch.nn.Parameter(torch.randn(r, base.in_features, dtype=base.weight.dtype) * 0.01)
        self.B = torch.nn.Parameter(torch.zeros(base.out_features, r, dtype=base.weight.dtype))

    def forward(self, x):
        return self.base(x) + (x @ self.A.T) @ self.B.T


@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), tuple(sorted(T.LORA_TARGETS))])
def test_lora_trainable_parameters_counted(targets):
    model, s = _tiny("llama", "eager")
    model.requires_grad_(False)
    for layer in model.model.layers:
        for mod in (layer.self_attn, layer.mlp):
            for name in targets:
                if hasattr(mod, name):
                    setattr(mod, name, _LoRALinear(getattr(mod, name), 8))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == T.lora_parameters(s, 8, targets)


def test_zero_stages_shard_what_they_say():
    full = T.zero_state_bytes(10**9, "adamw", 0, 8)
    assert full == {"weights": 2e9, "gradients": 2e9, "optimizer": 12e9}
    assert T.zero_state_bytes(10**9, "adamw", 1, 8)["optimizer"] == 1.5e9
    z2 = T.zero_state_bytes(10**9, "adamw", 2, 8)
    assert (z2["gradients"], z2["weights"]) == (0.25e9, 2e9)
    assert sum(T.zero_state_bytes(10**9, "adamw", 3, 8).values()) == 16e9 / 8
    with pytest.raises(ValueError, match="ZeRO stage"):
        T.zero_state_bytes(10, "adamw", 4, 8)
    with pytest.raises(ValueError, match="unknown optimizer"):
        T.state_bytes(10, "adam")
    with pytest.raises(ValueError, match="exceeds"):
        T.state_bytes(10, "adamw", trainable=11)


def test_adam8bit_blockwise_layout():
    assert T.adam8bit_state_bytes([4096]) == 2 * 4096 + 8 * 16
    assert T.adam8bit_state_bytes([4095]) == 8 * 4095  # small tensors stay in fp32
    assert T.adam8bit_state_bytes([4097]) == 2 * 4097 + 8 * 17


def test_korthikanti_and_published_estimators():
    assert T.korthikanti_layer_bytes(2048, 1, 4096, 32) == 2048 * 4096 * (34 + 5 * 32 * 2048 / 4096)
    assert T.deepspeed_zero2_bytes(10**9, 8)["gpu"] == 4e9 + 2e9
    assert T.deepspeed_zero3_bytes(10**9, 10**8, 8)["gpu"] == 4e8 + 18e9 / 8
    assert T.accelerate_training_bytes(10**9) == 16e9
    # accelerate's estimate-memory prints one row per dtype: 4 x the model's size in it (its bf16 row for
    # Llama 2 7B: 53.9 GB, the figure to set beside a bf16 recipe)
    assert T.accelerate_training_bytes(10**9, "bfloat16") == T.accelerate_training_bytes(10**9, "float16") == 8e9
    n7 = T.llama_shape(_fixture_configs()["Llama-2-7b-hf"]).parameters()
    assert round(T.accelerate_training_bytes(n7, "bfloat16") / 1e9, 1) == 53.9
    with pytest.raises(ValueError):
        T.accelerate_training_bytes(10, "int8")
    with pytest.raises(ValueError, match="mfu"):
        T.gpu_hours(1e20, 1e15, 0)


# --------------------------------------------------------------------------------------------------------------
# --train: lib.planner.train_cli
# --------------------------------------------------------------------------------------------------------------

HYBRID = {"falcon_h1", "nemotron_h", "qwen3_next"}


def _fixture_configs() -> dict[str, dict]:
    out = {}
    for path in sorted(FIXTURES.glob("*.config.json")):
        cfg = json.loads(path.read_text())
        out[path.name.removesuffix(".config.json")] = cfg
    return out


def _dense(cfg: dict) -> bool:
    cfg = language_model_config(cfg)[0]  # a multimodal wrapper: its language model
    moe = any(cfg.get(k) for k in ("num_local_experts", "num_experts", "n_routed_experts"))
    return not moe and cfg.get("model_type") not in HYBRID


DENSE = [name for name, cfg in _fixture_configs().items() if _dense(cfg)]


def _args(*argv: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--dtype", default="bf16")
    add_train_arguments(ap)
    return ap.parse_args(["--train", *argv])


def test_dense_fixtures_are_present():
    assert {"Llama-2-7b-hf", "Mistral-7B-v0.1", "Qwen2.5-7B-Instruct", "gpt2", "gemma-2-9b"} <= set(DENSE)


_WHOLE_MODEL_COUNTS: dict[str, dict[str, int]] = {}


@pytest.mark.parametrize("name", DENSE)
def test_activation_bytes_within_one_percent_of_meta_count(name, monkeypatch):
    """--train's activation_bytes (eager, 2048 tokens, micro-batch 1, bf16) against autograd's saved bytes of
    transformers' whole model on the meta device, plus what the loss's backward adds (the fp32 gradients of
    the log-probabilities and of the logits, 8 n V bytes): at 2048 tokens the peak of every dense fixture.
    A model whose layers differ is counted whole by the report too: that count, the same call, is made once
    (a whole-model count is most of this test's time)."""
    cfg = _fixture_configs()[name]
    meta_saved = T.meta_saved

    def counted_once(config, n_layers=None, n=2048, b=1, dtype="bf16", attention="eager"):
        key = json.dumps([config, n_layers, n, b, dtype, attention], sort_keys=True)
        if key not in _WHOLE_MODEL_COUNTS:
            _WHOLE_MODEL_COUNTS[key] = meta_saved(config, n_layers, n, b, dtype, attention)
        return dict(_WHOLE_MODEL_COUNTS[key])

    monkeypatch.setattr(T, "meta_saved", counted_once)
    report = training_report(cfg, _args("--context", "2048", "--attention", "eager"))
    cfg = language_model_config(cfg)[0]
    layers = cfg.get("num_hidden_layers") or cfg.get("n_layer")
    counted = T.meta_saved(cfg, layers, 2048, 1, "bf16")["bytes"] + 8 * 2048 * cfg["vocab_size"]
    assert abs(report["activation_bytes"] - counted) <= 0.01 * counted
    assert report["total_bytes_per_gpu"] == sum(report[k] for k in (
        "weights_bytes", "gradients_bytes", "optimizer_bytes", "activation_bytes"))


def test_training_report_llama_numbers():
    cfg = _fixture_configs()["Llama-2-7b-hf"]
    s = T.llama_shape(cfg)
    r = training_report(cfg, _args("--context", "4096", "--micro-batch", "2"))  # flash by default
    N = s.parameters()
    assert (r["weights_bytes"], r["gradients_bytes"], r["optimizer_bytes"]) == (2 * N, 2 * N, 12 * N)
    assert r["activation_bytes"] == T.llama_peak_bytes(s, 2, 4096, 2, "flash")["peak"]
    # the peak is the loss's backward here: all that is kept plus two fp32 tensors of the logits' size
    assert r["activation_bytes"] == T.llama_activation_bytes(s, 2, 4096, 2, "flash")["total"] + 8 * 2 * 4096 * s.vocab
    assert r["flops_per_token"] == 6 * s.matmul_parameters() + 6 * s.n_layers * 4096 * s.d
    assert r["flops_per_step"] == r["flops_per_token"] * 2 * 4096
    z = training_report(cfg, _args("--gpus", "8", "--zero", "3", "--tokens", "2e12", "--mfu", "0.5"))
    assert (z["weights_bytes"], z["optimizer_bytes"]) == (-(-2 * N // 8), -(-12 * N // 8))
    assert z["gpu_hours"] == pytest.approx(2e12 * z["flops_per_token"] / (989e12 * 0.5) / 3600)
    assert z["parallelism"] == {"gpus": 8, "tp": 1, "pp": 1, "dp": 8, "zero": 3}


def test_training_report_lora_and_quantized_base():
    cfg = _fixture_configs()["Llama-2-7b-hf"]
    s = T.llama_shape(cfg)
    r = training_report(cfg, _args("--lora-rank", "16", "--dtype", "int4"))
    n_lora = T.lora_parameters(s, 16, ("q_proj", "v_proj"))
    assert r["trainable_parameters"] == n_lora
    # NF4 as bitsandbytes stores it, written out here independently: 4 bits per weight, one 8-bit absmax per 64
    # weights, one fp32 per 256 absmax, per tensor an fp32 offset and the 16- and 256-entry fp32 code books;
    # embedding, LM head and norms in bf16 (every Llama 2 7B matrix is a multiple of 64 x 256 elements)
    lin = s.n_layers * (4 * s.d * s.d + 3 * s.d * s.d_ff)
    nf4 = lin // 2 + lin // 64 + 4 * lin // (64 * 256) + 7 * s.n_layers * (4 + 64 + 1024)
    assert r["weights_bytes"] == nf4 + 2 * (s.parameters() - lin) + 2 * n_lora
    assert round(nf4 / 1e9 + 2 * (s.parameters() - lin) / 1e9, 2) == 3.87
    no_dq = T.quantized_base_bytes(s.linear_numels(), s.parameters() - lin, "int4", double_quant=False)
    assert round(no_dq / 1e9, 2) == 4.17
    # LoRA activations: frozen projections keep no input (the closed form, equal to the meta-device count)
    assert r["activation_bytes"] == T.llama_peak_bytes(s, 1, 4096, 2, "flash", lora_rank=16)["peak"]
    assert r["activation_bytes"] < T.llama_peak_bytes(s, 1, 4096, 2, "flash")["peak"]
    assert (r["gradients_bytes"], r["optimizer_bytes"]) == (2 * n_lora, 12 * n_lora)
    # on a family counted on the meta device, the adapted layers are found by name
    g = training_report(_fixture_configs()["gemma-7b"], _args("--lora-rank", "8", "--lora-targets", "q_proj,o_proj"))
    gc = _fixture_configs()["gemma-7b"]
    q = gc["num_attention_heads"] * gc["head_dim"]
    assert g["trainable_parameters"] == gc["num_hidden_layers"] * 8 * 2 * (gc["hidden_size"] + q)


@pytest.mark.parametrize("argv,match", [
    (("--gpus", "3", "--tp", "2"), "not a multiple"),
    (("--dtype", "int4"), "cannot be trained"),
    (("--lora-rank", "4", "--lora-targets", "nope"), "LoRA targets"),
    (("--zero", "2", "--pp", "2", "--gpus", "4"), "pipeline"),
])
def test_training_report_refuses_bad_input(argv, match):
    with pytest.raises(TrainingInputError, match=match):
        training_report(_fixture_configs()["Llama-2-7b-hf"], _args(*argv))


def test_training_options_refused_by_the_parser(capsys):
    for argv in (("--mfu", "0"), ("--tokens", "lots"), ("--micro-batch", "0"), ("--zero", "4")):
        with pytest.raises(SystemExit):
            _args(*argv)
    with pytest.raises(TrainingInputError, match="model_type"):
        training_report({}, _args())


def test_training_text_names_every_part():
    from lib.planner.train_cli import training_text

    r = training_report(_fixture_configs()["Mistral-7B-v0.1"], _args("--tokens", "1e12", "--gpus", "8", "--zero", "2"))
    text = training_text(r)
    for word in ("weights", "gradients", "optimizer", "activations", "GPU-hours", "ZeRO 2", "assumption"):
        assert word in text
    assert all(len(line) < 200 for line in text.splitlines())


def test_moe_flops_count_the_routed_experts_a_token_uses():
    cfg = _fixture_configs()["Mixtral-8x7B-v0.1"]
    d, f, L, V, E, k = (cfg[key] for key in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                              "vocab_size", "num_local_experts", "num_experts_per_tok"))
    kv = cfg["num_key_value_heads"] * d // cfg["num_attention_heads"]
    per_layer = d * (d + 2 * kv) + d * d + k * 3 * d * f + d * E  # Q, K, V, O; k experts' SwiGLU; router
    active = L * per_layer + V * d
    r = training_report(cfg, _args("--context", "2048"))  # flash: the causal half of the attention term
    assert r["flops_per_token"] == 6 * active + 6 * L * 2048 * d


@pytest.mark.parametrize("name", ["Llama-2-7b-hf", "Mistral-7B-v0.1", "Qwen3-8B"])
def test_meta_count_with_a_tiled_kernel_matches_the_closed_form(name):
    """The planner's flash account for families without a closed form (the eager count with the n x n tensors
    replaced by the row statistics, K and V unrepeated), tried on families that have one."""
    from lib.planner.train_cli import meta_activation_bytes

    cfg = _fixture_configs()[name]
    s = T.llama_shape(cfg)
    got = meta_activation_bytes(cfg, 1, 2048, "bf16", s.n_heads, "flash")
    total = got["outside"] + s.n_layers * got["per_layer"]
    assert total == T.llama_activation_bytes(s, 1, 2048, 2, "flash")["total"]


def _checkpoint_only(model, layers: list[int]) -> None:
    """transformers' checkpointing on the named decoder layers only (the others keep what autograd saves)."""
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    for i, layer in enumerate(model.model.layers):
        layer.gradient_checkpointing = i in layers


@pytest.mark.parametrize("spec", ["every:2", "every:3", "every:5", "full"])
def test_selective_checkpointing_keeps_what_the_closed_form_says(spec):
    """every:K: the checkpointed layers keep their input, the others everything; counted on a 5-layer model
    with real tensors. RoPE's tables stay in the count while any layer is not checkpointed."""
    model, s = _tiny("llama", "eager", use_cache=False, num_hidden_layers=5)
    layers = T.checkpointed_layers(spec, s.n_layers)
    _checkpoint_only(model, layers)
    ids = torch.randint(0, 97, (1, 40))
    counted = T.count_saved_bytes(lambda: model(input_ids=ids, labels=ids), model.parameters()).bytes
    parts = T.llama_activation_bytes(s, 1, 40, 2, "eager", checkpointing=spec)
    rope = parts["RoPE cos and sin"] if len(layers) == s.n_layers else 0
    assert counted == parts["total"] - rope
    assert parts["layers"] == (5 - len(layers)) * T.llama_layer_bytes(s, 1, 40, 2)["total"] + len(layers) * 2 * 40 * 64


def test_checkpointed_layers_spec():
    assert T.checkpointed_layers("none", 7) == [] and T.checkpointed_layers("full", 3) == [0, 1, 2]
    assert T.checkpointed_layers("every:3", 7) == [0, 3, 6] and T.checkpointed_layers("every:1", 2) == [0, 1]
    for bad in ("every:0", "every:", "every:x", "half", "every:-1"):
        with pytest.raises(ValueError, match="every:K"):
            T.checkpointed_layers(bad, 4)


def test_recompute_flops_equal_a_second_forward_of_the_layers():
    """The extra FLOPs of every:K are one more forward pass of the checkpointed layers: FlopCounterMode on the
    forward of those layers alone (eager, both halves of the causal scores)."""
    from torch.utils.flop_counter import FlopCounterMode

    model, s = _tiny("llama", "eager", use_cache=False, num_hidden_layers=4)
    n = 32
    x = torch.randn(1, n, s.d, dtype=torch.bfloat16)
    pos = torch.arange(n)[None]
    rope = model.model.rotary_emb(x, pos)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        model.model.layers[0](x, position_embeddings=rope, attention_mask=None, position_ids=pos)
    layer_fwd = fc.get_total_flops()
    per_layer = (s.matmul_parameters() - s.vocab * s.d) / s.n_layers
    assert T.recompute_flops_per_token(per_layer, n, s.n_heads * s.head_dim, 1) * n == layer_fwd
    cfg = {**_fixture_configs()["Llama-2-7b-hf"]}
    sh = T.llama_shape(cfg)
    none = training_report(cfg, _args("--context", "2048", "--attention", "eager"))["flops_per_token"]
    for spec, c in (("full", 32), ("every:4", 8)):
        r = training_report(cfg, _args("--context", "2048", "--attention", "eager", "--checkpointing", spec))
        layer = (sh.matmul_parameters() - sh.vocab * sh.d) // 32
        assert r["flops_per_token"] - none == c * (2 * layer + 4 * 2048 * sh.n_heads * sh.head_dim)


def test_bitsandbytes_adam8bit_states_match_the_layout():
    """bitsandbytes' Adam8bit, built and stepped on CPU tensors: its state tensors (each storage once) are the
    layout of adam8bit_state_bytes, the two shared 256-entry code books included."""
    import logging

    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 40),
                                torch.nn.LayerNorm(40))
    opt = bnb.optim.Adam8bit(model.parameters(), lr=1e-3)
    model(torch.randn(3, 64)).square().mean().backward()
    opt.step()
    seen, total = set(), 0
    for prm in model.parameters():
        for v in opt.state[prm].values():
            if torch.is_tensor(v) and v.untyped_storage()._cdata not in seen:
                seen.add(v.untyped_storage()._cdata)
                total += v.untyped_storage().nbytes()
    numels = [q.numel() for q in model.parameters()]
    assert total == T.adam8bit_state_bytes(numels, include_maps=True)
    assert total - T.adam8bit_state_bytes(numels) == T.BNB_QMAP_BYTES
