"""No stale numbers, in the built book and in the stored outputs.

1. After a change to ``lib/``, ``tools/build_book.py`` re-executes the chapters. Jupyter Book 1.x caches
   executed notebooks keyed on their code cells only, and Sphinx re-reads only pages whose source changed, so
   without the build's digest of ``lib/`` the book would keep showing the numbers an older library computed. The
   end-to-end test builds a throw-away book once (one tiny chapter that prints and glues a constant from a
   throw-away *copy* of ``lib``), its execution cache seeded with that chapter's outputs under an older library
   (a cache entry jupyter-cache matches to the chapter), and reads the current value in the HTML; it also checks
   that the page typesets math from the built site (no CDN). The real repository is never touched.
2. Every stored chapter records the digest of its inputs (``tools/chapters.py``): its code, the modules it
   imports (their code, not their comments or docstrings), the files they name and the lock; ``stale_report``
   names what changed.
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
    for tool in ("build_book.py", "chapters.py", "download_README.md"):  # the build writes the zip's README too
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


def _seed_stale_cache(tmp: Path) -> None:
    """The state an earlier build with another library leaves: Jupyter Book's execution cache holding the probe's
    outputs as that library printed them (GB = 10**6), and the build's stamp of that library's digest."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    path = tmp / "chapters" / "probe.ipynb"
    nb = nbformat.read(path, as_version=4)
    record = "application/papermill.record/"
    nb.cells[1].outputs = [
        nbformat.v4.new_output("display_data", data={record + "text/plain": "1000000"},
                               metadata={"scrapbook": {"mime_prefix": record, "name": "probe_gb"}}),
        nbformat.v4.new_output("stream", name="stdout", text="PROBE GB=1000000\n")]
    cache = get_cache(str(tmp / "_build" / ".jupyter_cache"))
    cache.cache_notebook_bundle(CacheBundleIn(nb, str(path)), check_validity=False)
    # jupyter-cache would serve these outputs: it matches the chapter (by its code cells) to the entry
    assert cache.match_cache_notebook(nbformat.read(path, as_version=4)) is not None
    (tmp / "_build" / ".inputs.sha256").write_text("the digest of an older lib/\n")


@pytest.mark.tools
def test_lib_change_reexecutes_chapters(tmp_path: Path) -> None:
    _make_book(tmp_path)
    _seed_stale_cache(tmp_path)
    out = _build(tmp_path)
    assert "executing every chapter" in out
    assert _shown_values(tmp_path) == ("1000000000", "1000000000"), "the page shows the older library's value"
    # math is typeset by MathJax served from the built site itself, never from a CDN
    html = (tmp_path / "_build" / "html" / "chapters" / "probe.html").read_text()
    scripts = re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', html, flags=re.I)
    assert scripts and all(not s.startswith(("http:", "https:", "//")) for s in scripts), scripts
    assert all((tmp_path / "_build" / "html" / "chapters" / s).resolve().is_file() for s in scripts), scripts


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
    (root / "lib" / "a.py").write_text('"""A module."""\n\nX = 2  # two\n')  # a docstring and a comment
    assert bb.inputs_digest(root) == d3

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
    nb.metadata["book"] = {"scheme": ch.SCHEME, "inputs_digest": ch.chapter_digest(nb, root, path.parent),
                           "inputs": ch.input_hashes(nb, root, path.parent)}
    nbformat.write(nb, path)


def _stale(ch, paths: list[Path], root: Path) -> dict[str, list[str]]:
    """``{chapter: what made it stale}`` as ``tools/chapters.py check`` reports it."""
    return {p.relative_to(root).as_posix(): why for p, why in ch.stale_report(paths, root).items()}


def _edit(file: Path, old: str, new: str) -> str:
    before = file.read_text()
    assert old in before, (file, old)
    file.write_text(before.replace(old, new))
    return before


