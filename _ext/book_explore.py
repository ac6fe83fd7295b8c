"""Sliders in the HTML without a kernel: the frames that ``lib.book.widgets.explore`` stored, shown one at a time.

A static :func:`lib.book.widgets.explore` output is the panel grid (``image/png``) with the slider's frames in
the output's metadata (``book_explore``: the parameter's name, the stops' labels, the default stop and one PNG
per stop, all drawn by the chapter's own drawing function when the chapter was executed). For the HTML
builders this extension renders such an output as

    <div class="book-explore">           the slider's box
      <div class="book-explore-control" data-name=... data-labels=[...] data-default=i></div>
      <img class="book-explore-grid">    the panel grid: shown without JavaScript and in print
      <img class="book-explore-frame">   one per stop, written to _images like any output image
      ...

and ``_static/explore.js`` (registered in ``_config.yml``) puts a range input into the control that shows the
chosen frame and hides the others: no arithmetic on the data, no network. ``_static/explore.css`` shows the
grid instead of the slider when printing. The single-page build (the PDF) and non-HTML builders render the
grid alone, as before.

myst-nb calls :meth:`NbElementRenderer.render_image` for every image output; this extension wraps that method.

A stored output that is a live ipywidgets reference (``application/vnd.jupyter.widget-view+json``: what a chapter
run in JupyterLab holds where ``explore``'s slider was, if saved without the book's JupyterLab settings) stops
the build with the chapter's name: myst-nb would render it as an empty box, and the book would lose the figure.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from typing import Any

METADATA_KEY = "book_explore"  # lib.book.widgets.METADATA_KEY (this extension does not import lib)
SLIDER_BUILDERS = {"html", "dirhtml"}


def _builder_name(renderer) -> str | None:  # noqa: ANN001 - myst-nb's element renderer
    env = getattr(renderer.renderer, "sphinx_env", None)
    app = getattr(env, "app", None)
    return getattr(getattr(app, "builder", None), "name", None)


def _render_explore(self, data, original):  # noqa: ANN001, ANN202
    from docutils import nodes

    grid = original(self, data)
    meta = data.output_metadata.get(METADATA_KEY)
    if not isinstance(meta, dict) or _builder_name(self) not in SLIDER_BUILDERS:
        return grid
    name, labels, frames = str(meta["name"]), [str(x) for x in meta["labels"]], list(meta["frames"])
    default = int(meta.get("default", 0))
    if not frames or len(frames) != len(labels) or not 0 <= default < len(frames):
        self.logger.warning(f"explore output with {len(frames)} frames and {len(labels)} labels: grid only",
                            subtype="explore", line=data.line)
        return grid
    box = nodes.container(classes=["book-explore"])
    control = (f'<div class="book-explore-control" data-name="{html.escape(name)}" '
               f'data-labels="{html.escape(json.dumps(labels))}" data-default="{default}"></div>')
    box += nodes.raw("", control, format="html")
    for node in grid:
        node["classes"] = [*node.get("classes", []), "book-explore-grid"]
        box += node
    for label, frame in zip(labels, frames, strict=True):
        png = base64.b64decode(frame)
        uri = self.write_file([f"{hashlib.sha256(png).hexdigest()}.png"], png, overwrite=False, exists_ok=True)
        box += nodes.image(uri=uri, alt=f"{name} = {label}", classes=["book-explore-frame"])
    return [box]


def _wrap_render_image() -> None:
    from myst_nb.core.render import NbElementRenderer

    original = NbElementRenderer.render_image
    if getattr(original, "_book_explore", False):
        return

    def render_image(self, data):  # noqa: ANN001, ANN202
        return _render_explore(self, data, original)

    render_image._book_explore = True  # type: ignore[attr-defined]
    NbElementRenderer.render_image = render_image


def _refuse_widget_views() -> None:
    from myst_nb.core.render import NbElementRenderer
    from sphinx.errors import ExtensionError

    for method in ("render_widget_view", "render_widget_view_inline"):
        original = getattr(NbElementRenderer, method, None)
        if original is None or getattr(original, "_book_explore", False):
            continue

        def refuse(self, data, _method=method):  # noqa: ANN001, ANN202
            document = getattr(self.renderer, "document", None)
            where = document.get("source") if document is not None else None
            raise ExtensionError(
                f"{where or 'a chapter'}: the stored output of cell {data.cell_index} (counted from 0) is a "
                "live ipywidgets reference, not a figure: the chapter was saved from a "
                "JupyterLab without the book's settings. Re-execute it (tools/chapters.py execute) or restore it.",
                modname=__name__)

        refuse._book_explore = True  # type: ignore[attr-defined]
        setattr(NbElementRenderer, method, refuse)


def setup(app) -> dict[str, Any]:  # noqa: ANN001
    _wrap_render_image()
    _refuse_widget_views()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
