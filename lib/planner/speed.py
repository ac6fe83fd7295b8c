r"""How fast a plan serves: a roofline model of prefill and decode on the planner's description of a model.

A step of the model on :math:`G` GPUs (a tensor-parallel group) takes at least

.. math::
    t \;\ge\; \max\Bigl(\frac{\text{FLOPs}}{G\,\pi\,\eta_c},\; \frac{\text{bytes}}{G\,\beta\,\eta_b}\Bigr)
    \;+\; t_\text{comm},

with :math:`\pi` the card's dense matrix peak for the weights' dtype and :math:`\beta` its memory bandwidth
(:data:`lib.planner.gpus.ROOFLINES`, data sheets), :math:`\eta` the fraction of each that serving engines reach
(:class:`Efficiency`: assumptions, fitted to published measurements, printed with every answer) and
:math:`t_\text{comm}` a stated allowance for tensor parallelism's all-reduces.

* **Prefill** of :math:`n` prompt tokens: FLOPs :math:`= n\,F_\text{lin} + F_\text{head} + \sum_\ell a_\ell
  \sum_{i=1}^{n}\min(i, w_\ell)` (every matrix once per token, the output head for the last token only, and the
  causal attention's :math:`n^2/2` keys, each layer capped at its window :math:`w_\ell`), bytes = the weights read
  once (a mixture of experts: the experts the :math:`n` tokens touch).
* **Decode** of one token for each of :math:`B` sequences: FLOPs :math:`= B\,(F_\text{lin} + F_\text{head} +
  \sum_\ell a_\ell k_\ell)` with :math:`k_\ell` the keys a token attends to (averaged over the generated tokens);
  bytes = the weights read once per step + every sequence's cache read once. A mixture of experts reads the shared
  part and, per layer, the expected number of distinct experts :math:`B` tokens choose,
  :math:`E\,(1 - (1 - k/E)^{B})` (routing assumed uniform and independent; real routers are skewed, so fewer).
* **Serving** :math:`B` concurrent requests of :math:`n_\text{in}` and :math:`n_\text{out}` tokens with continuous
  batching: time to the first token = the prefill alone; time per output token = the decode step plus the other
  requests' prefills spread over their outputs, :math:`t_\text{step}(B) + (B-1)\,P/n_\text{out}`; output tokens per
  second of one replica :math:`= B\,n_\text{out} / (P + n_\text{out}\,t_\text{tok})`.

What this does not see: queueing (requests waiting for a slot), scheduler policy and chunked prefill, kernels that
miss the roof (small matrices, attention at long contexts), speculative decoding, CPU overheads, and
communication beyond the allowance. :func:`accuracy_rows` checks it against the published measurements in
``tests/fixtures/speed``.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..constants import GiB
from ..speed import expected_distinct_experts
from .gpus import MAMF_SOURCE, ROOFLINES, Roofline, gpu, roofline
from .units import as_count, bytes_per_element

__all__ = ["Efficiency", "DEFAULT_EFFICIENCY", "SpeedModel", "describe", "keys_sum", "prefill_seconds",
           "decode_step_seconds", "serve", "speed_section", "speed_text", "accuracy_rows", "accuracy_summary",
           "SPEED_KEYS", "web_description", "web_data", "engine_experts"]

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"


@dataclass(frozen=True)
class Efficiency:
    """Fractions of the data-sheet roofline that serving engines reach, by regime (assumptions).

    The defaults are the point of a grid (prefill 0.6-1.0, decode bandwidth 0.5-0.9, decode compute 0.3-0.7 in
    steps of 0.1; MoE 0.3-1.0) with the smallest median relative error over the published measurements of
    ``tests/fixtures/speed`` (:func:`accuracy_rows`: MLPerf Inference v4.0/v4.1 with TensorRT-LLM and AMD's
    submission, vLLM, SGLang and TensorRT-LLM benchmark printouts). Each is pinned mostly by one regime:
    ``prefill`` by batch-1 time to the first token (Qwen3-14B on an A100 at 2k-16k prompt tokens), ``decode_bandwidth``
    by batch-1 time per output token (Qwen3-14B on an A100), ``decode_compute`` by MLPerf Offline and Server
    (Llama-2-70B on H100, GH200 and MI300X), ``moe`` by the mixture-of-experts rows (Mixtral, MiniMax, gpt-oss).
    Compute efficiencies are fractions of the *achievable* peak (:attr:`lib.planner.gpus.Roofline.achievable`: a
    measured large matrix product over the data sheet). They are in-sample fits to 27 measurements, not constants
    of nature: a different engine, version or card can sit far from them (tests/test_planner_speed.py prints
    every case). Fitted with one source left out at a time (a coarser grid; the MLPerf results counted as one
    source) and checked on it, the median error over all figures was 21 % against 15 % in-sample, when this was
    written: the fit generalises across sources, loosely."""

    prefill: float = 0.8  #: fraction of the achievable matrix peak reached by prefill (compute-bound)
    decode_bandwidth: float = 0.6  #: fraction of memory bandwidth reached by a bandwidth-bound decode step
    decode_compute: float = 0.4  #: fraction of the achievable matrix peak reached by a compute-bound decode step
    moe: float = 0.4  #: further factor on all three for a mixture of experts (routing, uneven expert loads)
    allreduce_seconds: float = 10e-6  #: fixed cost of one all-reduce (launch and synchronisation), assumed

    def __post_init__(self) -> None:
        for k in ("prefill", "decode_bandwidth", "decode_compute", "moe"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and 0 < v <= 1):
                raise ValueError(f"efficiency {k} must be in (0, 1], got {v!r}")
        if not (isinstance(self.allreduce_seconds, (int, float)) and self.allreduce_seconds >= 0):
            raise ValueError(f"allreduce_seconds must be >= 0, got {self.allreduce_seconds!r}")

    def describe(self) -> str:
        return (f"efficiencies assumed: prefill {self.prefill:.0%} of the achievable peak FLOP/s, decode"
                f" {self.decode_bandwidth:.0%} of bandwidth when memory-bound and {self.decode_compute:.0%} of the"
                " achievable peak when compute-bound,"
                f" x{self.moe:g} for a mixture of experts; {self.allreduce_seconds * 1e6:g} us per all-reduce"
                + (" (fitted to published measurements: lib.planner.speed.Efficiency)" if self == Efficiency()
                   else " (given; the defaults fitted to published measurements are lib.planner.speed.Efficiency's)"))


DEFAULT_EFFICIENCY = Efficiency()


@dataclass(frozen=True)
class SpeedModel:
    """What the roofline reads of a model: bytes and FLOPs per token, layer by layer."""

    weight_bytes: float  #: every weight as the engine loads it
    dense_bytes: float  #: weights every step reads whatever the batch (all but the routed experts)
    moe: tuple[tuple[int, int, float], ...]  #: per mixture-of-experts layer: (experts E, top-k, bytes per expert)
    linear_flops: float  #: matrix FLOPs of one token, output head excluded (active experts only)
    head_flops: float  #: the output head's FLOPs for one token
    attention: tuple[tuple[float, int | None], ...]  #: per layer with attention: (FLOPs per cached key, window)
    kv: tuple[tuple[float, int | None], ...]  #: per caching layer: (cache bytes per token, window)
    state_bytes: float  #: fixed per-sequence state read each step (recurrent layers, cross-attention)
    d_model: int
    n_layers: int
    compute_dtype: str  #: "bf16", "fp8" or "fp4": which matrix peak applies
    notes: tuple[str, ...] = ()
    encoder_flops: float = 0.0  #: an encoder-decoder's encoder pass over one request's source, in its prefill

    @property
    def is_moe(self) -> bool:
        return bool(self.moe)


def keys_sum(n: int, window: int | None) -> float:
    r""":math:`\sum_{i=1}^{n} \min(i, w)`: keys attended by ``n`` causal tokens of a layer with window ``w``."""
    if n <= 0:
        return 0.0
    if window is None or n <= window:
        return n * (n + 1) / 2
    return window * (window + 1) / 2 + (n - window) * window


_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts")
_TOP_K = ("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token", "moe_k", "top_k",
          "top_k_experts")


def _raw_int(raw: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for src in (raw, raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}):
        for k in keys:
            v = src.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    return None


_EXPERT_INDEX = re.compile(r"(?:^|\.)experts\.(\d+)\.")
_FUSED_EXPERTS = re.compile(r"(?:^|\.)experts\.[^.]+$")


def engine_experts(em: Any) -> list[tuple[int, int, float]]:
    """Per mixture-of-experts layer of an engine-read model: (routed experts E, experts per token k, parameters of
    one expert), from its tensors (``experts.<i>.`` modules, or fused 3-D expert tensors whose first dimension is
    E) and the layer's active count (one token uses k of the E experts). Empty for a model without routed
    experts or whose experts are not found that way."""
    per_layer: dict[int, dict[str, Any]] = {}
    for name, shape, _, where in em.tensors:
        if where < 0 or "shared_expert" in name:
            continue
        n = math.prod(shape)
        m = _EXPERT_INDEX.search(name)
        if m:
            d = per_layer.setdefault(where, {"ids": set(), "params": 0, "fused": None})
            d["ids"].add(int(m.group(1)))
            d["params"] += n
        elif len(shape) == 3 and _FUSED_EXPERTS.search(name):
            d = per_layer.setdefault(where, {"ids": set(), "params": 0, "fused": None})
            d["fused"] = shape[0]
            d["params"] += n
    out = []
    for i, d in sorted(per_layer.items()):
        e = d["fused"] or len(d["ids"])
        la = em.layers[i]
        if e < 2 or la.params <= la.active:
            continue
        expert = d["params"] / e
        k = round(e - (la.params - la.active) / expert)
        if 0 < k < e:
            out.append((e, k, expert))
    return out


def _compute_dtype(dtype: str, quantisation: str | None) -> str:
    q = (quantisation or "").lower()
    if "fp4" in q:
        return "fp4"
    if q.startswith("fp8") or dtype in ("fp8", "float8", "fp8_e4m3"):
        return "fp8"
    return "bf16"


def describe(r: dict[str, Any], model: Any, raw: dict[str, Any] | None = None) -> SpeedModel:
    """The :class:`SpeedModel` of a planner report ``r`` (:func:`lib.planner.cli.report`) and
    the model it describes (a hand-read ``ModelConfig`` or an engine-read ``EngineModel``; ``raw``: its parsed
    config.json, where an engine-read mixture of experts names its expert count)."""
    from . import engine as eng_mod
    from .cache import kv_elements_per_token_layer
    from .counts import _ffn_params
    from .flops import forward_flops

    w = r["workload"]
    p_kv = bytes_per_element(w["kv_dtype"])
    total = r["parameters"]["total"]
    weight_bytes = float(r["weights_bytes"])
    per_param = weight_bytes / total if total else 0.0
    f = r["flops_per_token"]
    notes: list[str] = []
    moe: list[tuple[int, int, float]] = []
    if isinstance(model, eng_mod.EngineModel):
        attention = tuple((2.0 * la.score_width, la.window) for la in model.layers if la.score_width)
        kv = tuple((la.kv_per_token * p_kv, la.window) for la in model.layers if la.kv_per_token)
        n_layers, d_model = len(model.layers), model.d_model
        found = engine_experts(model)
        if found:
            moe = [(e, k, n * per_param) for e, k, n in found]
        elif any(la.params > la.active for la in model.layers):
            e, k = _raw_int(raw or {}, _EXPERTS), _raw_int(raw or {}, _TOP_K)
            if e and k and e > k:
                for la in model.layers:
                    if la.params > la.active:
                        moe.append((e, k, (la.params - la.active) / (e - k) * per_param))
            else:
                notes.append("expert count not read from the config: every expert counted as read each step")
    else:
        cfg = model
        one = forward_flops(cfg, 1, include_lm_head=False)
        a = one.attention / cfg.n_layers
        attention = tuple((a, win) for win in cfg.windows)
        kv = tuple((kv_elements_per_token_layer(cfg) * p_kv, win) for win in cfg.windows)
        n_layers, d_model = cfg.n_layers, cfg.d_model
        for i in range(cfg.n_layers):
            if cfg.is_moe_layer(i):
                moe.append((cfg.n_routed_experts, cfg.n_experts_per_tok,
                            _ffn_params(cfg, cfg.moe_d_ff) * per_param))
    if moe:
        notes.append("bytes per weight averaged over the model for the experts' share (quantised experts beside"
                     " 16-bit attention make this approximate)")
    dense = weight_bytes - sum(e * b for e, _, b in moe)
    encoder_flops = 0.0
    ed = r.get("encoder_decoder")
    if ed:  # the encoder runs once per request (its prefill), not at each decode step
        dense -= ed["encoder_params"] * per_param
        encoder_flops = 2.0 * ed["encoder_params"] * ed["source_tokens"]
        notes.append(f"encoder-decoder: the encoder's pass over {ed['source_tokens']:,} source positions counted in"
                     " the prefill as 2 FLOPs per encoder parameter per position (its attention left out); decode"
                     " steps read the decoder's weights only")
    return SpeedModel(weight_bytes=weight_bytes, dense_bytes=max(dense, 0.0), moe=tuple(moe),
                      linear_flops=float(f["projections"] + f["ffn"]), head_flops=float(f["lm_head"]),
                      attention=attention, kv=kv, state_bytes=float(r.get("state_bytes_per_sequence") or 0),
                      d_model=d_model, n_layers=n_layers,
                      compute_dtype=_compute_dtype(w["dtype"], r.get("quantisation")), notes=tuple(notes),
                      encoder_flops=encoder_flops)


def _weights_read(m: SpeedModel, tokens: float) -> float:
    """Bytes of weights one forward pass over ``tokens`` tokens reads: the dense part and, per expert layer, the
    expected distinct experts the tokens choose (uniform, independent routing)."""
    return m.dense_bytes + sum(expected_distinct_experts(e, k, tokens) * b for e, k, b in m.moe)


def _comm(m: SpeedModel, tp: int, tokens: float, link: float, eff: Efficiency) -> float:
    """Tensor parallelism's allowance: two all-reduces of the activations per layer (after attention and after the
    feed-forward block), each a fixed cost plus 2 (t-1)/t of its bf16 bytes over the GPU-to-GPU link."""
    if tp <= 1:
        return 0.0
    per = eff.allreduce_seconds + 2 * (tp - 1) / tp * tokens * m.d_model * 2 / link
    return 2 * m.n_layers * per


def _peak(card: Roofline, m: SpeedModel) -> float:
    """The matrix peak a step can reach: the data sheet's for the compute dtype, scaled by the card's measured
    achievable share (:attr:`lib.planner.gpus.Roofline.achievable`)."""
    return card.peak(m.compute_dtype) * card.achievable


def _eff(m: SpeedModel, eff: Efficiency, value: float) -> float:
    return value * (eff.moe if m.is_moe else 1.0)


def prefill_flops(m: SpeedModel, n: int) -> float:
    """Matrix FLOPs of a prompt of ``n`` tokens (causal attention; the output head for the last token only; an
    encoder-decoder's encoder pass over its source)."""
    return (n * m.linear_flops + m.head_flops + sum(a * keys_sum(n, win) for a, win in m.attention)
            + m.encoder_flops)


def prefill_seconds(m: SpeedModel, n: int, card: Roofline, tp: int = 1, eff: Efficiency = DEFAULT_EFFICIENCY,
                    *, alone: bool = True) -> float:
    """Time to process a prompt of ``n`` tokens on ``tp`` GPUs: its FLOPs at the prefill efficiency, or (a short
    prompt, ``alone``) the weights read once, whichever is longer, plus the all-reduce allowance. ``alone=False``:
    the compute term only (a prompt batched with decode steps shares their weight reads)."""
    compute = prefill_flops(m, n) / (tp * _peak(card, m) * _eff(m, eff, eff.prefill))
    if not alone:
        return compute
    memory = _weights_read(m, n) / (tp * card.bandwidth * _eff(m, eff, eff.decode_bandwidth))
    return max(compute, memory) + _comm(m, tp, n, card.link_bandwidth, eff)


def _mean_keys(n_in: int, n_out: int, window: int | None) -> float:
    """Keys a generated token attends to, averaged over ``n_out`` tokens after ``n_in`` prompt tokens."""
    n_out = max(n_out, 1)
    return (keys_sum(n_in + n_out, window) - keys_sum(n_in, window)) / n_out


def decode_step_seconds(m: SpeedModel, batch: int, n_in: int, n_out: int, card: Roofline, tp: int = 1,
                        eff: Efficiency = DEFAULT_EFFICIENCY) -> dict[str, float]:
    """One decode step for ``batch`` sequences (averaged over the ``n_out`` steps after ``n_in`` prompt tokens):
    ``{"seconds", "compute_seconds", "memory_seconds", "comm_seconds", "flops", "bytes"}``."""
    flops = batch * (m.linear_flops + m.head_flops
                     + sum(a * _mean_keys(n_in, n_out, win) for a, win in m.attention))
    cache = sum(b * _mean_keys(n_in, n_out, win) for b, win in m.kv) + m.state_bytes
    read = _weights_read(m, batch) + batch * cache
    compute = flops / (tp * _peak(card, m) * _eff(m, eff, eff.decode_compute))
    memory = read / (tp * card.bandwidth * _eff(m, eff, eff.decode_bandwidth))
    comm = _comm(m, tp, batch, card.link_bandwidth, eff)
    return {"seconds": max(compute, memory) + comm, "compute_seconds": compute, "memory_seconds": memory,
            "comm_seconds": comm, "flops": flops, "bytes": read}


def serve(m: SpeedModel, card: Roofline, *, tp: int, batch: int, n_in: int, n_out: int,
          eff: Efficiency = DEFAULT_EFFICIENCY) -> dict[str, float]:
    """One replica of ``tp`` GPUs serving ``batch`` concurrent requests of ``n_in`` + ``n_out`` tokens (module
    docstring): prefill seconds, decode step, seconds per output token, tokens/s per user and per replica."""
    batch, n_in, n_out = as_count(batch, "batch"), as_count(n_in, "input tokens"), as_count(n_out, "output tokens")
    prefill = prefill_seconds(m, n_in, card, tp, eff)
    shared = prefill_seconds(m, n_in, card, tp, eff, alone=False)
    step = decode_step_seconds(m, batch, n_in, n_out, card, tp, eff)
    per_token = step["seconds"] + (batch - 1) * shared / n_out
    replica = batch * n_out / (prefill + n_out * per_token)
    return {"prefill_seconds": prefill, "decode_step_seconds": step["seconds"], "seconds_per_output_token":
            per_token, "tokens_per_second_per_user": 1 / per_token, "tokens_per_second_per_replica": replica,
            "bound": "compute" if step["compute_seconds"] >= step["memory_seconds"] else "memory bandwidth"}


# ---------------------------------------------------------------------------------------------------------------
# The report's ``speed`` section


#: Keys of the report's ``speed`` object (``--json``), each with its meaning.
SPEED_KEYS: dict[str, str] = {
    "gpu": "the card whose data-sheet roofline is used (name, bandwidth_bytes_per_second, peak_flops_per_second"
           " for compute_dtype, achievable_fraction: a measured large matrix product over that peak, source)",
    "input_tokens": "prompt tokens per request (--input-tokens; default --context minus the output)",
    "output_tokens": "generated tokens per request (--output-tokens; default min(256, --context / 2))",
    "plan": "which serving plan the figures are for: tp_degree, pp_degree, replicas, sequences_per_replica"
            " (concurrent requests on the busiest replica)",
    "prefill_seconds": "time to process one request's prompt alone (about its time to the first token)",
    "decode_seconds_per_token": "one decode step at the planned batch (each sequence's cache read once, weights once)",
    "seconds_per_output_token": "decode step plus the other requests' prefills spread over the outputs",
    "tokens_per_second_per_user": "1 / seconds_per_output_token",
    "tokens_per_second_per_gpu": "output tokens per second of all replicas over the plan's GPUs",
    "bound": "'memory bandwidth' or 'compute': which side of the roofline the decode step sits on",
    "efficiency": "the assumed fractions of the roofline (lib.planner.speed.Efficiency)",
    "gpus_for_target": "only with --tokens-per-second-per-user or --tokens-per-second: gpus, tp_degree, replicas,"
                       " sequences_per_replica, tokens_per_second_per_user, tokens_per_second (null with a reason"
                       " when no layout reaches the target)",
    "cost_per_million_tokens": "only with --gpu-hour-price: price x GPUs / output tokens per hour x 10**6, for the"
                               " target's layout when one is asked, else the plan's",
    "assumptions": "list of strings: what the figures assume",
}


def _capacity(r: dict[str, Any], tp: int, per_seq: float, gpu_memory: float) -> int:
    """Sequences a replica of ``tp`` GPUs holds under the report's engine accounting (weights split ``tp`` ways)."""
    s = r["serving"]
    plan = s["tensor_parallel"] or s["tensor_x_pipeline"]
    over = plan["overhead_bytes_per_gpu"]  # activations and non-torch memory per GPU, as the memory plan counts them
    room = tp * (s["gpu_memory_utilization"] * gpu_memory - over) - r["weights_bytes"]
    return int(room // per_seq) if per_seq > 0 and room > 0 else 0


def _tp_degrees(r: dict[str, Any], model: Any) -> list[int]:
    from . import engine as eng_mod
    from .serving import valid_tp_degrees

    if isinstance(model, eng_mod.EngineModel):
        return valid_tp_degrees(model.n_heads, model.n_kv_heads, 64) if model.n_heads else [1]
    return valid_tp_degrees(model.n_heads, model.n_kv_heads, 64)


def _per_seq_bytes(r: dict[str, Any], model: Any, context: int) -> float:
    from . import engine as eng_mod
    from .cache import model_kv_bytes_per_sequence

    kv_dtype = r["workload"]["kv_dtype"]
    if isinstance(model, eng_mod.EngineModel):
        return eng_mod.kv_bytes_per_sequence(model, context, kv_dtype) + r["state_bytes_per_sequence"]
    return model_kv_bytes_per_sequence(model, context, kv_dtype)


def _largest_batch(ok, cap: int) -> int:
    """The largest b in [1, cap] with ok(b), for ok true up to some b and false after (0 if ok(1) fails)."""
    if cap < 1 or not ok(1):
        return 0
    lo, hi = 1, cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def gpus_for_target(r: dict[str, Any], model: Any, m: SpeedModel, card: Roofline, *, users: int, n_in: int,
                    n_out: int, per_user: float | None, total: float | None, max_seqs: int,
                    eff: Efficiency = DEFAULT_EFFICIENCY) -> dict[str, Any]:
    """The fewest GPUs (tensor-parallel replicas, no pipeline) that give every user at least ``per_user`` output
    tokens/s (serving ``users`` at once) and, with ``total``, that many output tokens/s in all; a replica takes
    as many requests as its memory, ``max_seqs`` and the per-user target allow."""
    per_seq = _per_seq_bytes(r, model, n_in + n_out)
    best: dict[str, Any] | None = None
    for tp in _tp_degrees(r, model):
        cap = min(_capacity(r, tp, per_seq, r["workload"]["gpu_memory_bytes"]), max_seqs)
        if cap < 1:
            continue

        def fast_enough(b: int, tp: int = tp) -> bool:
            return per_user is None or serve(m, card, tp=tp, batch=b, n_in=n_in, n_out=n_out,
                                             eff=eff)["tokens_per_second_per_user"] >= per_user

        b = _largest_batch(fast_enough, cap)
        if b == 0:
            continue
        if total is None:
            replicas = math.ceil(users / b)
            b = math.ceil(users / replicas)
        else:
            thr = serve(m, card, tp=tp, batch=b, n_in=n_in, n_out=n_out, eff=eff)["tokens_per_second_per_replica"]
            replicas = math.ceil(total / thr)
        s = serve(m, card, tp=tp, batch=b, n_in=n_in, n_out=n_out, eff=eff)
        row = {"gpus": replicas * tp, "tp_degree": tp, "replicas": replicas, "sequences_per_replica": b,
               "tokens_per_second_per_user": s["tokens_per_second_per_user"],
               "tokens_per_second": replicas * s["tokens_per_second_per_replica"]}
        if best is None or row["gpus"] < best["gpus"]:
            best = row
    return best if best is not None else {"gpus": None, "reason": "no tensor-parallel layout reaches the target"
                                          f" (largest tried: {_tp_degrees(r, model)[-1]} GPUs per replica)"}


def speed_section(r: dict[str, Any], model: Any, raw: dict[str, Any] | None, *, gpu_name: str | None,
                  input_tokens: int | None = None, output_tokens: int | None = None,
                  tokens_per_second_per_user: float | None = None, tokens_per_second: float | None = None,
                  gpu_hour_price: float | None = None, eff: Efficiency = DEFAULT_EFFICIENCY) -> dict[str, Any]:
    """The report's ``speed`` object (keys: :data:`SPEED_KEYS`) for the plan in ``r``: the tensor-parallel plan
    (the tensor x pipeline one when only that fits; its stages then run one after the other), the busiest replica's
    users as the decode batch. Raises ValueError (one line) where it cannot answer."""
    context = r["workload"]["context"]
    if output_tokens is None:
        output_tokens = max(1, min(256, context // 2)) if input_tokens is None else max(1, context - input_tokens)
    if input_tokens is None:
        input_tokens = max(1, context - output_tokens)
    input_tokens, output_tokens = as_count(input_tokens, "--input-tokens"), as_count(output_tokens, "--output-tokens")
    if input_tokens + output_tokens > context:
        raise ValueError(f"--input-tokens {input_tokens} + --output-tokens {output_tokens} exceed --context {context}"
                         " (the memory plan holds --context tokens per sequence)")
    if gpu_name is None:
        raise ValueError("time and throughput need a GPU preset (--gpu), not only --gpu-memory: the roofline needs"
                         " the card's bandwidth and peak")
    card = roofline(gpu_name)
    m = describe(r, model, raw)
    plan = r["serving"]["tensor_parallel"] or r["serving"]["tensor_x_pipeline"]
    users = r["workload"]["users"]
    batch = math.ceil(users / plan["replicas"])
    s = serve(m, card, tp=plan["tp_degree"], batch=batch, n_in=input_tokens, n_out=output_tokens, eff=eff)
    per_gpu = plan["replicas"] * s["tokens_per_second_per_replica"] / plan["gpus"]
    assumptions = [
        eff.describe(),
        f"roofline of the {card_name(gpu_name)} data sheet: {card.bandwidth / 1e12:g} TB/s, {m.compute_dtype} peak"
        f" {card.peak(m.compute_dtype) / 1e12:g} TFLOP/s dense ({card.source})"
        + (f"; a large matrix product reaches {card.achievable:.0%} of it (measured: {MAMF_SOURCE})"
           if card.matmul_measured else "; no measured matrix product found for this card: the sheet's peak taken"
           " whole"),
        f"requests of {input_tokens:,} prompt and {output_tokens:,} generated tokens; {batch} at once on each"
        " replica (continuous batching: the others' prefills interleave with each one's decode)",
        "not modelled: queueing for a free slot, scheduler policy, speculative decoding, CPU overheads;"
        " tensor parallelism costs two all-reduces per layer (allowance above)",
        *m.notes,
    ]
    if plan["pp_degree"] > 1:
        assumptions.append(f"{plan['pp_degree']} pipeline stages run one after another for each token: bandwidth"
                           f" and peak of {plan['tp_degree']} GPU(s) per step, the stages not overlapped")
    out: dict[str, Any] = {
        "gpu": {"name": card_name(gpu_name), "bandwidth_bytes_per_second": card.bandwidth,
                "peak_flops_per_second": card.peak(m.compute_dtype), "compute_dtype": m.compute_dtype,
                "achievable_fraction": card.achievable, "source": card.source},
        "input_tokens": input_tokens, "output_tokens": output_tokens,
        "plan": {"tp_degree": plan["tp_degree"], "pp_degree": plan["pp_degree"], "replicas": plan["replicas"],
                 "sequences_per_replica": batch},
        "prefill_seconds": s["prefill_seconds"],
        "decode_seconds_per_token": s["decode_step_seconds"],
        "seconds_per_output_token": s["seconds_per_output_token"],
        "tokens_per_second_per_user": s["tokens_per_second_per_user"],
        "tokens_per_second_per_gpu": per_gpu,
        "bound": s["bound"],
        "efficiency": asdict(eff),
        "assumptions": assumptions,
    }
    gpus_used, total_rate = plan["gpus"], per_gpu * plan["gpus"]
    if tokens_per_second_per_user is not None or tokens_per_second is not None:
        t = gpus_for_target(r, model, m, card, users=users, n_in=input_tokens, n_out=output_tokens,
                            per_user=tokens_per_second_per_user, total=tokens_per_second,
                            max_seqs=r["serving"]["max_num_seqs"], eff=eff)
        out["gpus_for_target"] = t
        if t.get("gpus"):
            gpus_used, total_rate = t["gpus"], t["tokens_per_second"]
    if gpu_hour_price is not None:
        out["cost_per_million_tokens"] = (gpu_hour_price * gpus_used / (3600 * total_rate) * 1e6
                                          if total_rate > 0 else None)
    return out


def speed_text(sp: dict[str, Any] | None) -> str:
    """The ``speed`` object as lines of the text report (one line saying why where there is none)."""
    if sp is None:
        return ("time and throughput: not computed (give a --gpu preset: --gpu-memory alone says nothing of the"
                " card's bandwidth or peak)")
    p = sp["plan"]
    lines = [
        f"time and throughput on {sp['gpu']['name']} (roofline x assumed efficiencies; requests of"
        f" {sp['input_tokens']:,} prompt + {sp['output_tokens']:,} generated tokens, {p['sequences_per_replica']}"
        f" at once on each of {p['replicas']} replica(s) of tensor-parallel {p['tp_degree']}"
        + (f" x pipeline {p['pp_degree']}" if p["pp_degree"] > 1 else "") + "):",
        f"  prefill {_ms(sp['prefill_seconds'])} per request (about its time to the first token); decode step"
        f" {_ms(sp['decode_seconds_per_token'])} ({sp['bound']}-bound); {_ms(sp['seconds_per_output_token'])} per"
        " output token with the others' prefills",
        f"  {sp['tokens_per_second_per_user']:,.1f} tokens/s per user; {sp['tokens_per_second_per_gpu']:,.0f}"
        " output tokens/s per GPU",
    ]
    t = sp.get("gpus_for_target")
    if t is not None:
        if t.get("gpus"):
            lines.append(f"  target met with {t['gpus']} GPU(s): {t['replicas']} replica(s) x tensor-parallel"
                         f" {t['tp_degree']}, {t['sequences_per_replica']} requests each:"
                         f" {t['tokens_per_second_per_user']:,.1f} tokens/s per user,"
                         f" {t['tokens_per_second']:,.0f} tokens/s in all")
        else:
            lines.append(f"  target NOT reachable: {t['reason']}")
    if "cost_per_million_tokens" in sp:
        c = sp["cost_per_million_tokens"]
        lines.append("  cost: " + (f"{c:,.3f} per million output tokens (GPU-hour price x GPUs / tokens per hour)"
                                   if c is not None else "not computed (no throughput)"))
    lines += [f"speed assumption: {a}" for a in sp["assumptions"]]
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def card_name(name: str) -> str:
    return name if name in ROOFLINES else gpu(name).name


def web_description(model: Any) -> dict[str, Any]:
    """What the in-page calculator needs of a model for :func:`serve`, independent of dtypes (``web/planner.js``
    multiplies by the bytes per element): ``total_params``, ``linear_flops`` and ``head_flops`` per token,
    ``attention`` ([FLOPs per cached key, window] per layer), ``kv_elements`` ([elements per token, window] per
    caching layer), ``state_elements`` (per sequence, as vLLM holds it), ``moe`` ([E, k, parameters of one expert]
    per layer), ``encoder_params`` and ``source_tokens`` (an encoder-decoder), ``d_model``, ``n_layers``."""
    from . import engine as eng_mod
    from .cache import kv_elements_per_token_layer
    from .counts import _ffn_params, parameter_count
    from .flops import forward_flops

    if isinstance(model, eng_mod.EngineModel):
        f = eng_mod.forward_flops(model, 1)
        return {"total_params": model.total, "linear_flops": f["projections"] + f["ffn"], "head_flops": f["lm_head"],
                "attention": [[2 * la.score_width, la.window] for la in model.layers if la.score_width],
                "kv_elements": [[la.kv_per_token, la.window] for la in model.layers if la.kv_per_token],
                "state_elements": sum(la.state - la.conv_channels for la in model.layers),
                "moe": [list(x) for x in engine_experts(model)], "encoder_params": model.encoder_params,
                "source_tokens": model.source_tokens, "d_model": model.d_model, "n_layers": len(model.layers)}
    cfg = model
    f = forward_flops(cfg, 1)
    a = forward_flops(cfg, 1, include_lm_head=False).attention / cfg.n_layers
    moe = [[cfg.n_routed_experts, cfg.n_experts_per_tok, _ffn_params(cfg, cfg.moe_d_ff)]
           for i in range(cfg.n_layers) if cfg.is_moe_layer(i)]
    return {"total_params": parameter_count(cfg).total, "linear_flops": f.projections + f.ffn, "head_flops": f.lm_head,
            "attention": [[a, w] for w in cfg.windows],
            "kv_elements": [[kv_elements_per_token_layer(cfg), w] for w in cfg.windows], "state_elements": 0,
            "moe": moe, "encoder_params": 0, "source_tokens": 0, "d_model": cfg.d_model, "n_layers": cfg.n_layers}


def web_data(presets: dict[str, Any]) -> dict[str, Any]:
    """The in-page calculator's speed data: each preset's :func:`web_description`, every card's roofline
    (bandwidth, dense peaks per dtype, link bandwidth, achievable share) and the default :class:`Efficiency`."""
    return {"models": {name: web_description(m) for name, m in presets.items()},
            "cards": {name: {"bandwidth": c.bandwidth, "peak_flops": c.peak_flops, "link_bandwidth": c.link_bandwidth,
                             "achievable": c.achievable} for name, c in ROOFLINES.items()},
            "efficiency": asdict(DEFAULT_EFFICIENCY)}


# ---------------------------------------------------------------------------------------------------------------
# Checked against published measurements


#: Fixture GPU names -> roofline names.
_CARDS = {"H100-SXM-80GB": "H100-80GB", "H100": "H100-80GB", "GH200-144GB": "GH200-144GB", "B200-SXM-180GB": "B200",
          "MI300X": "MI300X", "MI300X (192 GB)": "MI300X", "A100": "A100-80GB", "A100 80GB": "A100-80GB",
          "H100 NVL (95 GB)": "H100-NVL", "H100 PCIe": "H100-PCIe"}

#: Configs for fixtures that name none: (path under tests/fixtures, why it stands in).
_STAND_IN = {
    "MiniMax-M2.7": ("MiniMax-M2.5.config.json", "MiniMax-M2.7's config is not among the fixtures; M2.5's stands in"
                     " (the same MiniMax-M2 architecture is assumed)"),
}

#: Precision of runs whose logs print none: (weight dtype or quantisation, KV dtype, why).
_PRECISION = {
    "mlperf_nvidia": ("fp8", "fp8", "NVIDIA's MLPerf v4.0/v4.1 Llama-2-70B and Mixtral submissions on Hopper run"
                      " FP8 weights and FP8 KV cache (their submission notes; the summary log prints none)"),
    "mlperf_b200": ("fp4", "fp8", "NVIDIA's MLPerf v4.1 B200 submission ran FP4 weights (its announcement; the"
                    " summary log prints none)"),
    "mlperf_amd": ("fp8", "fp8", "AMD's MLPerf v4.1 MI300X submission ran FP8 weights and KV cache (its"
                   " announcement; the summary log prints none)"),
    "default": ("bf16", "bf16", "precision not printed: bf16 weights and cache assumed"),
}


def _precision(rec: dict[str, Any]) -> tuple[str, str, str]:
    if rec["source_kind"] == "mlperf":
        if "B200" in rec["gpu"]:
            return _PRECISION["mlperf_b200"]
        return _PRECISION["mlperf_amd"] if "MI300X" in rec["gpu"] else _PRECISION["mlperf_nvidia"]
    dtype = (rec["dtype"] or "").lower()
    kv = (rec["kv_cache_dtype"] or "").lower()
    w = "fp8" if dtype.startswith("fp8") else "int4" if "awq" in dtype or "4-bit" in dtype else "bf16"
    k = "fp8" if kv.startswith("fp8") else ("fp8" if w == "fp8" and not kv else "bf16")
    return w, k, "as the source prints it" if rec["dtype"] else _PRECISION["default"][2]


def _lengths(rec: dict[str, Any]) -> tuple[int, int, str]:
    """(mean input tokens, mean output tokens, how they were read) of a fixture's workload."""
    wl, fig = rec["workload"], rec["figures"]
    if wl["input_len"] and wl["output_len"]:
        return wl["input_len"], wl["output_len"], "fixed lengths"
    n = wl["num_prompts"]
    if wl["total_input_tokens"] and wl["total_output_tokens"] and n:
        return (round(wl["total_input_tokens"] / n), round(wl["total_output_tokens"] / n),
                "totals over requests")
    if fig["output_tokens_per_s"] and fig["requests_per_s"]:
        out = round(fig["output_tokens_per_s"] / fig["requests_per_s"])
        return out, out, ("mean output = tokens/s over samples/s; the dataset's mean input length is not printed:"
                          " assumed equal to it")
    raise ValueError(f"{rec['id']}: lengths not recorded")


def _quant(weights: str):
    from .quant import Quantisation

    if weights == "fp4":
        return Quantisation("nvfp4", 4, 16, 1, description="fp4 weights, an 8-bit scale per 16 (assumed layout)")
    return None


_MODELS: dict[tuple[str, str, str, str, int], tuple[Any, Any, Any, str | None]] = {}


def _fixture_model(rec: dict[str, Any], weights: str, kv: str, gpu_name: str, context: int):
    """(report, model, raw config, why a stand-in) for a fixture's model and precision (kept for the session:
    :func:`accuracy_rows` with other efficiencies reuses them)."""
    key = (rec["config_fixture"] or rec["model"], weights, kv, gpu_name, context)
    if key not in _MODELS:
        _MODELS[key] = _read_fixture_model(rec, weights, kv, gpu_name, context)
    return _MODELS[key]


def _read_fixture_model(rec: dict[str, Any], weights: str, kv: str, gpu_name: str, context: int):
    from .cli import read_model, report
    from .quant import read_quantisation
    from .serving import ServingAssumptions

    if rec["config_fixture"]:
        path, why = FIXTURES / rec["config_fixture"], ""
    elif rec["model"] in _STAND_IN:
        rel, why = _STAND_IN[rec["model"]]
        path = FIXTURES / rel
    else:
        return None, None, None, "no config among the fixtures"
    raw = json.loads(path.read_text(encoding="utf-8"))
    cfg, em, _ = read_model(path, cache=True)
    stored = read_quantisation(raw)
    if stored is not None:  # served as the checkpoint stores it; its other tensors at 16 bit
        quant, dtype = stored, "bf16"
    else:
        quant, dtype = _quant(weights), ("bf16" if weights == "fp4" else weights)
    card = gpu(gpu_name) if gpu_name in _GPU_PRESETS else None
    mem = card.plan_bytes if card else _NO_PRESET_MEMORY[gpu_name]
    engine = ServingAssumptions.vllm_defaults(mem, gpu_name, non_torch_bytes=GiB)
    kw = dict(context=context, users=1, gpu_memory_bytes=mem, dtype=dtype, kv_dtype=kv, engine=engine)
    model = cfg if cfg is not None else em
    return report(model, raw, quant=quant, **kw), model, raw, why


_GPU_PRESETS = {"H100-80GB", "B200", "MI300X", "A100-80GB"}
#: Memory of the cards with a roofline but no preset (marketed capacity; only the batch that fits depends on it).
_NO_PRESET_MEMORY = {"GH200-144GB": 144 * 10**9, "H100-NVL": 94 * 10**9, "H100-PCIe": 80 * 10**9}


def _best_layout(r, model, m, card, rec, n_in, n_out, eff, max_seqs) -> tuple[int, int, int]:
    """(tp, replicas, batch per replica) for a run of ``gpu_count`` GPUs: the printed tensor-parallel degree, else
    the layout with the highest predicted throughput (as a submitter tuning for the benchmark would choose)."""
    g = rec["gpu_count"] or rec["tensor_parallel"] or 1
    per_seq = _per_seq_bytes(r, model, n_in + n_out)
    degrees = [rec["tensor_parallel"]] if rec["tensor_parallel"] else [t for t in _tp_degrees(r, model) if g % t == 0]
    best = None
    for tp in degrees:
        cap = min(_capacity(r, tp, per_seq, r["workload"]["gpu_memory_bytes"]), max_seqs)
        if cap < 1:
            continue
        thr = (g // tp) * serve(m, card, tp=tp, batch=cap, n_in=n_in, n_out=n_out, eff=eff)[
            "tokens_per_second_per_replica"]
        if best is None or thr > best[0]:
            best = (thr, tp, g // tp, cap)
    if best is None:
        raise ValueError(f"{rec['id']}: the model does not fit on {g} GPUs")
    return best[1], best[2], best[3]


def accuracy_rows(eff: Efficiency = DEFAULT_EFFICIENCY, fixtures: Path | None = None) -> list[dict[str, Any]]:
    """Predicted against measured for every published measurement in ``tests/fixtures/speed`` (one row per figure
    the model predicts), each row a dict:

    ``id`` (the fixture), ``model``, ``gpu`` (as the source names it, with the count, or "(count not published)"),
    ``setting`` (scenario, concurrency or rate, lengths, precision, tensor-parallel layout), ``figure``
    (``"output tok/s"``, ``"TPOT ms"`` or ``"TTFT ms"``), ``predicted``, ``measured``, ``error`` (predicted /
    measured - 1) and ``assumed`` (what the prediction assumed beyond the fixture: stand-in configs, precision,
    lengths).

    Which figures: an MLPerf Offline run and an offline benchmark give output tokens/s (the largest batch the
    memory holds, capped at the engine's max_num_seqs); an MLPerf Server run gives the mean TPOT at its arrival
    rate (Little's law sets the batch); a fixed-concurrency serving run gives its mean TPOT, its output tokens/s,
    and at concurrency 1 its TTFT (the prefill alone). A fixture whose model has no config among the fixtures
    appears once with ``predicted`` None and the reason in ``assumed``. The model is :func:`serve` with ``eff``.
    """
    folder = fixtures or FIXTURES / "speed"
    rows: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        rows.extend(_rows_for(rec, eff))
    return rows


def _rows_for(rec: dict[str, Any], eff: Efficiency) -> list[dict[str, Any]]:
    wl, fig = rec["workload"], rec["figures"]
    weights, kv, why_precision = _precision(rec)
    n_in, n_out, why_lengths = _lengths(rec)
    card_key = _CARDS.get(rec["gpu"])
    gpus = f"{rec['gpu_count']} x {rec['gpu']}" if rec["gpu_count"] else f"{rec['gpu']} (count not published)"
    base = {"id": rec["id"], "model": rec["model"], "gpu": gpus}
    if card_key is None:
        return [{**base, "setting": wl["scenario"], "figure": None, "predicted": None, "measured": None,
                 "error": None, "assumed": f"no roofline for {rec['gpu']!r}"}]
    r, model, raw, why_config = _fixture_model(rec, weights, kv, card_key, n_in + n_out)
    if r is None:
        return [{**base, "setting": wl["scenario"], "figure": None, "predicted": None, "measured": None,
                 "error": None, "assumed": why_config}]
    card = ROOFLINES[card_key]
    m = describe(r, model, raw)
    max_seqs = wl["max_num_seqs"] or r["serving"]["max_num_seqs"]
    if r["quantisation"] and "quantization_config" in r["quantisation"]:  # the checkpoint's own storage
        weights = r["quantisation"].split(" ")[0]
        why_precision = f"weights as the checkpoint stores them ({r['quantisation']})"
    assumed = [x for x in (why_config, f"weights {weights}, cache {kv}: {why_precision}",
                           f"{n_in} in / {n_out} out tokens ({why_lengths})") if x]
    if not rec["gpu_count"]:
        assumed.append("GPU count not printed: one GPU assumed" if not rec["tensor_parallel"] else "")
    tp, replicas, cap = _best_layout(r, model, m, card, rec, n_in, n_out, eff, max_seqs)
    conc_text = f"concurrency {wl['max_concurrency']}, " if wl["max_concurrency"] else ""
    setting = f"{wl['scenario']}, {conc_text}{n_in}/{n_out} tokens, {weights}, TP{tp} x {replicas}"
    out: list[tuple[str, float, float]] = []
    conc = wl["max_concurrency"]
    if wl["scenario"] == "offline" or (conc is None and wl["scenario"] == "serving"):
        batch = min(cap, wl["num_prompts"] or cap)
        s = serve(m, card, tp=tp, batch=batch, n_in=n_in, n_out=n_out, eff=eff)
        if fig["output_tokens_per_s"]:
            out.append(("output tok/s", replicas * s["tokens_per_second_per_replica"], fig["output_tokens_per_s"]))
        assumed.append(f"batch {batch} per replica (what the memory holds, at most {max_seqs})")
    elif wl["scenario"] == "server" and fig["mean_tpot_ms"] and fig["mean_ttft_ms"] and fig["requests_per_s"]:
        # The batch a Poisson stream holds is set by the run's own latencies (Little's law): concurrency = rate x
        # time in the system. It is read from the printed rate, TTFT and TPOT, and the TPOT predicted at it.
        qps = fig["requests_per_s"]
        held = qps * (fig["mean_ttft_ms"] + (n_out - 1) * fig["mean_tpot_ms"]) / 1e3
        batch = max(1, min(cap, round(held / replicas)))
        s = serve(m, card, tp=tp, batch=batch, n_in=n_in, n_out=n_out, eff=eff)
        out.append(("TPOT ms", s["seconds_per_output_token"] * 1e3, fig["mean_tpot_ms"]))
        assumed.append(f"{held:.0f} requests in flight (Little's law on the printed rate {qps:g}/s, TTFT and TPOT),"
                       f" {batch} per replica")
    else:
        per_replica = max(1, math.ceil(conc / replicas))
        s = serve(m, card, tp=tp, batch=min(per_replica, cap), n_in=n_in, n_out=n_out, eff=eff)
        if fig["mean_tpot_ms"]:
            out.append(("TPOT ms", s["seconds_per_output_token"] * 1e3, fig["mean_tpot_ms"]))
        if fig["output_tokens_per_s"] and conc > 1:
            out.append(("output tok/s", replicas * s["tokens_per_second_per_replica"], fig["output_tokens_per_s"]))
        if fig["mean_ttft_ms"] and conc == 1:
            out.append(("TTFT ms", s["prefill_seconds"] * 1e3, fig["mean_ttft_ms"]))
    note = "; ".join(a for a in assumed if a)
    return [{**base, "setting": setting, "figure": name, "predicted": p, "measured": meas, "error": p / meas - 1,
             "assumed": note} for name, p, meas in out]


def accuracy_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """``{"cases", "median_abs_error", "max_abs_error", "within_25", "within_50"}`` over the rows with a
    prediction (errors as fractions: 0.25 is 25 %)."""
    errs = sorted(abs(r["error"]) for r in rows if r["error"] is not None)
    return {"cases": len(errs), "median_abs_error": statistics.median(errs) if errs else math.nan,
            "max_abs_error": errs[-1] if errs else math.nan,
            "within_25": sum(e <= 0.25 for e in errs), "within_50": sum(e <= 0.5 for e in errs)}

