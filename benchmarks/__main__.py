"""``python -m benchmarks [--build] [--threads N] [--quick]``: measure, print a table, write JSON.

Sections (each figure measured side by side in the same run, so the ratios hold on a noisy machine):

1. **matmul**: this machine's float32 matrix-multiply throughput in NumPy and in PyTorch; the larger is the
   ceiling that every attention implementation is compared with.
2. **fwd+bwd (CPU)**: forward and backward of one attention head, d = 64, float32, at n = 256, 1024, 4096:
   the NumPy reference (:mod:`lib.attention`), the tiled NumPy reference (:mod:`lib.tiled`), PyTorch's
   ``scaled_dot_product_attention`` through autograd, and the book's PyTorch paths (:mod:`lib.pt.attention`,
   :mod:`lib.pt.tiled`) through autograd; best and median seconds, ratio (of the best) to PyTorch's SDPA,
   fraction of the ceiling (useful FLOPs: 4 n² d forward, 8 n² d backward, as
   :func:`lib.flops.attention_score_flops` counts them).
3. **memory**: peak memory of naive against tiled attention (forward, NumPy, float32) at n = 4096 and 16384,
   each in a fresh subprocess (:mod:`benchmarks._memory_worker`), and their time ratio.
4. **device**: when :func:`lib.pt.device.default_device` is a GPU, the PyTorch paths against SDPA on it up
   to n = 32768 (time, peak memory, agreement).
5. **build** (``--build`` only, many minutes): a clean book build, a rebuild with nothing changed, and the full
   test command, on a fresh copy of the repository.

The targets of the issue are then stated as met or not, with the measured ratio.
"""

from __future__ import annotations

import os
import sys

from ._common import OPENBLAS_VARS, clean_env

# Re-exec without the OpenBLAS overrides before NumPy is imported: they select the kernel at load time.
if any(v in os.environ for v in OPENBLAS_VARS) and os.environ.get("BENCH_REEXEC") != "1":
    removed = {v: os.environ[v] for v in OPENBLAS_VARS if v in os.environ}
    env = clean_env() | {"BENCH_REEXEC": "1", "BENCH_UNSET": ",".join(f"{k}={v}" for k, v in removed.items())}
    os.execve(sys.executable, [sys.executable, "-m", "benchmarks", *sys.argv[1:]], env)

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lib.attention import attention_backward_steps  # noqa: E402
from lib.constants import GB, GiB, MiB  # noqa: E402
from lib.flops import attention_score_flops  # noqa: E402
from lib.pt import attention as pt_attention  # noqa: E402
from lib.pt import tiled as pt_tiled  # noqa: E402
from lib.pt.device import default_device  # noqa: E402
from lib.tiled import tiled_attention, tiled_attention_backward  # noqa: E402

from ._common import blas_report, interleaved, median, table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
D = 64


def fwd_bwd_flops(n: int, d: int = D) -> int:
    """Useful FLOPs of one head's forward (QKᵀ, AV) and backward (dV, dA, dQ, dK): 3x the forward's."""
    return 3 * attention_score_flops(n, d)


# ---------------------------------------------------------------- 1. matmul ceiling


