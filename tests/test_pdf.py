"""The whole book as one PDF (``make pdf``): a book, with every chapter in it and the HTML's numbers.

Checked: a cover (title, subtitle, version and date, no page number); a table of contents whose page numbers
are the pages where its entries start; an outline (bookmarks) of parts > chapters > sections; every chapter
starting a new page; every chapter title, numbered; no web-page UI text ("Hide code cell source", buttons);
no raw TeX; the bibliography; no source line of a cell tagged hide-input (only its output is printed); no
"-dirty" version on the cover; no page ending with an empty code frame, nor with a split code box's first line
alone; figures as vector graphics; no web-only sentence (a slider, a folded cell, "this page") nor code that only
drives the web page; nothing in the bottom margin, no line leading into an equation left on the page before it,
no chapter-end page holding only a short output, no heading at a page foot with under two lines after it;
numbered and captioned tables, cross-references as "Chapter N" and "Appendix A", no icon font; every "Going
deeper" fold-out's title printed, no "((4.4))", no call-out label ("Solution to Exercise 1.2") alone at a page
foot; and a sample of
the glued numbers of every chapter, the same in the PDF as in
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
from typing import NamedTuple

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
MAX_BITMAP_FIGURES = 10

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
    assert "dirty" not in cover, f"the cover names a working tree, not a version: {cover[:200]!r}"
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
        numbered = re.match(r"(\d+)\.\s+(\S+)", title)
        if numbered:  # its heading, with its number: the text may name the chapter in a cross-reference
            heading = rf"(?m)^\s*{numbered.group(1)}\.\s+{re.escape(numbered.group(2))}"
            assert not re.search(heading, before), f"{title!r} starts on the page before its own"
        else:
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


def _code_lines(cell: dict) -> list[str]:
    return [" ".join(line.split()) for line in "".join(cell["source"]).splitlines()]


def test_hide_input_cells_print_their_output_only(text: str) -> None:
    """A cell tagged hide-input shows only its output in the HTML; the PDF prints no line of its source (lines
    that also occur in a shown cell, in the prose or in an output, whole or inside a longer line, are not
    counted)."""
    hidden: dict[str, str] = {}
    elsewhere: set[str] = set()
    for stem in [d for d in _toc_docs() if d.startswith("chapters/")]:
        for cell in json.loads((ROOT / f"{stem}.ipynb").read_text())["cells"]:
            tags = set(cell.get("metadata", {}).get("tags", []))
            lines = _code_lines(cell) if cell["cell_type"] == "code" else []
            if "hide-input" in tags and not tags & {"remove-cell", "remove-input"}:
                hidden.update({line: stem for line in lines})
            else:
                elsewhere.update(" ".join(line.split()) for line in "".join(cell["source"]).splitlines())
            for out in cell.get("outputs", []):
                body = out.get("text") or out.get("data", {}).get("text/plain") or ""
                elsewhere.update(" ".join(line.split()) for line in "".join(body).splitlines())
    # distinctive lines that fit one printed line (a wrapped line is split by the PDF's text), and that are not
    # part of a line printed elsewhere ("from lib.x import a" inside a shown "from lib.x import a, b")
    shown = "\n".join(elsewhere)
    sample = {line: stem for line, stem in hidden.items()
              if 30 <= len(line) <= 70 and line not in shown and not line.startswith("#")}
    assert len(sample) >= 10, f"only {len(sample)} hide-input source lines to look for"
    flat = " ".join(text.split())
    printed = [f"{stem}: {line}" for line, stem in sample.items() if line in flat]
    assert not printed, f"{len(printed)} of {len(sample)} source lines of hide-input cells are printed: {printed[:5]}"


def test_figures_are_vector_graphics(reader) -> None:
    """The chapters' figures are SVG (lib.book.figures), so the PDF holds them as vector paths: at most a few
    figure-sized bitmaps (an image drawn inside a figure, e.g. a heat map, stays a bitmap)."""
    big = 0
    for page in reader.pages:
        resources = page.get("/Resources") or {}
        xobjects = resources.get("/XObject") or {}
        stack = [xobjects]
        while stack:
            objs = stack.pop()
            for ref in objs.values():
                obj = ref.get_object()
                if obj.get("/Subtype") == "/Image" and int(obj.get("/Width", 0)) >= 500:
                    big += 1
                elif obj.get("/Subtype") == "/Form":
                    inner = (obj.get("/Resources") or {}).get("/XObject")
                    if inner:
                        stack.append(inner.get_object())
    assert big <= MAX_BITMAP_FIGURES, (f"{big} figure-sized bitmaps (at least 500 px wide) in {PDF}: figures should "
                                       f"be SVG (at most {MAX_BITMAP_FIGURES} bitmaps)")


def _runs(mask) -> list[tuple[int, int]]:
    """The (first, last) indices of each run of True in ``mask``."""
    runs, start = [], None
    for i, on in enumerate(list(mask) + [False]):
        if on and start is None:
            start = i
        elif not on and start is not None:
            runs.append((start, i - 1))
            start = None
    return runs


def empty_frame_at_bottom(strip) -> bool:
    """``strip``: a page's bottom strip (greyscale rows, 0 black .. 255 white). True when the last thing on the
    page is a shaded band (a code or output frame) with no text in it: a frame whose lines went to the next page."""
    import numpy as np

    a = np.asarray(strip).astype(int)
    bands = _runs((a < 252).any(axis=1))
    if not bands:
        return False
    first, last = bands[-1]
    if first == 0 and last < 8:  # a frame's bottom padding cut by the strip's top edge: its text lies above
        return False
    band = a[first:last + 1]
    # at 36 dpi an empty frame (its padding) is 7 rows or more; a box's bottom border or shadow, 1 to 3. A dark
    # column through the whole band is the frame's own left or right border, not text.
    dark = band < 215  # text in a code box at 36 dpi is anti-aliased to grey, not black
    text = dark[:, dark.mean(axis=0) < 0.8].any()
    return band.shape[0] >= 5 and not text and (band < 252).mean() > 0.3


def test_empty_frame_detector() -> None:
    import numpy as np

    page = np.full((100, 300), 255, np.uint8)
    page[10:14, 20:200] = 40  # a line of text
    assert not empty_frame_at_bottom(page)
    page[80:90, 10:290] = 244  # a code frame's shaded box, nothing in it
    assert empty_frame_at_bottom(page)
    page[80:90, 10:12] = 90  # with a coloured left border
    assert empty_frame_at_bottom(page)
    page[83:86, 20:120] = 30  # a line of code in it
    assert not empty_frame_at_bottom(page)
    top = np.full((100, 300), 255, np.uint8)
    top[0:6, 10:290] = 244  # the bottom padding of a frame whose lines end just above the strip
    assert not empty_frame_at_bottom(top)
    top[0:40, 10:290] = 244  # a long empty band from the strip's top edge down
    assert empty_frame_at_bottom(top)
    top[0:40] = 255
    top[40:48, 10:290] = 244  # an empty frame lower down
    assert empty_frame_at_bottom(top)


def test_no_empty_code_frame_at_a_page_bottom(reader, tmp_path: Path) -> None:
    """No page ends with an empty code or output frame (its lines pushed to the next page): the bottom 28 mm of
    the text area of every page, rendered at 36 dpi by poppler's pdftoppm."""
    import subprocess

    from PIL import Image

    # A4 at 36 dpi: 298 x 421 px; the bottom margin is 22 mm (31 px): rows 300..395 end above an opening page's
    # number
    subprocess.run(["pdftoppm", "-r", "36", "-gray", "-x", "0", "-y", "300", "-W", "298", "-H", "95", str(PDF),
                    str(tmp_path / "p")], check=True, capture_output=True)
    strips = sorted(tmp_path.glob("p-*.pgm"))
    assert len(strips) == len(reader.pages)
    empty = [int(p.stem.split("-")[-1]) for p in strips if empty_frame_at_bottom(Image.open(p))]
    assert not empty, f"{len(empty)} pages end with an empty code or output frame (PDF pages {empty[:10]})"


