"""Execute the chapters and keep their stored outputs honest.

A chapter's stored outputs are source: nbval compares every printed number with them, and the book shows
them. They are only right for the inputs they were computed from, so every executed chapter records in its
metadata (``metadata.book.inputs_digest``) a SHA-256 over

- every file under ``lib/`` (not only ``*.py``: ``lib/web/planner.js`` is embedded in a chapter),
- the locked requirements (``requirements.lock``, ``requirements.txt``, ``pyproject.toml``),
- the chapter's own code cells (a figure is not compared by nbval, so a code edit must re-execute),
- every file of a local package or module the chapter imports from its own folder (``import errata`` in a
  chapter under ``chapters/`` reads ``chapters/errata/``), so that an edit there re-executes that chapter only.

``check`` recomputes the digests and fails, naming each stale chapter, when one differs; the test suite runs
it (``tests/test_stale_outputs.py``), so a stale figure cannot reach the book.

Usage::

    python tools/chapters.py execute [chapters/NAME.ipynb ...]   # default: every chapter in _toc.yml
    python tools/chapters.py check   [chapters/NAME.ipynb ...]

``execute`` runs each notebook in a fresh kernel in its own folder, with ``BOOK_WIDGETS=static`` (as the tests
and the book build do), stores the outputs in place and records the digest. It prints one line per chapter
with its wall time.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK_FILES = ("requirements.lock", "requirements.txt", "pyproject.toml")
METADATA_KEY = "book"


def _lib_files(root: Path) -> list[Path]:
    return sorted(
        p for p in (root / "lib").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in {".pyc", ".pyo"}
    )


def inputs_digest(root: Path = ROOT) -> str:
    """SHA-256 over every file besides a chapter's own code that can change its outputs: ``lib/`` and the
    requirements (the lock file included)."""
    files = _lib_files(root) + [root / name for name in LOCK_FILES if (root / name).exists()]
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


IMPORT_RE = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", flags=re.M)


def local_imports(nb, chapter_dir: Path) -> list[Path]:
    """The files of the packages and modules a chapter imports from its own folder, sorted."""
    files: set[Path] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for name in IMPORT_RE.findall(cell.source):
            if (chapter_dir / f"{name}.py").is_file():
                files.add(chapter_dir / f"{name}.py")
            elif (chapter_dir / name).is_dir():
                files.update(
                    p for p in (chapter_dir / name).rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts and p.suffix not in {".pyc", ".pyo"}
                )
    return sorted(files)


def chapter_digest(nb, root: Path = ROOT, inputs: str | None = None, chapter_dir: Path | None = None) -> str:
    """The digest a chapter's stored outputs must carry: the shared inputs, the notebook's code cells and the
    local packages those cells import (``chapter_dir``, default ``chapters/``, is where they are looked up)."""
    chapter_dir = chapter_dir or root / "chapters"
    h = hashlib.sha256((inputs or inputs_digest(root)).encode())
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(b"\0code\0")
            h.update(cell.source.encode())
    for p in local_imports(nb, chapter_dir):
        h.update(b"\0local\0" + p.relative_to(chapter_dir).as_posix().encode() + b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()


def toc_chapters(root: Path = ROOT) -> list[Path]:
    """The notebooks the table of contents lists, in its order."""
    toc = (root / "_toc.yml").read_text()
    files = re.findall(r"^\s*-?\s*file:\s*(\S+)\s*$", toc, flags=re.M)
    return [root / f"{f}.ipynb" for f in files if (root / f"{f}.ipynb").exists()]


def stale_chapters(paths: list[Path], root: Path = ROOT) -> list[str]:
    """One line for each chapter whose stored digest is missing or differs from the tree's."""
    import nbformat

    inputs = inputs_digest(root)
    problems = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        stored = nb.metadata.get(METADATA_KEY, {}).get("inputs_digest")
        want = chapter_digest(nb, root, inputs, path.parent)
        rel = path.relative_to(root) if path.is_relative_to(root) else path
        if stored is None:
            problems.append(f"{rel}: no inputs digest stored; execute it with `python tools/chapters.py execute {rel}`")
        elif stored != want:
            problems.append(
                f"{rel}: stored outputs were computed from other inputs (lib/, the requirements or its code "
                f"changed since); re-execute it with `python tools/chapters.py execute {rel}`"
            )
    return problems


def execute(paths: list[Path], root: Path = ROOT, timeout: int = 900) -> int:
    import nbformat
    from nbclient import NotebookClient

    os.environ["BOOK_WIDGETS"] = "static"
    failed = 0
    for i, path in enumerate(paths, 1):
        rel = path.relative_to(root) if path.is_relative_to(root) else path
        print(f"[{i}/{len(paths)}] executing {rel} ...", end="", flush=True)
        t0 = time.perf_counter()
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                                resources={"metadata": {"path": str(path.parent)}})
        try:
            client.execute()
        except Exception as exc:  # report and go on with the others; the notebook on disk is left unchanged
            print(f" FAILED after {time.perf_counter() - t0:.0f} s\n{exc}", flush=True)
            failed += 1
            continue
        nb.metadata[METADATA_KEY] = {"inputs_digest": chapter_digest(nb, root, chapter_dir=path.parent)}
        nbformat.write(nb, path)
        print(f" {time.perf_counter() - t0:.0f} s", flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["execute", "check"])
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter in _toc.yml")
    args = ap.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or toc_chapters()
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"chapters.py: no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.command == "execute":
        return execute(paths)
    problems = stale_chapters(paths)
    for line in problems:
        print(line, file=sys.stderr)
    if not problems:
        print(f"chapters.py: the stored outputs of all {len(paths)} chapters match their inputs")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
