"""Build the whole book as one PDF (``make pdf``): the single-page HTML build, printed by Chromium.

1. ``jupyter-book build --builder singlehtml`` renders every chapter, with its stored outputs (no execution: they
   are the outputs the tests check), into one HTML page.
2. That page is served on 127.0.0.1 and opened in the system Chromium (Playwright drives it; no browser is
   downloaded). Once MathJax has typeset every equation, Chromium prints it to ``_build/pdf/book.pdf`` (A4,
   page numbers in the footer). Nothing is requested from any other host: the book works offline.
3. When the HTML book exists (``make book``), it is rebuilt (fast: nothing is re-executed) so that it carries the
   PDF and its front page links to it (``_ext/book_html.py``).

Usage: ``python tools/build_pdf.py [--output PATH]``. Chromium: ``$CHROMIUM``, else ``chromium`` on the PATH.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import stored_outputs_config  # noqa: E402  (tools/ is not a package)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_build" / "pdf"
MATHJAX_TIMEOUT_MS = 300_000

# Print styles: the single page without the web page's navigation, each chapter on a new page.
PRINT_CSS = """
@page { size: A4; margin: 18mm 16mm 20mm 16mm; }
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer, .bd-footer-content, .header-article,
.prev-next-area, .bd-header-article, .sidebar-toggle, .theme-switch-button, .search-button,
#pst-skip-link, .bd-search { display: none !important; }
.bd-page-width, .bd-container, .bd-container__inner, .bd-main, .bd-content, .bd-article-container,
.bd-article { max-width: none !important; width: 100% !important; flex: 1 1 100% !important; margin: 0 !important;
  padding-left: 0 !important; padding-right: 0 !important; }
section[id] > h1 { break-before: page; }
figure, .cell_output img, table, mjx-container[display="true"] { break-inside: avoid; }
div.highlight pre { white-space: pre-wrap; }
details { display: block; }
"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise SystemExit("build_pdf: no Chromium found: set CHROMIUM=/path/to/chromium or put chromium on the PATH "
                         "(Debian: apt-get install chromium)")
    return found


def build_singlehtml(out: Path) -> Path:
    config = stored_outputs_config(ROOT, out / "_config.yml")
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "--builder", "singlehtml",
           "--path-output", str(out), "--config", str(config), "--all", "-q"]
    print("build_pdf: rendering the book as one HTML page (stored outputs, no execution)", flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, env=dict(os.environ, BOOK_WIDGETS="static"))
    page = out / "_build" / "singlehtml" / "intro.html"
    if not page.exists():
        raise SystemExit(f"build_pdf: the single-page build wrote no {page}")
    return page.parent


def print_pdf(site: Path, pdf: Path) -> None:
    from playwright.sync_api import sync_playwright

    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    off_host: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=_chromium(), args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"])
            page = browser.new_page()

            def route(r):  # noqa: ANN001 - a Playwright Route
                if r.request.url.startswith(base) or r.request.url.startswith(("data:", "blob:")):
                    return r.continue_()
                off_host.append(r.request.url)
                return r.abort()

            page.route("**/*", route)
            print("build_pdf: typesetting the math in Chromium", flush=True)
            page.goto(base + "intro.html", wait_until="load", timeout=MATHJAX_TIMEOUT_MS)  # the root page
            page.add_style_tag(content=PRINT_CSS)
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                   timeout=MATHJAX_TIMEOUT_MS)
            page.evaluate("() => MathJax.startup.promise")
            page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
            page.emulate_media(media="print")
            pdf.parent.mkdir(parents=True, exist_ok=True)
            page.pdf(path=str(pdf), format="A4", print_background=True, display_header_footer=True,
                     header_template="<span></span>",
                     footer_template='<div style="font-size:9px;width:100%;text-align:center;">'
                                     '<span class="pageNumber"></span> / <span class="totalPages"></span></div>',
                     margin={"top": "18mm", "bottom": "20mm", "left": "16mm", "right": "16mm"})
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    if off_host:
        raise SystemExit(f"build_pdf: the page asked for other hosts (blocked): {sorted(set(off_host))[:5]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", type=Path, default=OUT / "book.pdf", help="where to write the PDF")
    args = ap.parse_args(argv)
    site = build_singlehtml(OUT)
    print_pdf(site, args.output)
    print(f"build_pdf: the book is at {args.output}")
    if args.output.resolve() == (OUT / "book.pdf").resolve() and (ROOT / "_build" / "html" / "index.html").exists():
        print("build_pdf: rebuilding the HTML book so that its front page links to the PDF", flush=True)
        return subprocess.call([sys.executable, str(ROOT / "tools" / "build_book.py")], cwd=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
