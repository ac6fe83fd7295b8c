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
from urllib.parse import quote, urljoin

# Page and console errors that are tolerated, each with why: none. (The two the themes used to log, sphinx-thebe's
# doubled `const THEBE_JS_URL` and pydata-sphinx-theme's "invalid theme mode", are fixed at their source:
# _ext/book_html.py and `html_context.default_mode` in _config.yml.) Matched (re.search) against
# "pageerror: ..." / "console.error: ...".
ALLOWED_ERRORS: list[tuple[str, str]] = []

# Words too common to identify a chapter by.
STOP_WORDS = {"the", "and", "with", "from", "what", "when", "does", "into", "that", "this", "their", "how", "why"}
MATHJAX_TIMEOUT_MS = 30_000


def _unexpected_errors(errors: list[str]) -> list[str]:
    return [e for e in errors if not any(re.search(pattern, e) for pattern, _ in ALLOWED_ERRORS)]


def _open(page, site_url: str, rel: str) -> None:
    response = page.goto(urljoin(site_url, rel), wait_until="load")
    assert response is not None and response.ok, f"{rel}: HTTP {response.status if response else 'no response'}"


def _wait_for_mathjax(page, rel: str) -> None:
    try:
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=MATHJAX_TIMEOUT_MS
        )
    except Exception as exc:  # a Playwright TimeoutError
        raise AssertionError(
            f"{rel}: MathJax did not start within {MATHJAX_TIMEOUT_MS} ms (is it served from _static/offline/?)"
        ) from exc
    page.evaluate("() => MathJax.startup.promise")


def test_page_works_offline(page, site_url: str, site_pages: list[str], book_page: str) -> None:
    """Math typeset, images loaded, no off-host requests, no unexpected errors, solutions hidden."""
    rel = book_page
    _open(page, site_url, rel)

    n_math = page.locator(".math").count()
    if n_math:
        _wait_for_mathjax(page, rel)
        untypeset = page.evaluate(
            "() => Array.from(document.querySelectorAll('.math'))"
            ".filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80))"
        )
        assert not untypeset, f"{rel}: {len(untypeset)} of {n_math} math elements not typeset, e.g. {untypeset[:3]}"
        tex_errors = page.evaluate(
            "() => Array.from(document.querySelectorAll('mjx-merror, mjx-container [data-mjx-error]'))"
            ".map(e => (e.getAttribute('data-mjx-error') || e.textContent).slice(0, 120))"
        )
        assert not tex_errors, f"{rel}: MathJax reports TeX errors: {tex_errors[:5]}"
        # The typeset math really uses MathJax's web fonts, served from this host.
        fonts = page.evaluate(
            "() => performance.getEntriesByType('resource').map(r => r.name).filter(n => /\\.woff2?$/.test(n))"
        )
        assert all(f.startswith(site_url) for f in fonts), f"{rel}: fonts from elsewhere: {fonts}"

    broken = page.evaluate(
        """async () => {
            const imgs = Array.from(document.images);
            const results = await Promise.allSettled(imgs.map(i => { i.loading = 'eager'; return i.decode(); }));
            return imgs.filter((img, k) => results[k].status === 'rejected' || img.naturalWidth === 0)
                       .map(img => img.getAttribute('src'));
        }"""
    )
    assert not broken, f"{rel}: images that did not load: {broken}"

    solutions = page.locator(".solution.dropdown")
    for k in range(solutions.count()):
        body = solutions.nth(k).locator(":scope > :not(.admonition-title)")
        visible = [body.nth(j).is_visible() for j in range(body.count())]
        assert body.count() and not any(visible), f"{rel}: solution {k} is not hidden by default"
    if solutions.count():  # and one click shows it
        solutions.first.locator(".admonition-title").click()
        page.wait_for_timeout(300)
        assert solutions.first.locator(":scope > :not(.admonition-title)").first.is_visible(), (
            f"{rel}: clicking the first solution's title did not show it"
        )

    page.wait_for_timeout(200)  # let late scripts report
    assert not page.book_off_host_requests, f"{rel}: requests to other hosts: {page.book_off_host_requests}"
    unexpected = _unexpected_errors(page.book_errors)
    assert not unexpected, f"{rel}: page errors: {unexpected}"


def _search_word(title: str) -> str:
    words = [w.lower() for w in re.findall(r"[A-Za-z]{4,}", title) if w.lower() not in STOP_WORDS]
    assert words, f"no searchable word in the title {title!r}"
    return max(words, key=len)


def test_search_finds_chapter(page, site_url: str, site_pages: list[str], book_chapter: str) -> None:
    """The built-in search finds each chapter by the longest word of its title."""
    rel = book_chapter
    assert rel in site_pages, f"{rel} is not a page of the built book"
    _open(page, site_url, rel)
    title = page.locator("main h1").first.inner_text()
    word = _search_word(title)
    _open(page, site_url, f"search.html?q={quote(word)}")
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
    assert not _unexpected_errors(page.book_errors), page.book_errors


def test_chapter_notebook_downloadable(page, site_url: str, site_pages: list[str], book_chapter: str) -> None:
    """Every chapter page offers its notebook (.ipynb) for download, and the link serves a valid notebook."""
    rel = book_chapter
    assert rel in site_pages, f"{rel} is not a page of the built book"
    _open(page, site_url, rel)
    link = page.locator("a.btn-download-source-button[href$='.ipynb']")
    assert link.count() == 1, f"{rel}: no download link for the notebook"
    url = urljoin(page.url, link.first.get_attribute("href"))
    response = page.request.get(url)
    assert response.ok, f"{rel}: downloading {url} gave HTTP {response.status}"
    nb = json.loads(response.text())
    assert nb.get("nbformat") == 4 and nb.get("cells"), f"{rel}: {url} is not a notebook"
    assert nb["metadata"]["kernelspec"]["name"] == "python3", f"{rel}: kernelspec is not python3"


def test_screenshot_of_a_chapter(page, site_url: str, site_pages: list[str], artifacts_dir) -> None:
    """Keep a screenshot of one chapter (test-artifacts/chapter.png) for a human to look at."""
    chapters = [p for p in site_pages if p.startswith("chapters/")]
    rel = "chapters/softmax.html" if "chapters/softmax.html" in chapters else chapters[0]
    _open(page, site_url, rel)
    if page.locator(".math").count():
        _wait_for_mathjax(page, rel)
    out = artifacts_dir / "chapter.png"
    page.screenshot(path=str(out), full_page=False)
    assert out.stat().st_size > 10_000, f"{out} is suspiciously small"


def test_fixture_catches_off_host_requests_and_errors(page, site_url: str, site_pages: list[str]) -> None:
    """The checks above can fail: an off-host image, a missing local file and a script error are all caught."""
    _open(page, site_url, next(p for p in site_pages if p.startswith("chapters/")))
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
    assert any("deliberate" in e for e in _unexpected_errors(page.book_errors))
    page.book_off_host_requests.clear()  # expected here: do not fail the test at teardown


def test_bibliography_lists_what_the_chapters_cite(page, site_url: str, site_pages: list[str]) -> None:
    """The bibliography page renders its entries, and every entry is cited from some page (and vice versa)."""
    assert "bibliography.html" in site_pages, "there is no bibliography page (bibliography.md in _toc.yml)"
    _open(page, site_url, "bibliography.html")
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
