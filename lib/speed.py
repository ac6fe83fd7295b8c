r"""How fast a Transformer runs: arithmetic intensity, the roofline, and a decode step's time.

A kernel that does :math:`F` FLOPs and moves :math:`B` bytes between memory and the processor takes at least

.. math::  t \ge \max\!\left(\frac{F}{\pi}, \frac{B}{\beta}\right)

on a processor of peak :math:`\pi` FLOP/s and memory bandwidth :math:`\beta` bytes/s (the roofline of Williams,
Waterman and Patterson, 2009). Its *arithmetic intensity* :math:`I = F/B` (FLOP per byte) decides which bound
binds: below the *ridge point* :math:`\pi/\beta` the memory, above it the arithmetic.

Two halves:

* the model (pure functions): FLOPs, bytes and intensity of a matrix product, of attention over a KV cache, of
  a whole decode step of a model read from its ``config.json`` (:func:`decode_step`, through
  :mod:`lib.planner`), the batch where decode turns compute-bound (:func:`decode_knee_batch`), and the experts a
  batch of a mixture of experts touches (:func:`expected_distinct_experts`);
* the measurement (torch, CPU): a streaming copy for the bandwidth (:func:`copy_bandwidth`), a square matrix
  product for the peak (:func:`matmul_peak`), and a decode loop, ``x @ W`` over a stack of weight matrices
  larger than the processor's caches, timed across batch sizes (:func:`time_decode`), with the knee fitted to
  the times (:func:`fit_roofline`).

Units: FLOPs counted two per multiply-add (:data:`lib.constants.FLOPS_PER_MAC`), bytes as stored, seconds.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ._validate import check_int as _count
from ._validate import check_real
from .constants import FLOPS_PER_MAC

__all__ = [
    "Step", "RooflineFit", "attention_decode_intensity", "clock", "copy_bandwidth", "decode_knee_batch",
    "decode_knee_batch_with_cache", "decode_step", "decode_weights", "expected_distinct_experts", "fit_roofline",
    "matmul_bytes", "matmul_flops", "matmul_intensity", "matmul_peak", "prefill_step", "ridge_point",
    "roofline_time", "threads", "time_decode",
]


def _positive(x: float, name: str) -> float:
    return check_real(x, name, above=0)


# ------------------------------------------------------------------------------------------------ the model

def matmul_flops(m: int, k: int, n: int) -> int:
    """FLOPs of an ``(m, k) @ (k, n)`` product: :math:`2mkn` (a multiply-add is two)."""
    return FLOPS_PER_MAC * _count(m, "m") * _count(k, "k") * _count(n, "n")


def matmul_bytes(m: int, k: int, n: int, bytes_per_element: float) -> float:
    """Bytes an ``(m, k) @ (k, n)`` product must move at least: read both operands, write the result once,
    :math:`p\\,(mk + kn + mn)` for ``p`` bytes per element."""
    p = _positive(bytes_per_element, "bytes_per_element")
    return p * (_count(m, "m") * _count(k, "k") + k * _count(n, "n") + m * n)


def matmul_intensity(m: int, k: int, n: int, bytes_per_element: float) -> float:
    """Arithmetic intensity (FLOP per byte) of an ``(m, k) @ (k, n)`` product: :math:`2mkn / p(mk + kn + mn)`.
    For a batch of ``m`` vectors through a ``k x n`` weight (``m`` small) it is about :math:`2m/p`."""
    return matmul_flops(m, k, n) / matmul_bytes(m, k, n, bytes_per_element)


def attention_decode_intensity(n_heads: int, n_kv_heads: int, bytes_per_element: float) -> float:
    """FLOP per byte of one new token attending over a cache of ``n`` tokens in one layer.

    Scores :math:`q K^\\top` and the mix :math:`a V` are :math:`2 \\cdot 2\\,n\\,h\\,d_k` FLOPs; the cache read is
    :math:`2\\,n\\,h_{kv}\\,d_k\\,p` bytes (K and V). The ratio, :math:`2h / (h_{kv} p)`, does not depend on
    ``n`` or ``d_k``: a sequence's attention stays at the same intensity however long its context grows, and
    a batch does not raise it (each sequence reads its own cache).
    """
    h, h_kv = _count(n_heads, "n_heads"), _count(n_kv_heads, "n_kv_heads")
    if h % h_kv:
        raise ValueError(f"n_heads ({h}) must be a multiple of n_kv_heads ({h_kv})")
    return 2 * h / (h_kv * _positive(bytes_per_element, "bytes_per_element"))


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The intensity (FLOP per byte) where a roofline's two bounds meet: :math:`\\pi / \\beta`."""
    return _positive(peak_flops, "peak_flops") / _positive(bandwidth, "bandwidth")


