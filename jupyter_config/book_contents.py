"""JupyterLab shows a chapter as the book's page shows it, and opening or re-running a chapter changes no file.

A contents manager (the server side of opening and saving files) that, when JupyterLab opens a chapter:

- **shows the numbers.** myst-nb's ``glue`` stores a value as an output of the cell that computed it, and the
  book's HTML puts it into the prose. JupyterLab's MyST renderer (``jupyterlab-myst``) does not know glue
  (jupyter-book/jupyterlab-myst#40), so each ``{glue:text}`name``` role in a markdown cell is replaced by the
  value the stored outputs hold, formatted as the role asks (``{glue:text}`n:,```): the HTML's number;
- **shows the citations and figure numbers.** jupyterlab-myst has no bibliography (a ``{cite:p}`` role shows its
  key and "Citation Not Found", jupyter-book/jupyterlab-myst#127), and a figure the book makes from a code cell's
  output (myst-nb's ``mystnb.figure`` cell metadata) is no target it knows. ``{cite:p}`key``` becomes
  "[Vaswani et al., 2017]" and ``{cite:t}`key``` "Vaswani et al. [2017]" (written from ``references.bib`` by
  sphinxcontrib-bibtex's author-year style, as the HTML's are), and ``{numref}`fig-name``` of a figure of the
  same chapter "Fig. 2.2" (the chapter's number from ``_toc.yml``, the figure's place in the chapter);
  ``{ref}`label``` of another page of the book (which jupyterlab-myst cannot resolve) becomes a link to that
  notebook, named by its heading;
- **shows its figures.** A notebook nobody signed on this computer is untrusted, and JupyterLab then shows
  "<Figure size 640x480 with 1 Axes>" instead of its stored SVG figures; the chapters of the book's own
  ``_toc.yml`` are marked trusted (their code is what the reader runs anyway), other notebooks are not;
- **folds what the HTML hides.** A cell tagged ``remove-cell`` or ``hide-cell`` opens with its code and output
  collapsed, ``remove-input`` or ``hide-input`` with its code collapsed, ``remove-output`` or ``hide-output``
  with its output collapsed (``metadata.jupyter.source_hidden``/``outputs_hidden``, JupyterLab's own fields);
- **matches the running kernel's metadata.** JupyterLab rewrites ``metadata.kernelspec`` and
  ``metadata.language_info`` from the kernel it starts ("Python 3 (ipykernel)", the interpreter's version),
  which marked a chapter changed the moment it was opened, so autosave rewrote it two minutes later. The values
  are set to what the kernel will report before JupyterLab sees the notebook.

Saving undoes all of it: the roles come back in every cell the reader did not edit (the original source is kept
in the cell's metadata, ``book_glue_source``, until then), the folding fields and the kernel metadata are the
file's own again, and a cell whose figure is a live slider (an ipywidgets reference, which means nothing
outside the running kernel) keeps the static figure and frames the file stored, as long as its code is the
stored code. So a chapter opened, run and saved holds the outputs the book renders; a chapter whose code the
reader changed is stale for ``tools/chapters.py check`` as before. One saved with a widget reference anyway
(from a JupyterLab without these settings) stops the book's build (``_ext/book_explore.py``).

Enabled by ``jupyter_server_config.py`` beside this file, which ``tools/setup.sh`` makes ``.venv/bin/jupyter lab``
load; elsewhere ``jupyter lab --config jupyter_config/jupyter_server_config.py``.
"""

from __future__ import annotations

import ast
import platform
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

