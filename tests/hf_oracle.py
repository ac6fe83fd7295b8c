"""transformers as the oracle for lib.planner.config / lib.planner.counts: instantiate a config on the meta device (no
weights are allocated, so even DeepSeek-V3 takes seconds) and count the parameters of the real modules.

Test-only: lib never imports transformers or torch for sizing.
"""

from __future__ import annotations

import json
import re
import warnings
from functools import cache
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

transformers.logging.set_verbosity_error()

# A routed expert's parameters: "...mlp.experts.<i>.up_proj.weight" or the fused "...mlp.experts.gate_up_proj";
# a shared expert ("shared_expert.", "shared_experts.") does not match.
_ROUTED = re.compile(r"(^|\.)experts\.")


def hf_config(raw: dict):
    raw = dict(raw)
    model_type = raw.pop("model_type")
    for key in ("architectures", "transformers_version", "torch_dtype", "auto_map"):
        raw.pop(key, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoConfig.for_model(model_type, **raw)


@cache
def hf_counts(path: str) -> tuple[int, int]:
    """(total parameters, parameters one token uses) of the model ``path`` describes, from transformers' modules.

    Active: every parameter except routed experts, plus ``top_k / n_experts`` of each layer's routed experts (a
    token runs ``top_k`` of the ``n_experts`` equal experts; the router and any shared expert always run).
    """
    raw = json.loads(Path(path).read_text())
    cfg = hf_config(raw)
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_config(cfg)
    total = active = 0.0
    top_k = getattr(cfg, "num_experts_per_tok", None)
    n_experts = next((getattr(cfg, k) for k in ("num_local_experts", "num_experts", "n_routed_experts")
                      if getattr(cfg, k, None)), None)
    seen = set()
    for name, p in model.named_parameters(remove_duplicate=True):
        if id(p) in seen:
            continue
        seen.add(id(p))
        n = p.numel()
        total += n
        active += n * top_k / n_experts if (n_experts and _ROUTED.search(name)) else n
    assert active == int(active)
    return int(total), int(active)
