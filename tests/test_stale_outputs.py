"""No stale numbers: after a change to ``lib/``, ``tools/build_book.py`` re-executes the chapters.

Jupyter Book 1.x caches executed notebooks keyed on their code cells only, and Sphinx re-reads only pages
whose source changed, so without ``tools/build_book.py``'s hash of ``lib/`` the book would keep showing the
numbers the old library computed. The end-to-end test builds a throw-away book (one tiny chapter that prints
and glues a constant from a throw-away *copy* of ``lib``), changes that constant in the copy, rebuilds, and
reads the new value in the HTML. The real repository is never touched. It takes about 30-60 s.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def _load_build_book(root: Path):
    spec = importlib.util.spec_from_file_location("build_book_under_test", root / "tools" / "build_book.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _make_book(tmp: Path) -> None:
    """A minimal book in ``tmp`` with the real config, a copy of lib/ and one chapter that reads lib.constants.GB."""
    (tmp / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "build_book.py", tmp / "tools")
    shutil.copytree(ROOT / "lib", tmp / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("_config.yml", "references.bib", "requirements.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp)
    (tmp / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: chapters/probe\n")
    (tmp / "intro.md").write_text("# Probe book\n\nA throw-away book for tests/test_stale_outputs.py.\n")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Probe\n\nThe library says one GB is {glue:text}`probe_gb` bytes."),
        nbformat.v4.new_code_cell(
            "import os\nfrom pathlib import Path\n\nimport lib\nimport lib.constants as c\n"
            "from myst_nb import glue\n\n"
            "# this must be the throw-away copy of lib, not the repository's\n"
            "assert Path(lib.__file__).resolve().is_relative_to(Path(os.environ['PROBE_ROOT']).resolve())\n"
            "glue('probe_gb', c.GB, display=False)\n"
            "print(f'PROBE GB={c.GB}')"
        ),
    ]
    (tmp / "chapters").mkdir()
    nbformat.write(nb, tmp / "chapters" / "probe.ipynb")


def _build(tmp: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(tmp), PROBE_ROOT=str(tmp))  # the kernel imports the copy of lib
    proc = subprocess.run([PY, "tools/build_book.py", "--strict"], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _shown_values(tmp: Path) -> tuple[str, str]:
    html = (tmp / "_build" / "html" / "chapters" / "probe.html").read_text()
    printed = re.search(r"PROBE GB=(\d+)", html)
    glued = re.search(r"one GB is\s*(?:<[^>]+>\s*)*([\d_,]+)", html)
    assert printed and glued, "the probe page lacks its printed or glued value"
    return printed.group(1), glued.group(1)


def test_lib_change_reexecutes_chapters(tmp_path: Path) -> None:
    _make_book(tmp_path)
    out = _build(tmp_path)
    assert "re-executing every chapter" in out  # first build: no stamp yet
    assert _shown_values(tmp_path) == ("1000000000", "1000000000")

    out = _build(tmp_path)  # nothing changed: the cached outputs are reused
    assert "re-executing" not in out
    assert _shown_values(tmp_path) == ("1000000000", "1000000000")

    constants = tmp_path / "lib" / "constants.py"
    text = constants.read_text()
    assert "GB: Final = 10**9" in text, "lib/constants.py changed: update this test's probe"
    constants.write_text(text.replace("GB: Final = 10**9", "GB: Final = 10**6"))
    out = _build(tmp_path)
    assert "re-executing every chapter" in out
    assert _shown_values(tmp_path) == ("1000000", "1000000"), "the page still shows the old library's value"


def test_clear_stale_outputs_only_on_change(tmp_path: Path) -> None:
    """Unit level: the digest covers lib/ and the requirements, and a changed digest clears cache and env."""
    bb = _load_build_book(ROOT)
    root = tmp_path / "book"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "a.py").write_text("X = 1\n")
    (root / "requirements.txt").write_text("numpy\n")
    d1 = bb.inputs_digest(root)
    (root / "lib" / "a.py").write_text("X = 2\n")
    d2 = bb.inputs_digest(root)
    (root / "requirements.txt").write_text("numpy>=2\n")
    d3 = bb.inputs_digest(root)
    assert len({d1, d2, d3}) == 3

    build = root / "_build"
    for d in (".jupyter_cache", ".doctrees", "jupyter_execute"):
        (build / d).mkdir(parents=True)
    (build / ".inputs.sha256").write_text(d3 + "\n")
    assert bb.clear_stale_outputs(build, d3) is False
    assert (build / ".jupyter_cache").exists() and (build / ".doctrees").exists()
    assert bb.clear_stale_outputs(build, d1) is True
    assert not any((build / d).exists() for d in (".jupyter_cache", ".doctrees", "jupyter_execute"))
    assert (build / ".inputs.sha256").read_text().strip() == d1  # a failed build will not clear again
    assert bb.clear_stale_outputs(build, d1) is False


@pytest.mark.parametrize("integrity", ["sha512-AAAA", "sha512-" + "A" * 86 + "=="])
def test_vendored_tarball_integrity_is_checked(tmp_path: Path, monkeypatch, integrity: str) -> None:
    """A cached tarball whose hash differs from the pinned integrity is not used as is."""
    bb = _load_build_book(ROOT)
    monkeypatch.setattr(bb, "VENDOR_CACHE", tmp_path)
    (tmp_path / "pkg-1.0.tgz").write_bytes(b"not the real tarball")
    monkeypatch.setattr(bb.shutil, "which", lambda name: None)  # no npm: must refuse, not use the bad file
    with pytest.raises(SystemExit, match="npm is needed"):
        bb._npm_tarball("pkg", "1.0", integrity)