ROLE = re.compile(r"\{glue(?::(?:text|any|md))?\}`([^`:]+?)(?::([^`]*))?`")
CITE = re.compile(r"\{cite(?::(p|t))?\}`([^`]+)`")
NUMREF = re.compile(r"\{numref\}`([^`<>]+)`")
REF = re.compile(r"\{ref\}`(?:([^`<]*?)\s*<([^`>]+)>|([^`<>]+))`")
LABEL = re.compile(r"^\(([\w-]+)\)=[ \t]*\n+#+[ \t]+(.+)$", flags=re.M)
META = "book_glue_source"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_RECORD = "application/papermill.record/"
# the HTML's hiding tags -> the JupyterLab fields that fold the same parts
FOLDS = {"remove-cell": ("source_hidden", "outputs_hidden"), "hide-cell": ("source_hidden", "outputs_hidden"),
         "remove-input": ("source_hidden",), "hide-input": ("source_hidden",),
         "remove-output": ("outputs_hidden",), "hide-output": ("outputs_hidden",)}


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def glued_values(nb: dict) -> dict[str, str]:
    """name -> the glued value as text (``text/plain`` of the stored glue output; a quoted str unquoted)."""
    values: dict[str, str] = {}
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) or []:
            book = (out.get("metadata") or {}).get("scrapbook") or {}
            data = out.get("data") or {}
            text = data.get(_RECORD + "text/markdown") or data.get(_RECORD + "text/plain")
            if book.get("name") and text is not None:
                values[book["name"]] = "".join(text) if isinstance(text, list) else text
    return values


def _format(raw: str, spec: str | None) -> str:
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw
    if spec:
        try:
            return format(value, spec)
        except (TypeError, ValueError):
            pass
    return value if isinstance(value, str) else raw


# ---------------------------------------------------------------- citations and figure numbers


Bibliography = dict[str, tuple[Any, tuple]]


@lru_cache(maxsize=4)
def _bibliography(bib: Path, mtime: float) -> Bibliography:  # noqa: ARG001 - mtime keys the cache
    """key -> (pybtex entry, sort key) of every entry of a BibTeX file; {} when it cannot be read. The sort key
    is the bibliography's order (author, year, title, BibTeX's protecting braces ignored), the order in which
    the HTML lists the works of one citation."""
    try:
        from pybtex.database import parse_file
        from pybtex.style.sorting.author_year_title import SortingStyle

        data, order = parse_file(str(bib)), SortingStyle()
    except Exception:  # noqa: BLE001 - no bibliography is no reason to fail opening a notebook
        return {}
    return {key: (e, tuple(str(part).replace("{", "").replace("}", "") for part in order.sorting_key(e)))
            for key, e in data.entries.items()}


def _markdown(parts: list) -> str:
    """docutils nodes as markdown text: emphasis in asterisks, brackets escaped, raw nodes dropped."""
    from docutils import nodes

    out = []
    for node in parts:
        if isinstance(node, nodes.raw):
            continue
        if isinstance(node, nodes.emphasis):
            out.append(f"*{node.astext()}*")
        elif isinstance(node, nodes.Text):
            out.append(str(node).replace("[", "\\[").replace("]", "\\]"))
        else:
            out.append(_markdown(node.children))
    return "".join(out)


def citation_text(kind: str | None, keys: str, bib: Bibliography) -> str | None:
    """``{cite:p}`a,b``` -> "[A et al., 2017, B, 2019]"; ``{cite:t}`a``` -> "A et al. [2017]" (markdown, the
    brackets escaped), written by sphinxcontrib-bibtex's author-year style, the one the book's ``_config.yml``
    names; None if a key is not in the bibliography or the style is not installed (the role is then left)."""
    found = [bib.get(k.strip()) for k in keys.split(",")]
    if not found or None in found:
        return None
    try:
        from types import SimpleNamespace

        import pybtex_docutils
        from sphinxcontrib.bibtex.style.referencing import format_references
        from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
        from sphinxcontrib.bibtex.style.template import SphinxReferenceInfo
    except ImportError:
        return None
    # no Sphinx here: a builder named "latex" makes the style return the reference's text between two raw nodes
    info = SphinxReferenceInfo(builder=SimpleNamespace(name="latex"), fromdocname="", todocname="",
                               citation_id="", title=None, pre_text="", post_text="")
    refs = [(entry, None, info) for entry, _ in sorted(found, key=lambda pair: pair[1])]
    text = format_references(AuthorYearReferenceStyle(), "t" if kind == "t" else "p", refs)
    return _markdown(text.render(pybtex_docutils.Backend()))


