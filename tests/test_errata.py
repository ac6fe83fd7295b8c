"""The review behind the appendix "Common claims, checked" (chapters/errata): the API refuses entries the page
could not render or that would quote instead of paraphrase, every module runs and records its claims, and no
shown or kept line prints round-off digits."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
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


@pytest.mark.parametrize("field", ["evidence", "brief"])
def test_add_refuses_roundoff_digits(field: str) -> None:
    """Seven or more decimals are digits round-off could change between machines: the review refuses them."""
    review = errata.Review()
    with pytest.raises(ValueError, match=f"{field} must not print round-off digits"):
        review.add(**{**GOOD, field: "agreement 0.1234567"})
    review.add(**{**GOOD, "evidence": "agreement < 1e-12 and a mean of 0.123456"})  # a bound, six decimals: fine


def test_add_refuses_an_uncited_placeholder() -> None:
    with pytest.raises(ValueError, match="brief must cite evidence numbers"):
        errata.Review().add(**{**GOOD, "brief": "shown #{first}"})


def test_check_module_refuses_a_module_with_too_few_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that records fewer than MIN_CLAIMS claims has lost checks: check_module raises."""
    few = types.ModuleType("errata.few")
    few.check = lambda review: [review.add(**{**GOOD, "line": i + 1}) for i in range(errata.MIN_CLAIMS - 1)]
    monkeypatch.setitem(sys.modules, "errata.few", few)
    monkeypatch.setattr(errata, "MODULES", (*errata.MODULES, "few"))
    with pytest.raises(ValueError, match=f"recorded {errata.MIN_CLAIMS - 1} claims"):
        errata.check_module("few", errata.Review())
    few.check = lambda review: [review.add(**{**GOOD, "line": i + 1}) for i in range(errata.MIN_CLAIMS)]
    assert len(errata.check_module("few", errata.Review())) == errata.MIN_CLAIMS


def test_normal_expectation_of_independent_normals() -> None:
    """Moments of independent normals from their densities: E[z**n] = (n - 1)!! for even n, 0 for odd n, and
    the mean and variance of a product of independent normals in closed form."""
    import sympy as sp

    assert [errata.standard_normal_moment(n) for n in range(7)] == [1, 0, 1, 0, 3, 0, 15]
    mu_q, mu_k = sp.symbols("mu_q mu_k", real=True)
    s_q, s_k = sp.symbols("sigma_q sigma_k", positive=True)
    x, y = sp.symbols("x y", real=True)
    normals = {x: (mu_q, s_q), y: (mu_k, s_k)}
    mean = errata.normal_expectation(x * y, normals)
    second = errata.normal_expectation((x * y) ** 2, normals)
    assert sp.simplify(mean - mu_q * mu_k) == 0
    assert sp.simplify(second - mean**2 - (s_q**2 * s_k**2 + mu_q**2 * s_k**2 + mu_k**2 * s_q**2)) == 0
    assert errata.normal_expectation(x**3 + 2 * y, {x: (0, 1), y: (3, 1)}) == 6


def test_sample_dot_products_draws_blocks_of_pairs() -> None:
    """q . k and q . q of the vectors drawn, a block of pairs at a time: at d_k = 2**19, blocks of 2 pairs."""
    d_k = 2**19
    qk, qq = errata.sample_dot_products(np.random.default_rng(5), 3, d_k)
    g = np.random.default_rng(5)
    q, k = np.concatenate([g.standard_normal((2, 2, d_k)), g.standard_normal((2, 1, d_k))], axis=1)
    np.testing.assert_allclose(qk, (q * k).sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(qq, (q * q).sum(axis=1), rtol=1e-12)


# Every module's checks run where the appendix runs them: claims_checked.ipynb calls errata.check_all() (natively
# and on the second machine of the test command), and every claim they record passes Review.add's refusals above
# (grade, chapter, paraphrase, one-line brief, no round-off digits) and check_module's MIN_CLAIMS; running them
# here again would only repeat that computation.
