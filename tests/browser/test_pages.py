"""Every page of the built book, opened in a real browser (Chromium via Playwright), offline.

For each page: nothing is requested from any host but the one serving the book (the ``page`` fixture aborts
and reports such requests), math is typeset by the locally served MathJax without TeX errors, every image
has loaded, there are no page errors and no console errors at all, and exercise solutions start hidden. For
each chapter: the in-page search finds it by a word of its title, and its notebook can be downloaded.
One chapter's screenshot is kept in ``test-artifacts/``.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from urllib.parse import quote, urljoin

from page_checks import check_page_health, open_page, unexpected_errors, wait_for_mathjax

# Words too common to identify a chapter by.
STOP_WORDS = {"the", "and", "with", "from", "what", "when", "does", "into", "that", "this", "their", "how", "why"}


def test_page_works_offline(page, site_url: str, site_pages: list[str], book_other_page: str) -> None:
    """Every page that is not a chapter (a chapter is checked the same way, on the load that measures its layout
    at 1280 px: tests/browser/test_layout.py): math typeset, images loaded, no off-host requests, no errors."""
    rel = book_other_page
    open_page(page, site_url, rel)
    check_page_health(page, site_url, rel)


class _Anchors(HTMLParser):
    """The ``<a>`` elements (their attributes) and the text of the first ``<h1>`` of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[dict[str, str]] = []
        self.h1: list[str] = []
        self._in_h1 = 0
        self._h1_done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append({k: v or "" for k, v in attrs})
        if tag == "h1" and not self._h1_done:
            self._in_h1 += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "h1" and self._in_h1:
            self._in_h1 -= 1
            self._h1_done = not self._in_h1

    def handle_data(self, data: str) -> None:
        if self._in_h1:
            self.h1.append(data)


def _served(page, site_url: str, rel: str) -> str:
    """The page's HTML as served (fetched, not rendered: what is read from it needs no script)."""
    response = page.request.get(urljoin(site_url, rel))
    assert response.ok, f"{rel}: HTTP {response.status}"
    return response.text()


def _parsed(page, site_url: str, rel: str) -> _Anchors:
    """The page's anchors and first heading, as served."""
    parser = _Anchors()
    parser.feed(_served(page, site_url, rel))
    return parser


def _search_word(title: str) -> str:
    words = [w.lower() for w in re.findall(r"[A-Za-z]{4,}", title) if w.lower() not in STOP_WORDS]
    assert words, f"no searchable word in the title {title!r}"
    return max(words, key=len)


def test_search_finds_chapter(page, site_url: str, site_pages: list[str], book_chapter: str) -> None:
    """The built-in search finds each chapter by the longest word of its title."""
    rel = book_chapter
    assert rel in site_pages, f"{rel} is not a page of the built book"
    title = " ".join("".join(_parsed(page, site_url, rel).h1).split()).rstrip("#").strip()
    word = _search_word(title)
    open_page(page, site_url, f"search.html?q={quote(word)}")
    # Sphinx appends the results one by one, then writes "Search finished, found N page(s)...": wait for that.
    page.wait_for_function(
        """() => {
            const s = document.querySelector('#search-results .search-summary');
            const m = s && s.textContent.match(/found (\\d+) page/);
            return m && document.querySelectorAll('#search-results ul.search li').length === Number(m[1]);
        }""",
        timeout=30_000,
    )
    results = page.locator("#search-results ul.search li a")
    hrefs = [results.nth(k).get_attribute("href") or "" for k in range(results.count())]
    assert any(h.split("#")[0].split("?")[0].endswith(rel) for h in hrefs), (
        f"searching {word!r} (from the title {title!r}) does not find {rel}; found {hrefs[:10]}"
    )
    assert not page.book_off_host_requests
    assert not unexpected_errors(page.book_errors), page.book_errors


def test_chapter_notebook_downloadable(page, site_url: str, site_pages: list[str], book_chapter: str) -> None:
    """Every chapter page offers its notebook (.ipynb) for download, and the link serves a valid notebook."""
    rel = book_chapter
    assert rel in site_pages, f"{rel} is not a page of the built book"
    links = [a["href"] for a in _parsed(page, site_url, rel).anchors
             if "btn-download-source-button" in a.get("class", "").split() and a.get("href", "").endswith(".ipynb")]
    assert len(links) == 1, f"{rel}: {len(links)} download links for the notebook (want 1)"
    url = urljoin(urljoin(site_url, rel), links[0])
    response = page.request.get(url)
    assert response.ok, f"{rel}: downloading {url} gave HTTP {response.status}"
    nb = json.loads(response.text())
    assert nb.get("nbformat") == 4 and nb.get("cells"), f"{rel}: {url} is not a notebook"
    assert nb["metadata"]["kernelspec"]["name"] == "python3", f"{rel}: kernelspec is not python3"


