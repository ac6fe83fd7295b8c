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


def check_page_health(page, site_url: str, rel: str) -> None:
    """On the page already open at ``rel``: math typeset, images loaded, no off-host requests, no unexpected
    errors, exercise solutions hidden until clicked (the click is the last thing done to the page)."""
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
    unexpected = unexpected_errors(page.book_errors)
    assert not unexpected, f"{rel}: page errors: {unexpected}"


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