FRAME_GREY = 244  # a code or output frame's background (rgb(243, 244, 245)) in poppler's greyscale rendering


class Frame(NamedTuple):
    lines: int  # lines of text in the frame's part on this page
    top_pad: int  # rows of frame above its first line: the frame's padding, or none where it goes on from a page


def page_ends(page) -> tuple[Frame | None, Frame | None]:
    """``page``: a whole page (greyscale rows at 60 dpi, 0 black .. 255 white). The shaded frame that ends the
    page's text and the one that starts it, or None where the text ends (or starts) with something else. The
    page number, a short centred run at the bottom, is not text of the page."""
    import numpy as np

    a = np.asarray(page).astype(int)
    bands = _runs((a < 252).any(axis=1))
    if bands and (a[bands[-1][0]:bands[-1][1] + 1] < 200).any(axis=0).sum() < 0.1 * a.shape[1]:
        bands = bands[:-1]  # the page number

    def frame(band):
        rows = a[band[0]:band[1] + 1]
        if ((rows == FRAME_GREY).mean(axis=1) > 0.4).mean() <= 0.6:
            return None  # not a frame: most of its rows are not mostly the frames' grey
        dark = rows < 200
        dark = dark[:, dark.mean(axis=0) < 0.8]  # without an input frame's dark left border
        lines = [r for r in _runs(dark.any(axis=1)) if r[1] - r[0] >= 2]
        return Frame(len(lines), lines[0][0] if lines else len(rows))

    return (frame(bands[-1]), frame(bands[0])) if bands else (None, None)