def _find_up(start: Path, name: str, stop: Path) -> Path | None:
    for d in [start, *start.parents]:
        if (d / name).is_file():
            return d / name
        if d == stop:
            break
    return None


def toc_chapters(toc: Path) -> dict[Path, int | None]:
    """The chapters of ``_toc.yml`` (resolved paths of their notebooks) -> their numbers in the book (Jupyter Book
    numbers the chapters of numbered parts in one sequence; None in a part that is not numbered). {} when the
    table of contents cannot be read."""
    try:
        import yaml

        spec = yaml.safe_load(toc.read_text())
    except Exception:  # noqa: BLE001 - no table of contents: no chapters known
        return {}
    chapters: dict[Path, int | None] = {}
    n = 0
    for part in spec.get("parts", []) or []:
        for chapter in part.get("chapters", []) or []:
            if not chapter.get("file"):
                continue
            name = str(chapter["file"]).removesuffix(".ipynb").removesuffix(".md")
            n += bool(part.get("numbered"))
            chapters[(toc.parent / f"{name}.ipynb").resolve()] = n if part.get("numbered") else None
    return chapters


def figure_numbers(nb: dict, chapter: int | None) -> dict[str, str]:
    """name -> "Fig. 2.2" for every figure a code cell's metadata declares (``mystnb.figure.name``), numbered in
    the chapter's order as the HTML numbers them (a cell whose output the HTML removes shows no figure and takes
    no number)."""
    numbers, k = {}, 0
    for cell in nb.get("cells", []):
        meta = cell.get("metadata") or {}
        figure = (meta.get("mystnb") or {}).get("figure")
        if {"remove-cell", "remove-output"} & set(meta.get("tags") or []):
            continue
        if cell.get("cell_type") == "code" and isinstance(figure, dict):
            k += 1
            if figure.get("name"):
                numbers[figure["name"]] = f"Fig. {chapter}.{k}" if chapter else f"Fig. {k}"
    return numbers


@lru_cache(maxsize=64)
def _labels_of(page: Path, mtime: float) -> dict[str, str]:  # noqa: ARG001 - mtime keys the cache
    """label -> heading text of every ``(label)=`` followed by a heading in a notebook's markdown or a page."""
    try:
        if page.suffix == ".ipynb":
            import json

            cells = json.loads(page.read_text()).get("cells", [])
            text = "\n\n".join(_source(c) for c in cells if c.get("cell_type") == "markdown")
        else:
            text = page.read_text()
    except (OSError, ValueError):
        return {}
    return {label: title.strip() for label, title in LABEL.findall(text)}


def book_labels(chapters: dict[Path, int | None]) -> dict[str, tuple[Path, str]]:
    """label -> (the page that defines it, its heading) over the table of contents' pages."""
    labels: dict[str, tuple[Path, str]] = {}
    for nb in chapters:
        for page in (nb, nb.with_suffix(".md")):
            if page.is_file():
                for label, title in _labels_of(page, page.stat().st_mtime).items():
                    labels.setdefault(label, (page, title))
    return labels


def other_page_refs(nb: dict, here: Path, labels: dict[str, tuple[Path, str]]) -> dict[str, str]:
    """label -> a markdown link (relative to the notebook's folder ``here``) for every label of another page of
    the book: jupyterlab-myst knows only the open notebook's targets ("Cross reference target was not found")."""
    import os

    own = {label for c in nb.get("cells", []) if c.get("cell_type") == "markdown"
           for label, _ in LABEL.findall(_source(c))}
    return {label: os.path.relpath(page, here) for label, (page, _) in labels.items() if label not in own}