def roofline_time(flops: float, nbytes: float, peak_flops: float, bandwidth: float) -> float:
    """The roofline's lower bound on time: :math:`\\max(F / \\pi, B / \\beta)` seconds."""
    if flops < 0 or nbytes < 0:
        raise ValueError(f"flops and nbytes must be >= 0, got flops={flops!r}, nbytes={nbytes!r}")
    return max(flops / _positive(peak_flops, "peak_flops"), nbytes / _positive(bandwidth, "bandwidth"))


def decode_knee_batch(peak_flops: float, bandwidth: float, bytes_per_weight: float) -> float:
    """The batch where a decode step's weight product turns compute-bound, the cache left out.

    ``b`` tokens through ``P`` weights do :math:`2bP` FLOPs and read :math:`pP` bytes, so the two bounds meet at
    :math:`2b/p = \\pi/\\beta`, i.e. :math:`b^* = p\\,\\pi / (2\\beta)`.
    """
    return _positive(bytes_per_weight, "bytes_per_weight") * ridge_point(peak_flops, bandwidth) / FLOPS_PER_MAC


def expected_distinct_experts(n_experts: int, top_k: int, batch: float) -> float:
    """Expected number of distinct experts a batch of ``batch`` tokens routes to in one layer.

    Each token picks ``top_k`` of ``n_experts`` experts; if the picks of different tokens are independent and
    every expert equally likely, a given expert is missed by one token with probability :math:`1 - k/E` and by
    all ``b`` with :math:`(1 - k/E)^b`, so the expected count is :math:`E\\,(1 - (1 - k/E)^b)`. Real routers
    are not uniform (popular experts), which makes the count smaller.
    """
    e, k = _count(n_experts, "n_experts"), _count(top_k, "top_k")
    if k > e:
        raise ValueError(f"top_k ({k}) must be at most n_experts ({e})")
    b = float(batch)
    if not (math.isfinite(b) and b >= 0):
        raise ValueError(f"batch must be a finite number >= 0, got {batch!r}")
    return e * (1.0 - (1.0 - k / e) ** b)


@dataclass(frozen=True)
class Step:
    """One forward step of a batch (a decode step, or a prompt's prefill): FLOPs done and bytes moved (weights,
    KV cache)."""

    batch: int
    context: int
    flops: float
    weight_bytes: float
    cache_bytes: float

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.cache_bytes

    @property
    def intensity(self) -> float:
        """FLOP per byte of the whole step."""
        return self.flops / self.bytes

    def time(self, peak_flops: float, bandwidth: float) -> float:
        """The roofline's bound on the step's time, in seconds."""
        return roofline_time(self.flops, self.bytes, peak_flops, bandwidth)


def decode_step(cfg, batch: int, context: int, weight_dtype: str = "bf16", kv_dtype: str | None = None,
                *, expert_fraction: float | None = None) -> Step:
    """One decode step of ``batch`` sequences, each with ``context`` tokens in its cache, for a model read by
    :func:`lib.planner.config.load_config`.

    - FLOPs: ``batch`` times the forward FLOPs of one token at that context (:func:`lib.planner.forward_flops`,
      LM head included);
    - weight bytes: every weight the step multiplies by, read once for the whole batch. Dense layers: all of
      them. A mixture-of-experts layer: its shared part and the experts the batch routes to, on average
      :func:`expected_distinct_experts` (or ``expert_fraction`` of them, if given). The input token table is
      only looked up (a row per token) unless it is tied to the output head;
    - cache bytes: each sequence reads its own cache, :func:`lib.planner.model_kv_bytes_per_sequence` (sliding
      windows and latent caches as the planner counts them).
    """
    from .planner import forward_flops, model_kv_bytes_per_sequence, parameter_count
    from .planner.units import bytes_per_element

    b, n = _count(batch, "batch"), _count(context, "context")
    kv_dtype = weight_dtype if kv_dtype is None else kv_dtype
    pc = parameter_count(cfg)
    read = pc.active if cfg.tie_embeddings else pc.active - pc.embedding
    if cfg.is_moe:
        n_moe = cfg.n_moe_layers
        e, k = cfg.n_routed_experts, cfg.n_experts_per_tok
        expert, rest = divmod(pc.total - pc.active, n_moe * (e - k))  # one routed expert's parameters
        if rest:
            raise ValueError(f"{cfg.name or cfg.model_type}: routed experts of unequal sizes; no per-expert count")
        touched = e * expert_fraction if expert_fraction is not None else expected_distinct_experts(e, k, b)
        read += n_moe * (touched - k) * expert
    flops = b * forward_flops(cfg, n).total
    cache = b * model_kv_bytes_per_sequence(cfg, n, kv_dtype)
    return Step(b, n, float(flops), float(read * bytes_per_element(weight_dtype)), float(cache))