def test_page_ends_detector() -> None:
    import numpy as np

    page = np.full((400, 300), 255, np.uint8)
    page[20:24, 20:250] = 40  # a paragraph's line
    page[300:330, 10:290] = FRAME_GREY  # a frame at the bottom
    page[300:330, 10:12] = 90  # with an input cell's left border
    page[310:315, 20:200] = 60  # and one line of code, below the frame's padding
    page[380:385, 140:160] = 50  # the page number
    assert page_ends(page) == (Frame(1, 10), None)
    page[320:325, 20:120] = 60  # a second line
    assert page_ends(page) == (Frame(2, 10), None)
    page[0:15, 10:290] = FRAME_GREY  # a frame going on from the page before, with one line at its top
    page[1:6, 20:150] = 60
    assert page_ends(page) == (Frame(2, 10), Frame(1, 1))


def test_no_code_box_leaves_one_line_at_a_page_bottom(reader, tmp_path: Path) -> None:
    """A code or output box that a page break splits keeps at least two lines of text on each side: where a page
    starts with a frame that goes on from the page before (no padding above its first line), neither that part
    nor the one ending the page before holds a single line. Every page rendered at 60 dpi by poppler's
    pdftoppm."""
    import subprocess

    from PIL import Image

    subprocess.run(["pdftoppm", "-r", "60", "-gray", str(PDF), str(tmp_path / "p")], check=True,
                   capture_output=True)
    # the text area only: the running head above it (and an opening page's number below it) is not its text
    ends = [page_ends(_text_area(Image.open(p))) for p in sorted(tmp_path.glob("p-*.pgm"))]
    assert len(ends) == len(reader.pages)
    # a frame's own padding is 16 CSS px, 10 rows at 60 dpi; a part that goes on from a page has 0 to 2
    splits = [i for i in range(len(ends) - 1) if ends[i][0] and ends[i + 1][1] and ends[i + 1][1].top_pad <= 4]
    assert len(splits) >= 10, f"only {len(splits)} boxes split by a page: is FRAME_GREY still the frames' grey?"
    alone = [i + 1 for i in splits if 1 in (ends[i][0].lines, ends[i + 1][1].lines)]
    assert not alone, f"{len(alone)} page breaks leave one line of a box alone (after PDF pages {alone[:10]})"


# The margins of a body page, as fractions of its height: the running head lies above HEAD (24 mm of 297 mm is the
# text's top; the head is at 10 to 16 mm), an opening page's number below FOOT (the text ends 22 mm from the
# bottom, the number is 10 mm from it).
HEAD, FOOT = 0.07, 0.93


def _text_area(image):
    """A page's rendering without its margins (the running head, an opening page's number)."""
    return image.crop((0, int(HEAD * image.height), image.width, int(FOOT * image.height)))


class Word(NamedTuple):
    x0: float
    y0: float
    x1: float
    y1: float
    text: str


@pytest.fixture(scope="module")
def words() -> list[tuple[float, float, list[Word]]]:
    """(width, height, words) of every page, in points, by poppler's ``pdftotext -bbox``; soft hyphens dropped."""
    import subprocess

    out = subprocess.run(["pdftotext", "-bbox", "-enc", "UTF-8", str(PDF), "-"], capture_output=True, text=True,
                         check=True).stdout
    found = []
    for w, h, body in re.findall(r'<page width="([\d.]+)" height="([\d.]+)">(.*?)</page>', out, flags=re.S):
        found.append((float(w), float(h), [
            Word(float(a), float(b), float(c), float(d), html_lib.unescape(t).replace("\u00ad", ""))
            for a, b, c, d, t in re.findall(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" '
                                            r'yMax="([\d.]+)">([^<]*)</word>', body)]))
    return found


@pytest.fixture(scope="module")
def renders(reader, tmp_path_factory) -> list:
    """Every page as greyscale rows (0 black .. 255 white) at 20 dpi, by poppler's pdftoppm."""
    import subprocess

    import numpy as np
    from PIL import Image

    folder = tmp_path_factory.mktemp("pages20")
    subprocess.run(["pdftoppm", "-r", "20", "-gray", str(PDF), str(folder / "p")], check=True, capture_output=True)
    found = [np.asarray(Image.open(p)).astype(int) for p in sorted(folder.glob("p-*.pgm"))]
    assert len(found) == len(reader.pages)
    return found


def _body(page: tuple[float, float, list[Word]]) -> list[Word]:
    _, h, ws = page
    return [w for w in ws if w.y1 > HEAD * h and w.y0 < FOOT * h]


EQNO = re.compile(r"\(\d+\.\d+\)")


def lone_equation_numbers(page: tuple[float, float, list[Word]]) -> list[str]:
    """The equation numbers, "(3.2)" at the right of the text, on a page that holds nothing left of them on their
    line: numbers whose formula went to another page."""
    width, _, _ = page
    body = _body(page)
    return [w.text for w in body if EQNO.fullmatch(w.text) and w.x0 > 0.6 * width and not any(
        o.x1 < w.x0 and o.y0 < w.y1 + 2 and o.y1 > w.y0 - 2 for o in body)]


def test_lone_equation_number_detector() -> None:
    line = [Word(90, 300, 200, 312, "S"), Word(210, 300, 240, 312, "="), Word(500, 302, 530, 312, "(3.2)")]
    assert lone_equation_numbers((595, 842, line)) == []
    assert lone_equation_numbers((595, 842, [Word(500, 770, 530, 780, "(3.2)")])) == ["(3.2)"]
    # a reference in the text, "(3.2)" at a line's end, has its line's words before it
    assert lone_equation_numbers((595, 842, [Word(90, 400, 480, 412, "in"), Word(500, 400, 530, 412, "(3.2)")])) == []