def test_chapter_digest_covers_what_the_chapter_uses(tmp_path: Path) -> None:
    """Stale after an edit to an imported module (transitively), a data file a module or a cell names, the lock
    or the code; fresh after an edit to prose or to a module it does not import."""
    ch = _load_tool(ROOT, "chapters")
    path = _digest_book(tmp_path)
    assert _stale(ch, [path], tmp_path) == {"chapters/a.ipynb": ["<no digest>"]}
    _stamp(ch, path, tmp_path)
    assert _stale(ch, [path], tmp_path) == {}
    inputs = {p.relative_to(tmp_path).as_posix() for p in ch.chapter_inputs(nbformat.read(path, as_version=4),
                                                                            tmp_path, path.parent)}
    assert inputs == {"lib/__init__.py", "lib/a.py", "lib/b.py", "lib/web/planner.js",
                      "tests/fixtures/m.json", "requirements.lock"}

    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = "# A, reworded"  # prose does not change outputs
    nbformat.write(nb, path)
    assert _stale(ch, [path], tmp_path) == {}
    (tmp_path / "lib" / "c.py").write_text("Z = 2\n")  # not imported: still fresh
    assert _stale(ch, [path], tmp_path) == {}

    for rel, old, new in [("lib/web/planner.js", "x = 1", "x = 2"), ("lib/a.py", "return Y", "return Y + 1"),
                          ("lib/b.py", "Y = 1", "Y = 2"), ("tests/fixtures/m.json", "{}", "[]"),
                          ("requirements.lock", "2.0.0", "2.0.1")]:
        before = _edit(tmp_path / rel, old, new)
        assert _stale(ch, [path], tmp_path) == {"chapters/a.ipynb": [rel]}, rel
        (tmp_path / rel).write_text(before)
        assert _stale(ch, [path], tmp_path) == {}, rel

    nb.cells[1].source += "\nprint(2)"  # a code change must re-execute (nbval does not compare figures)
    nbformat.write(nb, path)
    assert _stale(ch, [path], tmp_path) == {"chapters/a.ipynb": ["<code>"]}


def test_a_comment_is_not_a_change(tmp_path: Path) -> None:
    """A comment, a docstring, blank lines or another line wrapping in an imported module, or a comment in a code
    cell, leave the chapter fresh; the smallest change of code in either restales it."""
    ch = _load_tool(ROOT, "chapters")
    path = _digest_book(tmp_path)
    b = tmp_path / "lib" / "b.py"
    b.write_text('"""Module b."""\n\n\ndef f(x):\n    """Twice x."""\n    return 2 * x\n\n\nY = f(1)\n')
    _stamp(ch, path, tmp_path)
    for old, new in [("Y = f(1)", "Y = f(1)  # the answer"), ('"""Module b."""', '"""Module b, reworded."""'),
                     ('"""Twice x."""', '"""x, doubled."""\n    # a comment'), ("\n\n\nY", "\nY"),
                     ("return 2 * x", "return (\n        2 * x\n    )"), ('"""Twice x."""\n    ', "")]:
        before = _edit(b, old, new)
        assert _stale(ch, [path], tmp_path) == {}, new
        b.write_text(before)
    for old, new in [("Y = f(1)", "Y = f(2)"), ("2 * x", "x * 2")]:
        before = _edit(b, old, new)
        assert _stale(ch, [path], tmp_path) == {"chapters/a.ipynb": ["lib/b.py"]}, new
        b.write_text(before)
    # a lone docstring-like string in a module's function body that is not the first statement is code
    before = _edit(b, "return 2 * x", "'not a docstring'\n    return 2 * x")
    assert _stale(ch, [path], tmp_path) == {"chapters/a.ipynb": ["lib/b.py"]}
    b.write_text(before)

    nb = nbformat.read(path, as_version=4)
    code = nb.cells[1].source
    nb.cells[1].source = "# a comment in the cell\n" + code.replace("\n", "  # and one more\n", 1)
    nbformat.write(nb, path)
    assert _stale(ch, [path], tmp_path) == {}
    nb.cells[1].source = code + "\n'a result'"  # a cell's lone string is its result, not a docstring
    nbformat.write(nb, path)
    assert _stale(ch, [path], tmp_path) == {"chapters/a.ipynb": ["<code>"]}