def prefill_step(cfg, n_prompt: int, weight_dtype: str = "bf16", kv_dtype: str | None = None) -> Step:
    """The prefill of one prompt of ``n_prompt`` tokens, as a :class:`Step` of batch 1 and context
    ``n_prompt``: FLOPs of every token at its own position (causal attention: token ``i`` attends to ``i`` keys,
    or its window) with the output head for the last token only; bytes: the weights the ``n_prompt`` tokens
    touch, read once, and the cache they write."""
    from .planner import forward_flops, model_kv_bytes_per_sequence

    n = _count(n_prompt, "n_prompt")
    kv_dtype = weight_dtype if kv_dtype is None else kv_dtype
    body = sum(forward_flops(cfg, i, include_lm_head=False).total for i in range(1, n + 1))
    head = forward_flops(cfg, 1).total - forward_flops(cfg, 1, include_lm_head=False).total
    weights = decode_step(cfg, n, n, weight_dtype, kv_dtype).weight_bytes  # n tokens' experts, if any
    cache = model_kv_bytes_per_sequence(cfg, n, kv_dtype)
    return Step(1, n, float(body + head), float(weights), float(cache))


def decode_knee_batch_with_cache(cfg, context: int, peak_flops: float, bandwidth: float,
                                 weight_dtype: str = "bf16", kv_dtype: str | None = None) -> float:
    """The batch where a dense model's decode step turns compute-bound at a given context, the cache counted:
    :math:`b^* = W / (F_\\text{tok}\\,\\beta/\\pi - C)` with ``W`` the weight bytes a step reads, ``F_tok`` one
    token's FLOPs and ``C`` one sequence's cache bytes. ``inf`` when ``C`` is at least ``F_tok beta / pi``:
    each sequence then adds more reading time than arithmetic time, and no batch is compute-bound. A mixture of
    experts (whose ``W`` grows with the batch) is refused."""
    if cfg.is_moe:
        raise ValueError("a mixture of experts reads more weights as the batch grows: no closed-form knee")
    one = decode_step(cfg, 1, context, weight_dtype, kv_dtype)
    spare = one.flops * _positive(bandwidth, "bandwidth") / _positive(peak_flops, "peak_flops") - one.cache_bytes
    return one.weight_bytes / spare if spare > 0 else math.inf


# ------------------------------------------------------------------------------------------------ measuring