def test_no_equation_number_apart_from_its_formula(words) -> None:
    numbers = sum(1 for page in words for w in _body(page) if EQNO.fullmatch(w.text) and w.x0 > 0.6 * page[0])
    assert numbers >= 40, f"only {numbers} equation numbers found: are they still '(3.2)' at the right?"
    alone = [(i + 1, n) for i, page in enumerate(words) for n in lone_equation_numbers(page)]
    assert not alone, f"{len(alone)} equation numbers on a page without their formula (PDF page, number): {alone}"


def separated_captions(page: tuple[float, float, list[Word]], rows, body_height: float) -> list[str]:
    """Figure captions ("Fig. 3.2 ...", set smaller than the text) that open a page with nothing drawn above them:
    their figure is on the page before. ``rows``: the page rendered (greyscale); ``body_height``: the text's usual
    word height."""
    import numpy as np

    _, h, _ = page
    body = sorted(_body(page), key=lambda w: (round(w.y0), w.x0))
    found = []
    for i, w in enumerate(body[:-1]):
        if w.text != "Fig." or not re.fullmatch(r"\d+(\.\d+)?", body[i + 1].text) or \
                (w.y1 - w.y0) >= 0.96 * body_height:
            continue
        top, bottom = int(HEAD * h / h * len(rows)), int((w.y0 - 3) / h * len(rows))
        if bottom <= top or (np.asarray(rows)[top:bottom] > 200).all():
            found.append(f"Fig. {body[i + 1].text}")
    return found


def test_separated_caption_detector() -> None:
    import numpy as np

    page = np.full((234, 165), 255)
    caption = (595, 842, [Word(70, 80, 90, 90, "Fig."), Word(92, 80, 110, 90, "3.2"), Word(112, 80, 200, 90, "The")])
    assert separated_captions(caption, page, 12.0) == ["Fig. 3.2"]
    page[18:21, 20:140] = 0  # a figure drawn above it
    assert separated_captions(caption, page, 12.0) == []
    prose = (595, 842, [Word(70, 80, 90, 92, "Fig."), Word(92, 80, 110, 92, "3.2"), Word(112, 80, 200, 92, "shows")])
    assert separated_captions(prose, np.full((234, 165), 255), 12.0) == []  # the text's size: a sentence


def test_no_caption_apart_from_its_figure(words, renders) -> None:
    import statistics

    heights = [w.y1 - w.y0 for page in words for w in _body(page)]
    body_height = statistics.median(heights)
    captions = sum(1 for page in words for w in _body(page) if w.text == "Fig." and w.y1 - w.y0 < 0.96 * body_height)
    assert captions >= 20, f"only {captions} captions set smaller than the text: is the caption size still smaller?"
    apart = [(i + 1, c) for i, (page, rows) in enumerate(zip(words, renders, strict=True))
             for c in separated_captions(page, rows, body_height)]
    assert not apart, f"{len(apart)} captions open a page without their figure (PDF page, caption): {apart}"


def _ink_rows(rows) -> list[int]:
    """The rows of a page's text area with something printed on them."""
    import numpy as np

    a = np.asarray(rows)
    top, bottom = int(HEAD * len(a)), int(FOOT * len(a))
    return [top + i for i in np.flatnonzero((a[top:bottom] < 200).any(axis=1))]


def test_no_empty_page(renders) -> None:
    """No page but the cover without text or a figure (a page holding only its number, 3 at 505a96d)."""
    empty = [i + 1 for i, rows in enumerate(renders) if i > 0 and not _ink_rows(rows)]
    assert not empty, f"{len(empty)} empty pages (PDF pages {empty})"


def test_no_short_page_inside_a_chapter(outline, renders) -> None:
    """A page inside a chapter (the next page goes on with it) is filled at least half-way down its text area: a
    figure or box that did not fit leaves no more than half a page empty (9 pages did at 505a96d)."""
    opening = {page for depth, _, page in outline if depth <= 1}
    first = min(page for depth, _, page in outline if depth == 1)
    short = []
    for i in range(first, len(renders) - 1):
        if i + 1 in opening or (i in opening and i + 1 not in opening and any(
                page == i and title.startswith("Part ") for _, title, page in outline)):
            continue
        ink = _ink_rows(renders[i])
        height = len(renders[i])
        if ink and ink[-1] < (HEAD + 0.5 * (FOOT - HEAD)) * height:
            short.append(i + 1)
    assert not short, f"{len(short)} pages inside a chapter end above half-way (PDF pages {short})"


def _head(page: tuple[float, float, list[Word]]) -> str:
    _, h, ws = page
    return " ".join(w.text for w in sorted(ws, key=lambda w: w.x0) if w.y1 <= HEAD * h)


