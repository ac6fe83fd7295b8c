"""Execute the chapters and keep their stored outputs honest.

A chapter's stored outputs are source: nbval compares every printed number with them, and the book shows
them. They are only right for the inputs they were computed from, so every executed chapter records in its
metadata (``metadata.book``) a SHA-256 of those inputs (``inputs_digest``) and, per input file, a short hash
(``inputs``), so that a stale chapter can be explained file by file. The inputs of a chapter are

- its own code cells (a figure is not compared by nbval, so a code edit must re-execute);
- the project modules it really imports, found from the code and followed transitively: ``import lib.x``,
  ``from lib.x import y`` (``y`` a submodule or a name), relative imports inside ``lib``, imports inside
  functions, a module named in a string (``python -m lib.sizing`` run as a subprocess), the ``__init__.py``
  of every package on the way, and local packages of the chapter's own folder (``import errata``);
- the data files those modules and cells name (``Path(__file__).parent / "web" / "planner.js"``,
  ``"tests/fixtures/Mistral-7B-v0.1.config.json"``, a fixtures folder): every string literal, or chain of
  ``/``-joined string literals, that names an existing file or folder of the repository;
- the locked requirements (``requirements.lock``, ``requirements.txt``, ``pyproject.toml``).

An edit elsewhere leaves the chapter fresh: a change to a planner module restales the planner chapters only.
A Python input (a module, a code cell) is digested as what can change an output: its syntax tree, without
comments, formatting and line numbers, and a module's without its docstrings (``code_key``). Rewording a comment
or a docstring restales nothing (and ``affected`` does not count it). No stored output shows a module's text:
the chapters show library code with ``{literalinclude}``, which the book build reads from the file itself. Where
code reads text at run time, the text counts: a module that names its own ``__doc__`` or uses ``help``,
``inspect.getdoc``/``getsource``/``getcomments`` or ``pydoc`` is digested whole, and so is every Python input
of a chapter whose cells do (or read an ``x.__doc__``, or ask IPython with ``x?``). Line numbers, which only a
traceback or a warning prints, are not digested: no stored output holds either (nbval would catch a change).
The scheme is stored beside the digest; ``check`` calls a digest stored by another scheme "stored by an older
digest scheme".

Usage::

    python tools/chapters.py execute [-j N] [--stale] [chapters/NAME.ipynb ...]  # default: every chapter
    python tools/chapters.py check   [chapters/NAME.ipynb ...]
    python tools/chapters.py deps    chapters/NAME.ipynb                          # list a chapter's inputs
    python tools/chapters.py affected --since REV      # chapters changed, or with a changed input, since REV
    python tools/chapters.py affected-tests --since REV  # the library test modules an edit since REV touches

``execute`` runs each notebook in a fresh kernel in its own folder, with ``BOOK_WIDGETS=static`` (as the tests
and the book build do), stores the outputs in place and records the digest; ``-j N`` runs N chapters at a
time (each kernel then single-threaded), ``--stale`` only those whose inputs changed. ``check`` names, for the
stale chapters, the files whose change made them stale, and prints the one command that re-executes them.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK_FILES = ("requirements.lock", "requirements.txt", "pyproject.toml")
METADATA_KEY = "book"
SCHEME = "code-without-comments-1"  # how inputs are digested (stored with the digest; see the module docstring)
PACKAGES = ("lib",)  # the project's importable packages, at the repository root
SKIP_PARTS = {"__pycache__", ".git", ".venv", "_build", ".ipynb_checkpoints"}
MODULE_STRING_RE = re.compile(r"(?:^|\s)(lib(?:\.[A-Za-z_]\w*)+)\b")


def _is_input_file(rel: Path) -> bool:
    """Not a cache, a build output or compiled Python (``rel`` relative to the repository root)."""
    return not SKIP_PARTS.intersection(rel.parts) and rel.suffix not in {".pyc", ".pyo"}


def _lib_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "lib").rglob("*") if _is_input_file(p.relative_to(root)) and p.is_file())


def inputs_digest(root: Path = ROOT) -> str:
    """SHA-256 over every file of ``lib/`` (a module by its code, ``code_key``) and the requirements: what the
    book build (``tools/build_book.py``) compares to decide that Jupyter Book's execution cache may be reused."""
    files = _lib_files(root) + [root / name for name in LOCK_FILES if (root / name).exists()]
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(root).as_posix()}\0{_file_hash(p)}\0".encode())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------------------
# What can change an output: a Python file's code, not its comments