# Two printed-text boxes in a row: what a cell that prints over time (a loop, a long computation) shows unless
# myst-nb merges its stream outputs (nb_merge_streams in _config.yml).
SPLIT_STREAM = re.compile(r'<div class="output stream[^"]*">\s*<div class="highlight"><pre>(?:(?!</pre>).)*</pre></div>'
                          r'\s*</div>\s*<div class="output stream', re.S)


def test_printed_text_of_a_cell_is_one_box(page, site_url: str, book_chapter: str) -> None:
    """What one cell prints is shown as one output box, however many pieces the kernel sent it in."""
    split = SPLIT_STREAM.findall(_served(page, site_url, book_chapter))
    assert not split, f"{book_chapter}: {len(split)} cells show their printed text in several boxes"


def test_screenshot_of_a_chapter(page, site_url: str, site_pages: list[str], artifacts_dir) -> None:
    """Keep a screenshot of one chapter (test-artifacts/chapter.png) for a human to look at."""
    chapters = [p for p in site_pages if p.startswith("chapters/")]
    rel = "chapters/softmax.html" if "chapters/softmax.html" in chapters else chapters[0]
    open_page(page, site_url, rel)
    if page.locator(".math").count():
        wait_for_mathjax(page, rel)
    out = artifacts_dir / "chapter.png"
    page.screenshot(path=str(out), full_page=False)
    assert out.stat().st_size > 10_000, f"{out} is suspiciously small"


def test_fixture_catches_off_host_requests_and_errors(page, site_url: str, site_pages: list[str]) -> None:
    """The checks above can fail: an off-host image, a missing local file and a script error are all caught."""
    open_page(page, site_url, next(p for p in site_pages if p.startswith("chapters/")))
    page.evaluate(
        """() => {
            const a = document.createElement('img'); a.src = 'http://example.invalid/x.png'; document.body.append(a);
            const b = document.createElement('img'); b.src = '_static/no-such-file.png'; document.body.append(b);
            setTimeout(() => { throw new Error('deliberate'); }, 0);
        }"""
    )
    page.wait_for_timeout(500)
    assert page.book_off_host_requests == ["http://example.invalid/x.png"]
    assert any(e.startswith("http 404:") and e.endswith("/_static/no-such-file.png") for e in page.book_errors)
    assert any("deliberate" in e for e in unexpected_errors(page.book_errors))
    page.book_off_host_requests.clear()  # expected here: do not fail the test at teardown


def test_bibliography_lists_what_the_chapters_cite(page, site_url: str, site_pages: list[str]) -> None:
    """The bibliography page renders its entries, and every entry is cited from some page (and vice versa)."""
    assert "bibliography.html" in site_pages, "there is no bibliography page (bibliography.md in _toc.yml)"
    open_page(page, site_url, "bibliography.html")
    entries = set(page.eval_on_selector_all("div.citation[role='doc-biblioentry']", "els => els.map(e => e.id)"))
    assert entries, "the bibliography page lists no entries"
    # labels read as the author-year citations do ("Vaswani et al., 2017"), not alpha keys ("VSP+17")
    labels = page.eval_on_selector_all("div.citation > span.label", "els => els.map(e => e.textContent.trim())")
    not_author_year = [t for t in labels if not re.fullmatch(r"\[?\S.*, (\d{4}[a-z]?|n\.d\.)\]?", t)]
    assert labels and not not_author_year, f"bibliography labels not author-year: {not_author_year[:5]}"
    cited: set[str] = set()
    for rel in site_pages:
        if rel == "bibliography.html":
            continue
        html = page.request.get(urljoin(site_url, rel)).text()
        cited |= set(re.findall(r'href="(?:\.\./)*bibliography\.html#([^"]+)"', html))
    assert cited, "no page cites anything from the bibliography"
    assert cited <= entries, f"citations point to missing entries: {sorted(cited - entries)}"
    assert entries <= cited, f"entries never cited from a page: {sorted(entries - cited)}"
