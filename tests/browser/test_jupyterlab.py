"""A chapter read in a real JupyterLab: it runs top to bottom, its prose shows numbers and roles, its slider works.

The test starts ``jupyter lab`` on 127.0.0.1 with a token (the repository's ``.venv``; the book's settings,
``jupyter_config/jupyter_server_config.py``, which ``tools/setup.sh`` makes ``.venv/bin/jupyter lab`` load), on a
temporary copy of one chapter (so no autosave can touch the stored outputs), and opens it in the browser tests'
Chromium. Then:

- before running: the prose shows the glued numbers (no ``{glue:text}`` left) and jupyterlab-myst has rendered
  the MyST roles and directives (no raw ``{ref}``/``{eq}``/``{numref}``/``{cite:p}`` text, no raw fences);
- "Run All": every cell runs, no cell ends in an error;
- the chapter's ``explore`` slider (ipywidgets, since the kernel was started by a Jupyter server) redraws its
  figure when moved: the image changes.
"""

from __future__ import annotations

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
RAW_ROLES = re.compile(r"\{(?:glue|glue:text|ref|eq|numref|cite:p|cite:t|doc)\}`|^:::|^```\{", flags=re.M)
RUN_TIMEOUT_S = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> tuple[str, str]:
    """(base URL, token) of a JupyterLab serving a copy of the chapter; stopped after the module."""
    root = tmp_path_factory.mktemp("lab")
    (root / "chapters").mkdir()
    shutil.copy(ROOT / CHAPTER, root / CHAPTER)
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
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def lab_browser():
    """The browser tests' Chromium (``$CHROMIUM`` or the PATH's); this test needs no built book."""
    chromium = (os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
                or "/usr/bin/chromium")
    if not Path(chromium).exists():
        pytest.fail(f"Chromium not found at {chromium}: run `bash tools/setup.sh --test`", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            yield browser.new_context(viewport={"width": 1280, "height": 900})
        finally:
            browser.close()


@pytest.fixture
def lab_page(lab_browser, lab):
    """A browser page on the chapter in JupyterLab."""
    base, token = lab
    pg = lab_browser.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.goto(f"{base}lab/tree/{CHAPTER}?token={token}", wait_until="domcontentloaded")
    pg.wait_for_function("() => window.jupyterapp && jupyterapp.shell.currentWidget "
                         "&& jupyterapp.shell.currentWidget.context && jupyterapp.shell.currentWidget.context.isReady",
                         timeout=90_000)
    pg.book_errors = errors
    yield pg
    pg.close()


def _markdown_text(page) -> str:
    """The rendered text of every markdown cell (jupyterlab-myst renders them as ``.myst`` widgets)."""
    page.wait_for_function("() => document.querySelectorAll('.jp-MarkdownCell .myst').length > 5", timeout=60_000)
    page.evaluate("""async () => { const p = document.querySelector('.jp-WindowedPanel-outer');
        if (!p) return; for (let y = 0; y < p.scrollHeight; y += 600) { p.scrollTop = y;
        await new Promise(r => setTimeout(r, 20)); } p.scrollTop = 0; }""")
    return page.evaluate("() => Array.from(document.querySelectorAll('.jp-MarkdownCell .myst'))"
                         ".map(e => e.textContent).join('\\n')")


def test_chapter_in_jupyterlab(lab_page) -> None:
    page = lab_page
    t0 = time.monotonic()
    prose = _markdown_text(page)
    assert GLUED in prose, "the glued number is not shown in JupyterLab's prose"
    raw = sorted(set(RAW_ROLES.findall(prose)))
    assert not raw, f"raw MyST in JupyterLab's prose: {raw}"

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
    print(f"JupyterLab: prose checked, Run All and the slider in {time.monotonic() - t0:.0f} s")