READS_TEXT = {"help", "getdoc", "getsource", "getsourcelines", "getcomments", "pydoc"}


def _key(node: object, docstrings: bool) -> str:
    """A syntax tree as text: node names and their fields, no positions. A field left empty (``None``, ``[]``)
    is left out, so the text is the same under Python versions that add a field (3.12's ``type_params``)."""
    if isinstance(node, list):
        return "[" + ",".join(_key(n, docstrings) for n in node) + "]"
    if not isinstance(node, ast.AST):
        return repr(node)
    fields = []
    for name in node._fields:
        value = getattr(node, name, None)
        if (not docstrings and name == "body" and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                                    ast.AsyncFunctionDef))
                and ast.get_docstring(node, clean=False) is not None):
            value = value[1:]
        if value is not None and value != []:
            fields.append(f"{name}={_key(value, docstrings)}")
    return f"{type(node).__name__}({','.join(fields)})"


def code_key(text: str, docstrings: bool = False) -> str:
    """What of Python source ``text`` can change an output: its syntax tree, without comments, formatting and
    line numbers, and without docstrings unless ``docstrings``. IPython's ``%``/``!`` lines are kept as written;
    text that does not parse is its own key."""
    magics = [ln for ln in text.splitlines() if ln.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join("" if ln in magics else ln for ln in text.splitlines()))
    except (SyntaxError, ValueError):
        return text
    return "\n".join(magics + [_key(tree, docstrings)])


def reads_text(tree: ast.AST, doc_attribute: bool = False) -> bool:
    """Whether code reads docstrings or source at run time: names its own ``__doc__``, or ``help`` (the built-in),
    ``getdoc``/``getsource``/``getsourcelines``/``getcomments`` or ``pydoc`` (a name, an attribute or an
    import); with ``doc_attribute`` also any ``x.__doc__`` (a chapter's cells; a module that copies a caller's
    docstring onto a wrapper shows none of its own)."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and node.id in READS_TEXT | {"__doc__"}
                or isinstance(node, ast.Attribute) and (node.attr in READS_TEXT - {"help"}  # not argparse's
                                                        or doc_attribute and node.attr == "__doc__")
                or isinstance(node, ast.alias) and node.name.split(".")[0] in READS_TEXT
                or isinstance(node, ast.ImportFrom) and node.module == "pydoc"):
            return True
    return False


_KEYS: dict[str, str] = {}


def python_key(text: str) -> str:
    """A module's digest text: its ``code_key``, or its whole text when it reads text itself (``reads_text``)
    or does not parse."""
    if text not in _KEYS:
        try:
            own = reads_text(ast.parse(text))
        except (SyntaxError, ValueError):
            own = True
        _KEYS[text] = text if own else code_key(text)
    return _KEYS[text]


def _file_hash(p: Path, whole: bool = False) -> str:
    """Short SHA-256 of an input file: a Python module's ``python_key`` (its whole text when ``whole``), any
    other file's bytes."""
    data = p.read_bytes() if p.suffix != ".py" else (p.read_text() if whole else python_key(p.read_text())).encode()
    return hashlib.sha256(data).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------------
# What a piece of code depends on


def _module_file(root: Path, dotted: str, search: list[Path]) -> Path | None:
    """The file of module ``dotted`` (a ``.py`` file or a package's ``__init__.py``) under one of ``search``."""
    parts = dotted.split(".")
    for base in search:
        cand = base.joinpath(*parts)
        if cand.with_suffix(".py").is_file():
            return cand.with_suffix(".py")
        if (cand / "__init__.py").is_file():
            return cand / "__init__.py"
    return None


def _package_inits(root: Path, dotted: str, base: Path) -> list[Path]:
    """The ``__init__.py`` of every package on the way to ``dotted`` (importing ``lib.pt.x`` runs them)."""
    out = []
    parts = dotted.split(".")
    for i in range(1, len(parts)):
        init = base.joinpath(*parts[:i]) / "__init__.py"
        if init.is_file():
            out.append(init)
    return out


