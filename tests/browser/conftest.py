"""Fixtures for the browser tests: the built book served on 127.0.0.1 and Debian's Chromium driven by Playwright.

Every test under ``tests/browser/`` is marked ``browser`` automatically: the test command runs
``pytest tests -m "not browser"`` before the book is built and ``pytest tests/browser -m browser`` after.

Fixtures other tests use:

- ``site_url`` (session): ``"http://127.0.0.1:PORT/"``, serving ``_build/html`` (or ``$BOOK_HTML``). Fails
  with a clear message when the book is not built.
- ``page`` (function): a fresh Playwright page. Every request to a host other than the one serving the book
  is aborted (the book must work offline) and recorded; the test fails if there was any. Uncaught page
  errors, console errors and HTTP errors (status >= 400, except the browser's own /favicon.ico probe) are
  recorded in ``page.book_errors`` (a list of str) for the test to judge; requests to other hosts in
  ``page.book_off_host_requests``.
- ``site_pages`` (session): the relative paths of every HTML page of the built book.
- ``artifacts_dir`` (session): ``test-artifacts/`` (git-ignored), for screenshots and the like.
- Parametrization: a test that takes an argument ``book_page`` runs once per HTML page of the book, one that
  takes ``book_chapter`` once per page under ``chapters/`` (relative paths, e.g. ``chapters/softmax.html``), and
  one that takes ``book_other_page`` once per page that is not a chapter.

A book-wide budget: tests record ``(BUDGET_KEY, {"numbered": n, "scrolling": [...]})`` with ``record_property``
(test_layout.py does, per chapter at phone width); after the session (on the xdist controller, which receives
every report) more than ``page_checks.MAX_SCROLLING_NUMBERED_ON_PHONE`` scrolling numbered equations, or none
numbered at all, fail the session with a message naming them.

Chromium: ``$CHROMIUM``, else ``chromium`` or ``chromium-browser`` on the PATH (``tools/setup.sh --test``
installs Debian's chromium when none is found); Playwright's
own browser download is never used.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from page_checks import BUDGET_KEY, budget_verdict

ROOT = Path(__file__).resolve().parents[2]
HTML_DIR = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html")).resolve()
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = (os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            or "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Schemes that never leave the page: not requests to another host.
LOCAL_SCHEMES = {"data", "blob", "about", "chrome-extension"}


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m deselection runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.browser)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    pages = html_pages() if (HTML_DIR / "index.html").exists() else []
    chapters = [p for p in pages if p.startswith("chapters/")]
    others = [p for p in pages if not p.startswith("chapters/")]
    for name, chosen in (("book_page", pages), ("book_chapter", chapters), ("book_other_page", others)):
        if name in metafunc.fixturenames:
            # Not built (or no chapters): one case that fails in site_pages with a clear message.
            metafunc.parametrize(name, chosen or [f"<no {name} in {HTML_DIR}>"])


_budget: dict[str, list] = {"numbered": [], "scrolling": []}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for key, value in report.user_properties:
        if key == BUDGET_KEY:
            _budget["numbered"].append(value["numbered"])
            _budget["scrolling"].extend(value["scrolling"])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller sees every report
        return
    why = budget_verdict(_budget["numbered"], _budget["scrolling"])
    if why:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("=", "FAILED: the book-wide budget of numbered equations at 390 px", red=True)
            reporter.write_line(why, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def html_pages(html_dir: Path = HTML_DIR) -> list[str]:
    """Every HTML page of the built book, as paths relative to ``html_dir`` (sorted)."""
    skip = {"_static", "_sources", "_images", "jupyter_execute", "_sphinx_design_static"}
    return sorted(
        p.relative_to(html_dir).as_posix()
        for p in html_dir.rglob("*.html")
        if not skip.intersection(p.relative_to(html_dir).parts)
    )


def _require_built() -> None:
    if not (HTML_DIR / "index.html").exists():
        pytest.fail(
            f"the book is not built: {HTML_DIR / 'index.html'} does not exist. Run `make book` "
            "(or `.venv/bin/python tools/build_book.py`) before the browser tests.",
            pytrace=False,
        )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".woff": "font/woff",
        ".woff2": "font/woff2",
        ".js": "text/javascript",
        ".ipynb": "application/x-ipynb+json",
    }

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="session")
def site_url() -> Iterator[str]:
    """Base URL (ending in "/") of the built book, served by a local HTTP server on 127.0.0.1."""
    _require_built()
    handler = functools.partial(_QuietHandler, directory=str(HTML_DIR))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def site_pages() -> list[str]:
    """Relative paths of every HTML page of the built book."""
    _require_built()
    pages = html_pages()
    if not any(p.startswith("chapters/") for p in pages):
        pytest.fail(f"the built book in {HTML_DIR} has no chapter pages (chapters/*.html)", pytrace=False)
    return pages


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """``test-artifacts/`` at the repository root (git-ignored), created on demand."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def browser_context(site_url: str) -> Iterator[object]:
    """One headless Chromium (a fresh user-data-dir) for the session."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: run `bash tools/setup.sh --test` (it apt-installs Debian's "
            "chromium) or set $CHROMIUM to its path",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    user_data = tempfile.mkdtemp(prefix="book-chromium-")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            user_data,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
            service_workers="block",
        )
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(user_data, ignore_errors=True)


@pytest.fixture
def page(browser_context, site_url: str) -> Iterator[object]:
    """A fresh page that aborts (and fails the test on) any request to a host other than the book's."""
    origin = urlsplit(site_url).netloc
    off_host: list[str] = []
    errors: list[str] = []

    def route(r) -> None:  # noqa: ANN001 - a Playwright Route
        url = r.request.url
        parts = urlsplit(url)
        if parts.scheme in LOCAL_SCHEMES or parts.netloc == origin:
            r.continue_()
        else:
            off_host.append(url)
            r.abort()

    pg = browser_context.new_page()
    pg.route("**/*", route)
    pg.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))

    def on_console(msg) -> None:  # noqa: ANN001 - a Playwright ConsoleMessage
        # "Failed to load resource" names no URL; HTTP failures are recorded with their URL by on_response.
        if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
            errors.append(f"console.error: {msg.text}")

    def on_response(resp) -> None:  # noqa: ANN001 - a Playwright Response
        if resp.status >= 400 and urlsplit(resp.url).path != "/favicon.ico":
            errors.append(f"http {resp.status}: {resp.url}")

    pg.on("console", on_console)
    pg.on("response", on_response)
    pg.on("requestfailed", lambda req: errors.append(f"requestfailed: {req.url} ({req.failure})")
          if urlsplit(req.url).netloc == origin else None)
    pg.book_errors = errors
    pg.book_off_host_requests = off_host
    try:
        yield pg
    finally:
        pg.close()
    if off_host:
        pytest.fail(f"the page requested {len(off_host)} URL(s) on other hosts (the book must work offline): "
                    + ", ".join(sorted(set(off_host))[:10]))
