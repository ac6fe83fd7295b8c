"""Build the whole book as one PDF (``make pdf``): the single-page HTML build, laid out as a book, printed by Chromium.

1. ``jupyter-book build --builder singlehtml`` renders every chapter, with its stored outputs (no execution: they
   are the outputs the tests check, and the ones the HTML book shows), into one HTML page. Sliders
   (``lib.book.widgets.explore``) appear as their static panel grid.
2. That page is served on 127.0.0.1 and opened in the system Chromium (Playwright drives it; no browser is
   downloaded). Once MathJax has typeset every equation, ``_static/pdf/book.js`` (with the print styles of
   ``_static/pdf/print.css``) turns the web page into a book's body, typeset in TeX Gyre Pagella, justified and
   hyphenated (TeX's patterns, ``_static/pdf/vendor/hyphen``), with code in 8.1 pt DejaVu Sans Mono (91 columns fit).
   Sentences true only on the web page ("drag the slider", "the folded cell") are rewritten for print
   (``_static/pdf/print_text.json``), code that only drives the web page (a slider's ``explore(...)`` call and its
   import, pandas' ``.style.set_uuid(...)``) is left out of the printed code, the in-page calculator becomes tables
   of its answers for four presets, every table gets a number and a caption ("Table 11.2 ...",
   ``_static/pdf/print_tables.json``), a cross-reference to a chapter prints as "Chapter N" (a section "Section
   N.M", the back matter "Appendix A"), links print dark and not underlined, call-outs as a small-capitals label
   between rules (a "Going deeper" fold-out too, its title the label), and links to the book's own files point
   to ``html.baseurl`` (or ``$BOOK_URL``) or, with none, are plain text. The site's navigation, buttons and
   "Show/Hide code cell" labels are removed, a cell tagged ``hide-input`` prints its output only, every other
   collapsed cell is opened, empty frames are dropped, a code or output box of up to 12 lines never splits
   across pages and a longer one splits between its lines (so no page ends with an empty frame), a paragraph
   stays with the equation it leads into, a heading with two lines under it, a short output with its code, code and
   output lines wrap with a hanging indent that keeps their indentation, figures print as the vector graphics
   (SVG) the chapters store, captions print dark, each part gets a title page, each chapter starts a new page,
   and a table of contents with page numbers comes first.
3. The body is printed twice or more (A4): the first print tells on which page each part,
   chapter and section starts (Chromium's named destinations, read with pypdf), the second carries those
   numbers in the contents. A cover (``_static/pdf/cover.html``: title, subtitle, version and date) is printed
   on its own, without a page number, and put in front. The margins are printed as pages of their own
   (``_static/pdf/heads.html``) and laid over the body's pages: a running head with the page number at its outer
   end, the chapter on left pages and the section on right ones (formulas as MathML), an opening page's number
   centred below its text. pypdf adds the outline (bookmarks: parts, chapters, sections, their formulas as Unicode,
   "Why √dₖ and not dₖ?"), page labels (the cover is "i", the body's numbers are the printed ones) and the title.
4. When the HTML book exists (``make book``), it is rebuilt (fast: nothing is re-executed) so that it carries the
   PDF and its front page links to it (``_ext/book_html.py``).

Why Chromium and not Jupyter Book's LaTeX builder: see the README ("The PDF"). Paged.js (npm pagedjs 0.4.3) was
tried on two chapters: 0.2 s a page and running heads by ``string-set``, but a code box it split across pages lost its
line breaks and spaces; Chromium prints boxes whole, and the margins here are its own print laid over the body.

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
import string
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
MARGIN = {"top": "24mm", "bottom": "22mm", "left": "24mm", "right": "24mm"}
FILL_PAGES = "(pages) => bookPdf.fillPages(pages)"
# The calculator's presets that print as its worked table (capacity_planner's "The calculator" section)
CALCULATOR_PRESETS = ["Llama-2-7b-hf", "Mistral-7B-v0.1", "Mixtral-8x7B-v0.1", "DeepSeek-V2-Lite"]

# The print styles, the script that lays the page out as a book and the cover: files of their own, under
# _static/pdf/ (which the HTML book's pages do not link: _ext/book_html.py)
PDF_STATIC = ROOT / "_static" / "pdf"
# TeX's US English hyphenation patterns and the hyphenator (npm package hyphen, vendored: see its SOURCE file)
HYPHEN = [PDF_STATIC / "vendor" / "hyphen" / "hyphen.js", PDF_STATIC / "vendor" / "hyphen" / "patterns-en-us.js"]


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


def base_url(root: Path = ROOT) -> str:
    """The book's published address, for links to its files in print: ``$BOOK_URL``, else ``html.baseurl`` in
    ``_config.yml``; empty when it has none (such links then print as plain text)."""
    if os.environ.get("BOOK_URL"):
        return os.environ["BOOK_URL"]
    config = yaml.safe_load((root / "_config.yml").read_text()) or {}
    return str((config.get("html") or {}).get("baseurl") or "")


def running_heads(entries: list[dict], pages: dict[str, int], n_pages: int) -> str:
    """One HTML page per body page, holding what its margins show: the page number at the outer edge of the head,
    the chapter in the head of a left (even) page and the section in the head of a right (odd) one; a page that
    opens a chapter or the back matter has its number centred below the text, a part's title page nothing, and the
    contents pages the head "Contents". Headings keep their mathematics (MathML, which Chromium typesets)."""
    starts: dict[int, list[dict]] = {}
    for e in entries:
        if e["id"] in pages:
            starts.setdefault(pages[e["id"]], []).append(e)
    first = min(starts) if starts else n_pages + 1
    chapter, section = None, None
    out = []
    for p in range(1, n_pages + 1):
        here = starts.get(p, [])
        for e in here:
            if e["level"] <= 1:
                chapter, section = e, None
        sections = [e for e in here if e["level"] == 2]
        if sections:
            head_section = sections[0]
            section = sections[-1]
        else:
            head_section = section
        part_page = any(e["id"].startswith("book-part-") for e in here) and \
            not any(e["level"] == 1 for e in here) and starts.get(p + 1)
        number = f'<span class="num">{p}</span>'
        if p < first:
            cls, text = ("left" if p % 2 == 0 else "right"), "Contents"
        elif part_page:
            out.append('<div class="page"></div>')
            continue
        elif any(e["level"] <= 1 for e in here):
            out.append(f'<div class="page"><div class="foot">{p}</div></div>')
            continue
        elif p % 2 == 0:
            cls, text = "left", (chapter or {}).get("head", "")
        else:
            cls, text = "right", (head_section or chapter or {}).get("head", "")
        inner = f'{number}<span class="text">{text}</span>' if cls == "left" else \
            f'<span class="text">{text}</span>{number}'
        out.append(f'<div class="page"><div class="head {cls}">{inner}</div></div>')
    template = string.Template((PDF_STATIC / "heads.html").read_text())
    return template.substitute(left=MARGIN["left"], right=MARGIN["right"], pages="\n".join(out))


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
             version_text: str, heads: bytes | None = None) -> None:
    """Cover + body (its running heads and page numbers, ``heads``, laid over its pages), with the outline
    (parts > chapters > sections), page labels and the document's title."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    cover_reader, body_reader = PdfReader(io.BytesIO(cover)), PdfReader(io.BytesIO(body))
    writer.append(cover_reader, import_outline=False)
    n_cover = len(cover_reader.pages)
    writer.append(body_reader, import_outline=False)
    if heads is not None:
        heads_reader = PdfReader(io.BytesIO(heads))
        if len(heads_reader.pages) != len(body_reader.pages):
            raise SystemExit(f"build_pdf: {len(heads_reader.pages)} pages of running heads for "
                             f"{len(body_reader.pages)} pages of text")
        for i, overlay in enumerate(heads_reader.pages):
            writer.pages[n_cover + i].merge_page(overlay)
            writer.pages[n_cover + i].compress_content_streams()  # merged, it is written uncompressed: 11x the bytes
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
    from pypdf import PdfReader

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
            page.add_style_tag(path=PDF_STATIC / "print.css")
            for script in [*HYPHEN, PDF_STATIC / "book.js"]:
                page.add_script_tag(path=script)
            rules = json.loads((PDF_STATIC / "print_text.json").read_text())["rules"]
            for where, web in page.evaluate("(rules) => bookPdf.printText(rules)", rules):
                print(f"build_pdf: print_text.json: {web!r} not found where {where!r}", flush=True)
            shown = page.evaluate("(names) => bookPdf.calculator(names)", CALCULATOR_PRESETS)
            print(f"build_pdf: the calculator prints as a table of {len(shown)} presets: {shown}", flush=True)
            captions = json.loads((PDF_STATIC / "print_tables.json").read_text())["tables"]
            found = page.evaluate("(entries) => bookPdf.tables(entries)", captions)
            for where in found["uncaptioned"]:
                print(f"build_pdf: a table without a caption (add one to print_tables.json): {where}", flush=True)
            for where in found["unmatched"]:
                print(f"build_pdf: print_tables.json: no table for {where!r}", flush=True)
            appendices = [d for p in parts() if not p["numbered"] for d in p["docs"] if d != "bibliography"]
            refs = page.evaluate("(docs) => bookPdf.crossrefs(docs)", appendices)
            print(f"build_pdf: {refs} cross-references print as 'Chapter N', 'Section N.M' or 'Appendix A'",
                  flush=True)
            unlinked = page.evaluate("(base) => bookPdf.links(base)", base_url())
            print(f"build_pdf: {unlinked} links to the book's own files "
                  f"{'made absolute' if base_url() else 'printed as text (no html.baseurl or $BOOK_URL)'}",
                  flush=True)
            entries = page.evaluate("(parts) => bookPdf.prepare(parts)", parts())
            print(f"build_pdf: {page.evaluate('() => bookPdf.plumbed || 0')} statements that only drive the web "
                  "page (a slider's explore call and its import, pandas' set_uuid) left out of the printed code",
                  flush=True)
            page.emulate_media(media="print")
            text_width = 210 - float(MARGIN["left"][:-2]) - float(MARGIN["right"][:-2])  # A4, in mm
            measured = page.evaluate("(width) => bookPdf.typeset(width)", text_width)
            # the window as wide as the printed text, so that its lines are the printed lines (hyphenate)
            page.set_viewport_size({"width": round(text_width * 96 / 25.4), "height": 1000})
            words = page.evaluate("() => bookPdf.hyphenate()")
            print(f"build_pdf: {words} words divided at a line end; code boxes hold {measured['codeColumns']} "
                  f"columns; body font {measured['bodyFont']}", flush=True)
            options = {"format": "A4", "print_background": True, "margin": MARGIN}
            pages: dict[str, int] = {}
            # the first print already has a (wide) number in every slot, so filling in the real ones changes no width
            page.evaluate(FILL_PAGES, {e["id"]: 888 for e in entries})
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
                    page.evaluate("(ids) => bookPdf.unnumber(ids)", gone)
                elif flipping:
                    print(f"build_pdf: {len(flipping)} headings flip between two pages; each starts a new page: "
                          f"{flipping[:4]}", flush=True)
                    page.evaluate("(ids) => bookPdf.breakBefore(ids)", flipping)
                    broken.update(flipping)
                history.append(found)
                pages = {k: v for k, v in found.items()}
                page.evaluate(FILL_PAGES, pages)
            else:
                raise SystemExit("build_pdf: the contents' page numbers did not settle after 8 prints")
            missing = [e["title"] for e in entries if e["id"] not in pages]
            if missing:
                raise SystemExit(f"build_pdf: no page found for {len(missing)} contents entries: {missing[:5]}")
            heads_page = browser.new_page()
            heads_page.set_content(running_heads(entries, pages, len(PdfReader(io.BytesIO(body)).pages)))
            heads = heads_page.pdf(format="A4", print_background=True,
                                   margin={"top": "0", "bottom": "0", "left": "0", "right": "0"})
            cover_page = browser.new_page()
            cover_html = string.Template((PDF_STATIC / "cover.html").read_text()).substitute(
                title=html.escape(TITLE), subtitle=html.escape(SUBTITLE), version=html.escape(version_text),
                date=html.escape(date_text))
            cover_page.set_content(cover_html)
            cover = cover_page.pdf(format="A4", print_background=True, margin={"top": "0", "bottom": "0",
                                                                                 "left": "0", "right": "0"})
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    if off_host:
        raise SystemExit(f"build_pdf: the page asked for other hosts (blocked): {sorted(set(off_host))[:5]}")
    assemble(cover, body, entries, pages, pdf, version_text, heads)
    (pdf.parent / (pdf.stem + ".outline.json")).write_text(json.dumps(
        [{"level": e["level"], "title": e["title"], "id": e["id"], "page": pages[e["id"]]} for e in entries],
        indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", type=Path, default=OUT / "book.pdf", help="where to write the PDF")
    ap.add_argument("--workdir", type=Path, default=OUT, help="where the single-page HTML build goes")
    ap.add_argument("--site", type=Path, help="print this single-page HTML build (a folder holding intro.html) "
                    "instead of building one: for work on the print styles")
    args = ap.parse_args(argv)
    site = args.site.resolve() if args.site else build_singlehtml(args.workdir.resolve())
    print_pdf(site, args.output)
    print(f"build_pdf: the book is at {args.output}")
    if args.output.resolve() == (OUT / "book.pdf").resolve() and (ROOT / "_build" / "html" / "index.html").exists():
        print("build_pdf: rebuilding the HTML book so that its front page links to the PDF", flush=True)
        return subprocess.call([sys.executable, str(ROOT / "tools" / "build_book.py")], cwd=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
