"""The book's JupyterLab contents manager (``jupyter_config/book_contents.py``) on the chapters themselves.

What JupyterLab receives when it opens a chapter is what the page shows (glued numbers, citations, figure
numbers, hidden cells folded, the kernel's own metadata), and what it saves back after opening is the file,
byte for byte. The browser test (``tests/browser/test_jupyterlab.py``) does the same through a real JupyterLab,
and compares the citations and figure numbers with the built HTML; these run in seconds and need no browser.
"""

from __future__ import annotations

import asyncio
import copy
import json
import platform
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.tools  # make check runs it only when a tool or the configuration (jupyter_config/) changed
sys.path.insert(0, str(ROOT / "jupyter_config"))
import book_contents as bc  # noqa: E402  (jupyter_config/ is not a package)

CHAPTERS = sorted(p for p in bc.toc_chapters(ROOT / "_toc.yml") if p.exists())  # .md pages are no notebooks


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


@pytest.fixture(scope="module")
def book_copy(tmp_path_factory) -> Path:
    """The chapters, the table of contents and the bibliography, copied byte for byte."""
    root = tmp_path_factory.mktemp("book")
    shutil.copytree(ROOT / "chapters", root / "chapters", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("_toc.yml", "references.bib", "planner_reference.md", "bibliography.md"):
        shutil.copy(ROOT / name, root / name)
    return root


def _open_and_save(root: Path, rel: str) -> dict:
    """Open ``rel`` as JupyterLab does (GET), then save the model JupyterLab got (PUT); returns that model."""
    manager = bc.BookContentsManager(root_dir=str(root))

    async def go() -> dict:
        model = await manager.get(rel, content=True, type="notebook")
        shown = copy.deepcopy(model["content"])
        await manager.save({"type": "notebook", "format": "json", "content": model["content"]}, rel)
        return shown

    return asyncio.run(go())


@pytest.mark.parametrize("chapter", CHAPTERS, ids=_ids(CHAPTERS))
def test_opening_shows_the_page_and_saving_changes_nothing(book_copy: Path, chapter: Path) -> None:
    rel = chapter.relative_to(ROOT).as_posix()
    before = (book_copy / rel).read_bytes()
    shown = _open_and_save(book_copy, rel)
    assert (book_copy / rel).read_bytes() == before, f"{rel}: opening and saving it changed the file"

    prose = "\n".join(bc._source(c) for c in shown["cells"] if c["cell_type"] == "markdown")
    left = sorted(set(re.findall(r"\{(?:glue(?::\w+)?|cite(?::\w)?)\}`[^`]*`", prose)))
    assert not left, f"{rel}: roles JupyterLab cannot render are left in the prose: {left[:5]}"
    own = {((c.get("metadata") or {}).get("mystnb") or {}).get("figure", {}).get("name") for c in shown["cells"]}
    raw_own = [n for n in re.findall(r"\{numref\}`([^`]+)`", prose) if n in own]
    assert not raw_own, f"{rel}: references to its own figures left as roles: {raw_own}"
    elsewhere = set(bc.book_labels(bc.toc_chapters(book_copy / "_toc.yml"))) - set(re.findall(
        r"^\(([\w-]+)\)=", prose, flags=re.M))
    raw_other = [m.group(0) for m in bc.REF.finditer(prose) if (m.group(2) or m.group(3)) in elsewhere]
    assert not raw_other, f"{rel}: references to other chapters left as roles: {raw_other[:5]}"

    # JupyterLab writes the started kernel's name and version into these; equal already, the chapter stays unchanged
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(shown["metadata"]["kernelspec"]["name"])
    assert shown["metadata"]["kernelspec"]["display_name"] == spec.display_name
    assert shown["metadata"]["language_info"]["version"] == platform.python_version()

    for cell in shown["cells"]:
        tags = set(cell["metadata"].get("tags", []))
        folded = cell["metadata"].get("jupyter", {})
        if tags & {"remove-cell", "remove-input", "hide-input", "hide-cell"}:
            assert folded.get("source_hidden") is True, f"{rel}: cell {cell.get('id')} ({tags}) is not folded"
        if tags & {"remove-cell", "hide-cell", "remove-output", "hide-output"}:
            assert folded.get("outputs_hidden") is True, f"{rel}: cell {cell.get('id')} output is not folded"
        if not tags & set(bc.FOLDS):
            assert not folded, f"{rel}: cell {cell.get('id')} has no hiding tag but is folded"
        if cell["cell_type"] == "code":
            assert cell["metadata"].get("trusted") is True, f"{rel}: the book's chapter is not trusted"


def test_a_saved_slider_keeps_the_stored_figure(book_copy: Path) -> None:
    """Run in JupyterLab, ``explore`` gives a live ipywidgets slider, whose output is a reference to a widget in
    the running kernel. Saved as it is, the book would show an empty box; the stored figure is kept instead,
    unless the cell's code changed."""
    rel = "chapters/softmax.ipynb"
    stored = nbformat.read(book_copy / rel, as_version=4)
    sliders = [c for c in stored.cells if c.cell_type == "code" and any(
        "book_explore" in (o.get("metadata") or {}) for o in c.get("outputs", []))]
    assert sliders, "softmax has no explore slider to test with"
    live = copy.deepcopy(stored)
    widget = {"output_type": "display_data", "metadata": {}, "data": {
        "text/plain": "interactive(children=(SelectionSlider(...)))",
        bc.WIDGET_VIEW: {"model_id": "0123", "version_major": 2, "version_minor": 0}}}
    for cell in live.cells:
        if cell.get("id") in {c.id for c in sliders}:
            cell.outputs = [copy.deepcopy(widget)]
    live.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    edited = copy.deepcopy(live)
    edited.cells[[c.get("id") for c in edited.cells].index(sliders[0].id)].source += "\n# changed"

    bc.restore(live, stored)
    assert not bc.widget_references(live)
    assert "widgets" not in live.metadata
    for cell in sliders:
        kept = next(c for c in live.cells if c.get("id") == cell.id)
        assert kept.outputs == cell.outputs
    bc.restore(edited, stored)
    assert bc.widget_references(edited) == [sliders[0].id], "a changed cell must keep its own (new) output"


def test_no_chapter_stores_a_widget_reference() -> None:
    """A chapter saved from JupyterLab without the book's settings holds ipywidgets references where its figures
    were: the book would render an empty box. None may."""
    found = {p.stem: bc.widget_references(json.loads(p.read_text())) for p in CHAPTERS}
    assert not {k: v for k, v in found.items() if v}, f"widget references stored in place of figures: {found}"


def test_folding_and_restoring_are_exact() -> None:
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["remove-cell"]}),
        nbformat.v4.new_code_cell("y = 2", metadata={"tags": ["remove-input"], "jupyter": {"keep": 1}}),
        nbformat.v4.new_code_cell("z = 3", metadata={"tags": ["remove-output"]}),
        nbformat.v4.new_code_cell("w = 4")])
    original = copy.deepcopy(nb)
    assert bc.fold_hidden(nb) == 3
    assert nb.cells[0].metadata.jupyter == {"source_hidden": True, "outputs_hidden": True}
    assert nb.cells[1].metadata.jupyter == {"keep": 1, "source_hidden": True}
    assert nb.cells[2].metadata.jupyter == {"outputs_hidden": True}
    assert "jupyter" not in nb.cells[3].metadata
    bc.restore(nb, None)
    assert nb == original