def test_text_that_code_reads_is_an_input(tmp_path: Path) -> None:
    """A module that reads its own docstring (argparse's description) is digested with its docstrings and
    comments; a chapter whose cells read documentation or source digests its modules' whole text."""
    ch = _load_tool(ROOT, "chapters")
    path = _digest_book(tmp_path)
    b = tmp_path / "lib" / "b.py"
    b.write_text('"""Module b: its help."""\n\nY = 1\nHELP = __doc__\n')
    _stamp(ch, path, tmp_path)
    before = _edit(b, "its help", "its new help")
    assert _stale(ch, [path], tmp_path) == {"chapters/a.ipynb": ["lib/b.py"]}
    b.write_text(before)

    b.write_text("import argparse\n\nY = 1\nHELP = [a.help for a in argparse.ArgumentParser()._actions]  # x\n")
    _stamp(ch, path, tmp_path)  # an argparse action's help is no docstring: a comment is still no change
    _edit(b, "# x", "# y")
    assert _stale(ch, [path], tmp_path) == {}

    b.write_text("Y = 1\n")
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import inspect\nprint(inspect.getsource(lib.a))"))
    nbformat.write(nb, path)
    _stamp(ch, path, tmp_path)
    _edit(tmp_path / "lib" / "a.py", "return Y", "return Y  # shown by getsource")
    assert _stale(ch, [path], tmp_path) == {"chapters/a.ipynb": ["lib/a.py"]}


def test_a_digest_of_an_older_scheme_is_named(tmp_path: Path, capsys) -> None:
    """A digest stored by another scheme (the whole text of every file, before comments stopped counting) makes
    the chapter stale, and ``check`` says why."""
    ch = _load_tool(ROOT, "chapters")
    path = _digest_book(tmp_path)
    _stamp(ch, path, tmp_path)
    nb = nbformat.read(path, as_version=4)
    del nb.metadata["book"]["scheme"]
    nbformat.write(nb, path)
    assert _stale(ch, [path], tmp_path) == {"chapters/a.ipynb": ["<digest scheme>"]}
    ch.ROOT = tmp_path
    assert ch.main(["check", str(path)]) == 1
    assert "stored by an older digest scheme: a" in capsys.readouterr().err


def test_affected_leaves_out_a_comment_edit(tmp_path: Path) -> None:
    """``affected --since REV`` (which chapters make check runs under nbval) does not count an edit to a
    module's comments, and counts one to its code."""
    ch = _load_tool(ROOT, "chapters")
    path = _digest_book(tmp_path)

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "probe")
    _edit(tmp_path / "lib" / "b.py", "Y = 1", "Y = 1  # one")
    assert ch.changed_files("HEAD", tmp_path) == set()
    assert ch.affected_chapters([path], ch.changed_files("HEAD", tmp_path), tmp_path) == []
    _edit(tmp_path / "lib" / "b.py", "Y = 1", "Y = 3")
    assert ch.affected_chapters([path], ch.changed_files("HEAD", tmp_path), tmp_path) == [path]


