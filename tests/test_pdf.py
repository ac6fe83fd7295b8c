"""The whole book as one PDF (``make pdf``): a book, with every chapter in it and the HTML's numbers.

Checked: a cover (title, subtitle, version and date, no page number); a table of contents whose page numbers
are the pages where its entries start; an outline (bookmarks) of parts > chapters > sections; every chapter
starting a new page; every chapter title, numbered; no web-page UI text ("Hide code cell source", buttons);
no raw TeX; the bibliography; and a sample of the glued numbers of every chapter, the same in the PDF as in
the stored outputs the HTML renders (and in the built HTML itself when there is one: ``$BOOK_HTML``, else
``_build/strict/_build/html``, else ``_build/html``).

Marked ``pdf``: the test command builds the PDF (``tools/build_pdf.py``, about four minutes) and then runs
``pytest -m pdf``; the library tests skip these. ``$BOOK_PDF`` names the file (default ``_build/pdf/book.pdf``).
"""

from __future__ import annotations

import html as html_lib
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PDF = Path(os.environ.get("BOOK_PDF", ROOT / "_build" / "pdf" / "book.pdf"))

pytestmark = pytest.mark.pdf

TITLE = "The Mathematics of the Transformer"
# Text of the web page's interface that must not reach the printed book.
UI_TEXT = ["Show code cell", "Hide code cell", "Click to show", "Click to hide", "Copy to clipboard",
           "Skip to main content", "Back to top", "Toggle navigation", "Ctrl+K", "Download source file",
           "Toggle hidden content", "Show code cell outputs", "Hide code cell outputs"]
GLUED_PER_CHAPTER = 4

# Markup a reader must never see: display-math delimiters and environments MathJax should have typeset, and
# MyST roles that should have become links or numbers. (Inline TeX commands such as \sqrt are not listed: the
# book shows library source, whose docstrings legitimately hold them. A role escaped as {{ref}} in an f-string
# is source code too, hence the look-behind.)
RAW_TEX = [
    r"\$\$", r"\\begin\{", r"\\end\{", r"\\frac\{",
    r"(?<!\{)\{(?:glue|glue:text|eq|numref|ref|doc|cite|cite:p|cite:t)\}",
    r"(?<!\{)\{(?:glue|cite):[a-z]*\}?`",
]


def _chapter_titles() -> list[str]:
    toc = (ROOT / "_toc.yml").read_text()
    titles = []
    for stem in re.findall(r"file:\s*(chapters/\S+)", toc):
        cells = json.loads((ROOT / f"{stem}.ipynb").read_text())["cells"]
        first = "".join(next(c for c in cells if c["cell_type"] == "markdown")["source"])
        titles.append(re.search(r"^# (.+)$", first, flags=re.M).group(1).strip())
    return titles


def _toc_docs() -> list[str]:
    return re.findall(r"file:\s*(\S+)", (ROOT / "_toc.yml").read_text())


@pytest.fixture(scope="module")
def reader():
    if not PDF.is_file():
        pytest.fail(f"no PDF at {PDF}: run `make pdf` (or .venv/bin/python tools/build_pdf.py) first", pytrace=False)
    from pypdf import PdfReader

    r = PdfReader(str(PDF))
    assert len(r.pages) > 50, f"{PDF} has only {len(r.pages)} pages"
    return r


@pytest.fixture(scope="module")
def pages(reader) -> list[str]:
    """The text of every page, by poppler's pdftotext (pypdf's extraction takes minutes on this PDF)."""
    import shutil
    import subprocess

    if not shutil.which("pdftotext"):
        pytest.fail("pdftotext not found: run `bash tools/setup.sh --test` (it apt-installs poppler-utils)",
                    pytrace=False)
    out = subprocess.run(["pdftotext", "-enc", "UTF-8", str(PDF), "-"], capture_output=True, text=True, check=True)
    found = out.stdout.split("\f")
    if found and not found[-1].strip():
        found.pop()
    assert len(found) == len(reader.pages), (len(found), len(reader.pages))
    return found


