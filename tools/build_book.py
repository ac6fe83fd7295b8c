"""Build the HTML book: executing the chapters (``make book``) or rendering their stored outputs (``--strict``).

``make book`` renders the chapters' stored outputs when every chapter's stored inputs digest is current (the
numbers the tests checked and the PDF prints), and otherwise executes them. Jupyter Book 1.x keeps executed outputs
in ``_build/.jupyter_cache``, keyed on a notebook's *code cells* only, and Sphinx re-reads a page only when
its *source file* changed (its environment lives in ``_build/.doctrees``). An edit to ``lib/`` would therefore
leave old outputs in the book twice over. This script hashes every input a chapter's outputs depend on besides
its own code (``lib/`` and the requirements, the same digest ``tools/chapters.py`` records in each chapter)
and, when the hash differs from the one stored when the cache was last cleared, removes both the execution
cache and the Sphinx environment, so every chapter is re-executed. When nothing changed, the cached outputs
are reused and the build is fast. ``tests/test_stale_outputs.py`` proves it on a throw-away copy.

``--strict`` is the test command's build: warnings are errors (``-W -n --keep-going``), every page is read
again (``--all``), and the chapters are **not** executed: the book renders the stored outputs, which nbval
has just checked against two fresh executions and ``tools/chapters.py check`` against the tree's inputs. Its
HTML goes to ``_build/strict/_build/html`` (``--output`` changes the first part).

Math is typeset offline by the ``sphinx-mathjax-offline`` extension (``_config.yml``), which copies MathJax
from its pip package into the built site: no CDN, no npm.

**The book's code as one download.** After a successful build, the site gets ``book-code.zip`` (linked from the
front page): one folder, ``transformer-book/``, holding ``lib/``, every chapter notebook of the table of
contents with the files its code reads (``chapters/errata/``, the model configs under ``tests/fixtures/``: the
same list ``tools/chapters.py`` hashes), ``requirements.txt``, ``requirements.lock``, ``pyproject.toml``,
``jupyter_config/`` (JupyterLab's settings: the chapter as the page shows it), ``_toc.yml`` and
``references.bib`` (which JupyterLab's figure numbers and citations are read from), and a reader's
``README.md`` (``tools/download_README.md``: what is inside, the set-up and its cost, the JupyterLab command).
Unpacked and set up as that README says (``python3 -m venv .venv``, ``pip install -r requirements.lock``, ``pip
install -e .``), a chapter runs from that folder. ``tests/test_download.py`` unpacks it and executes a chapter
there.

Usage: ``python tools/build_book.py [--strict] [--output DIR]``. ``BOOK_WIDGETS=static`` is set for the
chapters' kernels so ``lib.book.widgets`` draws figures instead of sliders (see that module).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chapters import chapter_inputs, inputs_digest, stale_report, toc_chapters  # noqa: E402  (tools/ is not a package)

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
DOWNLOAD = "book-code.zip"
DOWNLOAD_FOLDER = "transformer-book"
DOWNLOAD_TOP_FILES = ("pyproject.toml", "requirements.txt", "requirements.lock",
                      "jupyter_config/jupyter_server_config.py",  # JupyterLab shows the page (README)
                      "jupyter_config/book_contents.py",
                      "_toc.yml", "references.bib")  # JupyterLab's figure numbers and citations
# the zip's README.md is the reader's (what is inside, the set-up, JupyterLab), not the repository's
DOWNLOAD_README = ROOT / "tools" / "download_README.md"
_NOT_SHIPPED = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis", ".ruff_cache"}


def download_files(root: Path = ROOT) -> list[Path]:
    """What ``book-code.zip`` holds, relative to ``root``: lib/, the chapters and what they read, the set-up."""
    files: set[Path] = {root / name for name in DOWNLOAD_TOP_FILES if (root / name).is_file()}
    files |= {p for p in (root / "lib").rglob("*") if p.is_file() and not _NOT_SHIPPED.intersection(p.parts)
              and p.suffix not in {".pyc", ".pyo"}}
    for nb_path in toc_chapters(root):
        files.add(nb_path)
        nb = nbformat.read(nb_path, as_version=4)
        files |= {p for p in chapter_inputs(nb, root, nb_path.parent) if p.is_file()}
    return sorted({p.resolve() for p in files if not _NOT_SHIPPED.intersection(p.parts)})


def make_download(dest: Path, root: Path = ROOT) -> Path:
    """Write ``book-code.zip`` (the book's code in one folder) to ``dest``; returns its path."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    # written beside it, then renamed: a reader (the library tests run while the test command builds the book)
    # finds the whole file or none
    part = dest.with_name(dest.name + ".part")
    with zipfile.ZipFile(part, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        members = [(p.relative_to(root).as_posix(), p) for p in download_files(root)]
        for rel, p in [("README.md", root / DOWNLOAD_README.relative_to(ROOT)), *members]:
            info = zipfile.ZipInfo(f"{DOWNLOAD_FOLDER}/{rel}", date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, p.read_bytes())
    os.replace(part, dest)
    return dest


def clear_stale_outputs(build: Path, digest: str) -> bool:
    """Remove the execution cache and the Sphinx environment if ``digest`` differs from the stored one.

    Stores ``digest`` and returns True when they were removed (every chapter will be re-executed).
    """
    stamp = build / ".inputs.sha256"
    previous = stamp.read_text().strip() if stamp.exists() else None
    if previous == digest:
        return False
    for d in (build / ".jupyter_cache", build / ".doctrees", build / "jupyter_execute"):
        if d.exists():
            shutil.rmtree(d)
    # From now on the cache only ever holds outputs of the current inputs, even if the build that follows
    # fails or is interrupted, so the stamp is written now: a failed build's next run does not start over.
    build.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest + "\n")
    return True


def stored_outputs_config(root: Path, dest: Path) -> Path:
    """A copy of ``_config.yml`` with execution off, written to ``dest`` (the book renders stored outputs)."""
    config = yaml.safe_load((root / "_config.yml").read_text())
    config.setdefault("execute", {})["execute_notebooks"] = "off"
    # jupyter-book resolves local extensions relative to the config file: point them back at the repository
    local = config.get("sphinx", {}).get("local_extensions") or {}
    for name, folder in local.items():
        local[name] = str((root / folder).resolve())
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("# generated by tools/build_book.py --strict from _config.yml: execution off\n"
                    + yaml.safe_dump(config, sort_keys=False))
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", action="store_true",
                    help="render the stored outputs (no execution) and fail on any warning (-W -n --keep-going)")
    ap.add_argument("--output", type=Path, default=None,
                    help="jupyter-book's --path-output (default: the repository, or _build/strict with --strict); "
                         "the HTML goes to OUTPUT/_build/html")
    args = ap.parse_args(argv)

    jb = str(Path(sys.executable).parent / "jupyter-book")
    env = dict(os.environ, BOOK_WIDGETS="static")
    # jupyter-book writes to <path-output>/_build/html (and keeps its caches beside it)
    if args.strict:
        path_output = (args.output or BUILD / "strict").resolve()
        config = stored_outputs_config(ROOT, path_output / "_config.yml")
        cmd = [jb, "build", str(ROOT), "--path-output", str(path_output), "--config", str(config),
               "-W", "-n", "--keep-going", "--all"]
    elif not stale_report(toc_chapters(ROOT), ROOT):
        # Every chapter's stored outputs are current: render them (no execution), so the HTML shows the numbers
        # the tests checked and the PDF prints, rather than those of one more execution (timings differ).
        path_output = (args.output or ROOT).resolve()
        config = stored_outputs_config(ROOT, path_output / "_build" / "stored" / "_config.yml")
        print("build_book: every chapter's stored outputs are current: rendering them (no execution)", flush=True)
        cmd = [jb, "build", str(ROOT), "--path-output", str(path_output), "--config", str(config)]
    else:
        path_output = (args.output or ROOT).resolve()
        if clear_stale_outputs(path_output / "_build", inputs_digest(ROOT)):
            print("build_book: lib/ or the requirements changed since the last build (or there was none): "
                  "executing every chapter (about two minutes on two cores)", flush=True)
        cmd = [jb, "build", str(ROOT), "--path-output", str(path_output)]
    rc = subprocess.call(cmd, cwd=ROOT, env=env)
    if rc != 0:
        print(f"build_book: jupyter-book build failed (exit {rc})", file=sys.stderr)
        return rc
    html = path_output / "_build" / "html"
    zipped = make_download(html / DOWNLOAD)
    print(f"build_book: the book's code for download: {zipped} ({zipped.stat().st_size / 1e6:.1f} MB)")
    print(f"build_book: the book is at {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
