"""nbval on every core: each chapter re-executed and compared, on this machine and on the simulated other one.

The test command's two nbval passes (``tools/nbval.sh`` natively, and under ``tools/other_machine.env``) are
one queue of (chapter, machine) jobs here, run ``-j`` at a time, the longest first (by the seconds each took
last time, kept in ``_build/nbval-seconds.json``; on a fresh clone by ``tools/nbval_seconds.json``, a committed
full run, then by notebook size), so that both cores stay busy until the end. Every kernel is single-threaded:
``-j`` kernels share the cores. Each job is exactly ``tools/nbval.sh``'s pytest command on one notebook, with
the machine's environment.

Usage::

    python tools/nbval_parallel.py [-j N] [--machine native|other|both] [--native-only chapters/X.ipynb ...]
                                   [chapters/NAME.ipynb ...]

``--native-only NB`` (repeatable) adds NB to the queue on this machine only (``make check``: a chapter affected
through its inputs alone, not edited).

Prints one line per job as it ends (and the failing job's report); exits 1 if any job failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OTHER_ENV = ROOT / "tools" / "other_machine.env"
SECONDS_FILE = ROOT / "_build" / "nbval-seconds.json"
# On a fresh clone (no _build/): the seconds of a full run on the project's 2-core machine, committed so that the
# two training chapters start first (a notebook's size is a poor proxy for them). Only the order depends on it.
SEED_SECONDS_FILE = ROOT / "tools" / "nbval_seconds.json"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def other_machine_env(path: Path = OTHER_ENV) -> dict[str, str]:
    """The ``NAME=value`` lines of ``tools/other_machine.env`` (comments and blank lines skipped)."""
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Z_][A-Z0-9_]*)=(\S*)", line)
        if not m:
            raise ValueError(f"{path}: cannot read the line {line!r} (want NAME=value)")
        env[m.group(1)] = m.group(2)
    return env


def pytest_command(notebook: Path) -> list[str]:
    return [str(ROOT / ".venv" / "bin" / "python"), "tools/nbval_run.py", "-q", "-p", "no:randomly", "-p",
            "no:cacheprovider", "--nbval", "--nbval-current-env", "--nbval-sanitize-with",
            "tools/nbval_sanitize.cfg", str(notebook.relative_to(ROOT))]


def job_env(machine: str, single_thread: bool) -> dict[str, str]:
    env = dict(os.environ)  # tools/nbval_run.py adds the kernels' own settings (static figures, unrendered frames)
    if single_thread:
        env.update({v: "1" for v in THREAD_VARS})
    if machine == "other":
        env.update(other_machine_env())
    return env


def run_job(notebook: Path, machine: str, single_thread: bool) -> tuple[Path, str, int, float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(pytest_command(notebook), cwd=ROOT, env=job_env(machine, single_thread),
                          capture_output=True, text=True)
    return notebook, machine, proc.returncode, time.perf_counter() - t0, proc.stdout + proc.stderr


def _summary_line(output: str) -> str:
    lines = [ln for ln in output.strip().splitlines() if re.search(r"\d+ (passed|failed|error)", ln)]
    return lines[-1].strip("= ") if lines else "no pytest summary"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="jobs at a time (default: cores)")
    ap.add_argument("--machine", choices=["native", "other", "both"], default="both")
    ap.add_argument("--native-only", action="append", type=Path, default=[], metavar="NB",
                    help="also run NB, on this machine only (repeatable)")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter in _toc.yml")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, got {args.jobs}")
    sys.path.insert(0, str(ROOT / "tools"))
    from chapters import toc_chapters

    native_only = [p.resolve() for p in args.native_only]
    notebooks = [p.resolve() for p in args.notebooks] or ([] if native_only else toc_chapters(ROOT))
    missing = [str(p) for p in notebooks + native_only if not p.is_file()]
    if missing:
        print(f"nbval_parallel: no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    machines = ["native", "other"] if args.machine == "both" else [args.machine]
    last = {}
    for known in (SEED_SECONDS_FILE, SECONDS_FILE):  # this checkout's own last run wins
        try:
            last.update(json.loads(known.read_text()))
        except (OSError, ValueError):
            pass

    def cost(job: tuple[Path, str]) -> float:
        nb, machine = job
        key = f"{nb.relative_to(ROOT)}:{machine}"
        return last.get(key, nb.stat().st_size / 20_000 * (1.5 if machine == "other" else 1.0))

    queue = {(nb, m) for nb in notebooks for m in machines} | {(nb, "native") for nb in native_only}
    jobs = sorted(queue, key=cost, reverse=True)
    single = args.jobs > 1 or args.machine == "other"
    cmd = shlex.join(pytest_command(Path(ROOT / "chapters" / "NAME.ipynb")))
    extra = f" + {len(native_only)} native only" if native_only else ""
    print(f"nbval_parallel: {len(jobs)} jobs ({len(notebooks)} chapters x {', '.join(machines)}{extra}), "
          f"{args.jobs} at a time{', single-threaded kernels' if single else ''}; each job: {cmd}", flush=True)
    t_all = time.perf_counter()
    failed: list[str] = []
    seconds = dict(last)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_job, nb, m, single) for nb, m in jobs]
        for i, fut in enumerate(as_completed(futures), 1):
            nb, machine, rc, dt, out = fut.result()
            rel = nb.relative_to(ROOT)
            seconds[f"{rel}:{machine}"] = round(dt, 1)
            status = "PASS" if rc == 0 else "FAIL"
            print(f"[{i}/{len(jobs)}] {status}  {machine:6s} {rel} ({dt:.0f} s): {_summary_line(out)}", flush=True)
            if rc != 0:
                failed.append(f"{machine} {rel}")
                print(out[-6000:], flush=True)
    SECONDS_FILE.parent.mkdir(exist_ok=True)
    SECONDS_FILE.write_text(json.dumps(seconds, indent=1, sort_keys=True) + "\n")
    print(f"nbval_parallel: {len(jobs) - len(failed)} of {len(jobs)} jobs passed in "
          f"{time.perf_counter() - t_all:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
