"""Time the test command on a fresh clone, step by step, and write the figures to a file.

Clones the repository's committed HEAD into a new temporary folder (nothing of this checkout's ``.venv``,
``_build`` or caches goes with it), runs ``bash .ci/run`` there with ``CI=true`` (and, with ``--fresh-home``,
a new empty ``HOME``, so pip starts without its cache), and reads the seconds of every step from the test
command's summary. Writes ``benchmarks/results/test_times.json`` (or ``--out``) and prints a Markdown table,
the one the README shows.

Usage::

    python tools/time_test.py [--fresh-home] [--env NAME=VALUE ...] [--keep] [--out FILE]

A measurement, not a test: run it on a quiet machine; the README's figures come from its output.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEP_RE = re.compile(r"^\s+(PASS|FAIL|SKIP)\s+(.+?)\s+\((?:exit \d+, )?(\d+)s(?:, ([^)]*))?\)\s*$")
CPU_RE = re.compile(r"(?:^|, )cpu (\d+)s")


def parse_summary(text: str) -> list[dict]:
    """The steps of the test command's summary: ``[{"step", "status", "seconds"}]`` in order."""
    steps = []
    in_summary = False
    for line in text.splitlines():
        if line.strip() == "Summary:":
            in_summary, steps = True, []
            continue
        m = STEP_RE.match(line) if in_summary else None
        if m:
            row = {"step": m.group(2), "status": m.group(1), "seconds": int(m.group(3))}
            cpu = CPU_RE.search(m.group(4) or "")
            if cpu:  # user + system seconds of the step's processes (tools/steps.sh)
                row["cpu_seconds"] = int(cpu.group(1))
            steps.append(row)
    return steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fresh-home", action="store_true", help="run with a new empty HOME (no pip cache)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="extra environment")
    ap.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "test_times.json")
    args = ap.parse_args(argv)
    extra = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            ap.error(f"--env wants NAME=VALUE, got {item!r}")
        extra[name] = value

    tmp = Path(tempfile.mkdtemp(prefix="time-test-"))
    clone = tmp / "book"
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    env = dict(os.environ, CI="true", **extra)
    for var in ("VIRTUAL_ENV", "BOOK_HTML", "BOOK_PDF"):
        env.pop(var, None)
    if args.fresh_home:
        (tmp / "home").mkdir()
        env["HOME"] = str(tmp / "home")
    log = tmp / "ci-run.log"
    print(f"time_test: bash .ci/run in {clone} (commit {commit[:12]}); log: {log}", flush=True)
    t0 = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with log.open("w") as fh:
        rc = subprocess.run(["bash", ".ci/run"], cwd=clone, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    total = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    total_cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    text = log.read_text()
    steps = parse_summary(text)
    report = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "cpu_count": os.cpu_count(),
        "fresh_home": args.fresh_home,
        "env": extra,
        "returncode": rc,
        "total_seconds": round(total),
        "total_cpu_seconds": round(total_cpu),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "steps": steps,
        "log_tail": text[-3000:] if rc else "",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print("| step | status | seconds | CPU seconds |\n|---|---|---:|---:|")
    for s in steps:
        print(f"| {s['step']} | {s['status']} | {s['seconds']} | {s.get('cpu_seconds', '')} |")
    print(f"| **all** (`bash .ci/run`, exit {rc}) | | **{round(total)}** | **{round(total_cpu)}** |")
    print(f"time_test: wrote {args.out}")
    if args.keep:
        print(f"time_test: the clone is kept at {clone}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
