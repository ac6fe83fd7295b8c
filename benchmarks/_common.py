"""Timing, the BLAS report and the environment the benchmark runs its subprocesses in."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

#: Variables that select or tune OpenBLAS's kernel. They may be set on the book's machines and slow NumPy
#: down; the benchmark removes them for itself and its subprocesses (never for the tests) and reports it.
OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def clean_env() -> dict[str, str]:
    """This process's environment without :data:`OPENBLAS_VARS`, for the subprocesses."""
    return {k: v for k, v in os.environ.items() if k not in OPENBLAS_VARS}


def blas_report() -> dict:
    """Which BLAS NumPy and torch run with: library, kernel (architecture) and threads, via threadpoolctl."""
    import numpy as np
    import torch

    report: dict = {"numpy": np.__version__, "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                    "cpu_count": os.cpu_count(), "python": sys.version.split()[0]}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - threadpoolctl is in requirements.txt
        report["blas"] = "threadpoolctl is not installed: kernel unknown"
        return report
    report["blas"] = [
        {k: info.get(k) for k in ("internal_api", "version", "architecture", "num_threads", "threading_layer",
                                  "filepath")}
        for info in threadpool_info()
        if info.get("user_api") == "blas"
    ]
    return report


def interleaved(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1,
                sync: Callable[[], None] | None = None, rotate: bool = False) -> dict[str, list[float]]:
    """Time each function ``repeats`` times, interleaving them (a, b, c, a, b, c, ...) so that a change in
    the machine's load hits all of them alike; with ``rotate`` each round starts one later (a, b, c, b, c, a,
    ...), so that no function always runs first. Returns the wall-clock seconds of every call."""
    sync = sync or (lambda: None)
    for _ in range(warmup):
        for fn in fns.values():
            fn()
            sync()
    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        k = r % len(names) if rotate else 0
        for name in names[k:] + names[:k]:
            fn = fns[name]
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - t0)
    return times


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """A plain-text table; ``columns`` are (key, header, format spec)."""
    cells = [[h for _, h, _ in columns]]
    for r in rows:
        cells.append([("" if r.get(k) is None else format(r[k], f)) for k, _, f in columns])
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
