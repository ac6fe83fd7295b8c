"""The chapters read in a real JupyterLab: opening one changes nothing, it shows what the page shows, it runs.

The tests start ``jupyter lab`` on 127.0.0.1 with a token (the repository's ``.venv``; the book's settings,
``jupyter_config/jupyter_server_config.py``, which ``tools/setup.sh`` makes ``.venv/bin/jupyter lab`` load) on a
temporary copy of the book's chapters (byte for byte the repository's, with ``_toc.yml`` and ``references.bib``),
with autosave every 2 s instead of 120 s, and drive it from the browser tests' Chromium:

- every chapter of the table of contents is opened (its kernel started, as a reader's is) and left past three
  autosave intervals: none is marked changed, every file is byte-identical afterwards, and each cell the HTML
  hides (tags ``remove-cell``, ``remove-input``, ``hide-input``...) is collapsed in JupyterLab's own cell state;
- softmax, before running: the prose shows the glued numbers (no ``{glue:text}`` left), the citations as the
  HTML writes them, and jupyterlab-myst has rendered the MyST roles and directives (no raw
  ``{ref}``/``{eq}``/``{numref}``/``{cite:p}`` text, no raw fences, no "Citation Not Found");
- "Run All": every cell runs, no cell ends in an error;
- the chapter's ``explore`` slider (ipywidgets, since the kernel was started by a Jupyter server) redraws its
  figure when moved: the image changes;
- saved after all that, the chapter still holds the stored static figure and frames where the live slider was
  (no widget reference the book would render as an empty box);
- and, against the built book (no JupyterLab needed): every citation and same-chapter figure reference the
  contents manager writes reads as the HTML writes it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "chapters/softmax.ipynb"  # prose with glued numbers and roles, and a slider
GLUED = "11.0859"  # a number the chapter glues into its prose (exp_edge_f16)
CITED = r"\[Dao *et al.*, 2022\]"  # a citation as the HTML writes it, in markdown
RAW_ROLES = re.compile(r"\{(?:glue|glue:text|ref|eq|numref|cite:p|cite:t|doc)\}`|^:::|^```\{", flags=re.M)
RUN_TIMEOUT_S = 180
AUTOSAVE_S = 2  # JupyterLab's default is 120 s
SETTINGS = {  # JupyterLab's user settings for the test: autosave soon, no news pop-up over the notebook
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosaveInterval": AUTOSAVE_S},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
}
HIDING = {"remove-cell": (True, True), "hide-cell": (True, True), "remove-input": (True, None),
          "hide-input": (True, None), "remove-output": (None, True), "hide-output": (None, True)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> tuple[str, str]:
    """(base URL, token, root) of a JupyterLab serving a copy of the chapters; stopped after the module."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "chapters", root / "chapters", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("_toc.yml", "references.bib"):
        shutil.copy(ROOT / name, root / name)
    for name, values in SETTINGS.items():
        (root / ".settings" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / ".settings" / name).write_text(json.dumps(values))
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               JUPYTERLAB_SETTINGS_DIR=str(root / ".settings"), JUPYTERLAB_WORKSPACES_DIR=str(root / ".ws"),
               JUPYTER_RUNTIME_DIR=str(root / ".runtime"))
    env.pop("BOOK_WIDGETS", None)  # the kernel decides: started by a server, so interactive
    log = open(root / "lab.log", "w")  # noqa: SIM115 - closed after the server stops
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter-lab"), "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         f"--config={ROOT / 'jupyter_config' / 'jupyter_server_config.py'}",
         "--LabApp.expose_app_in_browser=True", "--ServerApp.open_browser=False", "--allow-root"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}api/status?token={token}", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{(root / 'lab.log').read_text()[-3000:]}",
                                pytrace=False)
                time.sleep(0.5)
        yield base, token, root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def lab_browser(browser_context):
    """The browser tests' session Chromium (conftest.py's ``browser_context``): Playwright's sync API runs one
    instance per process, so a second one started here fails in a worker that already ran another browser test
    ("using Playwright Sync API inside the asyncio loop")."""
    return browser_context


