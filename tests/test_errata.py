"""The review behind the appendix "Common claims, checked" (chapters/errata): the API refuses entries the page
could not render or that would quote instead of paraphrase, every module runs and records its claims, and no
shown or kept line prints round-off digits."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "chapters"))
import errata  # noqa: E402  (a package of the chapters folder, as the appendix imports it)

GOOD = dict(note="lab-report", line=3, section="1. Attention", says="a claim", grade="correct", evidence="shown 7",
            chapter="softmax", brief="shown #{0}")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("note", "lab_report", "note must be one of"),
    ("grade", "mostly right", "grade must be one of"),
    ("line", 0, "line must be a positive int"),
    ("line", 2.0, "line must be a positive int"),
    ("line", True, "line must be a positive int"),
    ("section", " ", "section must be a non-empty string"),
    ("evidence", "", "evidence must be a non-empty string"),
    ("brief", "", "brief must be a non-empty string"),
    ("brief", "x" * (errata.MAX_BRIEF + 1), "brief must be one line"),
    ("brief", "cites #{3}", "brief cites number"),
    ("says", "x" * (errata.MAX_SAYS + 1), "says must paraphrase"),
    ("says", 'the note says "exactly this"', "says must paraphrase, not quote"),
    ("chapter", "Softmax", "chapter must be a chapter label"),
    ("chapter", None, "chapter must be a chapter label"),
])
def test_add_refuses_bad_entries(field: str, value: object, message: str) -> None:
    review = errata.Review()
    with pytest.raises(ValueError, match=message):
        review.add(**{**GOOD, field: value})
    assert review.claims == []


def test_brief_quotes_the_evidence_numbers() -> None:
    review = errata.Review()
    claim = review.add(**{**GOOD, "evidence": "max |difference| < 1e-12 over 1,024 rows, 62% saturate",
                          "brief": "#{2} of #{1} rows; agreement #{0}"})
    assert claim.brief == "62% of 1,024 rows; agreement 1e-12"


def test_for_chapter_keeps_order_and_chapters_apart() -> None:
    review = errata.Review()
    review.add(**{**GOOD, "line": 9, "says": "first"})
    review.add(**{**GOOD, "line": 2, "says": "second"})
    review.add(**{**GOOD, "chapter": "scaling"})
    assert [c.says for c in review.for_chapter("softmax")] == ["first", "second"]
    assert len(review.for_chapter("scaling")) == 1 and review.for_chapter("beyond") == []


def test_check_module_refuses_an_unknown_module() -> None:
    with pytest.raises(ValueError, match="module must be one of"):
        errata.check_module("the lab report", errata.Review())


def test_chapters_are_the_books() -> None:
    """Every chapter label a claim may name is a chapter of the table of contents, and its file stem is right."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    stems = {Path(ch["file"]).name for part in toc["parts"] for ch in part["chapters"]}
    assert set(errata.CHAPTERS.values()) <= stems
    for label, stem in errata.CHAPTERS.items():
        assert f"({label})=" in (ROOT / "chapters" / f"{stem}.ipynb").read_text(), (label, stem)


def test_longest_stored_n_counts_the_weights() -> None:
    bare = errata.longest_stored_n(32, 2, 80 * 2**30, 0)
    assert errata.longest_stored_n(32, 2, 80 * 2**30, 13 * 10**9) < bare
    assert bare**2 * 64 <= 80 * 2**30 < (bare + 1) ** 2 * 64
    with pytest.raises(ValueError, match="do not fit"):
        errata.longest_stored_n(32, 2, 10, 11)


ROUNDOFF = re.compile(r"\d\.\d{7,}")  # seven or more decimals: digits that round-off could change


@pytest.mark.parametrize("module", errata.MODULES)
def test_each_module_is_reviewed(module: str) -> None:
    """Every module runs (its own assertions hold), records at least 10 claims, each with a chapter, a paraphrase
    and a one-line brief, and prints no round-off digits, which would differ between machines."""
    review = errata.Review()
    claims = errata.check_module(module, review)
    assert len(claims) >= 10, f"{module}: only {len(claims)} claims recorded"
    assert {c.grade for c in claims} <= set(errata.GRADES)
    assert all(c.chapter in errata.CHAPTER_LABELS for c in claims)
    for c in claims:
        for text in (c.evidence, c.brief):
            assert not ROUNDOFF.search(text), f"{module} line {c.line}: round-off digits in {text!r}"
        assert "#{" not in c.brief
