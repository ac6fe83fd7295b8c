"""A small Sphinx extension for the book's HTML: every ``<script>`` once.

Jupyter Book 1.x sets up sphinx-thebe in a way that adds its inline configuration script (``const
THEBE_JS_URL = ...``) twice to every page, and the browser rejects the second ``const`` declaration with a
console error on every page. This extension drops exact duplicates from a page's scripts before the page is
rendered; the browser tests fail on any console error.
"""

from __future__ import annotations

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


def setup(app) -> dict[str, Any]:  # noqa: ANN001
    app.connect("html-page-context", _dedupe_scripts, priority=900)  # after the themes have added theirs
    return {"parallel_read_safe": True, "parallel_write_safe": True}