# ---------------------------------------------------------------- opening: what the page shows


def show_values(nb: dict, bib: Bibliography | None = None, figures: dict[str, str] | None = None,
                links: dict[str, tuple[str, str]] | None = None) -> int:
    """Replace glue roles (and, given a bibliography, figure numbers and other pages' labels, citations,
    same-chapter figure references and references to other pages) in markdown cells by what the HTML shows, in
    place; returns how many roles were replaced. ``links``: label -> (relative path, heading)."""
    values, count = glued_values(nb), 0

    def glue(m: re.Match) -> str:
        nonlocal count
        if m.group(1) not in values:
            return m.group(0)
        count += 1
        return _format(values[m.group(1)], m.group(2))

    def cite(m: re.Match) -> str:
        nonlocal count
        text = citation_text(m.group(1), m.group(2), bib or {})
        if text is None:
            return m.group(0)
        count += 1
        return text

    def numref(m: re.Match) -> str:
        nonlocal count
        if m.group(1) not in (figures or {}):
            return m.group(0)
        count += 1
        return figures[m.group(1)]

    def ref(m: re.Match) -> str:
        nonlocal count
        label = m.group(2) or m.group(3)
        if label not in (links or {}):
            return m.group(0)
        count += 1
        path, title = links[label]
        return f"[{m.group(1) or title}]({path.replace(' ', '%20')})"

    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        src = _source(cell)
        shown = REF.sub(ref, NUMREF.sub(numref, CITE.sub(cite, ROLE.sub(glue, src))))
        if shown != src:
            cell.setdefault("metadata", {})[META] = {"source": src, "shown": shown}
            cell["source"] = shown
    return count


def fold_hidden(nb: dict) -> int:
    """Collapse, in place, what the HTML hides (``FOLDS``); returns the number of cells folded."""
    folded = 0
    for cell in nb.get("cells", []):
        meta = cell.setdefault("metadata", {})
        fields = {f for tag in meta.get("tags") or [] for f in FOLDS.get(tag, ())}
        if fields:
            jupyter = meta.setdefault("jupyter", {})
            for f in sorted(fields):
                jupyter[f] = True
            folded += 1
    return folded


def kernel_metadata(nb: dict, display_name: str | None, language: str | None) -> None:
    """Set, in place, the kernelspec's display name and language and (for Python) the language version to what
    the kernel JupyterLab starts for this notebook will report, so starting it changes nothing."""
    spec = (nb.get("metadata") or {}).get("kernelspec")
    if not isinstance(spec, dict):
        return
    if display_name:
        spec["display_name"] = display_name
    if language:
        spec["language"] = language
    info = nb["metadata"].get("language_info")
    if isinstance(info, dict) and info.get("name") == "python" and spec.get("language") == "python":
        info["version"] = platform.python_version()


# ---------------------------------------------------------------- saving: the file's own fields back


def restore(nb: dict, stored: dict | None = None) -> None:
    """Undo, in place, what opening changed (before saving). ``stored``: the notebook as the file holds it now
    (or None for a new file), whose kernel metadata and static slider outputs are kept."""
    for cell in nb.get("cells", []):
        meta = cell.get("metadata") or {}
        shown = meta.pop(META, None)
        if shown and _source(cell) == shown.get("shown"):
            cell["source"] = shown["source"]
        fields = {f for tag in meta.get("tags") or [] for f in FOLDS.get(tag, ())}
        jupyter = meta.get("jupyter")
        if fields and isinstance(jupyter, dict):
            for f in fields:
                jupyter.pop(f, None)
            if not jupyter:
                meta.pop("jupyter")
    if stored is None:
        return
    old_meta, new_meta = stored.get("metadata") or {}, nb.setdefault("metadata", {})
    same_kernel = (old_meta.get("kernelspec") or {}).get("name") == (new_meta.get("kernelspec") or {}).get("name")
    if same_kernel:
        for key in ("kernelspec", "language_info"):
            if key in old_meta:
                new_meta[key] = old_meta[key]
    keep_static_figures(nb, stored)