def section_matmul(size: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    times = interleaved({"numpy": lambda: a @ b, "torch": lambda: ta @ tb}, repeats=repeats)
    flops = 2 * size**3
    rates = {k: flops / min(v) for k, v in times.items()}
    return {"size": size, "dtype": "float32", "gflops": {k: r / 1e9 for k, r in rates.items()},
            "ceiling_gflops": max(rates.values()) / 1e9, "seconds": times}


# ---------------------------------------------------------------- 2. forward + backward on the CPU


def _cpu_impls(n: int, block: int):
    rng = np.random.default_rng(n)
    q, k, v, do = (rng.standard_normal((1, n, D), dtype=np.float32) for _ in range(4))
    tq, tk, tv = (torch.from_numpy(x.copy()).requires_grad_() for x in (q, k, v))
    tdo = torch.from_numpy(do.copy())
    results: dict[str, object] = {}

    def numpy_ref():
        st = attention_backward_steps(q, k, v, do)  # one forward and the closed-form backward
        results["numpy reference"] = (st.o, (st.dq, st.dk, st.dv))

    def numpy_tiled():
        o, lse = tiled_attention(q, k, v, block_size=block)
        results["numpy tiled"] = (o, tiled_attention_backward(q, k, v, o, lse, do, block_size=block))

    def torch_autograd(name, fn):
        def run():
            for t in (tq, tk, tv):
                t.grad = None
            o = fn()
            o.backward(tdo)
            results[name] = (o.detach().numpy(), tuple(t.grad.numpy() for t in (tq, tk, tv)))
        return run

    impls = {
        "numpy reference": numpy_ref,
        "numpy tiled": numpy_tiled,
        "torch sdpa": torch_autograd("torch sdpa", lambda: F.scaled_dot_product_attention(tq, tk, tv)),
        "torch lib.pt reference": torch_autograd(
            "torch lib.pt reference", lambda: pt_attention.attention(tq, tk, tv)[0]),
        "torch lib.pt tiled": torch_autograd(
            "torch lib.pt tiled", lambda: pt_tiled.tiled_attention(tq, tk, tv, block_size=block)[0]),
    }
    return impls, results


def section_fwd_bwd(ns: list[int], block: int, repeats: dict[int, int], mm_size: int = 1024) -> list[dict]:
    """Every implementation at each n, interleaved with two float32 matmuls of ``mm_size``³ (NumPy, torch)
    whose faster rate is this n's ceiling: the fraction of the ceiling is then measured under the same load."""
    rng = np.random.default_rng(1)
    ma, mb = (rng.standard_normal((mm_size, mm_size), dtype=np.float32) for _ in range(2))
    tma, tmb = torch.from_numpy(ma), torch.from_numpy(mb)
    rows = []
    for n in ns:
        impls, results = _cpu_impls(n, block)
        times = interleaved({**impls, "matmul numpy": lambda: ma @ mb, "matmul torch": lambda: tma @ tmb},
                            repeats=repeats.get(n, 3))
        ceiling = max(2 * mm_size**3 / min(times.pop(f"matmul {x}")) for x in ("numpy", "torch"))
        ref_o, ref_g = results["torch sdpa"]
        base = min(times["torch sdpa"])
        for name, ts in times.items():
            o, g = results[name]
            err = max(float(np.abs(o - ref_o).max()),
                      *(float(np.abs(a - b).max()) for a, b in zip(g, ref_g, strict=True)))
            rows.append({
                "n": n, "impl": name, "block": block if "tiled" in name else None, "best_s": min(ts),
                "median_s": median(ts), "ratio_to_sdpa": min(ts) / base,
                "gflops": fwd_bwd_flops(n) / min(ts) / 1e9, "ceiling_gflops": ceiling / 1e9,
                "fraction_of_ceiling": fwd_bwd_flops(n) / min(ts) / ceiling,
                "max_abs_diff_vs_sdpa": err, "all_s": ts,
            })
    return rows


# ---------------------------------------------------------------- 3. memory, in subprocesses


def _memory_run(impl: str, n: int, block: int, repeats: int, threads: int | None) -> dict:
    cmd = [sys.executable, "-m", "benchmarks._memory_worker", "--impl", impl, "--n", str(n), "--d", str(D),
           "--block", str(block), "--repeats", str(repeats)]
    if threads:
        cmd += ["--threads", str(threads)]
    proc = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"n": n, "impl": impl, "error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def section_memory(ns: list[int], block: int, repeats: int, rounds: int = 2, threads: int | None = None) -> list[dict]:
    """Naive and tiled forward passes, each in fresh subprocesses, alternated ``rounds`` times (naive, tiled,
    naive, tiled, ...): the peak memory is the same every round, the time is the best round's."""
    rows = []
    for n in ns:
        pair: dict[str, dict] = {}
        for _ in range(rounds):
            for impl in ("naive", "tiled"):
                r = _memory_run(impl, n, block, repeats, threads)
                if impl not in pair or "error" in r:
                    pair[impl] = r
                    continue
                if "error" in pair[impl]:
                    continue
                pair[impl]["all_seconds"] += r["all_seconds"]
                pair[impl]["seconds"] = min(pair[impl]["seconds"], r["seconds"])
                pair[impl]["tracemalloc_peak_bytes"] = max(pair[impl]["tracemalloc_peak_bytes"],
                                                           r["tracemalloc_peak_bytes"])
        rows.extend(pair.values())
        naive, tiled = pair["naive"], pair["tiled"]
        if "error" not in naive and "error" not in tiled:
            tiled["memory_ratio_to_naive"] = tiled["tracemalloc_peak_bytes"] / naive["tracemalloc_peak_bytes"]
            tiled["rss_ratio_to_naive"] = tiled["rss_peak_growth_bytes"] / max(naive["rss_peak_growth_bytes"], 1)
            tiled["time_ratio_to_naive"] = tiled["seconds"] / naive["seconds"]
            tiled["same_output"] = abs(tiled["checksum"] - naive["checksum"]) <= 1e-4 * abs(naive["checksum"])
    return rows


# ---------------------------------------------------------------- 4. on a GPU


def _device_one_n(device: torch.device, n: int, block: int, repeats: int) -> list[dict]:
    g = torch.Generator(device=device).manual_seed(n)
    q, k, v, do = (torch.randn(1, 1, n, D, device=device, generator=g) for _ in range(4))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    impls = {
        "torch sdpa": lambda: F.scaled_dot_product_attention(*leaves),
        "torch lib.pt tiled": lambda: pt_tiled.tiled_attention(*leaves, block_size=block)[0],
        "torch lib.pt reference": lambda: pt_attention.attention(*leaves)[0],
    }
    outs: dict[str, tuple] = {}
    rows = []
    for name, fn in impls.items():
        def run(fn=fn, name=name):
            for t in leaves:
                t.grad = None
            o = fn()
            o.backward(do)
            outs[name] = (o.detach(), [t.grad for t in leaves])

        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        try:
            ts = interleaved({name: run}, repeats=repeats, sync=torch.cuda.synchronize)[name]
        except torch.cuda.OutOfMemoryError as err:
            rows.append({"n": n, "impl": name, "error": str(err).splitlines()[0]})
            continue
        peak = torch.cuda.max_memory_allocated(device) - base
        o, grads = outs[name]
        ref_o, ref_g = outs["torch sdpa"]
        err = max(float((o - ref_o).abs().max()), *(float((a - b).abs().max()) for a, b in zip(grads, ref_g,
                                                                                                strict=True)))
        rows.append({"n": n, "impl": name, "block": block if "tiled" in name else None, "best_s": min(ts),
                     "median_s": median(ts), "peak_bytes": peak, "gflops": fwd_bwd_flops(n) / min(ts) / 1e9,
                     "max_abs_diff_vs_sdpa": err, "all_s": ts})
    base_t = next((r["best_s"] for r in rows if r["impl"] == "torch sdpa" and "best_s" in r), None)
    for r in rows:
        if "best_s" in r and base_t:
            r["ratio_to_sdpa"] = r["best_s"] / base_t
    return rows


def section_device(device: torch.device, ns: list[int], block: int, repeats: int) -> list[dict]:
    """The PyTorch paths against SDPA on a GPU: time, peak memory above the inputs, agreement."""
    return [row for n in ns for row in _device_one_n(device, n, block, repeats)]


def device_matmul(device: torch.device, size: int = 8192, repeats: int = 10) -> dict:
    a, b = (torch.randn(size, size, device=device) for _ in range(2))
    out = {}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        x, y = a.to(dtype), b.to(dtype)
        ts = interleaved({name: lambda x=x, y=y: x @ y}, repeats=repeats, warmup=3, sync=torch.cuda.synchronize)[name]
        out[name] = 2 * size**3 / min(ts) / 1e9
    return {"size": size, "gflops": out, "tf32_allowed": torch.backends.cuda.matmul.allow_tf32}


# ---------------------------------------------------------------- 5. book build and test command


BUILD_STEPS = (
    ("clean_build_s", [".venv/bin/python", "tools/build_book.py"]),
    ("nochange_rebuild_s", [".venv/bin/python", "tools/build_book.py"]),
    ("full_test_s", ["bash", "tools/test.sh"]),
)


def section_build(steps_to_run: tuple = BUILD_STEPS) -> dict:
    """Time a clean build, a no-change rebuild and the full test command on a fresh copy of the repository
    (the tracked and untracked-but-not-ignored files, with ``.venv`` linked in), one after the other."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    tmp = Path(tempfile.mkdtemp(prefix="bench-build-"))
    try:
        for f in files:
            src = ROOT / f
            if src.is_file():
                (tmp / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, tmp / f)
        (tmp / ".venv").symlink_to(ROOT / ".venv")
        env = clean_env()
        steps = {}
        for name, cmd in steps_to_run:
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, check=False)
            steps[name] = time.perf_counter() - t0
            steps[name.replace("_s", "_rc")] = proc.returncode
            if proc.returncode:
                steps[name.replace("_s", "_tail")] = proc.stdout[-2000:] + proc.stderr[-2000:]
        steps["cpu_count"] = os.cpu_count()
        return steps
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- targets


def targets(fb: list[dict], mem: list[dict], build: dict | None) -> list[dict]:
    out = []

    def add(name, value, limit, unit="x", note=""):
        met = None if value is None else value <= limit
        out.append({"target": name, "measured": value, "limit": limit, "unit": unit,
                    "status": "not measured" if met is None else ("MET" if met else "NOT MET"), "note": note})

    r = next((x for x in fb if x["n"] == 1024 and x["impl"] == "numpy reference"), None)
    add("NumPy reference fwd+bwd / PyTorch CPU SDPA, n=1024", r and r["ratio_to_sdpa"], 1.5)
    t = next((x for x in mem if x["n"] == 16384 and x["impl"] == "tiled" and "memory_ratio_to_naive" in x), None)
    add("tiled / naive peak memory, n=16384", t and t["memory_ratio_to_naive"], 0.1, note="tracemalloc peak")
    add("tiled / naive time, n=16384", t and t["time_ratio_to_naive"], 1.5)
    for key, name, limit in (("clean_build", "clean book build", 180.0),
                             ("nochange_rebuild", "no-change rebuild", 10.0)):
        if build is None:
            add(name, None, limit, "s", note="needs --build")
        else:
            rc = build.get(f"{key}_rc", 0)
            note = f"{build.get('cpu_count')} CPUs" + (f"; exit {rc}" if rc else "")
            add(name, build[f"{key}_s"], limit, "s", note=note)
            if rc:
                out[-1]["status"] = f"FAILED (exit {rc})"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="store_true", help="also time the book build and the test command (minutes)")
    ap.add_argument("--threads", type=int, default=None, help="BLAS/torch threads (default: as configured)")
    ap.add_argument("--block", type=int, default=512, help="tile side of the tiled implementations on the CPU")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for checking that the script runs")
    ap.add_argument("--out", type=Path, default=RESULTS / "bench.json")
    args = ap.parse_args()

    if args.threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
        torch.set_num_threads(args.threads)
    report: dict = {"machine": {"platform": platform.platform(), "processor": platform.processor(),
                                "openblas_vars_unset": os.environ.get("BENCH_UNSET", "none were set"),
                                **blas_report()},
                    "units": {"GB": GB, "GiB": GiB, "MiB": MiB}}
    print("BLAS:", json.dumps(report["machine"]["blas"]), "| OpenBLAS overrides unset:",
          report["machine"]["openblas_vars_unset"], "| torch threads:", torch.get_num_threads())

    ns = [256, 1024] if args.quick else [256, 1024, 4096]
    mem_ns = [1024, 2048] if args.quick else [4096, 16384]

    mm = section_matmul(1024 if args.quick else 2048, repeats=5)
    report["matmul"] = mm
    print(f"\n== 1. matmul ceiling (float32, {mm['size']}^3): " + ", ".join(
        f"{k} {v:.1f} GFLOP/s" for k, v in mm["gflops"].items()) + f"; ceiling {mm['ceiling_gflops']:.1f} GFLOP/s")

    fb = section_fwd_bwd(ns, args.block, repeats={256: 20, 1024: 7, 4096: 3})
    report["fwd_bwd_cpu"] = fb
    print(f"\n== 2. forward+backward, one head, d={D}, float32, CPU (best of interleaved runs; ratios and"
          " rates use the best, which the machine's other load disturbs least; ceiling: the faster float32"
          " 1024^3 matmul, NumPy or torch, timed in the same interleaved loop)")
    print(table(fb, [("n", "n", "d"), ("impl", "implementation", "s"), ("best_s", "best s", ".4f"),
                     ("median_s", "median s", ".4f"),
                     ("ratio_to_sdpa", "x SDPA", ".2f"), ("gflops", "GFLOP/s", ".1f"),
                     ("ceiling_gflops", "ceiling", ".1f"), ("fraction_of_ceiling", "of ceiling", ".1%"),
                     ("max_abs_diff_vs_sdpa", "max |diff|", ".1e")]))

    mem = section_memory(mem_ns, args.block, repeats=2, threads=args.threads)
    report["memory"] = mem
    print(f"\n== 3. peak memory, forward, d={D}, float32, NumPy, fresh subprocesses, naive and tiled alternated"
          f" twice, best time (tiled block {args.block})")
    for r in mem:
        r["tracemalloc_peak_MiB"] = r.get("tracemalloc_peak_bytes", 0) / MiB
        r["rss_growth_MiB"] = r.get("rss_peak_growth_bytes", 0) / MiB
    print(table(mem, [("n", "n", "d"), ("impl", "impl", "s"), ("tracemalloc_peak_MiB", "peak MiB", ".1f"),
                      ("rss_growth_MiB", "RSS growth MiB", ".1f"), ("seconds", "seconds", ".3f"),
                      ("memory_ratio_to_naive", "mem / naive", ".4f"), ("time_ratio_to_naive", "time / naive", ".2f"),
                      ("same_output", "same out", "")]))

    device = default_device()
    if device.type == "cuda":
        report["device"] = {"name": torch.cuda.get_device_name(device), "matmul": device_matmul(device)}
        dev_ns = [1024, 4096] if args.quick else [1024, 4096, 16384, 32768]
        rows = section_device(device, dev_ns, block=1024, repeats=5)
        report["device"]["fwd_bwd"] = rows
        for r in rows:
            r["peak_GiB"] = r.get("peak_bytes", 0) / GiB
        print(f"\n== 4. forward+backward on {report['device']['name']} (float32), matmul "
              + ", ".join(f"{k} {v / 1e3:.1f} TFLOP/s" for k, v in report["device"]["matmul"]["gflops"].items()))
        print(table(rows, [("n", "n", "d"), ("impl", "implementation", "s"), ("best_s", "best s", ".5f"),
                           ("ratio_to_sdpa", "x SDPA", ".2f"), ("peak_GiB", "peak GiB", ".3f"),
                           ("gflops", "GFLOP/s", ".0f"), ("max_abs_diff_vs_sdpa", "max |diff|", ".1e")]))
    else:
        print(f"\n== 4. no GPU here (default_device() is {device}): the device section is skipped")

    build = None
    if args.build:
        print("\n== 5. book build and full test command on a fresh copy (minutes) ...", flush=True)
        build = section_build()
        report["build"] = build
        print(json.dumps({k: v for k, v in build.items() if not k.endswith("_tail")}, indent=1))

    report["targets"] = targets(fb, mem, build)
    print("\n== targets")
    print(table(report["targets"], [("target", "target", "s"), ("measured", "measured", ".3f"),
                                    ("limit", "limit", "g"), ("unit", "", "s"), ("status", "status", "s"),
                                    ("note", "", "s")]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
