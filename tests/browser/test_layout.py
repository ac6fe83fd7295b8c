"""Every chapter as a reader sees it, at 1280 px (a laptop) and 390 px (a phone).

- The page itself never scrolls sideways, and no inline formula or code span runs past the text column.
- At 1280 px every display equation fits the text column; on a phone a wide one may scroll inside its own box,
  never be cut off.
- Every figure a chapter draws is numbered and captioned.
- No plumbing is visible by default: no ``glue(...)``, no nbval markers, no ``getsource`` dumps, no testing
  lines (``assert``, ``np.testing``, ``torch.testing``) in a visible code cell; no shown cell (not collapsed)
  over 30 lines. (Line widths are checked in the notebooks, at 76 characters: tools/check_reader_layer.py.)
- On a phone, at most 10 of the book's numbered equations need sideways scrolling (long ones are broken over
  lines).
- At 1280 px a code cell's or an output's box holds at least 78 characters (the chapters are formatted to 76)
  without scrolling sideways: its inner width is measured against a 78-character string in its own font.
- On a phone every figure is shown at most ``PHONE_FIGURE_PX`` wide (lib/book/figures.py: the width the
  chapters size their figures for; measured here, so the constant stays true) and its smallest text is at least
  9 px there: read from the figure file (an SVG's glyph sizes; a slider frame's PNG text chunks) and scaled to
  the width the browser shows it.
- On a phone a tap opens a figure at full size (700 px or more), and another tap closes it.
- Tables (pandas outputs, markdown tables) fit the text column at both widths: they wrap, never scroll or
  stick out (code may scroll inside its box on a phone; tables may not).
- On a phone a tap on an exercise solution's title shows the solution, on screen (and at 1280 px a click on
  the title hides it again).
- A chapter reads as a chapter, not a test report: at most 4,000 words (2,500 for the appendix) as the page
  shows them at 1280 px (prose, code and outputs; folded blocks and exercise solutions, which the reader opens,
  not counted), and no shown output line reads like a test verdict ("...: True", "to 1e-12", "< 1e-12",
  "for every seed").
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

from page_checks import BUDGET_KEY, check_page_health, toggle_first_solution

from lib.book import figures
from lib.book.widgets import PNG_TEXT_PT, PNG_WIDTH_IN

WIDTHS = {"laptop": 1280, "phone": 390}
PLUMBING = re.compile(r"\bglue\(|NBVAL_|getsource\(")
TESTING = re.compile(r"^\s*assert\b|\bnp\.testing\.|\btorch\.testing\.", re.M)
MAX_SHOWN_LINES = 30
MIN_CODE_BOX_CHARS = 78  # at 1280 px
MATHJAX_TIMEOUT_MS = 60_000
MAX_VISIBLE_WORDS = 4000
MAX_APPENDIX_WORDS = 2500  # the appendix of pitfalls: one sentence each, a reference rather than a chapter
VERDICT = re.compile(r":\s*True\s*$|\bto 1e-\d+|[<\u2264]\s*1e-\d+|for every seed", re.M)


def _load(page, site_url: str, rel: str, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    response = page.goto(urljoin(site_url, rel), wait_until="load")
    assert response is not None and response.ok, f"{rel}: HTTP {response.status if response else 'none'}"
    if page.locator(".math").count():
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                               timeout=MATHJAX_TIMEOUT_MS)
        page.evaluate("() => MathJax.startup.promise")
    page.wait_for_timeout(100)


def test_chapter_as_read(page, site_url: str, site_pages: list[str], book_chapter: str, record_property) -> None:
    """One load of the chapter, every check of this module's docstring on it: at 1280 px, then with the window
    narrowed to 390 px (the page's layout is CSS, and MathJax typesets once, at load, whatever the width), then
    the checks of every page (tests/browser/page_checks.py: offline, math typeset, images, no errors, solutions).
    """
    rel = book_chapter
    _load(page, site_url, rel, WIDTHS["laptop"])
    _layout_fits(page, rel, "laptop")
    _figures_are_numbered_and_captioned(page, rel)
    _no_plumbing_is_visible(page, rel)
    _reads_as_a_chapter(page, rel)
    page.set_viewport_size({"width": WIDTHS["phone"], "height": 900})
    page.wait_for_function(f"() => window.innerWidth === {WIDTHS['phone']}")
    page.wait_for_timeout(200)
    _layout_fits(page, rel, "phone")
    _figures_are_legible_on_a_phone(page, rel)
    record_property(BUDGET_KEY, _numbered_equations_that_scroll(page, rel))
    has_solution = _a_solution_opens_on_a_tap(page, rel)
    page.set_viewport_size({"width": WIDTHS["laptop"], "height": 900})
    # last, at 1280 px: a click on the first solution's title (closes the one the tap opened)
    check_page_health(page, site_url, rel, first_solution_open=has_solution)


def _layout_fits(page, rel: str, device: str) -> None:
    width = WIDTHS[device]
    page_width = page.evaluate("() => document.documentElement.scrollWidth")
    assert page_width <= width + 1, f"{rel} at {width} px: the page scrolls sideways ({page_width} px wide)"
    # Each display equation: how wide it is, how wide its box is, and whether that box scrolls.
    equations = page.evaluate(
        """() => Array.from(document.querySelectorAll('mjx-container[display="true"]')).map(m => {
            let box = m.parentElement;
            const text = (box.textContent || '').trim().slice(0, 60);
            while (box && box.clientWidth === 0) box = box.parentElement;
            const scrolls = el => el && ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
            return {need: m.scrollWidth, have: box ? box.clientWidth : 0,
                    scrolls: scrolls(m) || scrolls(m.parentElement), text};
        })"""
    )
    # Inline formulas and inline code in the prose: MathJax never breaks an inline formula and a browser never
    # breaks inside a code span, so one wider than the text column is cut off at its edge. (Tables, code cells
    # and cell outputs scroll in their own boxes and are left out; a collapsed dropdown has no width.)
    overflowing = page.evaluate(
        """() => {
            const art = document.querySelector('article') || document.body;
            const limit = art.getBoundingClientRect().right + 2;
            return Array.from(art.querySelectorAll('mjx-container:not([display="true"]), code'))
                .filter(el => !el.closest('pre, table, .cell_output') && !el.parentElement.closest('mjx-container'))
                .filter(el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.right > limit; })
                .map(el => (el.textContent || '').trim().slice(0, 60));
        }"""
    )
    assert not overflowing, (f"{rel} at {width} px: {len(overflowing)} inline formulas or code spans run past the "
                             f"text column (split a formula into several, e.g. before '='), e.g. {overflowing[:3]}")
    # Tables: within the text column, and no box around them scrolls sideways.
    tables = page.evaluate(
        """() => {
            const art = document.querySelector('article') || document.body;
            const limit = art.getBoundingClientRect().right + 2;
            return Array.from(art.querySelectorAll('table')).filter(t => t.offsetParent !== null).map(t => {
                let scrolls = false;
                for (let el = t; el && el !== art; el = el.parentElement)
                    if (el.scrollWidth > el.clientWidth + 2 && getComputedStyle(el).overflowX !== 'visible')
                        scrolls = true;
                const r = t.getBoundingClientRect();
                return {width: Math.round(r.width), out: r.right > limit, scrolls,
                        text: (t.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 50)};
            }).filter(t => t.out || t.scrolls);
        }"""
    )
    assert not tables, (f"{rel} at {width} px: {len(tables)} tables scroll sideways or stick out of the text column "
                        f"(split a column or shorten a cell), e.g. {tables[:3]}")
    if device == "laptop":
        # Every displayed code or output box: its inner width against a 78-character string in its own font.
        boxes = page.evaluate(
            """(n) => Array.from(document.querySelectorAll('div.cell div.highlight pre, .cell_output pre'))
                .filter(pre => pre.offsetParent !== null)
                .map(pre => {
                    const probe = document.createElement('span');
                    probe.textContent = 'M'.repeat(n);
                    probe.style.whiteSpace = 'pre';
                    pre.append(probe);
                    const need = probe.getBoundingClientRect().width;
                    probe.remove();
                    const cs = getComputedStyle(pre);
                    const have = pre.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
                    return {chars: Math.floor(have / (need / n) * 10) / 10,
                            text: (pre.textContent || '').trim().slice(0, 40)};
                })""", MIN_CODE_BOX_CHARS)
        narrow = [b for b in boxes if b["chars"] < MIN_CODE_BOX_CHARS]
        assert not narrow, (f"{rel} at {width} px: {len(narrow)} code/output boxes hold fewer than "
                            f"{MIN_CODE_BOX_CHARS} characters, e.g. {narrow[:3]}")
        wide = [e for e in equations if e["need"] > e["have"] + 2]
        assert not wide, f"{rel} at {width} px: {len(wide)} display equations wider than the column, e.g. {wide[:3]}"
    else:
        cut = [e for e in equations if e["need"] > e["have"] + 2 and not e["scrolls"]]
        assert not cut, f"{rel} at {width} px: {len(cut)} wide equations are cut off (no scroll box): {cut[:3]}"


def _figure_text_px(body: bytes, src: str, shown: float) -> float | None:
    """The smallest text, in CSS px, of a figure file shown ``shown`` px wide; None if the file does not say."""
    if src.split("?")[0].endswith(".svg"):
        return figures.svg_text_px(body.decode("utf-8"), shown_px=shown)
    import io

    from PIL import Image

    chunks = getattr(Image.open(io.BytesIO(body)), "text", {})
    if PNG_TEXT_PT not in chunks or PNG_WIDTH_IN not in chunks:
        return None
    # A PNG frame saved W inches wide is 96 W CSS px at its own size; the page shows it `shown` px wide.
    return float(chunks[PNG_TEXT_PT]) * shown / (72 * float(chunks[PNG_WIDTH_IN]))


def _figures_are_legible_on_a_phone(page, rel: str) -> None:
    """At 390 px: every figure (those in folded blocks and exercise solutions too, measured with the blocks
    opened for the moment; a slider's frames at the width of the one shown) no wider than PHONE_FIGURE_PX, its
    smallest text at least MIN_TEXT_PX at the width shown."""
    shown = page.evaluate(
        """() => {
            const hidden = Array.from(document.querySelectorAll('article .toggle-hidden'));
            const closed = Array.from(document.querySelectorAll('article details:not([open])'));
            hidden.forEach(el => el.classList.remove('toggle-hidden'));
            closed.forEach(d => { d.open = true; });
            const found = Array.from(document.querySelectorAll('article img')).map(img => {
                let width = img.getBoundingClientRect().width;
                const box = img.closest('.book-explore');
                if (!width && box && img.classList.contains('book-explore-frame')) {
                    const current = box.querySelector('img.book-explore-current');
                    width = current ? current.getBoundingClientRect().width : 0;
                }
                return {src: img.currentSrc || img.src, width};
            }).filter(f => f.width > 0);
            hidden.forEach(el => el.classList.add('toggle-hidden'));
            closed.forEach(d => { d.open = false; });
            return found;
        }"""
    )
    wide = [f"{f['src'].rsplit('/', 1)[-1][:16]} {f['width']:.0f} px" for f in shown
            if f["width"] > figures.PHONE_FIGURE_PX + 0.5]
    assert not wide, (f"{rel} at 390 px: {len(wide)} figures shown wider than figures.PHONE_FIGURE_PX = "
                      f"{figures.PHONE_FIGURE_PX} (the width the figures are sized for: measure and update it), "
                      f"e.g. {wide[:3]}")
    small, unknown = [], []
    for f in shown:
        response = page.request.get(f["src"])
        assert response.ok, f"{rel}: {f['src']} HTTP {response.status}"
        px = _figure_text_px(response.body(), f["src"], f["width"])
        name = f"{f['src'].rsplit('/', 1)[-1][:16]} ({f['width']:.0f} px wide)"
        if px is None:
            unknown.append(name)
        elif px < figures.MIN_TEXT_PX:
            small.append(f"{name}: {px:.1f} px")
    assert not small and not unknown, (
        f"{rel} at 390 px: {len(small)} figures have text under {figures.MIN_TEXT_PX:g} px (draw them "
        f"figures.PHONE_WIDTH wide or with larger fonts), e.g. {small[:4]}; {len(unknown)} whose text size cannot "
        f"be read (a slider frame drawn before widgets.py recorded it: re-execute), e.g. {unknown[:2]}")


def _a_solution_opens_on_a_tap(page, rel: str) -> bool:
    """At phone width the first exercise solution is hidden, and a tap at the centre of its title shows it on
    screen (page_checks.toggle_first_solution; a mouse click, which reaches togglebutton.js as a tap does). At 390
    px the title's centre falls on its link to the exercise, not on empty title as at 1280 px. Whether the
    chapter has a solution."""
    solution = page.locator(".solution.dropdown").first
    if not solution.count():
        return False
    assert not solution.locator(":scope > :not(.admonition-title)").first.is_visible(), (
        f"{rel}: the first solution is not hidden by default")
    toggle_first_solution(page, rel, show=True)
    return True


def _figures_are_numbered_and_captioned(page, rel: str) -> None:
    bare = page.evaluate(
        """() => Array.from(document.querySelectorAll('.cell_output img, .output img'))
            .filter(img => {
                const fig = img.closest('figure');
                const cap = fig && fig.querySelector('figcaption');
                return !(cap && /Fig\\.?\\s*\\d/.test(cap.textContent) && cap.textContent.trim().length > 12);
            })
            .map(img => img.getAttribute('src'))"""
    )
    assert not bare, f"{rel}: {len(bare)} figures without a number and caption: {bare[:5]}"


def _no_plumbing_is_visible(page, rel: str) -> None:
    visible_code = page.evaluate(
        """() => Array.from(document.querySelectorAll('.cell_input pre, .cell .highlight pre'))
            .filter(pre => pre.offsetParent !== null)  // displayed (not inside a collapsed details)
            .map(pre => pre.textContent)"""
    )
    shown = [c.strip().splitlines()[0][:80] for c in visible_code if PLUMBING.search(c)]
    assert not shown, f"{rel}: {len(shown)} visible code cells show glue/NBVAL/getsource, e.g. {shown[:3]}"
    testing = [c.strip().splitlines()[0][:80] for c in visible_code if TESTING.search(c)]
    assert not testing, f"{rel}: {len(testing)} visible code cells hold testing lines, e.g. {testing[:3]}"
    shown = page.evaluate(
        """() => Array.from(document.querySelectorAll('.cell_input pre'))
            .filter(pre => pre.offsetParent !== null && !pre.closest('.tag_hide-input, .tag_hide-cell'))
            .map(pre => pre.textContent)"""
    )
    long = [len(c.strip().splitlines()) for c in shown if len(c.strip().splitlines()) > MAX_SHOWN_LINES]
    assert not long, f"{rel}: {len(long)} shown code cells over {MAX_SHOWN_LINES} lines ({long})"


def _reads_as_a_chapter(page, rel: str) -> None:
    """Words as the page shows them (``innerText`` leaves out what is not rendered: closed dropdowns, hidden
    solutions) and shown output lines that read like a verdict."""
    text = page.evaluate("() => (document.querySelector('article') || document.body).innerText")
    words = len(text.split())
    limit = MAX_APPENDIX_WORDS if rel.endswith("claims_checked.html") else MAX_VISIBLE_WORDS
    assert words <= limit, (f"{rel}: {words:,} visible words at 1280 px (at most {limit:,}): fold side material "
                            "into a 'Going deeper' dropdown or cut it")
    outputs = page.evaluate(
        """() => Array.from(document.querySelectorAll('.cell_output pre'))
            .filter(pre => pre.offsetParent !== null).map(pre => pre.innerText)"""
    )
    verdicts = [line.strip()[:80] for out in outputs for line in out.splitlines() if VERDICT.search(line)]
    assert not verdicts, (f"{rel}: {len(verdicts)} shown output lines read like a test verdict (say the agreement "
                          f"in a sentence, keep the check in a hidden cell), e.g. {verdicts[:3]}")


def _numbered_equations_that_scroll(page, rel: str) -> dict:
    """The chapter's numbered equations (with an equation number) at this width, and those wider than the column:
    ``{"numbered": n, "scrolling": ["chapters/x.html (3.2)", ...]}``, for the book-wide budget (conftest.py)."""
    found = page.evaluate(
        """() => Array.from(document.querySelectorAll('div.math'))
            .filter(div => div.querySelector('.eqno'))
            .map(div => {
                const m = div.querySelector('mjx-container') || div;
                let box = div;
                while (box && box.clientWidth === 0) box = box.parentElement;
                return {wide: m.scrollWidth > (box ? box.clientWidth : 0) + 2,
                        eqno: (div.querySelector('.eqno').textContent || '').trim()};
            })"""
    )
    return {"numbered": len(found), "scrolling": [f"{rel} {e['eqno']}" for e in found if e["wide"]]}


def test_a_figure_opens_full_size_on_a_tap(page, site_url: str, site_pages: list[str]) -> None:
    """On a phone a figure is shown 342 px wide; a tap opens it at 700 px or more (scrolling sideways) and a
    second tap closes it (_static/figure-zoom.js)."""
    chapters = [p for p in site_pages if p.startswith("chapters/")]
    assert chapters, "no chapter pages"
    _load(page, site_url, chapters[0] if "chapters/softmax.html" not in chapters else "chapters/softmax.html",
          WIDTHS["phone"])
    figure = page.locator("img.book-zoomable").first
    assert figure.count(), "no figure can be opened full size (img.book-zoomable)"
    figure.scroll_into_view_if_needed()
    figure.click()
    shown = page.evaluate("""() => { const o = document.querySelector('div.book-zoom');
        const img = o && o.querySelector('img');
        return o ? {width: img.getBoundingClientRect().width, scrolls: o.scrollWidth > o.clientWidth} : null; }""")
    assert shown and shown["width"] >= 700 and shown["scrolls"], f"the figure did not open full size: {shown}"
    page.locator("div.book-zoom").click()
    assert page.locator("div.book-zoom").count() == 0, "the full-size figure did not close"