def _words_of(s: str) -> set[str]:
    return set(re.findall(r"[A-Za-z]{3,}", s.replace("\u00ad", "")))


def test_running_heads(reader, outline, words) -> None:
    """Every page but the cover, a part's title page and a page that opens a chapter carries a running head with its
    page number: the chapter on a left (even) page, the section on a right (odd) one (the first that starts on the
    page, else the last one before it); the contents pages say "Contents"."""
    opening = {page for depth, _, page in outline if depth <= 1}
    first = min(page for _, _, page in outline)
    wrong = []
    checked = 0
    for i in range(1, len(words)):
        label = reader.page_labels[i]
        head = _head(words[i])
        if i in opening:
            if head.strip():
                wrong.append((i + 1, "an opening page with a head", head))
            continue
        checked += 1
        numbers = re.findall(r"\b\d+\b", head)
        if label not in numbers:
            wrong.append((i + 1, f"no page number {label}", head))
            continue
        if i < first:
            expected = "Contents"
        else:
            chapter = [t for d, t, p in outline if d <= 1 and p <= i][-1]
            sections = [t for d, t, p in outline if d == 2 and p == i] or \
                [t for d, t, p in outline if d == 2 and p < i and p >= max(q for dd, _, q in outline if dd <= 1
                                                                           and q <= i)][-1:]
            expected = chapter if int(label) % 2 == 0 else (sections[0] if sections else chapter)
        if not _words_of(head) or not _words_of(head) <= _words_of(expected):
            wrong.append((i + 1, f"expected {expected!r}", head))
    assert checked >= 100, f"only {checked} pages with a running head to check"
    assert not wrong, f"{len(wrong)} pages with a wrong or missing running head: {wrong[:8]}"


def _math_headings() -> list[str]:
    """The source of every heading (chapter or section) whose text holds mathematics ($...$)."""
    found = []
    for doc in _toc_docs():
        path = ROOT / (doc if doc.endswith((".md", ".ipynb")) else doc + ".ipynb")
        if not path.exists():
            path = ROOT / (doc + ".md")
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text())["cells"]
            text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        else:
            text = path.read_text()
        found += [h for h in re.findall(r"(?m)^#{1,3} (.+)$", text) if "$" in h]
    return found


def test_mathematics_in_the_contents_and_bookmarks(outline, pages) -> None:
    """A heading with mathematics keeps it in the bookmarks ("Why √dₖ and not dₖ?", not "Why dk and not dk?"): its
    square roots, sub- and superscripts and letters; and the contents show the typeset formula."""
    headings = _math_headings()
    assert len(headings) >= 3, headings
    titles = [t for _, t, _ in outline]
    problems = []
    for h in headings:
        words = _plain(h)
        matches = [t for t in titles if _flat(_plain(t)) == _flat(words)]
        if not matches:
            problems.append(f"no bookmark for {h!r}")
            continue
        title = matches[0]
        math = " ".join(re.findall(r"\$([^$]+)\$", h))
        letters = re.findall(r"(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])", re.sub(r"\\[A-Za-z]+", " ", math))
        import unicodedata

        missing = [c for c in letters if c not in unicodedata.normalize("NFKC", title)]  # dₖ is d and k
        if missing:
            problems.append(f"{title!r} lacks {missing} of {math!r}")
        if "\\sqrt" in math and "√" not in title:
            problems.append(f"{title!r} lacks the square root of {math!r}")
        if "_" in math and not re.search(r"[_\u2080-\u209c\u1d62-\u1d6a\u2c7c]", title):
            problems.append(f"{title!r} lacks the subscript of {math!r}")
        if "'" in math and not re.search(r"['\u2032]", title):
            problems.append(f"{title!r} lacks the prime of {math!r}")
    assert not problems, problems
    start = next(i for i, p in enumerate(pages) if p.lstrip().startswith("Contents"))
    end = min(page for _, _, page in outline)
    contents = "".join(pages[start:end])
    roots = sum(1 for _, t, _ in outline if "√" in t)
    assert contents.count("√") >= roots, f"the contents show {contents.count('√')} square roots, the bookmarks {roots}"


# Web-only phrasing that must not reach paper (_static/pdf/print_text.json rewrites it for print), and the code
# that only drives the web page (book.js: plumbing). A sentence that names "the web book" speaks of the other
# edition (the preface's "Three ways to read it") and may say what it has.
WEB_ONLY = [r"\b[Dd]rag(?:ging)?\b", r"\b[Tt]his page\b", r"\bin your browser\b", r"\bThe slider below\b",
            r"\bThe form below\b", r"\b[Cc]lick\b", r"\bsliders?\b", r"\bweb page\b", r"\b[Tt]his site\b",
            r"\bbrowser\b", r"\bfolded\b(?! into)", r"\bcell (?:above|below)\b", r"\bexplore\(",
            r"\bset_uuid\b", r"\blib\.book\.widgets\b",
            # the calculator is a form on the web page; on paper it is tables (a config's fields, a closed form
            # and "the form of" are other things)
            r"\b[Cc]alculator\b", r"\b(?:[Ee]very|[Ee]ach|[Ii]ts|overhead|input|empty) fields?\b",
            r"\b[Tt]he form(?:’s|'s)? (?:below|above|opens|runs|has|gives)\b", r"\bin the form\b(?! of)"]