@pytest.fixture(scope="module")
def text(pages: list[str]) -> str:
    return "\n".join(pages)


@pytest.fixture(scope="module")
def outline(reader) -> list[tuple[int, str, int]]:
    """(depth, title, 0-based page) for every bookmark, in order."""
    flat: list[tuple[int, str, int]] = []

    def walk(items, depth: int) -> None:  # noqa: ANN001 - pypdf's nested outline lists
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                flat.append((depth, item.title, reader.get_destination_page_number(item)))

    walk(reader.outline, 0)
    return flat


def _flat(s: str) -> str:
    """The words of ``s`` (3+ letters), hyphens dropped: the PDF's text may join "feed-forward" as one word."""
    return " ".join(re.findall(r"[A-Za-z][A-Za-z]{2,}", re.sub(r"[-\u2010\u2011]", "", s)))


def _plain(s: str) -> str:
    """Titles hold math ($\\sqrt{d_k}$, n×n) that the PDF typesets: compare the words around it."""
    s = re.sub(r"\$[^$]*\$", " ", s)
    s = re.sub(r"`([^`]*)`", r"\1", s)
    return " ".join(w for w in re.findall(r"[A-Za-z][A-Za-z-]{2,}", s))


def test_every_chapter_title_is_in_the_pdf(text: str) -> None:
    flat = " ".join(re.findall(r"[A-Za-z][A-Za-z-]{2,}", text))
    titles = _chapter_titles()
    assert len(titles) >= 10
    missing = [t for t in titles if _plain(t) not in flat]
    assert not missing, f"chapter titles not found in {PDF}: {missing}"


def test_chapters_are_numbered(text: str) -> None:
    for number, title in enumerate(_chapter_titles()[:3], start=1):
        words = _plain(title).split()
        assert re.search(rf"\b{number}\.\s+{re.escape(words[0])}", text), f"chapter {number} ({title}) is not numbered"


def test_no_raw_tex_is_left(text: str) -> None:
    found = {pattern: len(re.findall(pattern, text)) for pattern in RAW_TEX}
    left = {p: n for p, n in found.items() if n}
    assert not left, f"raw TeX in {PDF}: {left}"


def test_bibliography_is_in_the_pdf(text: str) -> None:
    flat = " ".join(text.split()).lower()  # lines wrap anywhere
    assert "attention is all you need" in flat and "vaswani" in flat


def test_cover(reader, pages: list[str]) -> None:
    cover = " ".join(pages[0].split())
    assert TITLE in cover, f"the first page is not the cover: {cover[:200]!r}"
    assert re.search(r"Version \S+", cover) and re.search(r"\b\d{1,2} [A-Z][a-z]+ \d{4}\b", cover), cover
    assert "executable textbook" in cover  # the subtitle
    assert reader.page_labels[0] == "i" and reader.page_labels[1] == "1", reader.page_labels[:3]
    assert not re.search(r"(^|\n)\s*1\s*($|\n)", pages[0]), "the cover carries a page number"


def test_outline_holds_parts_chapters_and_sections(outline: list[tuple[int, str, int]]) -> None:
    tops = [title for depth, title, _ in outline if depth == 0]
    assert [t for t in tops if t.startswith("Part ")] == [
        "Part I. The attention primitive", "Part II. The architecture", "Part III. Cost and scale"], tops
    chapters = [title for depth, title, _ in outline if depth == 1]
    assert len(chapters) == len(_toc_docs()), chapters  # every document of the parts (the front page is a root)
    missing = [t for t in _chapter_titles() if _flat(_plain(t)) not in _flat(" ".join(chapters))]
    assert not missing, f"chapters without a bookmark: {missing}"
    assert sum(1 for depth, _, _ in outline if depth == 2) >= 5 * len(chapters) // 2, "too few section bookmarks"
    pages_in_order = [page for _, _, page in outline]
    assert pages_in_order == sorted(pages_in_order), "bookmarks out of page order"