@pytest.mark.parametrize("live", [True, False], ids=["widget-reference", "static-figure"])
def test_the_build_stops_at_a_stored_widget_reference(tmp_path: Path, live: bool) -> None:
    """Sphinx with myst-nb and ``_ext/book_explore.py``, execution off (as the book renders stored outputs), on a
    one-cell notebook: a live-widget reference where the figure was fails the build, naming the notebook; the
    same cell with a static figure builds."""
    import subprocess

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / '_ext')!r})\n"
        "extensions = ['myst_nb', 'book_explore']\nnb_execution_mode = 'off'\n")
    output = ({"output_type": "display_data", "metadata": {}, "data": {
        "text/plain": "VBox(children=(SelectionSlider(...), Output()))",
        bc.WIDGET_VIEW: {"model_id": "0123", "version_major": 2, "version_minor": 0}}} if live else
        {"output_type": "display_data", "metadata": {}, "data": {"text/plain": "<Figure>",
                                                                 "image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg'/>"}})
    cell = nbformat.v4.new_code_cell("explore(draw, 'beta', [0, 1])", outputs=[nbformat.from_dict(output)])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A chapter"), cell],
                                  metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nbformat.write(nb, src / "index.ipynb")
    run = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", str(src), str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=300)
    if live:
        assert run.returncode != 0, "the build rendered a widget reference as an empty box and succeeded"
        assert "index.ipynb" in run.stderr and "ipywidgets reference" in run.stderr, run.stderr[-2000:]
    else:
        assert run.returncode == 0, run.stderr[-2000:]