def test_affected_tests_are_the_importers_of_a_change(tmp_path: Path) -> None:
    """``affected-tests`` (which library test modules make check runs): a module that imports a changed file,
    directly, through another module or through a helper of the tests' folder; none for a comment edit; every
    module (``None``) when conftest.py's inputs, or a file other than a Python file under lib/ or tests/,
    changed."""
    ch = _load_tool(ROOT, "chapters")
    _digest_book(tmp_path)
    tests = tmp_path / "tests"
    (tests / "conftest.py").write_text("from helper import H  # noqa: F401\n")
    (tests / "helper.py").write_text("H = 1\n")
    (tests / "test_a.py").write_text("import lib.a\n\n\ndef test_a():\n    assert lib.a.x() == 1\n")
    (tests / "test_c.py").write_text("from lib import c\n\n\ndef test_c():\n    assert c.Z == 1\n")
    (tests / "test_twin.py").write_text("from twin import T\n\n\ndef test_t():\n    assert T\n")
    (tests / "twin.py").write_text("from lib.c import Z\n\nT = Z\n")
    subprocess.run("git init -q && git add . && git -c user.name=t -c user.email=t@t commit -q -m probe",
                   shell=True, cwd=tmp_path, check=True)

    def touched() -> list[str] | None:
        return ch.affected_tests(ch.changed_files("HEAD", tmp_path), tmp_path)

    assert touched() == []
    _edit(tmp_path / "lib" / "b.py", "Y = 1", "Y = 1  # one")
    assert touched() == []
    _edit(tmp_path / "lib" / "b.py", "Y = 1", "Y = 3")  # lib.a imports it inside a function
    assert touched() == ["tests/test_a.py"]
    _edit(tmp_path / "lib" / "c.py", "Z = 1", "Z = 2")  # test_c directly, test_twin through twin.py
    assert touched() == ["tests/test_a.py", "tests/test_c.py", "tests/test_twin.py"]
    _edit(tests / "twin.py", "T = Z", "T = Z + 1")
    assert "tests/test_twin.py" in touched()
    _edit(tests / "helper.py", "H = 1", "H = 2")  # conftest.py runs with every test
    assert touched() is None
    _edit(tests / "helper.py", "H = 2", "H = 1")
    assert touched() is not None
    _edit(tests / "fixtures" / "m.json", "{}", "[]")  # data: no scan tells which test reads it
    assert touched() is None


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
    assert _stale(ch, [path, importer], tmp_path) == {}
    (pkg / "one.py").write_text("X = 2\n")
    assert _stale(ch, [path, importer], tmp_path) == {"chapters/b.ipynb": ["chapters/helpers/one.py"]}
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert _stale(ch, [importer], tmp_path) == {"chapters/b.ipynb": ["chapters/helpers/one.py"]}


def test_pycache_does_not_change_the_digest(tmp_path: Path) -> None:
    ch = _load_tool(ROOT, "chapters")
    path = _digest_book(tmp_path)
    d1 = ch.inputs_digest(tmp_path)
    _stamp(ch, path, tmp_path)
    (tmp_path / "lib" / "__pycache__").mkdir()
    (tmp_path / "lib" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert ch.inputs_digest(tmp_path) == d1
    assert _stale(ch, [path], tmp_path) == {}


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


@pytest.mark.tools
def test_execute_stores_one_stream_and_a_current_digest(tmp_path: Path, monkeypatch) -> None:
    """``tools/chapters.py execute`` on a chapter whose cell prints in pieces (flushed apart, so several stream
    messages): the stored output holds each stream once, as nbval and the book show it (nbclient's
    ``coalesce_streams``), and the stored digest is current."""
    ch = _load_tool(ROOT, "chapters")
    path = _digest_book(tmp_path)
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import sys, time\nprint('additive mask:', end='', flush=True)\ntime.sleep(0.2)\nprint(' exact')\n"
        "print('a warning', file=sys.stderr, flush=True)\ntime.sleep(0.2)\nprint('next')"))
    nbformat.write(nb, path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the kernel imports the throw-away lib
    assert ch.execute([path], tmp_path) == 0
    nb = nbformat.read(path, as_version=4)
    got = [(o.output_type, o.get("name"), o.get("text")) for o in nb.cells[-1].outputs]
    assert got == [("stream", "stdout", "additive mask: exact\nnext\n"), ("stream", "stderr", "a warning\n")]
    assert nb.metadata["book"]["scheme"] == ch.SCHEME
    assert _stale(ch, [path], tmp_path) == {}