def web_only_phrases(text: str) -> dict[str, list[str]]:
    """The web-only phrases in ``text`` (pattern -> the bits of sentence around each), leaving out sentences about
    the web book."""
    flat = " ".join(text.replace("\u00ad", "").split())
    sentences = " ".join(s for s in re.split(r"(?<=[.!?])\s+", flat) if "web book" not in s)
    found = {p: re.findall(rf"[^.]{{0,60}}{p}[^.]{{0,40}}", sentences) for p in WEB_ONLY}
    return {p: hits for p, hits in found.items() if hits}


def test_web_only_detector() -> None:
    assert web_only_phrases("In the web book, figures carry a slider. The panels show it.") == {}
    assert list(web_only_phrases("On the web page a slider sets t.")) == [r"\bsliders?\b", r"\bweb page\b"]
    assert list(web_only_phrases("The code is folded; the cell below times it.")) == [r"\bfolded\b(?! into)",
                                                                                     r"\bcell (?:above|below)\b"]
    assert web_only_phrases("The up-projections can be folded into the query.") == {}
    assert list(web_only_phrases("Every field is at its default. The calculator's presets.")) == [
        r"\b[Cc]alculator\b", r"\b(?:[Ee]very|[Ee]ach|[Ii]ts|overhead|input|empty) fields?\b"]
    assert web_only_phrases("A closed form, the additive form, a config's field names; A field is read. "
                            "Three GPUs cannot form a group.") == {}


def test_no_web_only_text(text: str) -> None:
    """No sentence that is true only on the web page (a slider, a folded cell, "this page", 20 at 480ff41) and no
    code that only drives it (explore(...), set_uuid)."""
    left = web_only_phrases(text)
    assert not left, f"web-only phrases in {PDF}: {left}"


def _lines(ws: list[Word]) -> list[list[Word]]:
    """Words grouped into lines (their vertical middles within 3 pt), top to bottom, each left to right."""
    out: list[tuple[float, list[Word]]] = []
    for w in sorted(ws, key=lambda w: (w.y0 + w.y1) / 2):
        mid = (w.y0 + w.y1) / 2
        if out and abs(mid - out[-1][0]) <= 3:
            out[-1][1].append(w)
        else:
            out.append((mid, [w]))
    return [sorted(line, key=lambda w: w.x0) for _, line in out]


def _height(line: list[Word]) -> float:
    import statistics

    return statistics.median(w.y1 - w.y0 for w in line)


@pytest.fixture(scope="module")
def body_height(words) -> float:
    import statistics

    return statistics.median(w.y1 - w.y0 for page in words for w in _body(page))


def margin_glyphs(page: tuple[float, float, list[Word]]) -> list[str]:
    """Text in the bottom margin, below the text area (22 mm) and above an opening page's number: a piece of a
    line (a formula's root sign) that a page break cut off."""
    _, h, ws = page
    bottom = h * (1 - 22 / 297)
    return [w.text for w in ws if w.y1 > bottom + 3 and w.y0 < h * (1 - 14 / 297)]


def test_margin_glyph_detector() -> None:
    text = [Word(70, 760, 200, 772, "text"), Word(290, 805, 305, 814, "17")]  # a line, an opening page's number
    assert margin_glyphs((595, 842, text)) == []
    assert margin_glyphs((595, 842, [*text, Word(300, 781, 310, 793, "√")])) == ["√"]


def test_no_glyph_in_the_bottom_margin(words) -> None:
    stray = [(i + 1, g) for i, page in enumerate(words) for g in margin_glyphs(page)]
    assert not stray, f"{len(stray)} pieces of text in the bottom margin (PDF page, text): {stray[:10]}"


def lead_in_apart(page, following, width: float) -> str | None:
    """The last line of ``page`` when it leads into a displayed equation (it ends with a colon, or is only one)
    that opens the page ``following``: the equation's number ("(16.1)", at the right) is on one of its first 3
    lines."""
    lines, nxt = _lines(_body(page)), _lines(_body(following))
    if not lines or not nxt:
        return None
    last = " ".join(w.text for w in lines[-1])
    if re.fullmatch(r"\s*[:;,.]\s*", last):
        return last
    if last.endswith(":") and any(EQNO.fullmatch(w.text) and w.x0 > 0.6 * width for line in nxt[:3] for w in line):
        return last
    return None


def test_lead_in_detector() -> None:
    page = (595, 842, [Word(70, 700, 120, 712, "the"), Word(125, 700, 160, 712, "bias:")])
    eq = (595, 842, [Word(200, 80, 260, 95, "h"), Word(500, 82, 530, 94, "(16.1)")])
    prose = (595, 842, [Word(70, 80, 120, 92, "Then")])
    assert lead_in_apart(page, eq, 595) == "the bias:"
    assert lead_in_apart(page, prose, 595) is None
    assert lead_in_apart((595, 842, [Word(70, 700, 75, 712, ":")]), prose, 595) == ":"


