"""One attention forward pass in a fresh process, for a clean peak: ``python -m benchmarks._memory_worker``.

Prints one JSON object: the peak of NumPy's allocations during the call (tracemalloc sees every NumPy array),
the growth of the process's peak resident size over the call (``VmHWM`` after resetting it, else
``ru_maxrss``), and the call's wall time
measured in separate, untraced calls. Used by :mod:`benchmarks.__main__`; not meant to be run by hand.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import tracemalloc

import numpy as np

from lib.attention import attention
from lib.tiled import tiled_attention


def _status_bytes(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024  # reported in kB (KiB)
    except OSError:
        pass
    return None


def _maxrss_bytes() -> int:
    """``ru_maxrss`` in bytes: getrusage(2) reports it in KiB on Linux and in bytes on macOS."""
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024


def _rss_start() -> int:
    """Reset the peak resident size where Linux allows it (``/proc/self/clear_refs``), return the baseline."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current VmRSS
        return _status_bytes("VmRSS") or 0
    except OSError:
        return _maxrss_bytes()


def _rss_peak() -> int:
    return _status_bytes("VmHWM") or _maxrss_bytes()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["naive", "tiled"], required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads (default: as configured)")
    args = ap.parse_args()
    if args.threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, args.n, args.d), dtype=np.float32) for _ in range(3))
    if args.impl == "naive":
        def run():
            return attention(q, k, v)[0]  # forms the (n, n) weights
    else:
        def run():
            return tiled_attention(q, k, v, block_size=args.block)[0]

    rss_before = _rss_start()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    out = run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_growth = _rss_peak() - rss_before
    checksum = float(np.abs(out).sum())
    del out
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    print(json.dumps({
        "impl": args.impl, "n": args.n, "d": args.d, "block": args.block if args.impl == "tiled" else None,
        "dtype": "float32", "tracemalloc_peak_bytes": peak - base, "rss_peak_growth_bytes": rss_growth,
        "inputs_bytes": 3 * q.nbytes, "seconds": min(times), "all_seconds": times, "checksum": checksum,
    }))


if __name__ == "__main__":
    main()
