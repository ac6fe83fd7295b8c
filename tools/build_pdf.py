"""Build the whole book as one PDF (``make pdf``): the single-page HTML build, laid out as a book, printed by Chromium.

1. ``jupyter-book build --builder singlehtml`` renders every chapter, with its stored outputs (no execution: they
   are the outputs the tests check, and the ones the HTML book shows), into one HTML page. Sliders
   (``lib.book.widgets.explore``) appear as their static panel grid.
2. That page is served on 127.0.0.1 and opened in the system Chromium (Playwright drives it; no browser is
   downloaded). Once MathJax has typeset every equation, a script turns the web page into a book's body: the
   site's navigation, buttons and "Show/Hide code cell" labels are removed, a cell tagged ``hide-input`` prints
   its output only, every other collapsed cell is opened, empty frames are dropped, a code or output box of up
   to 12 lines never splits across pages and a longer one splits between its lines (so no page ends with an
   empty frame), code and output lines wrap with a hanging indent that keeps their
   indentation, figures print as the vector graphics (SVG) the chapters store, captions print dark, each part
   gets a title page, each chapter starts a new page,
   and a table of contents with page numbers comes first.
3. The body is printed twice (A4, page numbers in the footer): the first print tells on which page each part,
   chapter and section starts (Chromium's named destinations, read with pypdf), the second carries those
   numbers in the contents. A cover (title, subtitle, version and date) is printed on its own, without a page
   number, and put in front; pypdf adds the outline (bookmarks: parts, chapters, sections), page labels
   (the cover is "i", the body's numbers are the printed ones) and the document's title.
4. When the HTML book exists (``make book``), it is rebuilt (fast: nothing is re-executed) so that it carries the
   PDF and its front page links to it (``_ext/book_html.py``).

Why Chromium and not Jupyter Book's LaTeX builder: see the README ("The PDF").

Usage: ``python tools/build_pdf.py [--output PATH] [--workdir DIR]``. Chromium: ``$CHROMIUM``, else ``chromium``
on the PATH. Nothing is requested from any other host: the book works offline.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import html
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import stored_outputs_config  # noqa: E402  (tools/ is not a package)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_build" / "pdf"
MATHJAX_TIMEOUT_MS = 300_000
TITLE = "The Mathematics of the Transformer"
SUBTITLE = "An executable textbook: every step derived, every number computed by the code beside it"
MARGIN = {"top": "18mm", "bottom": "20mm", "left": "17mm", "right": "17mm"}
FOOTER = ('<div style="font-size:9px;width:100%;text-align:center;color:#444;">'
          '<span class="pageNumber"></span></div>')

# Print styles: the page without the web site around it, parts and chapters on new pages, code wrapped.
PRINT_CSS = """
@page { size: A4; }
html, body { background: #fff !important; }
body { font-size: 10.5pt; }
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer, .bd-footer-content, .header-article,
.prev-next-area, .bd-header-article, .sidebar-toggle, .theme-switch-button, .search-button, #pst-skip-link,
.bd-search, #jb-print-docs-body, .headerlink, button, .copybtn, #pst-back-to-top
  { display: none !important; }
.bd-page-width, .bd-container, .bd-container__inner, .bd-main, .bd-content, .bd-article-container,
.bd-article { max-width: none !important; width: 100% !important; flex: 1 1 100% !important; margin: 0 !important;
  padding-left: 0 !important; padding-right: 0 !important; }
/* sphinx-book-theme's print styles hide the page's first h1 (it prints its own title) and indent the text */
.bd-main .bd-content .bd-article h1:first-of-type { display: block !important; }
.bd-main .bd-content { margin-left: 0 !important; }
span[id^="document-"] + section { break-before: page; }
div.book-part { break-before: page; text-align: center; padding-top: 75mm; }  /* the chapter breaks after it */
div.book-part .book-part-number { font-size: 14pt; letter-spacing: 0.2em; text-transform: uppercase; color: #555; }
div.book-part .book-part-title { font-size: 26pt; font-weight: 700; margin-top: 0.5em; color: #111; }
nav.book-contents { break-after: page; }
nav.book-contents h1 { font-size: 22pt; margin-bottom: 1em; }
nav.book-contents ol { list-style: none; padding: 0; margin: 0; }
nav.book-contents li { display: flex; align-items: baseline; gap: 0.4em; break-inside: avoid; }
nav.book-contents li a { color: #111 !important; text-decoration: none; }
nav.book-contents li .dots { flex: 1 1 auto; border-bottom: 1px dotted #999; transform: translateY(-0.25em); }
/* a fixed slot: filling in a number never rewraps a line */
nav.book-contents li .page { font-variant-numeric: tabular-nums; flex: 0 0 2.6em; width: 2.6em; text-align: right;
  white-space: nowrap; }
nav.book-contents li.level-0 { font-weight: 700; font-size: 12pt; margin-top: 0.9em; }
nav.book-contents li.level-1 { font-weight: 600; margin-top: 0.35em; padding-left: 1.2em; }
nav.book-contents li.level-2 { font-size: 9.5pt; padding-left: 3.2em; color: #333; }
figure, .cell_output img, table, mjx-container[display="true"], .admonition-title { break-inside: avoid; }
h1, h2, h3, h4 { break-after: avoid; break-inside: avoid; }
figcaption, figcaption *, .caption, .caption-text { font-weight: 400 !important; }
details { display: block; }
details > summary { display: none !important; }
.toggle-hidden, .dropdown .sd-summary-content { display: block !important; visibility: visible !important; }
div.highlight, div.highlight pre, .output pre { overflow: visible !important; max-height: none !important; }
div.highlight pre, .output pre { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 8.6pt; line-height: 1.35; }
pre .book-line { display: block; min-height: 1.35em; }
/* No empty code frame at a page bottom. The theme's print styles forbid a code box to split: a long one then
   jumps to the next page and leaves its cell's frame empty at the bottom of this one. Here a long box splits
   between its lines; a box of up to 12 lines (with its cell's frame, when the cell holds no more) moves whole.
   A long box keeps its first two and its last two lines of text together (book-keep, set by PREPARE_JS), so
   that no page ends with its first line alone (6 pages did), and a paragraph ending in a colon that leads into a
   cell ("In code:", book-lead) stays whole with it (28 pages ended with one, its code on the next page; kept
   with any paragraph, Chromium carried single last lines over instead). No "avoid" rule on whole boxes or on the
   start of a box: Chromium meets one by breaking earlier, and the box's frame then runs empty to the page
   bottom. */
div.highlight pre, .cell_output pre, .output pre, div.highlight, div[class^="highlight-"], .cell_input, .cell_output
  { break-inside: auto !important; page-break-inside: auto !important; }
div.highlight, div[class^="highlight-"], .cell_input, .cell_output { display: block !important; }
div.highlight.book-short, div.cell_input.book-short, div.cell_output.book-short, div.output.book-short
  { break-inside: avoid !important; page-break-inside: avoid !important; }
pre .book-line.book-keep { break-after: avoid; }
p.book-lead { break-after: avoid; break-inside: avoid; }
/* Captions as dark as the text (the theme prints them pale grey) */
figcaption, figcaption *, .caption, .caption-text, .caption-number, figure p.caption span {
  color: #111 !important; opacity: 1 !important; }
"""

# Runs in the page once MathJax is done: the web page becomes the body of a book. Returns the outline entries.
PREPARE_JS = r"""
(parts) => {
  const drop = (el) => el && el.remove();
  // A cell tagged hide-input shows its output only: in print its source is left out (its collapsed frame
  // with it), while hide-cell and hide-output cells are opened below.
  document.querySelectorAll('.cell.tag_hide-input > details.above-input, .cell.tag_hide-input > .cell_input')
    .forEach(drop);
  // Collapsed cells open (a <details> becomes a plain <div>: without its summary a browser would label it
  // "Details"), their "Show/Hide code cell ..." labels and every toggle button removed.
  document.querySelectorAll('summary, .toggle-button, button.copybtn, a.headerlink').forEach(drop);
  document.querySelectorAll('details').forEach(d => {
    const div = document.createElement('div');
    div.className = d.className + ' book-opened';
    while (d.firstChild) div.append(d.firstChild);
    d.replaceWith(div);
  });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  // The site's own print table of contents: the book has its own contents. (The single page holds the chapters
  // inside the front page's toctree-wrapper, which therefore stays.)
  document.querySelectorAll('#jb-print-docs-body').forEach(drop);
  // Empty frames: an output, an input or a whole cell with nothing to see.
  const visible = (el) => el.textContent.trim() !== '' ||
      el.querySelector('img, svg, mjx-container, table, video, iframe, canvas') !== null;
  document.querySelectorAll('.cell_output .output, .cell_output, div.highlight, .cell_input, .cell')
    .forEach(el => { if (!visible(el)) el.remove(); });
  // Code and outputs: one block per line, wrapped with a hanging indent past the line's own indentation.
  document.querySelectorAll('div.highlight pre, .cell_output pre, .output pre').forEach(pre => {
    const segments = [];
    const walk = (node, cls) => {
      node.childNodes.forEach(child => {
        if (child.nodeType === Node.TEXT_NODE) segments.push([child.textContent, cls]);
        else if (child.nodeType === Node.ELEMENT_NODE) walk(child, child.className || cls);
      });
    };
    walk(pre, '');
    const lines = [[]];
    segments.forEach(([text, cls]) => {
      text.split('\n').forEach((piece, i) => {
        if (i > 0) lines.push([]);
        if (piece) lines[lines.length - 1].push([piece, cls]);
      });
    });
    if (lines.length > 1 && lines[lines.length - 1].length === 0) lines.pop();
    pre.textContent = '';
    lines.forEach(line => {
      const text = line.map(s => s[0]).join('');
      const indent = text.length - text.trimStart().length;
      const block = document.createElement('span');
      block.className = 'book-line';
      block.style.paddingLeft = `${indent + 4}ch`;
      block.style.textIndent = `-${indent + 4}ch`;
      line.forEach(([piece, cls]) => {
        const span = document.createElement('span');
        if (cls) span.className = cls;
        span.textContent = piece;
        block.append(span);
      });
      pre.append(block);
    });
    if (lines.length <= 12) {  // a short box moves to the next page whole
      [pre.closest('div.highlight'), pre.closest('.cell_output .output')]
        .forEach(box => { if (box) box.classList.add('book-short'); });
    } else {  // a long one split by a page leaves at least two lines of text on each side of the break
      const blocks = [...pre.children];
      const texts = blocks.map((b, i) => i).filter(i => blocks[i].textContent.trim() !== '');
      if (texts.length >= 4) {
        blocks.slice(0, texts[1]).forEach(b => b.classList.add('book-keep'));
        blocks.slice(texts[texts.length - 2], -1).forEach(b => b.classList.add('book-keep'));
      }
    }
  });
  // A paragraph that leads into a cell ("In code:") stays whole on the page of the cell's start.
  document.querySelectorAll('p').forEach(p => {
    const next = p.nextElementSibling;
    if (next && next.classList.contains('cell') && p.textContent.trim().endsWith(':')) p.classList.add('book-lead');
  });
  // and so does a cell's input or output frame with at most 12 lines in all
  document.querySelectorAll('.cell_input, .cell_output').forEach(frame => {
    if (frame.querySelectorAll('pre .book-line').length <= 12 && !frame.querySelector('img, svg, table'))
      frame.classList.add('book-short');
  });
  // Parts: a title page before each part's first chapter; the outline in document order.
  // The single page repeats section ids across chapters ("the-question"): each contents entry gets its own.
  const entries = [];
  const entry = (level, title, el) => {
    el.id = el.id && document.querySelectorAll('#' + CSS.escape(el.id)).length === 1 ? el.id
      : 'book-entry-' + entries.length;
    entries.push({level: level, title: title, id: el.id});
  };
  const article = document.querySelector('.bd-article') || document.body;
  const front = article.querySelector('section');
  const frontHeading = front && front.querySelector('h1');
  if (front && frontHeading) {  // the cover carries the title: the front page is the book's preface
    frontHeading.textContent = 'About this book';
    entry(0, 'About this book', frontHeading);
  }
  let numeral = 0;
  const roman = ['I', 'II', 'III', 'IV', 'V', 'VI', 'VII', 'VIII', 'IX', 'X'];
  parts.forEach((part, p) => {
    const anchors = part.docs.map(doc => document.getElementById('document-' + doc)).filter(Boolean);
    if (anchors.length === 0) return;
    const partId = 'book-part-' + (p + 1);
    if (part.numbered) {
      const page = document.createElement('div');
      page.className = 'book-part';
      page.id = partId;
      const label = document.createElement('div');
      label.className = 'book-part-number';
      label.textContent = 'Part ' + roman[numeral++];
      const title = document.createElement('div');
      title.className = 'book-part-title';
      title.textContent = part.caption;
      page.append(label, title);
      anchors[0].before(page);
    } else {
      const mark = document.createElement('span');  // inside the first chapter: on its first page
      mark.id = partId;
      const first = anchors[0].nextElementSibling;
      if (first && first.tagName === 'SECTION') first.prepend(mark); else anchors[0].before(mark);
    }
    entries.push({level: 0, title: (part.numbered ? 'Part ' + roman[numeral - 1] + '. ' : '') + part.caption,
                  id: partId});  // unique by construction
    anchors.forEach(anchor => {
      const chapter = anchor.nextElementSibling;
      if (!chapter || chapter.tagName !== 'SECTION') return;
      const h = chapter.querySelector('h1, h2');
      entry(1, h.textContent.replace(/#$/, '').trim(), h);
      chapter.querySelectorAll(':scope > section').forEach(section => {
        const sh = section.querySelector('h2, h3, h4');
        if (sh) entry(2, sh.textContent.replace(/#$/, '').trim(), sh);
      });
    });
  });
  // The contents, with a page-number slot per entry (filled once the first print has said where they land).
  const nav = document.createElement('nav');
  nav.className = 'book-contents';
  const heading = document.createElement('h1');
  heading.textContent = 'Contents';
  const list = document.createElement('ol');
  entries.forEach(e => {
    const li = document.createElement('li');
    li.className = 'level-' + e.level;
    const a = document.createElement('a');
    a.href = '#' + e.id;
    a.textContent = e.title;
    const dots = document.createElement('span');
    dots.className = 'dots';
    const num = document.createElement('span');
    num.className = 'page';
    num.dataset.target = e.id;
    num.textContent = '000';
    li.append(a, dots, num);
    list.append(li);
  });
  nav.append(heading, list);
  article.prepend(nav);
  return entries;
}
"""

BREAK_BEFORE_JS = """(ids) => ids.forEach(id => {
  const el = document.getElementById(id);
  // the heading itself (a section's own id would put the break before the enclosing chapter instead)
  const target = el && (el.matches('h1, h2, h3, h4') ? el : (el.querySelector('h1, h2, h3, h4') || el));
  if (target) target.style.breakBefore = 'page';
})"""

FILL_PAGES_JS = """(pages) => document.querySelectorAll('nav.book-contents .page').forEach(
  s => { if (!s.dataset.unnumbered) s.textContent = pages[s.dataset.target] ?? '?'; })"""

UNNUMBER_JS = """(ids) => document.querySelectorAll('nav.book-contents .page').forEach(s => {
  if (ids.includes(s.dataset.target)) { s.dataset.unnumbered = '1'; s.textContent = ''; }
})"""

COVER_HTML = """<!doctype html><html><head><meta charset="utf-8"><style>
@page {{ size: A4; margin: 0; }}
body {{ margin: 0; font-family: "DejaVu Sans", sans-serif; color: #111; }}
.cover {{ height: 297mm; box-sizing: border-box; padding: 70mm 25mm 25mm; display: flex; flex-direction: column; }}
.rule {{ height: 6px; width: 60mm; background: #0072B2; margin-bottom: 12mm; }}
h1 {{ font-size: 34pt; line-height: 1.15; margin: 0 0 8mm; }}
p.sub {{ font-size: 15pt; line-height: 1.4; color: #333; margin: 0; max-width: 140mm; }}
.meta {{ margin-top: auto; font-size: 11pt; color: #444; line-height: 1.6; }}
</style></head><body><div class="cover"><div class="rule"></div><h1>{title}</h1><p class="sub">{subtitle}</p>
<div class="meta">Version {version}<br>{date}</div></div></body></html>"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise SystemExit("build_pdf: no Chromium found: set CHROMIUM=/path/to/chromium or put chromium on the PATH "
                         "(Debian: apt-get install chromium)")
    return found


def parts(root: Path = ROOT) -> list[dict]:
    """The book's parts from ``_toc.yml``: caption, whether numbered, and their documents (``chapters/x``)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    return [{"caption": p["caption"], "numbered": bool(p.get("numbered")),
             "docs": [c["file"] for c in p.get("chapters", [])]} for p in toc.get("parts", [])]


def version(root: Path = ROOT) -> tuple[str, str]:
    """The book's version and its date: ``git describe`` of the last commit (a tag, or the short hash) and the
    commit's date. Never "-dirty": a build from a working tree names the commit it started from (the date says
    when). A download without git says "unversioned" and today's date."""
    try:
        described = subprocess.run(["git", "describe", "--tags", "--always"], cwd=root,
                                   capture_output=True, text=True, check=True).stdout.strip()
        stamp = subprocess.run(["git", "log", "-1", "--format=%cI"], cwd=root, capture_output=True, text=True,
                               check=True).stdout.strip()
        when = dt.datetime.fromisoformat(stamp)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return "unversioned", dt.date.today().strftime("%-d %B %Y")
    return described, when.strftime("%-d %B %Y")


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


def _destination_pages(pdf: bytes) -> dict[str, int]:
    """Named destination -> 1-based page, as Chromium writes them for every anchor a link points to."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(pdf))
    pages = {}
    for name, dest in reader.named_destinations.items():
        try:
            pages[str(name).lstrip("/")] = reader.get_destination_page_number(dest) + 1
        except Exception:  # noqa: BLE001 - a destination without a page is not one of ours
            continue
    return pages


def assemble(cover: bytes, body: bytes, entries: list[dict], pages: dict[str, int], pdf: Path,
             version_text: str) -> None:
    """Cover + body, with the outline (parts > chapters > sections), page labels and the document's title."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    cover_reader, body_reader = PdfReader(io.BytesIO(cover)), PdfReader(io.BytesIO(body))
    writer.append(cover_reader, import_outline=False)
    n_cover = len(cover_reader.pages)
    writer.append(body_reader, import_outline=False)
    parents: dict[int, object] = {}
    for e in entries:
        page = pages.get(e["id"])
        if page is None:
            continue
        parent = parents.get(e["level"] - 1) if e["level"] else None
        item = writer.add_outline_item(title=e["title"], page_number=n_cover + page - 1, parent=parent)
        parents[e["level"]] = item
        for deeper in [k for k in parents if k > e["level"]]:
            del parents[deeper]
    writer.set_page_label(0, n_cover - 1, style="/r")
    writer.set_page_label(n_cover, len(writer.pages) - 1, style="/D", start=1)
    writer.add_metadata({"/Title": TITLE, "/Subject": SUBTITLE, "/Author": "The book's authors",
                         "/Keywords": f"version {version_text}"})
    writer.page_mode = "/UseOutlines"
    pdf.parent.mkdir(parents=True, exist_ok=True)
    with open(pdf, "wb") as fh:
        writer.write(fh)


def print_pdf(site: Path, pdf: Path) -> None:
    from playwright.sync_api import sync_playwright

    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    off_host: list[str] = []
    version_text, date_text = version()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=_chromium(), args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"])
            page = browser.new_page()

            def route(r):  # noqa: ANN001 - a Playwright Route
                if r.request.url.startswith(base) or r.request.url.startswith(("data:", "blob:", "about:")):
                    return r.continue_()
                off_host.append(r.request.url)
                return r.abort()

            page.route("**/*", route)
            print("build_pdf: typesetting the math in Chromium", flush=True)
            page.goto(base + "intro.html", wait_until="load", timeout=MATHJAX_TIMEOUT_MS)  # the root page
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                   timeout=MATHJAX_TIMEOUT_MS)
            page.evaluate("() => MathJax.startup.promise")
            page.add_style_tag(content=PRINT_CSS)
            entries = page.evaluate(PREPARE_JS, parts())
            page.emulate_media(media="print")
            options = {"format": "A4", "print_background": True, "display_header_footer": True,
                       "header_template": "<span></span>", "footer_template": FOOTER, "margin": MARGIN}
            pages: dict[str, int] = {}
            # the first print already has a (wide) number in every slot, so filling in the real ones changes no width
            page.evaluate(FILL_PAGES_JS, {e["id"]: 888 for e in entries})
            # Filling in the numbers can move what follows: print until the pages the contents show are the pages
            # the entries land on (two or three prints). A heading that sits on a page boundary can flip between
            # two pages from one print to the next (filled in as page p it lands on p + 1, and back): such a
            # heading starts a new page, so that its page no longer depends on the contents.
            history: list[dict[str, int]] = []
            broken: set[str] = set()
            unnumbered: set[str] = set()
            for attempt in range(8):
                print(f"build_pdf: printing the body (pass {attempt + 1})", flush=True)
                body = page.pdf(**options)
                found = _destination_pages(body)
                found = {e["id"]: found[e["id"]] for e in entries if e["id"] in found}
                if {k: v for k, v in found.items() if k not in unnumbered} == \
                        {k: v for k, v in pages.items() if k not in unnumbered} and pages:
                    break
                moved = [f"{k}: {pages.get(k)} -> {v}" for k, v in found.items() if pages.get(k) != v]
                if pages:
                    print(f"build_pdf: {len(moved)} contents entries moved, e.g. {moved[:4]}", flush=True)
                flipping = [k for k, v in found.items() if len(history) >= 2 and history[-2].get(k) == v
                            and pages.get(k) != v and k not in unnumbered]
                if flipping and any(k in broken for k in flipping):
                    # still flipping after starting a page: its contents line shows no number rather than a wrong
                    # one (the PDF outline still takes the reader there)
                    gone = [k for k in flipping if k in broken]
                    print(f"build_pdf: {len(gone)} headings still flip; their contents lines show no page: {gone}",
                          flush=True)
                    unnumbered.update(gone)
                    page.evaluate(UNNUMBER_JS, gone)
                elif flipping:
                    print(f"build_pdf: {len(flipping)} headings flip between two pages; each starts a new page: "
                          f"{flipping[:4]}", flush=True)
                    page.evaluate(BREAK_BEFORE_JS, flipping)
                    broken.update(flipping)
                history.append(found)
                pages = {k: v for k, v in found.items()}
                page.evaluate(FILL_PAGES_JS, pages)
            else:
                raise SystemExit("build_pdf: the contents' page numbers did not settle after 8 prints")
            missing = [e["title"] for e in entries if e["id"] not in pages]
            if missing:
                raise SystemExit(f"build_pdf: no page found for {len(missing)} contents entries: {missing[:5]}")
            cover_page = browser.new_page()
            cover_page.set_content(COVER_HTML.format(title=html.escape(TITLE), subtitle=html.escape(SUBTITLE),
                                                     version=html.escape(version_text), date=date_text))
            cover = cover_page.pdf(format="A4", print_background=True, margin={"top": "0", "bottom": "0",
                                                                                 "left": "0", "right": "0"})
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    if off_host:
        raise SystemExit(f"build_pdf: the page asked for other hosts (blocked): {sorted(set(off_host))[:5]}")
    assemble(cover, body, entries, pages, pdf, version_text)
    (pdf.parent / (pdf.stem + ".outline.json")).write_text(json.dumps(
        [dict(e, page=pages[e["id"]]) for e in entries], indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", type=Path, default=OUT / "book.pdf", help="where to write the PDF")
    ap.add_argument("--workdir", type=Path, default=OUT, help="where the single-page HTML build goes")
    args = ap.parse_args(argv)
    site = build_singlehtml(args.workdir.resolve())
    print_pdf(site, args.output)
    print(f"build_pdf: the book is at {args.output}")
    if args.output.resolve() == (OUT / "book.pdf").resolve() and (ROOT / "_build" / "html" / "index.html").exists():
        print("build_pdf: rebuilding the HTML book so that its front page links to the PDF", flush=True)
        return subprocess.call([sys.executable, str(ROOT / "tools" / "build_book.py")], cwd=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