def test_no_lead_in_line_apart_from_its_equation(words) -> None:
    """A paragraph that leads into an equation ("... with row vectors:") ends on the equation's page (1 page at
    c78739c ended with it, the equation on the next; R4 saw a line holding only ":")."""
    apart = [(i + 1, t) for i in range(len(words) - 1)
             if (t := lead_in_apart(words[i], words[i + 1], words[i][0]))]
    assert not apart, f"{len(apart)} pages end with the line leading into an equation on the next (page, line): {apart}"


def output_only_page(page, body_height: float) -> bool:
    """A page whose text is a few lines (up to 6) all set smaller than the text: a short code output alone, or with
    the last line or two of its code."""
    lines = _lines(_body(page))
    return bool(lines) and len(lines) <= 6 and all(_height(line) < 0.9 * body_height for line in lines)


def test_output_only_page_detector() -> None:
    out = (595, 842, [Word(70, 100, 300, 110, "forward"), Word(70, 112, 300, 122, "backward")])
    assert output_only_page(out, 13.6)
    assert not output_only_page((595, 842, [*out[2], Word(70, 140, 300, 154, "Text")]), 13.6)


def test_no_chapter_end_page_with_only_an_output(outline, words, body_height: float) -> None:
    """A chapter's last page is not a few lines of output split from their code (2 pages at c78739c)."""
    opening = {page for depth, _, page in outline if depth <= 1}
    alone = [i + 1 for i in range(len(words)) if (i + 1 in opening or i == len(words) - 1)
             and output_only_page(words[i], body_height)]
    assert not alone, f"{len(alone)} chapter-end pages hold only a code output (PDF pages {alone})"


def headings_at_foot(page, body_height: float) -> list[str]:
    """Section headings ("12.4. What ...", set larger than the text) with fewer than two lines under them on
    their page."""
    lines = _lines(_body(page))
    found = []
    for i, line in enumerate(lines):
        if _height(line) >= 1.2 * body_height and re.fullmatch(r"\d+\.\d+(\.\d+)*\.?", line[0].text):
            under = [m for m in lines[i + 1:] if _height(m) < 1.2 * body_height]
            if len(under) < 2:
                found.append(" ".join(w.text for w in line))
    return found


def test_heading_at_foot_detector() -> None:
    head = [Word(70, 700, 100, 718, "12.4."), Word(105, 700, 200, 718, "Decode")]
    one = [Word(70, 730, 300, 744, "One")]
    two = [*one, Word(70, 748, 300, 762, "two")]
    assert headings_at_foot((595, 842, head + one), 13.6) == ["12.4. Decode"]
    assert headings_at_foot((595, 842, head + two), 13.6) == []


def test_no_heading_at_a_page_foot(words, body_height: float) -> None:
    """Every section heading has at least two lines of text under it on its page (1 page at c78739c)."""
    found = [(i + 1, h) for i, page in enumerate(words) for h in headings_at_foot(page, body_height)]
    assert not found, f"{len(found)} headings at a page foot with under two lines after them: {found}"


def _letters(s: str) -> str:
    """Only the letters of ``s``, lower case: a title set in small capitals, hyphenated or broken across lines,
    compares with its source."""
    return re.sub(r"[^a-z]", "", s.lower())


