"""Checks shared by the browser tests: a page opened offline, math typeset, images loaded, no errors."""

from __future__ import annotations

import re
from urllib.parse import urljoin

# Page and console errors that are tolerated, each with why: none. (The two the themes used to log, sphinx-thebe's
# doubled `const THEBE_JS_URL` and pydata-sphinx-theme's "invalid theme mode", are fixed at their source:
# _ext/book_html.py and `html_context.default_mode` in _config.yml.) Matched (re.search) against
# "pageerror: ..." / "console.error: ...".
ALLOWED_ERRORS: list[tuple[str, str]] = []

MATHJAX_TIMEOUT_MS = 30_000
#: How long a click on a solution's title may take to show it (togglebutton.js shows it at once: the 0.3 s fade
#: of its opacity does not count; Playwright counts an element visible when it has a box and visibility).
SOLUTION_TIMEOUT_MS = 3_000
#: The ``record_property`` key of a chapter's numbered equations at 390 px (the book-wide budget in conftest.py).
BUDGET_KEY = "numbered_equations_at_390px"
#: At most this many of the book's numbered equations may need sideways scrolling at 390 px (long ones are
#: broken over lines): a book-wide budget, summed over the per-chapter records of test_layout.py.
MAX_SCROLLING_NUMBERED_ON_PHONE = 10


def without_math(page) -> None:
    """Serve MathJax to this page as an empty script, for a test of something else on a chapter page (a slider,
    the calculator): the browser then spends no seconds typesetting formulas the test never looks at. The
    formulas themselves are checked on the loads of tests/browser/test_layout.py."""
    page.route("**/_static/mathjax/**",
               lambda route: route.fulfill(status=200, content_type="text/javascript", body=""))


def unexpected_errors(errors: list[str]) -> list[str]:
    return [e for e in errors if not any(re.search(pattern, e) for pattern, _ in ALLOWED_ERRORS)]


def open_page(page, site_url: str, rel: str) -> None:
    response = page.goto(urljoin(site_url, rel), wait_until="load")
    assert response is not None and response.ok, f"{rel}: HTTP {response.status if response else 'no response'}"


def wait_for_mathjax(page, rel: str) -> None:
    try:
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=MATHJAX_TIMEOUT_MS
        )
    except Exception as exc:  # a Playwright TimeoutError
        raise AssertionError(
            f"{rel}: MathJax did not start within {MATHJAX_TIMEOUT_MS} ms (is it served from _static/offline/?)"
        ) from exc
    page.evaluate("() => MathJax.startup.promise")


def check_page_health(page, site_url: str, rel: str, first_solution_open: bool = False) -> None:
    """On the page already open at ``rel``: math typeset, images loaded, no off-host requests, no unexpected
    errors, exercise solutions hidden until clicked, and a click on the first one's title opens it (the click is
    the last thing done to the page). With ``first_solution_open`` (a tap at phone width opened it already:
    tests/browser/test_layout.py) the others are hidden and the click closes it."""
    n_math = page.locator(".math").count()
    if n_math:
        wait_for_mathjax(page, rel)
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
    for k in range(1 if first_solution_open else 0, solutions.count()):
        body = solutions.nth(k).locator(":scope > :not(.admonition-title)")
        visible = [body.nth(j).is_visible() for j in range(body.count())]
        assert body.count() and not any(visible), f"{rel}: solution {k} is not hidden by default"
    if solutions.count():  # and a click on the first one's title shows it (or hides the one a tap showed)
        toggle_first_solution(page, rel, show=not first_solution_open)

    page.wait_for_timeout(200)  # let late scripts report
    assert not page.book_off_host_requests, f"{rel}: requests to other hosts: {page.book_off_host_requests}"
    unexpected = unexpected_errors(page.book_errors)
    assert not unexpected, f"{rel}: page errors: {unexpected}"


def toggle_first_solution(page, rel: str, show: bool = True) -> None:
    """Click the first exercise solution's title at its centre, where a reader taps (Playwright scrolls it into
    view first), and wait until the solution is shown (``show``) or hidden. Shown means on screen too: its top
    within the window, nothing of it past the window's left or right edge. A failure names the element under
    the title's centre and the page's address after the click (a link in the title once took the tap and jumped
    to the exercise, leaving the solution shut)."""
    from playwright.sync_api import expect

    solution = page.locator(".solution.dropdown").first
    title = solution.locator(":scope > .admonition-title")
    body = solution.locator(":scope > :not(.admonition-title)").first
    before = page.url
    title.scroll_into_view_if_needed(timeout=SOLUTION_TIMEOUT_MS)
    under = title.evaluate(
        """(t) => { const r = t.getBoundingClientRect();
            const e = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            return e ? e.outerHTML.slice(0, 100) : null; }""")
    title.click(timeout=SOLUTION_TIMEOUT_MS)  # fails fast, naming it, when another element covers the title
    width = page.viewport_size["width"]
    what = (f"{rel} at {width} px: a click at the centre of the first solution's title (it lands on {under}; "
            f"address {before} -> {page.url})")
    try:
        expect(body).to_be_visible(visible=show, timeout=SOLUTION_TIMEOUT_MS)
    except AssertionError as exc:
        raise AssertionError(f"{what} did not {'show' if show else 'hide'} it within {SOLUTION_TIMEOUT_MS} ms"
                             ) from exc
    if show:
        box = body.bounding_box()
        height = page.viewport_size["height"]
        assert box and box["x"] >= -1 and box["x"] + box["width"] <= width + 1 and 0 <= box["y"] < height, (
            f"{what} showed it off screen: {box} in a {width}x{height} window")


def budget_verdict(numbered: list[int], scrolling: list[str], limit: int = MAX_SCROLLING_NUMBERED_ON_PHONE) -> str:
    """Why the book-wide budget fails ("" when it holds, or when no chapter recorded anything)."""
    if not numbered:
        return ""
    if sum(numbered) == 0:
        return f"no numbered equation found in any of the {len(numbered)} chapters measured at 390 px"
    if len(scrolling) > limit:
        return (f"{len(scrolling)} of {sum(numbered)} numbered equations scroll sideways at 390 px (at most {limit}):"
                f" break them over lines; {scrolling}")
    return ""
