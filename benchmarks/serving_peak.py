"""The activation peak of one serving forward pass, measured and estimated.

transformers' Llama built from small configs, bf16 on the CPU, ``torch.no_grad()``, eager attention or PyTorch's
SDPA, one forward over ``b`` sequences of ``n`` tokens with logits for the last token of each sequence only
(``logits_to_keep=1``, the one token an engine samples per sequence), cast to fp32 as vLLM's sampler does. For
each setting: the peak of bytes allocated during the pass and still held (the weights, allocated before, are
not counted), measured by :func:`lib.planner.training.measure_activation_peak` (torch's memory profiler), and
:func:`lib.planner.serving.activation_peak_bytes` for ``tokens = b n`` and ``sequences = b``.

    .venv/bin/python -m benchmarks.serving_peak
"""

from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from lib.planner.config import config_from_dict
from lib.planner.serving import activation_peak_bytes
from lib.planner.training import measure_activation_peak

# d_ff about 2.7 d_model; GQA and MHA; small and large vocabularies
SHAPES = {
    "gqa-64": dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=2, intermediate_size=172,
                   num_hidden_layers=2, vocab_size=512),
    "mha-128": dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=4, intermediate_size=344,
                    num_hidden_layers=3, vocab_size=4096),
    "gqa-256": dict(hidden_size=256, num_attention_heads=8, num_key_value_heads=2, intermediate_size=688,
                    num_hidden_layers=2, vocab_size=32000),
}


def measure(shape: str, impl: str, n: int, b: int) -> dict:
    """Measured and estimated peak (bytes) of one forward pass of ``b`` sequences of ``n`` tokens."""
    raw = dict(model_type="llama", max_position_embeddings=4096, **SHAPES[shape])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**raw, use_cache=False), dtype=torch.bfloat16,
                                             attn_implementation=impl).eval()
    ids0 = torch.randint(0, raw["vocab_size"], (b, n))

    def step() -> None:
        with torch.no_grad():
            model(input_ids=ids0, logits_to_keep=1, use_cache=False).logits.float()

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # SDPA's CPU kernel allocates scratch per thread: one thread, one answer anywhere
    try:
        step()
        measured = measure_activation_peak(step)
    finally:
        torch.set_num_threads(threads)
    estimate = activation_peak_bytes(config_from_dict(raw, shape), tokens=b * n, sequences=b, dtype="bf16")
    return {"shape": shape, "attention": impl, "n": n, "b": b, "measured": measured, "estimate": estimate,
            "ratio": estimate / measured, "d": raw["hidden_size"], "w": raw["intermediate_size"],
            "h": raw["num_attention_heads"]}


def row(r: dict) -> str:
    return (f"{r['shape']:8s} {r['attention']:5s} b={r['b']} n={r['n']:5d}  measured {r['measured']:>11,}"
            f"  formula {r['estimate']:>11,.0f}  formula/measured {r['ratio']:.3f}")


def main() -> None:
    for shape in SHAPES:
        for impl in ("eager", "sdpa"):
            for n, b in ((256, 1), (1024, 1), (256, 4)):
                print(row(measure(shape, impl, n, b)), flush=True)


if __name__ == "__main__":
    main()
