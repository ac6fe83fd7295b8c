"""The book's sliders work in the HTML, without a kernel (``lib.book.widgets.explore``, ``_static/explore.js``).

For each chapter page: every ``explore(...)`` call in the chapter's code became a slider on the page (a stored
output with no frames would leave only the static grid: the chapter was executed before the frames existed);
each slider shows exactly one frame, and moving it (keyboard, as a reader would) shows another frame image and
another value; the static panel grid is hidden on screen and shown when printing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urljoin

from page_checks import without_math

ROOT = Path(__file__).resolve().parents[2]
CALL = re.compile(r"^\s*(?:\w+\s*=\s*)?explore\(", flags=re.M)


def _explore_calls(rel: str) -> int:
    """How many cells of the chapter's notebook call ``explore(`` (the HTML page's source)."""
    nb = ROOT / Path(rel).with_suffix(".ipynb")
    if not nb.is_file():
        return 0
    cells = json.loads(nb.read_text())["cells"]
    return sum(1 for c in cells if c["cell_type"] == "code" and CALL.search("".join(c["source"])))


def _state(page, i: int) -> dict:
    return page.evaluate(
        """i => { const box = document.querySelectorAll('.book-explore')[i];
                 const shown = Array.from(box.querySelectorAll('img.book-explore-frame'))
                    .filter(img => getComputedStyle(img).display !== 'none');
                 return {shown: shown.map(img => img.currentSrc || img.src),
                         loaded: shown.every(img => img.complete && img.naturalWidth > 0),
                         value: (box.querySelector('.book-explore-value') || {}).textContent,
                         grid: getComputedStyle(box.querySelector('.book-explore-grid')).display}; }""", i)


def test_every_slider_changes_its_figure(page, site_url: str, book_chapter: str) -> None:
    rel = book_chapter
    without_math(page)
    response = page.goto(urljoin(site_url, rel), wait_until="load")
    assert response is not None and response.ok, rel
    expected = _explore_calls(rel)
    boxes = page.locator(".book-explore")
    assert boxes.count() == expected, (
        f"{rel}: {expected} explore() call(s) in the notebook but {boxes.count()} slider(s) on the page "
        "(re-execute the chapter so its outputs carry the slider's frames)")
    for i in range(expected):
        box = boxes.nth(i)
        box.scroll_into_view_if_needed()
        slider = box.locator("input[type=range]")
        assert slider.count() == 1, f"{rel}: slider {i + 1} has no range input (explore.js did not run?)"
        before = _state(page, i)
        assert len(before["shown"]) == 1 and before["loaded"], f"{rel}: slider {i + 1} shows {before}"
        assert before["grid"] == "none", f"{rel}: slider {i + 1} also shows the static grid on screen"
        n = int(slider.get_attribute("max")) + 1
        assert n >= 2, f"{rel}: slider {i + 1} has {n} frame(s)"
        seen = {before["shown"][0]}
        slider.focus()
        key = "ArrowLeft" if int(slider.input_value()) == n - 1 else "ArrowRight"
        for _ in range(2):
            page.keyboard.press(key)
            after = _state(page, i)
            assert len(after["shown"]) == 1 and after["loaded"], f"{rel}: slider {i + 1} shows {after}"
            assert after["shown"][0] not in seen, f"{rel}: slider {i + 1} did not change its figure ({after})"
            assert after["value"] != before["value"], f"{rel}: slider {i + 1}'s value label did not change"
            seen.add(after["shown"][0])
            if int(slider.input_value()) in (0, n - 1):
                break
    if expected:
        page.emulate_media(media="print")
        printed = [_state(page, i) for i in range(expected)]
        assert all(s["grid"] != "none" and not s["shown"] for s in printed), f"{rel}: print shows {printed}"
        page.emulate_media(media="screen")
    errors = [e for e in page.book_errors if "explore" in e]
    assert not errors, f"{rel}: {errors}"
