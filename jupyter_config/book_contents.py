"""JupyterLab shows the computed numbers where a chapter's prose glues them (``{glue:text}`name```).

myst-nb's ``glue`` stores a value as an output of the cell that computed it, and the book's HTML puts it into
the prose. JupyterLab's MyST renderer (``jupyterlab-myst``) evaluates ``{eval}`` roles but does not know glue
(jupyter-book/jupyterlab-myst#40), so a chapter opened in JupyterLab would show the role's raw text. This
contents manager is the fallback: when JupyterLab opens a notebook, each glue role in a markdown cell is
replaced by the value the notebook's stored outputs hold (formatted as the role asks: ``{glue:text}`n:,```),
the same value the HTML and the PDF show; the cell's original source is kept in its metadata
(``book_glue_source``) and put back when the notebook is saved, unless the reader edited that cell.

Enabled by ``jupyter_server_config.py`` beside this file, which ``tools/setup.sh`` makes ``.venv/bin/jupyter lab``
load; elsewhere ``jupyter lab --config jupyter_config/jupyter_server_config.py``.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

ROLE = re.compile(r"\{glue(?::(?:text|any|md))?\}`([^`:]+?)(?::([^`]*))?`")
META = "book_glue_source"
_RECORD = "application/papermill.record/"


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


def show_values(nb: dict) -> int:
    """Replace glue roles in markdown cells by their stored values, in place; returns how many were replaced."""
    values, count = glued_values(nb), 0

    def sub(m: re.Match) -> str:
        nonlocal count
        if m.group(1) not in values:
            return m.group(0)
        count += 1
        return _format(values[m.group(1)], m.group(2))

    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        src = _source(cell)
        shown = ROLE.sub(sub, src)
        if shown != src:
            cell.setdefault("metadata", {})[META] = {"source": src, "shown": shown}
            cell["source"] = shown
    return count


def restore(nb: dict) -> None:
    """Put back the glue roles of every cell the reader did not edit (before saving), in place."""
    for cell in nb.get("cells", []):
        meta = (cell.get("metadata") or {}).pop(META, None)
        if meta and _source(cell) == meta.get("shown"):
            cell["source"] = meta["source"]


class BookContentsManager(AsyncLargeFileManager):
    """The default contents manager, showing glued values in the prose of the notebooks it opens."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):  # noqa: A002, ANN001, ANN201
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if content and model.get("type") == "notebook" and model.get("content") is not None:
            show_values(model["content"])
        return model

    async def save(self, model, path=""):  # noqa: ANN001, ANN201
        if model.get("type") == "notebook" and model.get("content") is not None:
            restore(model["content"])
        return await super().save(model, path)