def test_every_chapter_starts_a_new_page(outline, pages: list[str]) -> None:
    chapters = [(title, page) for depth, title, page in outline if depth == 1]
    for (_title, page), (_, previous) in zip(chapters[1:], chapters, strict=False):
        assert page > previous
    for title, page in chapters:
        head = _flat(pages[page])[:300]
        assert _flat(_plain(title))[:40] in head, f"{title!r} does not open page {page + 1}: {head[:120]!r}"
        before = pages[page - 1]
        assert _flat(_plain(title))[:40] not in _flat(before), f"{title!r} starts on the page before its own"


def test_contents_page_numbers_are_the_outline_pages(reader, outline, pages: list[str]) -> None:
    start = next(i for i, p in enumerate(pages) if p.lstrip().startswith("Contents"))
    end = min(page for _, _, page in outline)  # the contents end where the first entry starts
    assert start < end, (start, end)
    import subprocess

    layout = subprocess.run(["pdftotext", "-layout", "-enc", "UTF-8", "-f", str(start + 1), "-l", str(end), str(PDF),
                             "-"], capture_output=True, text=True, check=True).stdout  # an entry and its page on a line
    contents = " ".join(layout.split())
    for depth, title, page in outline:
        if depth > 1:
            continue
        label = reader.page_labels[page]
        words = re.escape(title.split()[-1])
        assert re.search(rf"{words}\W*(?:\. ?)*{label}\b", contents), f"contents: {title!r} is not at page {label}"


def test_no_web_page_text(text: str) -> None:
    found = {ui: text.count(ui) for ui in UI_TEXT}
    found["a 'Details' label (a <details> without its summary)"] = len(re.findall(r"(?m)^\s*Details\s*$", text))
    left = {ui: n for ui, n in found.items() if n}
    assert not left, f"web-page interface text in {PDF}: {left}"


def _html_text(rel: str) -> str | None:
    for base in [os.environ.get("BOOK_HTML"), ROOT / "_build" / "strict" / "_build" / "html", ROOT / "_build" / "html"]:
        if base and (Path(base) / rel).is_file():
            raw = (Path(base) / rel).read_text()
            return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", raw)).split())
    return None


def _glued_sample(stem: str) -> list[tuple[str, str]]:
    """Up to GLUED_PER_CHAPTER (name, value) of the chapter's stored glue outputs that its prose shows as is."""
    nb = json.loads((ROOT / f"{stem}.ipynb").read_text())
    prose = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    shown = set(re.findall(r"\{glue(?::text)?\}`([^`:]+)`", prose))
    found = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            book = out.get("metadata", {}).get("scrapbook")
            value = out.get("data", {}).get("application/papermill.record/text/plain")
            if not book or value is None or book["name"] not in shown:
                continue
            value = value.strip("'\"")
            if re.fullmatch(r"[\d.,]*\d[\d.,]*", value) and len(value) >= 4 and "." in value:
                found.append((book["name"], value))
    return found[:GLUED_PER_CHAPTER]


def test_glued_numbers_are_the_htmls(text: str) -> None:
    flat_pdf = " ".join(text.split())
    checked, missing, html_differs = 0, [], []
    for stem in [d for d in _toc_docs() if d.startswith("chapters/")]:
        html_text = _html_text(f"{stem}.html")
        for name, value in _glued_sample(stem):
            checked += 1
            if value not in flat_pdf:
                missing.append(f"{stem}:{name}={value}")
            if html_text is not None and value not in html_text:
                html_differs.append(f"{stem}:{name}={value}")
    assert checked >= 20, f"only {checked} glued numbers to compare"
    assert not missing, f"glued numbers of the stored outputs not in the PDF: {missing}"
    assert not html_differs, f"glued numbers of the stored outputs not in the built HTML: {html_differs}"