def _dropdown_titles() -> list[str]:
    """The titles of the chapters' fold-outs (``{dropdown}`` directives: "Going deeper: ...")."""
    titles = []
    for stem in re.findall(r"file:\s*(chapters/\S+)", (ROOT / "_toc.yml").read_text()):
        for cell in json.loads((ROOT / f"{stem}.ipynb").read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                titles += re.findall(r"^[`:]{3,}\{dropdown\}[ \t]*(.+)$", "".join(cell["source"]), flags=re.M)
    return titles


def test_fold_out_titles_print(text: str) -> None:
    """Every "Going deeper" fold-out prints its title as a call-out's label (20 printed as untitled boxes at
    f6979d9, R7)."""
    titles = _dropdown_titles()
    assert len(titles) >= 15, f"only {len(titles)} dropdown titles found in the chapters"
    flat = _letters(text)
    missing = [t for t in titles if _letters(_plain(t) if "$" in t else t) not in flat]
    assert not missing, f"{len(missing)} of {len(titles)} fold-out titles are not in {PDF}: {missing}"


def test_no_doubled_equation_brackets(text: str) -> None:
    """An equation reference prints "(4.4)", not "((4.4))" (the role brackets it already; 16 at f6979d9, R7)."""
    flat = " ".join(text.split())
    found = re.findall(r".{0,40}\(\(\d+\.\d+\)\).{0,10}", flat)
    assert not found, f"{len(found)} doubled brackets around an equation number: {found[:6]}"


LABEL = re.compile(r"(?:Solution to )?Exercise \d+\.\d+\.?|Going deeper:.*|Takeaways|Pitfall.*", flags=re.I)


def labels_at_foot(page) -> list[str]:
    """A call-out's label ("Solution to Exercise 1.2", a line of its own in small capitals, which the PDF's text
    holds in the source's case) that is the last line of its page, its body on the next."""
    lines = _lines(_body(page))
    if not lines:
        return []
    last = " ".join(w.text for w in lines[-1])
    return [last] if LABEL.fullmatch(last) else []


def test_label_at_foot_detector() -> None:
    text = [Word(70, 600, 300, 612, "Some"), Word(70, 700, 150, 712, "Solution"), Word(155, 700, 170, 712, "to"),
            Word(175, 700, 240, 712, "Exercise"), Word(245, 700, 260, 712, "1.2")]
    assert labels_at_foot((595, 842, text)) == ["Solution to Exercise 1.2"]
    assert labels_at_foot((595, 842, [*text, Word(70, 716, 300, 728, "The")])) == []
    assert labels_at_foot((595, 842, [Word(70, 700, 150, 712, "Exercise"), Word(155, 700, 170, 712, "10.3"),
                                      Word(175, 700, 240, 712, "Derive")])) == []


def test_no_call_out_label_at_a_page_foot(words) -> None:
    """A "Solution to Exercise N" (or any call-out's) label keeps its first lines with it (4 pages ended with one
    at f6979d9, R7)."""
    found = [(i + 1, t) for i, page in enumerate(words) for t in labels_at_foot(page)]
    assert not found, f"{len(found)} call-out labels end a page, their body on the next (page, label): {found}"


def test_tables_are_numbered_and_captioned(text: str) -> None:
    """Every table carries "Table N.k" and a caption, as in a book (none did at c78739c): the chapters' 15 and the
    calculator's 2 (its "One training step" table is left out for presets it cannot answer)."""
    flat = " ".join(text.replace("\u00ad", "").split())
    numbers = set(re.findall(r"\bTable (\d+\.\d+) [A-Z]", flat))
    assert len(numbers) >= 17, f"only {len(numbers)} numbered table captions: {sorted(numbers)}"
    assert any(n.startswith("14.") for n in numbers), "the calculator's tables are not numbered"


def test_cross_references_name_chapters(text: str, outline) -> None:
    """A link to another chapter prints as "Chapter N", to a back-matter document as "Appendix A" (titles at
    c78739c: 84 links named their target's title), and the appendices carry their letters."""
    flat = " ".join(text.replace("\u00ad", "").split())
    assert len(re.findall(r"\bChapter \d+\b", flat)) >= 40
    assert re.search(r"\bAppendix [AB]\b", flat)
    titles = [t for _, t, _ in outline]
    assert any(t.startswith("Appendix A") for t in titles) and any(t.startswith("Appendix B") for t in titles), titles
    assert not re.search(r"\bthe Chapter \d", flat), "a reference reads 'the Chapter N'"


def test_no_icon_font() -> None:
    """The call-outs carry no web icons: no icon font in the PDF (FontAwesome at c78739c)."""
    import subprocess

    fonts = subprocess.run(["pdffonts", str(PDF)], capture_output=True, text=True, check=True).stdout
    assert "FontAwesome" not in fonts and "Font Awesome" not in fonts, fonts


def test_calculator_prints_as_a_table(pages: list[str]) -> None:
    """The in-page calculator prints as a worked table of presets, not as empty form fields."""
    flat = [" ".join(p.replace("\u00ad", "").split()) for p in pages]
    labels = ["LoRA rank (0: full training)", "training tokens (0: no time)", "context (tokens)"]
    fields = [(i + 1, label) for i, p in enumerate(flat) for label in labels if label in p]
    assert not fields, f"the calculator's form fields are printed (PDF page, label): {fields}"
    tables = [i for i, p in enumerate(flat) if "GPUs (serving rules)" in p]
    assert tables, "no calculator table (its row 'GPUs (serving rules)') in the PDF"
    page = " ".join(flat[tables[0]:tables[0] + 2])
    assert "Llama-2-7b-hf" in page and "Mixtral-8x7B-v0.1" in page, page[:300]
    assert "weights + cache" in page and len(re.findall(r"\d GiB", page)) >= 12, \
        f"the calculator's table holds too few values: {page[:400]}"


def test_pdf_size() -> None:
    """The PDF stays a download (11 MB at 505a96d; 121 MB when the pages merged with their running heads were written
    uncompressed)."""
    size = PDF.stat().st_size
    assert size < 30e6, f"{PDF} is {size / 1e6:.0f} MB"


def test_no_link_to_the_build_server(reader) -> None:
    """Links to the book's own files (the code download) do not point at the local server that printed it."""
    local = []
    for i, page in enumerate(reader.pages):
        for annot in page.get("/Annots") or []:
            action = annot.get_object().get("/A")
            uri = str(action.get("/URI", "")) if action else ""
            if re.match(r"https?://(127\.0\.0\.1|localhost)\b", uri):
                local.append((i + 1, uri))
    assert not local, f"{len(local)} links to the build's local server: {local[:5]}"
