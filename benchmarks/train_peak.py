"""The activation peak of one training step, measured and derived.

transformers' Llama built from small configs, bf16 on the CPU, eager attention or PyTorch's SDPA (a tiled
kernel), with activation checkpointing on every layer, every K-th layer or none. For each setting: the peak
measured by :func:`lib.planner.training.measure_activation_peak` (torch's memory profiler, the weights'
gradients left out) and :func:`lib.planner.training.llama_peak_bytes` with the CPU's fp32 matmul buffer.
A measurement, not a test (about a minute on two cores); ``tests/test_train_peak.py`` asserts a subset.

    .venv/bin/python -m benchmarks.train_peak [--out benchmarks/results/train_peak.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from lib.planner import training as T

SHAPES = [dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=160,
               num_hidden_layers=4, n=256, b=1),
          dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=4, intermediate_size=160,
               num_hidden_layers=4, n=256, b=1),
          dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=4, intermediate_size=320,
               num_hidden_layers=5, n=128, b=2)]


def llama(shape: dict, impl: str, spec: str) -> tuple[dict, torch.nn.Module]:
    cfg = dict(model_type="llama", vocab_size=97, max_position_embeddings=1024,
               **{k: v for k, v in shape.items() if k not in ("n", "b")})
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg, use_cache=False), dtype=torch.bfloat16,
                                             attn_implementation=impl).train()
    if spec != "none":
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        chosen = set(T.checkpointed_layers(spec, cfg["num_hidden_layers"]))
        for i, layer in enumerate(model.model.layers):
            layer.gradient_checkpointing = i in chosen
    return cfg, model


def measure(shape: dict, impl: str, spec: str) -> dict:
    torch.manual_seed(0)
    cfg, model = llama(shape, impl, spec)
    ids0 = torch.randint(0, cfg["vocab_size"], (shape["b"], shape["n"]))

    def step() -> None:
        ids = ids0.clone()  # the step's own token ids
        model(input_ids=ids, labels=ids).loss.backward()

    step()
    model.zero_grad(set_to_none=True)
    measured = T.measure_activation_peak(step, model.parameters())
    kind = "eager" if impl == "eager" else "flash"
    s = T.llama_shape(cfg)
    derived = T.llama_peak_bytes(s, shape["b"], shape["n"], 2, kind, spec, cpu_bf16_matmul=True)
    kept = T.llama_activation_bytes(s, shape["b"], shape["n"], 2, kind, spec)["total"]
    layer = T.llama_layer_bytes(s, shape["b"], shape["n"], 2, kind)["total"]
    old = kept + (layer if spec != "none" else 0)  # the former rule: kept + one recomputed layer
    return {"shape": shape, "attention": kind, "checkpointing": spec, "measured": measured,
            "derived": derived["peak"], "moments": derived, "former_rule": old}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/train_peak.json"))
    args = ap.parse_args()
    rows = []
    for shape in SHAPES:
        for impl in ("eager", "sdpa"):
            for spec in ("none", "full", "every:2", "every:3"):
                r = measure(shape, impl, spec)
                rows.append(r)
                print(f"d={shape['hidden_size']:4d} h={shape['num_attention_heads']} n={shape['n']} b={shape['b']}"
                      f" {r['attention']:5s} {spec:8s} measured {r['measured']:>11,} derived {r['derived']:>11,}"
                      f" ratio {r['derived'] / r['measured']:.3f}  former rule {r['former_rule'] / r['measured']:.3f}",
                      flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