def _path_literals(tree: ast.AST) -> list[str]:
    """String literals, and chains of ``/``-joined string literals (``ROOT / "tests" / "fixtures"``), that
    might name a file."""
    out: list[str] = []

    def chain(node: ast.AST) -> list[str] | None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = chain(node.left), chain(node.right)
            if right is None:
                return None
            return (left or []) + right
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        return None if not isinstance(node, (ast.Name, ast.Attribute, ast.Call)) else []

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and 0 < len(node.value) < 300:
            out.append(node.value)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts = chain(node)
            if parts and len(parts) > 1:
                out.append("/".join(parts))
    return out


def _resolve_path_literal(root: Path, text: str, bases: list[Path]) -> list[Path]:
    text = text.strip()
    if not text or len(text) > 200 or any(ch.isspace() for ch in text) or text in {".", ".."} \
            or text.startswith(("http:", "https:")):
        return []
    found: list[Path] = []
    for base in bases:
        try:
            if not os.path.exists(base / text):  # most literals name nothing: one stat, not a realpath
                continue
            cand = (base / text).resolve()
        except (OSError, ValueError):
            continue
        if not cand.is_relative_to(root) or cand == root or SKIP_PARTS.intersection(cand.relative_to(root).parts):
            continue
        try:
            is_file, is_dir = cand.is_file(), cand.is_dir()
        except OSError:
            continue
        if is_file:
            found.append(cand)
        # a folder counts when it is named by a path of two or more parts, or relative to the module's own folder
        elif is_dir and cand not in {root / p for p in PACKAGES} and ("/" in text or base != root):
            found.extend(p for p in cand.rglob("*") if p.is_file() and _is_input_file(p.relative_to(root)))
        if found:
            break
    return found