@pytest.fixture
def lab_page(lab_browser, lab):
    """A browser page on the chapter in JupyterLab."""
    base, token, _ = lab
    pg = lab_browser.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.goto(f"{base}lab/tree/{CHAPTER}?token={token}&reset", wait_until="domcontentloaded")
    pg.wait_for_function("() => window.jupyterapp && jupyterapp.shell.currentWidget "
                         "&& jupyterapp.shell.currentWidget.context && jupyterapp.shell.currentWidget.context.isReady",
                         timeout=90_000)
    pg.book_errors = errors
    yield pg
    pg.close()


def _toc_notebooks() -> list[str]:
    """The chapters of the table of contents that are notebooks, as paths relative to the repository."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [f"{c['file']}.ipynb" for part in toc["parts"] for c in part["chapters"]]
    return [f for f in files if (ROOT / f).exists()]


_OPEN_STATE = """() => Array.from(jupyterapp.shell.widgets('main'))
    .filter(w => w.context && w.content && w.content.widgets)
    .map(w => ({path: w.context.path, ready: w.context.isReady, dirty: w.context.model.dirty,
                kernel: w.sessionContext.session && w.sessionContext.session.kernel
                        ? w.sessionContext.session.kernel.status : null,
                cells: w.content.widgets.map(c => ({tags: c.model.getMetadata('tags') || [], type: c.model.type,
                                                    input: c.inputHidden, output: !!c.outputHidden}))}))"""


def test_opening_a_chapter_changes_nothing_and_folds_hidden_cells(lab_browser, lab) -> None:
    """Every chapter opened, its kernel started and left past three autosave intervals: no file changes, and the
    cells the HTML hides are collapsed. Then one edit, to show that autosave was on and would have written."""
    base, token, root = lab
    chapters = _toc_notebooks()
    assert len(chapters) >= 10, chapters
    before = {c: (root / c).read_bytes() for c in chapters}
    assert before == {c: (ROOT / c).read_bytes() for c in chapters}, "the copies are not the chapters"
    t0 = time.monotonic()
    pg = lab_browser.new_page()
    try:
        pg.goto(f"{base}lab?token={token}", wait_until="domcontentloaded")
        pg.wait_for_function("() => window.jupyterapp", timeout=90_000)
        pg.evaluate("async () => { await jupyterapp.started; await jupyterapp.restored; }")
        for c in chapters:
            pg.evaluate("async p => { await jupyterapp.commands.execute('docmanager:open', {path: p}); }", c)
        pg.wait_for_function(f"() => {{ const s = ({_OPEN_STATE})(); return s.length === {len(chapters)} && "
                             "s.every(w => w.ready && w.kernel === 'idle'); }", timeout=240_000)
        time.sleep(3 * AUTOSAVE_S + 1)
        state = pg.evaluate(_OPEN_STATE)
        assert sorted(w["path"] for w in state) == sorted(chapters)
        dirty = [w["path"] for w in state if w["dirty"]]
        assert not dirty, f"opening marked these chapters changed (autosave rewrites them): {dirty}"
        changed = [c for c in chapters if (root / c).read_bytes() != before[c]]
        assert not changed, f"opening rewrote these chapters: {changed}"
        wrong, folded = [], 0
        for w in state:
            for i, cell in enumerate(w["cells"]):
                hides = [HIDING[t] for t in cell["tags"] if t in HIDING]
                want_in = any(h[0] for h in hides)
                want_out = cell["type"] == "code" and any(h[1] for h in hides)
                got_out = cell["output"] if cell["type"] == "code" else False
                if (cell["input"], got_out) != (want_in, want_out):
                    wrong.append(f"{w['path']} cell {i} {cell['tags']}: input hidden {cell['input']}, "
                                 f"output hidden {got_out}")
                folded += want_in
        assert not wrong, "cells folded unlike the HTML:\n" + "\n".join(wrong[:10])
        assert folded > 100, f"only {folded} cells folded: the chapters hide more than that"

        # the control: an edit is saved within the interval, so the silence above was autosave finding nothing
        probe = chapters[-1]
        pg.evaluate("""p => { const w = Array.from(jupyterapp.shell.widgets('main'))
                            .find(w => w.context && w.context.path === p);
                            w.context.model.setMetadata('book_autosave_probe', 1); }""", probe)
        deadline = time.monotonic() + 10 * AUTOSAVE_S
        while (root / probe).read_bytes() == before[probe] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert (root / probe).read_bytes() != before[probe], "autosave never wrote: the test proves nothing"
        pg.evaluate("async () => { await jupyterapp.commands.execute('application:close-all'); "
                    "await jupyterapp.serviceManager.sessions.shutdownAll(); }")
    finally:
        pg.close()
    print(f"JupyterLab: {len(chapters)} chapters opened, none changed, {folded} cells folded, "
          f"in {time.monotonic() - t0:.0f} s")


def _markdown_text(page) -> str:
    """The rendered text of every markdown cell (jupyterlab-myst renders them as ``.myst`` widgets)."""
    page.wait_for_function("() => document.querySelectorAll('.jp-MarkdownCell .myst').length > 5", timeout=60_000)
    page.evaluate("""async () => { const p = document.querySelector('.jp-WindowedPanel-outer');
        if (!p) return; for (let y = 0; y < p.scrollHeight; y += 600) { p.scrollTop = y;
        await new Promise(r => setTimeout(r, 20)); } p.scrollTop = 0; }""")
    return page.evaluate("() => Array.from(document.querySelectorAll('.jp-MarkdownCell .myst'))"
                         ".map(e => e.textContent).join('\\n')")


def test_chapter_in_jupyterlab(lab_page, lab) -> None:
    page = lab_page
    t0 = time.monotonic()
    _, _, root = lab
    stored = json.loads((root / CHAPTER).read_text())
    prose = _markdown_text(page)
    assert GLUED in prose, "the glued number is not shown in JupyterLab's prose"
    source = page.evaluate("() => jupyterapp.shell.currentWidget.context.model.toJSON().cells"
                           ".filter(c => c.cell_type === 'markdown')"
                           ".map(c => [].concat(c.source).join('')).join('\\n')")
    assert CITED in source, "the citation is not given to JupyterLab as the HTML shows it"
    raw = sorted(set(RAW_ROLES.findall(prose)))
    assert not raw, f"raw MyST in JupyterLab's prose: {raw}"
    assert "Citation Not Found" not in prose

    # no autosave from here: outputs are cleared below, which is no state the chapter should ever be saved in
    autosave = page.evaluate("() => jupyterapp.commands.isToggled('docmanager:toggle-autosave')")
    if autosave:
        page.evaluate("() => jupyterapp.commands.execute('docmanager:toggle-autosave')")

    # outputs and execution counts cleared first, so that "every cell has run" cannot be the stored state
    page.evaluate("() => jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    page.wait_for_function("() => jupyterapp.shell.currentWidget.context.model.toJSON().cells"
                           ".every(c => c.cell_type !== 'code' || c.execution_count === null)", timeout=30_000)
    page.evaluate("() => jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        """() => { const nb = jupyterapp.shell.currentWidget;
                   const cells = nb.context.model.toJSON().cells.filter(c => c.cell_type === 'code');
                   const busy = nb.sessionContext.session && nb.sessionContext.session.kernel &&
                                nb.sessionContext.session.kernel.status !== 'idle';
                   return !busy && cells.every(c => c.execution_count !== null) &&
                          document.querySelectorAll('.jp-InputPrompt').length > 0 &&
                          !Array.from(document.querySelectorAll('.jp-InputPrompt'))
                               .some(p => p.textContent.includes('*')); }""",
        timeout=RUN_TIMEOUT_S * 1000)
    errors = page.evaluate(
        """() => jupyterapp.shell.currentWidget.context.model.toJSON().cells
              .flatMap(c => (c.outputs || []).filter(o => o.output_type === 'error')
              .map(o => o.ename + ': ' + o.evalue))""")
    assert not errors, f"cells ended in errors after Run All: {errors}"

    slider = page.locator(".widget-slider, .jupyter-widgets.widget-hslider").first
    slider.scroll_into_view_if_needed()
    box = slider.locator("xpath=ancestor::div[contains(@class,'jp-OutputArea-output')][1]")
    image = box.locator("img").first
    image.wait_for(timeout=30_000)
    before = image.get_attribute("src")
    handle = slider.locator(".noUi-handle, [role=slider]").first
    handle.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "([el, src]) => { const img = el.querySelector('img'); return img && img.getAttribute('src') !== src; }",
        arg=[box.element_handle(), before], timeout=30_000)
    assert not [e for e in page.book_errors if "widget" in e.lower()], page.book_errors

    # saved now, the file keeps the static figure and frames where the live slider was
    page.evaluate("() => jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    saved = json.loads((root / CHAPTER).read_text())
    widgets = [c["id"] for c in saved["cells"] if any(
        "application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in c.get("outputs", []))]
    assert not widgets, f"saved with live-widget references in place of the figures: cells {widgets}"
    sliders = {c["id"]: c["outputs"] for c in stored["cells"] if any(
        "book_explore" in o.get("metadata", {}) for o in c.get("outputs", []))}
    assert sliders
    assert {c["id"]: c["outputs"] for c in saved["cells"] if c["id"] in sliders} == sliders
    assert "widgets" not in saved["metadata"]
    assert saved["metadata"]["kernelspec"] == stored["metadata"]["kernelspec"]
    print(f"JupyterLab: prose checked, Run All and the slider in {time.monotonic() - t0:.0f} s")


def test_citations_and_figure_numbers_read_as_in_the_html(site_pages) -> None:
    """What the contents manager writes for ``{cite:p}``, ``{cite:t}`` and a same-chapter ``{numref}`` of a
    figure is the text the built HTML shows there (the book the other browser tests read)."""
    html_dir = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html")).resolve()  # as conftest.py reads it
    sys.path.insert(0, str(ROOT / "jupyter_config"))
    import book_contents as bc

    bib = bc._bibliography(ROOT / "references.bib", 0.0)
    chapters = {p: n for p, n in bc.toc_chapters(ROOT / "_toc.yml").items() if p.exists()}
    compared = 0
    for path, number in chapters.items():
        html = (html_dir / "chapters" / f"{path.stem}.html").read_text()
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).replace("\xa0", " ")
        nb = json.loads(path.read_text())
        prose = "".join(bc._source(c) for c in nb["cells"] if c["cell_type"] == "markdown")
        for m in bc.CITE.finditer(prose):
            shown = bc.citation_text(m.group(1), m.group(2), bib)
            assert shown is not None, f"{path.stem}: {m.group(0)} is not in references.bib"
            plain = shown.replace("\\[", "[").replace("\\]", "]").replace("*", "")
            assert plain in text, f"{path.stem}: {m.group(0)} shows as {plain!r} in JupyterLab, not in the HTML"
            compared += 1
        numbers = bc.figure_numbers(nb, number)
        for m in re.finditer(r'href="#([^"]+)"><span class="std std-numref">([^<]+)</span>', html):
            if m.group(1) in numbers:
                assert numbers[m.group(1)] == m.group(2).replace("\xa0", " "), (path.stem, m.group(1))
                compared += 1
    assert compared > 100, f"only {compared} citations and figure references compared"
