"""No stale numbers, in the built book and in the stored outputs.

1. After a change to ``lib/``, ``tools/build_book.py`` re-executes the chapters. Jupyter Book 1.x caches
   executed notebooks keyed on their code cells only, and Sphinx re-reads only pages whose source changed, so
   without the build's hash of ``lib/`` the book would keep showing the numbers the old library computed. The
   end-to-end test builds a throw-away book (one tiny chapter that prints and glues a constant from a
   throw-away *copy* of ``lib``), changes that constant in the copy, rebuilds, and reads the new value in the
   HTML; it also checks that the page typesets math from the built site (no CDN). The real repository is
   never touched. It takes about 30-60 s.
2. Every stored chapter records the digest of its inputs (``tools/chapters.py``); the digest covers every
   file under ``lib/`` (not only Python), the lock file and the chapter's code, and ``stale_chapters`` names a
   chapter whose digest differs.
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


def _load_tool(root: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", root / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _make_book(tmp: Path) -> None:
    """A minimal book in ``tmp`` with the real config, a copy of lib/ and one chapter that reads lib.constants.GB."""
    (tmp / "tools").mkdir()
    for tool in ("build_book.py", "chapters.py"):
        shutil.copy(ROOT / "tools" / tool, tmp / "tools")
    shutil.copytree(ROOT / "lib", tmp / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "_ext", tmp / "_ext", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("_config.yml", "references.bib", "requirements.txt", "requirements.lock", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp)
    (tmp / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: chapters/probe\n")
    (tmp / "intro.md").write_text("# Probe book\n\nA throw-away book for tests/test_stale_outputs.py.\n")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Probe\n\nThe library says one GB is {glue:text}`probe_gb` bytes, "
                                      "$10^9 = \\mathrm{GB}$."),
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
    proc = subprocess.run([PY, "tools/build_book.py"], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _shown_values(tmp: Path) -> tuple[str, str]:
    html = (tmp / "_build" / "html" / "chapters" / "probe.html").read_text()
    printed = re.search(r"PROBE GB=(\d+)", html)
    glued = re.search(r"one GB is\s*(?:<[^>]+>\s*)*([\d_,]+)", html)
    assert printed and glued, "the probe page lacks its printed or glued value"
    return printed.group(1), glued.group(1)


@pytest.mark.tools
def test_lib_change_reexecutes_chapters(tmp_path: Path) -> None:
    _make_book(tmp_path)
    out = _build(tmp_path)
    assert "executing every chapter" in out  # first build: no stamp yet
    assert _shown_values(tmp_path) == ("1000000000", "1000000000")
    # math is typeset by MathJax served from the built site itself, never from a CDN
    html = (tmp_path / "_build" / "html" / "chapters" / "probe.html").read_text()
    scripts = re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', html, flags=re.I)
    assert scripts and all(not s.startswith(("http:", "https:", "//")) for s in scripts), scripts
    assert all((tmp_path / "_build" / "html" / "chapters" / s).resolve().is_file() for s in scripts), scripts

    out = _build(tmp_path)  # nothing changed: the cached outputs are reused
    assert "executing every chapter" not in out
    assert _shown_values(tmp_path) == ("1000000000", "1000000000")

    constants = tmp_path / "lib" / "constants.py"
    text = constants.read_text()
    assert "GB: Final = 10**9" in text, "lib/constants.py changed: update this test's probe"
    constants.write_text(text.replace("GB: Final = 10**9", "GB: Final = 10**6"))
    out = _build(tmp_path)
    assert "executing every chapter" in out
    assert _shown_values(tmp_path) == ("1000000", "1000000"), "the page still shows the old library's value"


def test_clear_stale_outputs_only_on_change(tmp_path: Path) -> None:
    """Unit level: the digest covers lib/ and the requirements, and a changed digest clears cache and env."""
    bb = _load_tool(ROOT, "build_book")
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


def _digest_book(root: Path) -> Path:
    """A minimal tree for the chapter digests: a package ``lib`` whose module ``a`` imports ``b`` (relative,
    inside a function) and reads a web asset by path, an unrelated module ``c``, a lock file, one chapter
    importing ``lib.a``, and a fixture file the chapter names."""
    (root / "lib" / "web").mkdir(parents=True)
    (root / "lib" / "__init__.py").write_text("")
    (root / "lib" / "a.py").write_text(
        "from pathlib import Path\n\nJS = Path(__file__).parent / 'web' / 'planner.js'\n\n\n"
        "def x():\n    from .b import Y\n\n    return Y\n"
    )
    (root / "lib" / "b.py").write_text("Y = 1\n")
    (root / "lib" / "c.py").write_text("Z = 1\n")
    (root / "lib" / "web" / "planner.js").write_text("const x = 1;\n")
    (root / "tests" / "fixtures").mkdir(parents=True)
    (root / "tests" / "fixtures" / "m.json").write_text("{}\n")
    (root / "requirements.lock").write_text("numpy==2.0.0\n")
    (root / "chapters").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A"),
                nbformat.v4.new_code_cell("import lib.a\nprint(lib.a.x(), open('../tests/fixtures/m.json').read())")]
    path = root / "chapters" / "a.ipynb"
    nbformat.write(nb, path)
    return path


def _stamp(ch, path: Path, root: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.metadata["book"] = {"inputs_digest": ch.chapter_digest(nb, root, path.parent),
                           "inputs": ch.input_hashes(nb, root, path.parent)}
    nbformat.write(nb, path)


def test_chapter_digest_covers_what_the_chapter_uses(tmp_path: Path) -> None:
    """Stale after an edit to an imported module (transitively), a data file a module or a cell names, the lock
    or the code; fresh after an edit to prose or to a module it does not import."""
    ch = _load_tool(ROOT, "chapters")
    path = _digest_book(tmp_path)
    assert ch.stale_chapters([path], tmp_path) == ["chapters/a.ipynb: no inputs digest stored"]
    _stamp(ch, path, tmp_path)
    assert ch.stale_chapters([path], tmp_path) == []
    inputs = {p.relative_to(tmp_path).as_posix() for p in ch.chapter_inputs(nbformat.read(path, as_version=4),
                                                                            tmp_path, path.parent)}
    assert inputs == {"lib/__init__.py", "lib/a.py", "lib/b.py", "lib/web/planner.js",
                      "tests/fixtures/m.json", "requirements.lock"}

    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = "# A, reworded"  # prose does not change outputs
    nbformat.write(nb, path)
    assert ch.stale_chapters([path], tmp_path) == []
    (tmp_path / "lib" / "c.py").write_text("Z = 2\n")  # not imported: still fresh
    assert ch.stale_chapters([path], tmp_path) == []

    for rel, text in [("lib/web/planner.js", "const x = 2;\n"), ("lib/a.py", None), ("lib/b.py", "Y = 2\n"),
                      ("tests/fixtures/m.json", "[]\n"), ("requirements.lock", "numpy==2.0.1\n")]:
        file = tmp_path / rel
        before = file.read_text()
        file.write_text(text if text is not None else before + "# edited\n")
        assert ch.stale_chapters([path], tmp_path) == [
            f"chapters/a.ipynb: changed since its outputs were stored: {rel}"], rel
        file.write_text(before)
        assert ch.stale_chapters([path], tmp_path) == [], rel

    nb.cells[1].source += "\nprint(2)"  # a code change must re-execute (nbval does not compare figures)
    nbformat.write(nb, path)
    assert ch.stale_chapters([path], tmp_path) == ["chapters/a.ipynb: changed since its outputs were stored: <code>"]


def test_local_package_change_reexecutes_only_its_importer(tmp_path: Path) -> None:
    """A chapter importing a package from its own folder (here loading its modules dynamically, as the
    appendix's review does) is stale after an edit to any of its modules; a chapter that does not import it is
    not."""
    ch = _load_tool(ROOT, "chapters")
    path = _digest_book(tmp_path)
    pkg = tmp_path / "chapters" / "helpers"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import importlib\n\n\ndef load(n):\n"
                                     "    return importlib.import_module(f'{__name__}.{n}')\n")
    (pkg / "one.py").write_text("X = 1\n")
    importer = tmp_path / "chapters" / "b.ipynb"
    nb_b = nbformat.v4.new_notebook()
    nb_b.cells = [nbformat.v4.new_code_cell("import helpers\nprint(helpers.load('one').X)")]
    nbformat.write(nb_b, importer)
    for p in (path, importer):
        _stamp(ch, p, tmp_path)
    assert ch.stale_chapters([path, importer], tmp_path) == []
    (pkg / "one.py").write_text("X = 2\n")
    assert ch.stale_chapters([path, importer], tmp_path) == [
        "chapters/b.ipynb: changed since its outputs were stored: chapters/helpers/one.py"]
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert ch.stale_chapters([importer], tmp_path)[0].endswith("chapters/helpers/one.py")


def test_pycache_does_not_change_the_digest(tmp_path: Path) -> None:
    ch = _load_tool(ROOT, "chapters")
    path = _digest_book(tmp_path)
    d1 = ch.inputs_digest(tmp_path)
    _stamp(ch, path, tmp_path)
    (tmp_path / "lib" / "__pycache__").mkdir()
    (tmp_path / "lib" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert ch.inputs_digest(tmp_path) == d1
    assert ch.stale_chapters([path], tmp_path) == []


def _real_inputs() -> dict[str, set[str]]:
    ch = _load_tool(ROOT, "chapters")
    return {p.stem: {q.relative_to(ROOT).as_posix() for q in ch.chapter_inputs(nbformat.read(p, as_version=4),
                                                                               ROOT, p.parent)}
            for p in ch.toc_chapters(ROOT)}


def test_real_chapters_depend_on_what_they_import() -> None:
    """On the book itself: a planner module is an input of the planner chapters and not of the softmax
    chapter; ``lib/softmax.py`` is an input of every chapter whose code imports the softmax module (directly
    or through another module), and the lock of every chapter."""
    inputs = _real_inputs()
    planner = [f for f in inputs["capacity_planner"] if f.startswith("lib/planner/") and f.endswith(".py")]
    assert planner, "the capacity planner chapter imports no module of lib/planner/"
    assert "lib/planner/web/planner.js" in inputs["capacity_planner"]
    for f in planner:
        assert f not in inputs["softmax"], f
    assert "lib/softmax.py" in inputs["softmax"]
    for name, files in inputs.items():
        assert "requirements.lock" in files, name
        code = " ".join(c.source for c in nbformat.read(ROOT / "chapters" / f"{name}.ipynb", as_version=4).cells
                        if c.cell_type == "code")
        if re.search(r"lib\.softmax|from lib import [^\n]*\bsoftmax\b", code):
            assert "lib/softmax.py" in files, name


def test_toc_lists_every_chapter() -> None:
    """Every notebook under chapters/ is in the table of contents, so `check` sees every one."""
    ch = _load_tool(ROOT, "chapters")
    listed = {p.resolve() for p in ch.toc_chapters(ROOT)}
    on_disk = {p.resolve() for p in (ROOT / "chapters").glob("*.ipynb")}
    assert listed == on_disk and len(listed) >= 10


def test_stored_outputs_join_a_stream_cut_by_flushes() -> None:
    """A cell's printing arrives in as many stream messages as the kernel flushed; the stored outputs keep one per
    run of the same stream, so re-executing a chapter does not change its file by chance."""
    ch = _load_tool(ROOT, "chapters")
    out = nbformat.v4.new_output
    cell = nbformat.v4.new_code_cell("print(...)", outputs=[
        out("stream", name="stdout", text="additive mask, to 1e-12:"), out("stream", name="stdout", text=" True\n"),
        out("stream", name="stderr", text="a warning\n"), out("stream", name="stdout", text="next\n"),
        out("display_data", data={"text/plain": "x"}), out("stream", name="stdout", text="after\n"),
        out("stream", name="stdout", text="and more\n")])
    nb = nbformat.v4.new_notebook(cells=[cell, nbformat.v4.new_markdown_cell("prose")])
    ch.merge_streams(nb)
    got = [(o.output_type, o.get("name"), o.get("text")) for o in nb.cells[0].outputs]
    assert got == [("stream", "stdout", "additive mask, to 1e-12: True\n"), ("stream", "stderr", "a warning\n"),
                   ("stream", "stdout", "next\n"), ("display_data", None, None),
                   ("stream", "stdout", "after\nand more\n")]
    assert "outputs" not in nb.cells[1]
