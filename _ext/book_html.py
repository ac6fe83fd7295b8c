"""A small Sphinx extension for the book's HTML.

- **Every ``<script>`` once.** Jupyter Book 1.x sets up sphinx-thebe in a way that adds its inline configuration
  script (``const THEBE_JS_URL = ...``) twice to every page, and the browser rejects the second ``const``
  declaration with a console error on every page. This extension drops exact duplicates from a page's scripts
  before the page is rendered; the browser tests fail on any console error.
- **The PDF's own files stay out of the web pages.** Jupyter Book links every ``.css`` and ``.js`` under
  ``_static/`` into every page; the print styles and the layout script of ``make pdf`` (``_static/pdf/``) are
  left out (``tools/build_pdf.py`` loads them itself).
- **The PDF, when built.** ``make pdf`` writes ``_build/pdf/book.pdf``; when it exists, the HTML build copies it
  into the site and the front page links to it.
- **The single-page build works** (``make pdf`` prints it): sphinx-jupyterbook-latex marks table-of-contents
  nodes with a ``HiddenCellNode`` that only its LaTeX writer knows; the HTML writers skip it here.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


def _dedupe_scripts(app, pagename: str, templatename: str, context: dict[str, Any], doctree) -> None:  # noqa: ANN001
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple] = set()
    unique = []
    for js in scripts:  # the same file with the same attributes, whatever its priority, is loaded once
        key = (str(getattr(js, "filename", js) or ""), tuple(sorted(getattr(js, "attributes", {}).items())))
        if key in seen:
            continue
        seen.add(key)
        unique.append(js)
    context["script_files"] = unique


PDF_ASSETS = "pdf/"  # under _static/: the PDF's print styles and layout script


def _drop_pdf_assets(app, config) -> None:  # noqa: ANN001
    for name in ("html_css_files", "html_js_files"):
        kept = [f for f in getattr(config, name) if not str(f[0] if isinstance(f, tuple) else f).startswith(PDF_ASSETS)]
        setattr(config, name, kept)


def _pdf(app) -> Path:  # noqa: ANN001
    return Path(app.srcdir) / "_build" / "pdf" / "book.pdf"


def _link_pdf(app, pagename: str, templatename: str, context: dict[str, Any], doctree) -> None:  # noqa: ANN001
    if app.builder.name == "html" and pagename == app.config.root_doc and _pdf(app).is_file() and "body" in context:
        context["body"] = ('<p class="book-pdf"><a class="reference external" href="book.pdf">Download the whole '
                           "book as one PDF</a></p>\n" + context["body"])


def _copy_pdf(app, exc) -> None:  # noqa: ANN001
    if exc is None and app.builder.name == "html" and _pdf(app).is_file():
        shutil.copy(_pdf(app), Path(app.outdir) / "book.pdf")


def _skip(self, node) -> None:  # noqa: ANN001
    from docutils import nodes

    raise nodes.SkipNode


def _html_handlers_for_singlehtml(app) -> None:  # noqa: ANN001
    """Give the single-page writer the HTML writer's node handlers, and a skip for ``HiddenCellNode``."""
    try:
        from sphinx_jupyterbook_latex.nodes import HiddenCellNode
    except ImportError:
        HiddenCellNode = None  # noqa: N806
    handlers = app.registry.translation_handlers
    if HiddenCellNode is not None:
        handlers.setdefault("html", {}).setdefault(HiddenCellNode.__name__, (_skip, None))
    if app.builder.name == "singlehtml":
        # Sphinx looks up handlers by builder name first and falls back to the format ("html") only when the
        # name has none: merge, so that both the extensions' HTML handlers and any single-page ones apply.
        handlers["singlehtml"] = {**handlers.get("html", {}), **handlers.get("singlehtml", {})}


def setup(app) -> dict[str, Any]:  # noqa: ANN001
    app.connect("config-inited", _drop_pdf_assets)
    app.connect("html-page-context", _dedupe_scripts, priority=900)  # after the themes have added theirs
    app.connect("builder-inited", _html_handlers_for_singlehtml)
    app.connect("html-page-context", _link_pdf)
    app.connect("build-finished", _copy_pdf)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
