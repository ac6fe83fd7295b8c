"""The book's code as one download (``book-code.zip``, written by ``tools/build_book.py``): a chapter runs from it.

The zip is made once here, as the build makes it (``make_download``), unpacked into a temporary folder, and one
chapter is executed there (nbclient, a fresh kernel whose working folder is the unpacked ``chapters/``), with the
unpacked ``lib`` first on the path: the chapter must import that copy, not the repository's.

Its README is the reader's (``tools/download_README.md``), not the repository's: every file and folder it names
is in the zip, every command it gives uses only what the zip holds, and it names nothing the zip lacks (``make``,
``tools/``, uv).
"""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.tools  # make check runs it only when a tool or the configuration changed
sys.path.insert(0, str(ROOT / "tools"))
from build_book import DOWNLOAD, DOWNLOAD_FOLDER, DOWNLOAD_README, make_download  # noqa: E402

CHAPTER = "chapters/notation.ipynb"  # a short chapter


@pytest.fixture(scope="module")
def download(tmp_path_factory) -> Path:
    return make_download(tmp_path_factory.mktemp("site") / DOWNLOAD)


def test_download_holds_the_code_and_the_set_up(download: Path) -> None:
    names = zipfile.ZipFile(download).namelist()
    assert all(n.startswith(f"{DOWNLOAD_FOLDER}/") for n in names)
    rel = {n.removeprefix(f"{DOWNLOAD_FOLDER}/") for n in names}
    for needed in ["README.md", "pyproject.toml", "requirements.txt", "requirements.lock", "lib/__init__.py",
                   "lib/book/widgets.py", CHAPTER, "chapters/errata/__init__.py", "jupyter_config/book_contents.py",
                   "jupyter_config/jupyter_server_config.py", "_toc.yml", "references.bib"]:
        assert needed in rel, f"{needed} is not in the download"
    assert not [n for n in rel if "__pycache__" in n or n.endswith(".pyc") or n.startswith((".venv", "_build"))]


def test_a_chapter_runs_from_the_unpacked_download(download: Path, tmp_path: Path, monkeypatch) -> None:
    from nbclient import NotebookClient

    with zipfile.ZipFile(download) as zf:
        zf.extractall(tmp_path / "unpacked")
    book = tmp_path / "unpacked" / DOWNLOAD_FOLDER
    nb = nbformat.read(book / CHAPTER, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import lib\nprint(lib.__file__)"))
    monkeypatch.setenv("PYTHONPATH", str(book))  # the kernel inherits it: the unpacked lib comes first
    monkeypatch.setenv("BOOK_WIDGETS", "static")
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(book / "chapters")}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    where = "".join(o.get("text", "") for o in nb.cells[-1].outputs).strip()
    assert Path(where).resolve().is_relative_to(book.resolve()), f"the chapter imported lib from {where}"


def test_the_zip_appears_whole(download: Path) -> None:
    """The zip is written beside its name and renamed into place (a reader never sees half of it): afterwards the
    folder holds the zip alone, and it reads."""
    assert sorted(p.name for p in download.parent.iterdir()) == [DOWNLOAD]
    assert zipfile.ZipFile(download).testzip() is None


def _members(download: Path) -> tuple[set[str], str]:
    """(the zip's paths relative to its folder, with their parent folders; its README's text)."""
    with zipfile.ZipFile(download) as zf:
        names = {n.removeprefix(f"{DOWNLOAD_FOLDER}/") for n in zf.namelist()}
        readme = zf.read(f"{DOWNLOAD_FOLDER}/README.md").decode()
    folders = {"/".join(n.split("/")[:i]) + "/" for n in names for i in range(1, n.count("/") + 1)}
    return names | folders, readme


def test_the_readme_is_the_readers(download: Path) -> None:
    names, readme = _members(download)
    assert readme == DOWNLOAD_README.read_text(), "the zip's README is not tools/download_README.md"
    assert readme != (ROOT / "README.md").read_text()
    # nothing the zip does not hold: the repository's tooling, its set-up script, uv
    for absent in (r"`make\b|^make |\bmake (book|test|pdf|check)\b", r"\btools/", r"setup\.sh", r"\buv\b", "nbval",
                   "pytest"):
        assert not re.search(absent, readme, flags=re.M), f"the zip's README mentions {absent!r}, not in the zip"
    # what is inside, the set-up, the cost, the one JupyterLab command and root's extra option
    for needed in ("## What is inside", "python3 -m venv .venv", ".venv/bin/pip install -r requirements.lock",
                   ".venv/bin/pip install -e .", "326 s", "2.0 GB",
                   ".venv/bin/jupyter lab --config jupyter_config/jupyter_server_config.py", "--allow-root"):
        assert needed in readme, f"the zip's README does not say {needed!r}"
    assert not re.search(r"^\.venv/bin/jupyter lab\s*$", readme, flags=re.M), "a bare `jupyter lab` shows no numbers"


def readme_paths(readme: str) -> set[str]:
    """The files and folders a README names in its code (inline and blocks): words with a "/" (not under
    ``.venv/``, not a URL or an option) or a file name's suffix."""
    code = " ".join(re.findall(r"```\w*\n(.*?)```", readme, flags=re.S) + re.findall(r"`([^`\n]+)`", readme))
    words = {w.strip(",;:()").removeprefix("./") for w in code.split()}
    return {w for w in words if not w.startswith((".venv", "http", "-", "<")) and (
        "/" in w or re.search(r"\.(ipynb|lock|toml|txt|yml|bib|json|py|md)$", w))}


def test_every_path_the_readme_names_is_in_the_zip(download: Path) -> None:
    names, readme = _members(download)
    named = readme_paths(readme) - {"notation.run.ipynb"}  # what the nbconvert command writes
    assert {"chapters/*.ipynb", "requirements.lock", "jupyter_config/jupyter_server_config.py",
            "tests/fixtures/Mistral-7B-v0.1.config.json"} <= named, sorted(named)
    missing = [p for p in sorted(named) if not (
        p in names or p.rstrip("/") + "/" in names
        or ("*" in p and any(re.fullmatch(re.escape(p).replace(r"\*", "[^/]*"), n) for n in names)))]
    assert not missing, f"the zip's README names paths the zip does not hold: {missing}"