def _has_widget(outputs: list) -> bool:
    return any(WIDGET_VIEW in (o.get("data") or {}) for o in outputs or [])


def keep_static_figures(nb: dict, stored: dict) -> int:
    """A code cell whose outputs hold a live widget (``explore``'s slider run in JupyterLab) gets back the
    outputs the file stored (the panel grid and the frames the HTML's slider shows), provided its code is the
    stored code and the file stored outputs for it; the notebook's saved widget state goes too. In place;
    returns the number of cells kept."""
    old = {c.get("id"): c for c in stored.get("cells", []) if c.get("cell_type") == "code" and c.get("id")}
    kept = 0
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code" or not _has_widget(cell.get("outputs")):
            continue
        before = old.get(cell.get("id"))
        if (before is not None and _source(before) == _source(cell) and before.get("outputs")
                and not _has_widget(before.get("outputs"))):
            cell["outputs"] = before.get("outputs", [])
            kept += 1
    if kept and not any(_has_widget(c.get("outputs")) for c in nb.get("cells", [])):
        (nb.get("metadata") or {}).pop("widgets", None)
    return kept


def widget_references(nb: dict) -> list[str]:
    """The ids of the code cells whose stored outputs are live-widget references, not a figure: a chapter saved
    with one shows an empty box in the book (a check for ``tools/chapters.py`` and the tests)."""
    return [str(c.get("id")) for c in nb.get("cells", []) if c.get("cell_type") == "code"
            and _has_widget(c.get("outputs"))]


class BookContentsManager(AsyncLargeFileManager):
    """The default contents manager; a notebook opens as the book's page shows it and saves as it was stored."""

    def _kernel_spec(self, name: str) -> tuple[str | None, str | None]:
        try:
            from jupyter_client.kernelspec import KernelSpecManager

            manager = getattr(self.parent, "kernel_spec_manager", None) or KernelSpecManager()
            spec = manager.get_kernel_spec(name)
            return spec.display_name, spec.language
        except Exception:  # noqa: BLE001 - an unknown kernel: JupyterLab asks the reader which one
            return None, None

    async def get(self, path, content=True, type=None, format=None, **kwargs):  # noqa: A002, ANN001, ANN201
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        nb = model.get("content") if content and model.get("type") == "notebook" else None
        if nb is not None:
            file = Path(self._get_os_path(path))
            root = Path(self.root_dir).resolve()
            bib = _find_up(file.parent, "references.bib", root)
            toc = _find_up(file.parent, "_toc.yml", root)
            chapters = toc_chapters(toc) if toc else {}
            chapter = chapters.get(file.resolve())
            labels = book_labels(chapters)
            links = {label: (path, labels[label][1]) for label, path in
                     other_page_refs(nb, file.resolve().parent, labels).items()}
            show_values(nb, _bibliography(bib, bib.stat().st_mtime) if bib else {}, figure_numbers(nb, chapter),
                        links)
            fold_hidden(nb)
            if file.resolve() in chapters:
                # the book's own chapter: its stored figures (SVG) are shown, as the book shows them; an
                # untrusted notebook would show "<Figure size 640x480 with 1 Axes>" in their place
                self.notary.mark_cells(nb, True)
            name = ((nb.get("metadata") or {}).get("kernelspec") or {}).get("name")
            if name:
                kernel_metadata(nb, *self._kernel_spec(name))
        return model

    async def save(self, model, path=""):  # noqa: ANN001, ANN201
        if model.get("type") == "notebook" and model.get("content") is not None:
            stored = None
            if await self.file_exists(path):
                try:
                    stored = (await super().get(path, content=True, type="notebook"))["content"]
                except Exception:  # noqa: BLE001 - an unreadable file is overwritten, as without this class
                    stored = None
            restore(model["content"], stored)
        return await super().save(model, path)