def _is_dynamic_import(node: ast.Call) -> bool:
    """``importlib.import_module(x)`` or ``__import__(x)`` with an ``x`` that is not a string literal."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name not in {"import_module", "__import__"} or not node.args:
        return False
    return not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))


_MODULE_ACTIONS: dict[tuple, list[tuple[str, object]]] = {}


class _Deps:
    """The transitive inputs of a set of code snippets: module files and data files."""

    def __init__(self, root: Path, chapter_dir: Path):
        self.root = root.resolve()
        self.chapter_dir = chapter_dir.resolve()
        self.files: set[Path] = set()
        self.cells_read_text = False  # a code cell reads docstrings or source (then every text counts)
        self._seen_modules: set[Path] = set()

    def _add_module(self, dotted: str, search: list[Path]) -> None:
        f = _module_file(self.root, dotted, search)
        if f is None:
            return
        base = next(b for b in search if f.is_relative_to(b))
        for init in _package_inits(self.root, dotted, base):
            self._visit_module(init)
        self._visit_module(f)

    def _visit_module(self, f: Path) -> None:
        f = f.resolve()
        if f in self._seen_modules:
            return
        self._seen_modules.add(f)
        self.files.add(f)
        # What a module file leads to depends only on its text (and the tree around it, which does not change
        # while this process runs): worked out once per file and process, then replayed for every chapter.
        text = f.read_text()
        key = (self.root, self.chapter_dir, f, text)
        actions = _MODULE_ACTIONS.get(key)
        if actions is None:
            try:
                tree = ast.parse(text, filename=str(f))
            except SyntaxError:
                actions = []
            else:
                pkg_parts = f.parent.relative_to(self._base_of(f)).parts  # lib/pt/x.py, lib/pt/__init__.py: lib.pt
                actions = self._actions(tree, module_dir=f.parent, package=".".join(pkg_parts))
            _MODULE_ACTIONS[key] = actions
        self._apply(actions)

    def _base_of(self, f: Path) -> Path:
        return self.chapter_dir if f.is_relative_to(self.chapter_dir) else self.root

    def _search(self) -> list[Path]:
        return [self.root, self.chapter_dir]

    def scan_code(self, source: str) -> None:
        """A chapter's code cell (IPython magics and shell lines are dropped before parsing)."""
        lines = [("" if ln.lstrip().startswith(("%", "!")) else ln) for ln in source.splitlines()]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:  # IPython's help, ``obj?``, among other things
            self.cells_read_text |= any(ln.rstrip().endswith("?") for ln in lines)
            return
        self.cells_read_text |= reads_text(tree, doc_attribute=True)
        self._apply(self._actions(tree, module_dir=self.chapter_dir, package=""))

    def _apply(self, actions: list[tuple[str, object]]) -> None:
        for kind, arg in actions:
            if kind == "module":
                self._add_module(arg, self._search())
            elif kind == "visit":
                self._visit_module(arg)
            else:
                self.files.add(arg)

    def _actions(self, tree: ast.AST, module_dir: Path, package: str) -> list[tuple[str, object]]:
        """What the code ``tree`` leads to, in order: ("module", dotted name), ("visit", a .py file) and
        ("file", a data file)."""
        out: list[tuple[str, object]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    out.append(("module", alias.name))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = package.split(".") if package else []
                    if node.level > 1:
                        base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    mod = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if not mod:
                    continue
                out.append(("module", mod))
                for alias in node.names:  # ``from lib import softmax``: a submodule, if there is one
                    if alias.name != "*":
                        out.append(("module", f"{mod}.{alias.name}"))
            elif isinstance(node, ast.Call) and _is_dynamic_import(node):
                # importlib.import_module(f"{__name__}.{name}"): which module is not known statically, so
                # every module of this package folder counts
                for p in sorted(module_dir.glob("*.py")):
                    out.append(("visit", p))
        for text in _path_literals(tree):
            for m in MODULE_STRING_RE.findall(text):  # "python -m lib.sizing", importlib.import_module("lib.x")
                out.append(("module", m))
            for p in _resolve_path_literal(self.root, text, [module_dir, self.root, self.chapter_dir]):
                out.append(("visit", p) if p.suffix == ".py" else ("file", p.resolve()))
        return out


def _scan(nb, root: Path, chapter_dir: Path | None) -> _Deps:
    deps = _Deps(root.resolve(), (chapter_dir or root / "chapters").resolve())
    for cell in nb.cells:
        if cell.cell_type == "code":
            deps.scan_code(cell.source)
    deps.files |= {deps.root / name for name in LOCK_FILES if (deps.root / name).exists()}
    return deps


def chapter_inputs(nb, root: Path = ROOT, chapter_dir: Path | None = None) -> list[Path]:
    """Every file a chapter's outputs depend on besides its own code cells, sorted."""
    return sorted(_scan(nb, root, chapter_dir).files)


def _rel(p: Path, root: Path) -> str:
    return p.relative_to(root).as_posix()


def input_hashes(nb, root: Path = ROOT, chapter_dir: Path | None = None) -> dict[str, str]:
    """``{relative path: short SHA-256}`` of every input file of a chapter (``_file_hash``), and of its code
    cells under ``<code>`` (each cell's ``code_key``, docstrings kept: a cell's lone string is its result)."""
    root = root.resolve()
    deps = _scan(nb, root, chapter_dir)
    whole = deps.cells_read_text
    out = {_rel(p, root): _file_hash(p, whole) for p in sorted(deps.files)}
    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(b"\0code\0")
            h.update((cell.source if whole else code_key(cell.source, docstrings=True)).encode())
    out["<code>"] = h.hexdigest()[:16]
    return out


def chapter_digest(nb, root: Path = ROOT, chapter_dir: Path | None = None) -> str:
    """The digest a chapter's stored outputs must carry: its code cells and every input file's content."""
    h = hashlib.sha256()
    for name, digest in sorted(input_hashes(nb, root, chapter_dir).items()):
        h.update(f"{name}\0{digest}\0".encode())
    return h.hexdigest()


def toc_chapters(root: Path = ROOT) -> list[Path]:
    """The notebooks the table of contents lists, in its order."""
    toc = (root / "_toc.yml").read_text()
    files = re.findall(r"^\s*-?\s*file:\s*(\S+)\s*$", toc, flags=re.M)
    return [root / f"{f}.ipynb" for f in files if (root / f"{f}.ipynb").exists()]


def _why_stale(stored: dict, now: dict) -> list[str]:
    """The inputs that differ between the stored and the current hashes (added, removed or changed)."""
    names = sorted(set(stored) | set(now))
    return [n for n in names if stored.get(n) != now.get(n)]


def stale_report(paths: list[Path], root: Path = ROOT) -> dict[Path, list[str]]:
    """``{chapter: [the inputs whose change made it stale]}`` for every stale chapter (``["<no digest>"]``
    when none was stored)."""
    import nbformat

    out: dict[Path, list[str]] = {}
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        meta = nb.metadata.get(METADATA_KEY, {})
        stored = meta.get("inputs_digest")
        if stored is None:
            out[path] = ["<no digest>"]
            continue
        if meta.get("scheme") != SCHEME:  # stored by an older scheme (the whole text of every file)
            out[path] = ["<digest scheme>"]
            continue
        if stored == chapter_digest(nb, root, path.parent):
            continue
        why = _why_stale(meta["inputs"], input_hashes(nb, root, path.parent))
        out[path] = why or ["<digest scheme>"]
    return out


def changed_files(base: str, root: Path = ROOT) -> set[str]:
    """Files that differ between git revision ``base`` and the working tree, untracked files included; a Python
    file whose code is unchanged (``code_key``: a comment or a docstring edited) does not count."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)

    listed = [git("diff", "--name-only", base), git("ls-files", "--others", "--exclude-standard")]
    for proc in listed:
        if proc.returncode != 0:
            raise SystemExit(f"chapters.py: git failed: {proc.stderr.strip()}")
    changed = {ln for proc in listed for ln in proc.stdout.splitlines() if ln}
    for name in [n for n in changed if n.endswith(".py") and (root / n).is_file()]:
        before = git("show", f"{base}:{name}")
        if before.returncode == 0 and python_key(before.stdout) == python_key((root / name).read_text()):
            changed.discard(name)
    return changed


def test_inputs(path: Path, root: Path = ROOT) -> set[str]:
    """The files a test module depends on, found as a chapter's are (its imports, followed transitively, local
    helpers of its folder such as ``twins.py`` included, and the files its string literals name), relative to
    ``root``."""
    root = root.resolve()
    deps = _Deps(root, path.parent)
    deps.scan_code(path.read_text())
    return {_rel(p, root) for p in deps.files}


def affected_tests(changed: set[str], root: Path = ROOT) -> list[str] | None:
    """The library test modules (``tests/test_*.py``) an edit touches: those that changed or depend on a changed
    file (``test_inputs``). ``None`` when every module must run: a changed file that is not an existing Python
    file under ``lib/`` or ``tests/`` (a test may read data, chapters or tools in ways no scan sees), or one that
    ``tests/conftest.py``, which every test runs, depends on."""
    if any(not (n.endswith(".py") and n.startswith(("lib/", "tests/")) and (root / n).is_file()) for n in changed):
        return None
    tests = root / "tests"
    if ({"tests/conftest.py"} | test_inputs(tests / "conftest.py", root)) & changed:
        return None
    return [_rel(f, root.resolve()) for f in sorted(tests.resolve().glob("test_*.py"))
            if _rel(f, root.resolve()) in changed or test_inputs(f, root) & changed]


def affected_chapters(paths: list[Path], changed: set[str], root: Path = ROOT) -> list[Path]:
    """The chapters that are themselves in ``changed`` or have an input in it."""
    import nbformat

    out = []
    for path in paths:
        rel = path.relative_to(root).as_posix()
        nb = nbformat.read(path, as_version=4)
        inputs = {p.relative_to(root).as_posix() for p in chapter_inputs(nb, root, path.parent)}
        if rel in changed or inputs & changed:
            out.append(path)
    return out


def _execute_one(path_str: str, root_str: str, timeout: int, single_thread: bool) -> tuple[str, float, str]:
    import nbformat
    from nbclient import NotebookClient

    path, root = Path(path_str), Path(root_str)
    os.environ["BOOK_WIDGETS"] = "static"
    if single_thread:  # N kernels at a time share the cores; the kernel inherits these
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = "1"
    t0 = time.perf_counter()
    nb = nbformat.read(path, as_version=4)
    # coalesce_streams: each stream of a cell stored as one output, as nbval and the book show it (how a
    # cell's printing is cut into messages depends on when the kernel flushed)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False, coalesce_streams=True,
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except Exception as exc:  # the notebook on disk is left unchanged
        return path_str, time.perf_counter() - t0, f"FAILED: {exc}"
    nb.metadata[METADATA_KEY] = {
        "scheme": SCHEME,
        "inputs_digest": chapter_digest(nb, root, path.parent),
        "inputs": input_hashes(nb, root, path.parent),
    }
    nbformat.write(nb, path)
    return path_str, time.perf_counter() - t0, ""


def execute(paths: list[Path], root: Path = ROOT, timeout: int = 900, jobs: int = 1) -> int:
    failed = 0
    t_all = time.perf_counter()
    if jobs <= 1:
        results = (_execute_one(str(p), str(root), timeout, False) for p in paths)
        for i, (p, dt, err) in enumerate(results, 1):
            failed += _report(i, len(paths), Path(p), root, dt, err)
    else:
        # longest first (by the size of the stored notebook, a fair proxy), so the last ones are short
        order = sorted(paths, key=lambda p: -p.stat().st_size)
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_execute_one, str(p), str(root), timeout, True) for p in order]
            for i, fut in enumerate(as_completed(futures), 1):
                p, dt, err = fut.result()
                failed += _report(i, len(paths), Path(p), root, dt, err)
    print(f"executed {len(paths) - failed} of {len(paths)} chapters in {time.perf_counter() - t_all:.0f} s"
          f" ({jobs} at a time)")
    return 1 if failed else 0


def _report(i: int, n: int, path: Path, root: Path, dt: float, err: str) -> int:
    rel = path.relative_to(root) if path.is_relative_to(root) else path
    print(f"[{i}/{n}] {rel}: {err or 'executed'} ({dt:.0f} s)", flush=True)
    return 1 if err else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["execute", "check", "deps", "affected", "affected-tests"])
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter in _toc.yml")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="chapters executed at a time (default 1)")
    ap.add_argument("--stale", action="store_true", help="execute only the chapters whose inputs changed")
    ap.add_argument("--since", default="HEAD", metavar="REV",
                    help="affected: chapters changed, or with an input changed, since git revision REV "
                         "(default HEAD: the uncommitted changes)")
    args = ap.parse_intermixed_args(argv)  # `execute -j 2 chapters/a.ipynb chapters/b.ipynb` as check prints it
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, got {args.jobs}")
    paths = [p.resolve() for p in args.notebooks] or toc_chapters()
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"chapters.py: no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.command == "deps":
        import nbformat

        for path in paths:
            nb = nbformat.read(path, as_version=4)
            print(f"{path.relative_to(ROOT)}:")
            for p in chapter_inputs(nb, ROOT, path.parent):
                print(f"  {p.relative_to(ROOT)}")
        return 0
    if args.command == "affected":
        for path in affected_chapters(paths, changed_files(args.since)):
            print(path.relative_to(ROOT))
        return 0
    if args.command == "affected-tests":  # one test module a line; "tests" when every one must run
        tests = affected_tests(changed_files(args.since))
        print("\n".join(["tests"] if tests is None else tests))
        return 0
    if args.command == "execute":
        if args.stale:
            paths = list(stale_report(paths))
            if not paths:
                print("chapters.py: every chapter is fresh; nothing to execute")
                return 0
        return execute(paths, jobs=args.jobs)
    report = stale_report(paths)
    if not report:
        print(f"chapters.py: the stored outputs of all {len(paths)} chapters match their inputs")
        return 0
    by_file: dict[str, list[str]] = {}
    for path, why in report.items():
        for name in why:
            by_file.setdefault(name, []).append(path.stem)
    print(f"chapters.py: {len(report)} of {len(paths)} chapters are stale:", file=sys.stderr)
    for name, chapters in sorted(by_file.items()):
        what = {"<code>": "its code cells", "<no digest>": "no digest stored",
                "<digest scheme>": "stored by an older digest scheme"}.get(name, name)
        print(f"  {what}: {', '.join(chapters)}", file=sys.stderr)
    rels = " ".join(str(p.relative_to(ROOT)) for p in report)
    jobs = min(len(report), os.cpu_count() or 1)
    print(f"re-execute them with:\n  .venv/bin/python tools/chapters.py execute -j {jobs} {rels}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
