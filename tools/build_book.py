"""Build the HTML book, re-executing the chapters whenever their inputs changed.

Jupyter Book's execution cache keys on a notebook's code cells only, so an edit to ``lib/`` (or to the
pinned requirements) would leave stale outputs in the book. This script hashes those inputs and clears
the cache when the hash changed; when nothing changed the cached outputs are reused and the build is fast.

Usage: ``python tools/build_book.py [--strict]``. ``--strict`` turns warnings into errors (``-W -n
--keep-going``), as the test command does.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
CACHE = BUILD / ".jupyter_cache"
STAMP = BUILD / ".inputs.sha256"


def inputs_digest() -> str:
    """SHA-256 over every file whose change can change a chapter's outputs without changing its code."""
    files = sorted(p for p in (ROOT / "lib").rglob("*.py") if "__pycache__" not in p.parts)
    files += [ROOT / "requirements.txt", ROOT / "pyproject.toml"]
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(ROOT).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", action="store_true", help="fail on any warning (-W -n --keep-going)")
    args = ap.parse_args(argv)

    digest = inputs_digest()
    if STAMP.exists() and STAMP.read_text().strip() != digest and CACHE.exists():
        print("build_book: lib/ or the requirements changed since the last build: re-executing every chapter")
        shutil.rmtree(CACHE)
    elif not STAMP.exists() and CACHE.exists():
        shutil.rmtree(CACHE)

    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT)]
    if args.strict:
        cmd += ["-W", "-n", "--keep-going"]
    rc = subprocess.call(cmd, cwd=ROOT)
    if rc != 0:
        print(f"build_book: jupyter-book build failed (exit {rc})", file=sys.stderr)
        return rc
    BUILD.mkdir(exist_ok=True)
    STAMP.write_text(digest + "\n")
    print(f"build_book: the book is at {BUILD / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
