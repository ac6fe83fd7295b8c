"""``python -m benchmarks.bench_planner_cache [--repeats R] [CONFIG ...]``: what the planner's cache of the
engine's description saves, measured as a user meets it: ``python -m lib.sizing CONFIG`` in a fresh process.

For each config read by transformers (by default gpt-oss-20b, Qwen3-Coder-Next and Jamba 1.5 Mini from
tests/fixtures), with an empty cache folder (``LIB_SIZING_CACHE_DIR``, a temporary directory):

- ``first``: the first run, which imports torch and transformers, builds the model on the meta device and writes
  the description to the cache;
- ``cached``: the runs after it, which read the description back and import neither.

Each run is a new interpreter (``subprocess``), timed from start to exit; the first run is repeated with the cache
emptied before each (``--repeats``, default 3), the cached one as often. Prints the best and median seconds of
each and the ratio first / cached of the best times; writes them to ``benchmarks/results/planner_cache.json``
(``--out`` to change it). A measurement, not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["gpt-oss-20b", "Qwen3-Coder-Next", "AI21-Jamba-1.5-Mini"]


def _run(config: Path, cache: Path) -> float:
    env = {**os.environ, "LIB_SIZING_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "lib.sizing", str(config)], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(config: Path, repeats: int) -> dict:
    first, cached = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        for _ in range(repeats):
            shutil.rmtree(cache, ignore_errors=True)
            first.append(_run(config, cache))
            cached.append(_run(config, cache))
    return {"first_s": first, "cached_s": cached, "ratio_best": min(first) / min(cached)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_planner_cache")
    ap.add_argument("configs", nargs="*", help="config.json files (default: three fixtures read by transformers)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "planner_cache.json"))
    args = ap.parse_args(argv)
    configs = [Path(c) for c in args.configs] or [ROOT / "tests" / "fixtures" / f"{n}.config.json" for n in DEFAULT]
    results = {}
    print(f"{'config':<24} {'first best':>10} {'median':>8} {'cached best':>12} {'median':>8} {'ratio':>7}")
    for c in configs:
        r = measure(c, args.repeats)
        results[c.name] = r
        print(f"{c.name.removesuffix('.config.json'):<24} {min(r['first_s']):>9.2f}s"
              f" {statistics.median(r['first_s']):>7.2f}s {min(r['cached_s']):>11.2f}s"
              f" {statistics.median(r['cached_s']):>7.2f}s {r['ratio_best']:>6.1f}x")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