@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """Run torch's CPU kernels on ``n`` threads inside the block, and restore the count after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(_count(n, "n"))
    try:
        yield
    finally:
        torch.set_num_threads(before)


#: The clock of every measurement: the CPU time of the calling thread, which leaves out the time the operating
#: system gave the core to other programs (on one torch thread every kernel runs on the calling thread), and still
#: counts the time the core waits for memory.
clock: Callable[[], float] = time.thread_time


def _times(fn: Callable[[], object], repeats: int) -> np.ndarray:
    fn()  # warm-up: page faults, first-call dispatch
    out = []
    for _ in range(_count(repeats, "repeats")):
        t0 = clock()
        fn()
        out.append(clock() - t0)
    return np.array(out)


def copy_bandwidth(nbytes: int = 2**29, repeats: int = 5) -> float:
    """Bytes per second of a streaming copy of ``nbytes`` (float32) into another buffer on one thread, counted as
    STREAM counts it: the bytes read plus the bytes written, over the fastest of ``repeats`` copies."""
    import torch

    n = _count(nbytes, "nbytes", minimum=1024) // 4
    src = torch.ones(n)
    dst = torch.empty_like(src)
    with threads(1):
        best = _times(lambda: dst.copy_(src), repeats).min()
    return 2 * 4 * n / best


def matmul_peak(n: int = 1024, repeats: int = 5) -> float:
    """FLOP/s of an ``(n, n) @ (n, n)`` float32 product (:math:`2n^3` FLOPs) on one thread, the fastest of
    ``repeats``: operands that fit in the caches, so the arithmetic, not the memory, sets the pace."""
    import torch

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen)
    b = torch.randn(n, n, generator=gen)
    out = torch.empty(n, n)
    with threads(1):
        best = _times(lambda: torch.mm(a, b, out=out), repeats).min()
    return matmul_flops(n, n, n) / best


def decode_weights(total_bytes: int, width: int = 4096, seed: int = 0) -> list:
    """A stack of ``width x width`` float32 weight matrices holding at least ``total_bytes`` in all."""
    import torch

    per = 4 * _count(width, "width") ** 2
    layers = -(-_count(total_bytes, "total_bytes") // per)
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(width, width, generator=gen) - 0.5 for _ in range(layers)]


def time_decode(weights: Sequence, batches: Sequence[int], repeats: int = 3) -> np.ndarray:
    """Seconds per decode step ``x @ W`` through every matrix of ``weights`` (one step: a batch of vectors
    through the whole stack), for each batch size, on one thread; ``repeats`` sweeps over the batch sizes,
    interleaved so a change of load hits all of them alike. Returns an array ``(repeats, len(batches))``."""
    import torch

    if not weights:
        raise ValueError("weights must hold at least one matrix")
    width = weights[0].shape[0]
    gen = torch.Generator().manual_seed(1)
    xs = [torch.randn(_count(b, "batch"), width, generator=gen) for b in batches]
    outs = [torch.empty(x.shape[0], weights[0].shape[1]) for x in xs]

    def step(x, out):
        for w in weights:
            torch.mm(x, w, out=out)

    times = np.empty((_count(repeats, "repeats"), len(batches)))
    with threads(1):
        step(xs[0], outs[0])  # warm-up
        for r in range(repeats):
            for j, (x, out) in enumerate(zip(xs, outs, strict=True)):
                t0 = clock()
                step(x, out)
                times[r, j] = clock() - t0
    return times


@dataclass(frozen=True)
class RooflineFit:
    """``t(b) = max(flat, per_row * b)`` fitted to step times: the memory-bound floor, the compute-bound
    slope, and the knee ``flat / per_row`` where they meet."""

    flat: float
    per_row: float

    @property
    def knee(self) -> float:
        return self.flat / self.per_row

    def __call__(self, batch):
        return np.maximum(self.flat, self.per_row * np.asarray(batch, dtype=float))


def fit_roofline(batches: Sequence[int], seconds: Sequence[float]) -> RooflineFit:
    """Fit ``t(b) = max(a, c b)`` to measured step times by least squares on the logarithms.

    For a given knee ``k = a/c`` the best ``log a`` is a mean, so the fit scans the knee over a fine grid
    between the smallest and largest batch (both parameters in closed form at each) and keeps the best.
    """
    b = np.asarray(batches, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if b.shape != t.shape or b.ndim != 1 or b.size < 3:
        raise ValueError(f"need matching 1-D batches and times, at least 3, got {b.shape} and {t.shape}")
    if np.any(b <= 0) or np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise ValueError("batches and times must be positive and finite")
    lb, lt = np.log(b), np.log(t)
    best = None
    for log_knee in np.linspace(lb.min(), lb.max(), 2001):
        # t = a for b <= knee, a * b / knee above: log t = log a + max(0, log b - log knee)
        shape = np.maximum(0.0, lb - log_knee)
        log_a = np.mean(lt - shape)
        err = np.sum((lt - log_a - shape) ** 2)
        if best is None or err < best[0]:
            best = (err, log_a, log_knee)
    _, log_a, log_knee = best
    return RooflineFit(float(np.exp(log_a)), float(np.exp(log_a - log_knee)))
