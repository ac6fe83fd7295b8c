"""``python -m benchmarks.bench_training_step [--steps N] [--repeats R]``: what a small model's training step costs,
and what each of two choices of :mod:`lib.pt` saves, measured side by side in one run.

The model is the training chapter's (:class:`lib.pt.model.Seq2SeqTransformer`, d_model 64, 4 heads, d_ff 128,
2 layers, Pre-LN) on its reversal task (:func:`lib.pt.train.train`, sequences of 2 to 8 digits), one thread,
deterministic kernels (:func:`lib.pt.train.set_determinism`), at the two batch sizes the book trains with (128 in
the training chapter, 48 in *Before and beyond attention*). Three variants, interleaved (their order rotated from one
round to the next, after an untimed round) so that a change in the machine's speed hits all alike:

- ``lib.pt``: the library as it is;
- ``finite check per entry``: :func:`lib.pt._validate.check_finite` builds the boolean tensor on every call,
  without the one-sum test first;
- ``Adam unfused``: ``torch.optim.Adam`` without ``fused=True``: the same update as a handful of separate
  element-wise operations per parameter tensor, issued from Python (fused, each tensor is updated in one pass).

Also measured, and not taken into the library: ``torch.softmax`` forward and backward on 5,120 rows of 8, 10,
16 and 32 entries, as they are and padded to 16 with ``-inf`` (on an AVX-512 CPU torch's kernel takes a far slower
path for rows shorter than 16, and attention over a short sequence is made of them); for attention weights of shape
(128, 4, 10, 10), the largest difference between the padded and the plain softmax, and the bytes autograd keeps
for the backward pass of each (``torch.autograd.graph.saved_tensors_hooks``): padding keeps the padded rows, so
the activation memory of a model would depend on the processor.

Prints microseconds and milliseconds (best of the repeats, and the median) and each variant's ratio to
``lib.pt``; writes every timing to ``benchmarks/results/training_step.json`` (``--out`` to change it). The last
loss of each variant is printed too: every variant computes the same function, so they agree to round-off.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import torch

import lib.pt._validate as validate
from lib.pt.model import Seq2SeqTransformer
from lib.pt.train import VOCAB_SIZE, set_determinism, train

from ._common import interleaved, median, table

RESULTS = Path(__file__).resolve().parent / "results"
VARIANTS = ("lib.pt", "finite check per entry", "Adam unfused")


@contextlib.contextmanager
def variant(name: str):
    """Run the library with one of its choices undone (``name`` from :data:`VARIANTS`)."""
    if name not in VARIANTS:
        raise ValueError(f"name must be one of {VARIANTS}, got {name!r}")
    exact = validate.check_finite
    users = [m for n, m in list(sys.modules.items())
             if n.startswith("lib.pt") and getattr(m, "check_finite", None) is exact]
    adam = torch.optim.Adam

    def per_entry(x, name, why=""):
        if bool((~torch.isfinite(x.detach())).any()):
            exact(x, name, why)

    class UnfusedAdam(adam):
        def __init__(self, *args, **kwargs):
            kwargs.pop("fused", None)
            super().__init__(*args, foreach=False, **kwargs)

    try:
        if name == "finite check per entry":
            for m in users:
                m.check_finite = per_entry
        elif name == "Adam unfused":
            torch.optim.Adam = UnfusedAdam
        yield
    finally:
        for m in users:
            m.check_finite = exact
        torch.optim.Adam = adam


def _softmax_kernels(n: int) -> dict:
    """torch.softmax forward and backward on 5,120 rows of ``n``, as they are and padded to 16 with -inf."""
    x = torch.randn(5120, n, generator=torch.Generator().manual_seed(n))
    xp = torch.nn.functional.pad(x, (0, max(16 - n, 0)), value=float("-inf"))
    y, yp = torch.softmax(x, -1), torch.softmax(xp, -1)
    g, gp = torch.randn_like(y), torch.randn_like(yp)
    return {"fwd": lambda: torch.softmax(x, -1), "fwd padded": lambda: torch.softmax(xp, -1),
            "bwd": lambda: torch._softmax_backward_data(g, y, -1, x.dtype),
            "bwd padded": lambda: torch._softmax_backward_data(gp, yp, -1, x.dtype)}


def softmax_rows(repeats: int) -> list[dict]:
    rows = []
    for n in (8, 10, 16, 32):
        fns = _softmax_kernels(n)
        times = interleaved({k: (lambda f=f: [f() for _ in range(20)]) for k, f in fns.items()}, repeats)
        best = {k: min(v) / 20 * 1e6 for k, v in times.items()}
        rows.append({"n": n, **best, "ratio": (best["fwd"] + best["bwd"]) / (best["fwd padded"] + best["bwd padded"])})
    return rows


def padded_attention_softmax() -> dict:
    """For attention weights of shape (128, 4, 10, 10), float32: the largest difference between the softmax of
    the rows padded to 16 with -inf (sliced back) and the plain one, and the bytes autograd keeps for each."""
    x = torch.randn(128, 4, 10, 10, generator=torch.Generator().manual_seed(0))

    def kept(f) -> tuple[torch.Tensor, int]:
        sizes: list[int] = []

        def pack(t):
            sizes.append(t.numel() * t.element_size())
            return t

        leaf = x.clone().requires_grad_()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = f(leaf)
        return y.detach(), sum(sizes)

    plain, plain_bytes = kept(lambda t: torch.softmax(t, -1))
    padded, padded_bytes = kept(
        lambda t: torch.softmax(torch.nn.functional.pad(t, (0, 6), value=float("-inf")), -1)[..., :10])
    return {"max_abs_diff": float((padded - plain).abs().max()), "kept_bytes_plain": plain_bytes,
            "kept_bytes_padded": padded_bytes}


def training_steps(batch: int, steps: int, repeats: int) -> tuple[list[dict], dict]:
    losses: dict[str, float] = {}

    def run(name: str):
        def go():
            with variant(name):
                torch.manual_seed(0)
                model = Seq2SeqTransformer(VOCAB_SIZE, 64, 4, 128, 2, norm="pre", max_len=32)
                hist = train(model, steps, batch_size=batch, lr=3e-3, warmup=steps // 2, seed=0, log_every=steps)
                losses[name] = hist[-1][1]
        return go

    times = interleaved({name: run(name) for name in VARIANTS}, repeats, warmup=1, rotate=True)
    base = min(times["lib.pt"])
    rows = [{"batch": batch, "variant": name, "best_ms": min(t) / steps * 1e3, "median_ms": median(t) / steps * 1e3,
             "ratio": min(t) / base, "loss": losses[name]} for name, t in times.items()]
    return rows, times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="training steps per timed run (default 40)")
    ap.add_argument("--repeats", type=int, default=4, help="timed runs of each variant (default 4)")
    ap.add_argument("--out", type=Path, default=RESULTS / "training_step.json")
    args = ap.parse_args(argv)
    if args.steps < 2:
        ap.error(f"--steps must be at least 2, got {args.steps}")
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {args.repeats}")
    set_determinism(0, 1)
    capability = torch.backends.cpu.get_cpu_capability()
    print(f"torch {torch.__version__}, ATen CPU capability {capability}, one thread, deterministic kernels\n")
    sm = softmax_rows(args.repeats * 5)
    print("torch.softmax on 5,120 rows, microseconds (best), as they are and padded to 16 with -inf:")
    print(table(sm, [("n", "row", "d"), ("fwd", "fwd", ".0f"), ("fwd padded", "fwd padded", ".0f"),
                     ("bwd", "bwd", ".0f"), ("bwd padded", "bwd padded", ".0f"),
                     ("ratio", "as is / padded", ".2f")]))
    pad = padded_attention_softmax()
    print(f"attention weights (128, 4, 10, 10), padded to 16: max |padded - plain| = {pad['max_abs_diff']:.1e}; "
          f"kept for backward {pad['kept_bytes_padded']:,} bytes against {pad['kept_bytes_plain']:,}")
    steps_rows, seconds = [], {}
    for batch in (128, 48):
        t0 = time.perf_counter()
        rows, times = training_steps(batch, args.steps, args.repeats)
        steps_rows += rows
        seconds[batch] = times
        print(f"\none training step at batch {batch}: {args.steps} steps x {args.repeats} runs per variant, "
              f"{time.perf_counter() - t0:.0f} s")
        print(table(rows, [("variant", "variant", "s"), ("best_ms", "ms/step (best)", ".1f"),
                           ("median_ms", "median", ".1f"), ("ratio", "/ lib.pt", ".2f"), ("loss", "last loss", ".4f")]))
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps({"capability": capability, "torch": torch.__version__, "steps": args.steps,
                                    "softmax_rows_us": sm, "padded_softmax": pad, "training_step": steps_rows,
                                    "seconds": seconds},
                                   indent=1) + "\n")
    print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
