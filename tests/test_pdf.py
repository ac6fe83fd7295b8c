"""The whole book as one PDF (``make pdf``): every chapter is in it, numbered, and no raw TeX is left.

Marked ``pdf``: the test command builds the PDF (``tools/build_pdf.py``, about two minutes) and then runs
``pytest -m pdf``; the library tests skip these. ``$BOOK_PDF`` names the file (default ``_build/pdf/book.pdf``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PDF = Path(os.environ.get("BOOK_PDF", ROOT / "_build" / "pdf" / "book.pdf"))

pytestmark = pytest.mark.pdf

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


@pytest.fixture(scope="module")
def text() -> str:
    if not PDF.is_file():
        pytest.fail(f"no PDF at {PDF}: run `make pdf` (or .venv/bin/python tools/build_pdf.py) first", pytrace=False)
    from pypdf import PdfReader

    reader = PdfReader(str(PDF))
    assert len(reader.pages) > 50, f"{PDF} has only {len(reader.pages)} pages"
    return "\n".join(page.extract_text() or "" for page in reader.pages)


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
