"""The review of the four notes (chapters/errata): the API refuses entries the appendix could not render, and
every note's module runs, records its claims in the note's order and prints no round-off digits."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "chapters"))
import errata  # noqa: E402  (a package of the chapters folder, as the appendix imports it)

GOOD = dict(note="lab-report", line=3, section="1. Attention", says="a claim", grade="correct", evidence="shown")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("note", "lab_report", "note must be one of"),
    ("grade", "mostly right", "grade must be one of"),
    ("line", 0, "line must be a positive int"),
    ("line", 2.0, "line must be a positive int"),
    ("line", True, "line must be a positive int"),
    ("section", " ", "section must be a non-empty string"),
    ("evidence", "", "evidence must be a non-empty string"),
    ("says", "x" * (errata.MAX_SAYS + 1), "says must paraphrase"),
    ("chapter", "Softmax", "chapter must be a chapter label"),
])
def test_add_refuses_bad_entries(field: str, value: object, message: str) -> None:
    review = errata.Review()
    with pytest.raises(ValueError, match=message):
        review.add(**{**GOOD, field: value})
    assert review.claims == []


def test_for_note_orders_by_line_and_keeps_other_notes_apart() -> None:
    review = errata.Review()
    review.add(**{**GOOD, "line": 9, "says": "later"})
    review.add(**{**GOOD, "line": 2, "says": "earlier"})
    review.add(**{**GOOD, "note": "walkthrough", "line": 1})
    assert [c.says for c in review.for_note("lab-report")] == ["earlier", "later"]
    assert len(review.for_note("walkthrough")) == 1 and review.for_note("theory-notes") == []


def test_check_note_refuses_an_unknown_note() -> None:
    with pytest.raises(ValueError, match="note must be one of"):
        errata.check_note("the lab report", errata.Review())


ROUNDOFF = re.compile(r"\d\.\d{7,}")  # seven or more decimals: digits that round-off could change


@pytest.mark.parametrize("note", list(errata.MODULES))
def test_each_note_is_reviewed(note: str) -> None:
    """Every note's module runs (its own assertions hold), records claims of that note only, and prints no
    round-off digits, which would differ between machines."""
    review = errata.Review()
    claims = errata.check_note(note, review)
    assert len(claims) >= 10, f"{note}: only {len(claims)} claims recorded"
    assert {c.note for c in claims} == {note}
    assert {c.grade for c in claims} <= set(errata.GRADES)
    for c in claims:
        assert not ROUNDOFF.search(c.evidence), f"{note} line {c.line}: round-off digits in {c.evidence!r}"
