"""The book's code as one download (``book-code.zip``, written by ``tools/build_book.py``): a chapter runs from it.

The zip is made once here, as the build makes it (``make_download``), unpacked into a temporary folder, and one
chapter is executed there (nbclient, a fresh kernel whose working folder is the unpacked ``chapters/``), with the
unpacked ``lib`` first on the path: the chapter must import that copy, not the repository's.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.tools  # make check runs it only when a tool or the configuration changed
sys.path.insert(0, str(ROOT / "tools"))
from build_book import DOWNLOAD, DOWNLOAD_FOLDER, make_download  # noqa: E402

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
                   "jupyter_config/jupyter_server_config.py"]:
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
