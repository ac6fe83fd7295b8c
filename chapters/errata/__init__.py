"""Common claims about the Transformer, each checked by a computation: the data behind the appendix.

The appendix ``claims_checked.ipynb`` ("Common claims, checked") renders this review, grouped by the chapter
that derives each claim. The claims were collected from four tutorial notes; where each came from (``note``,
``line``, ``section``) stays here for maintainers and is not shown to readers. One module per note
(``lab_report``, ``theory_notes``, ``intro_article``, ``walkthrough``) plus ``worked`` (claims several notes
share) has a ``check(review)`` that recomputes every claim with ``lib``, PyTorch or sympy, asserts what it finds
and records it with ``review.add``. A claim whose check fails raises, so the appendix (and nbval) fails with it.

A claim is recorded with ``says`` (the claim, paraphrased in the book's words), ``grade``, ``evidence`` (the full
finding, kept for maintainers) and ``brief`` (the one line of evidence the page shows). ``brief`` may cite the
numbers of ``evidence`` by position, ``#{0}`` for the first number in it, so that the shown line quotes
computed numbers only.

Grades (the rubric the appendix states):

* ``wrong``: the conclusion is false, and the computation shows by how much;
* ``imprecise``: the conclusion holds, but a number, a unit or the reason given is not right;
* ``assumption``: true only under a condition the note does not state;
* ``rounding``: right for the rounded input the note works with, but the exact input moves the result by
  more than the precision the note states;
* ``correct``: the computation reproduces it.

Every number in ``says`` and ``evidence`` that is a result comes from the computation (formatted with
``lib.book.fmt``), never typed; round-off agreement is reported as the bound it is asserted against, and
``Review.add`` refuses a number with seven or more decimals, whose last digits round-off could change from one
machine to another. ``check_module`` refuses a module that records fewer than ``MIN_CLAIMS`` claims.
"""

from __future__ import annotations

import functools
import importlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"

NOTES = {  # key: the note a claim was collected from (kept for maintainers; the page names no note)
    "lab-report": "Lab Report",
    "theory-notes": "Theory Notes",
    "intro-article": "Introductory Article",
    "walkthrough": "First-Principles Walkthrough",
}
MODULES = ("worked", "lab_report", "theory_notes", "intro_article", "walkthrough")  # run in this order
GRADES = ("wrong", "imprecise", "assumption", "rounding", "correct")
CHAPTERS = {  # the label that starts each chapter, e.g. (softmax)= in chapters/softmax.ipynb: its file stem
    "notation": "notation", "softmax": "softmax", "scaling": "scaling", "attention-backward": "attention_backward",
    "multihead": "multihead", "positional": "positional", "layernorm-ffn": "layernorm_ffn", "blocks": "blocks",
    "training": "training", "flops": "flops", "kv-cache": "kv_cache", "capacity-planner": "capacity_planner",
    "tiled-attention": "tiled_attention", "beyond": "beyond",
    "train-memory": "train_memory",
}
CHAPTER_LABELS = frozenset(CHAPTERS)
MAX_SAYS = 160  # characters: a claim is paraphrased in one short sentence
MAX_BRIEF = 150  # characters, numbers filled in: the one line of evidence the page shows
MIN_CLAIMS = 10  # claims each module records at least: a module that records fewer has lost its checks
ROUNDOFF = re.compile(r"\d\.\d{7,}")  # seven or more decimals: digits that round-off could change
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e-?\d+)?%?")  # the numbers of an evidence string, as #{k} cites them
CITE = re.compile(r"#\{(\d+)\}")


def fill_brief(brief: str, evidence: str) -> str:
    """``brief`` with each ``#{k}`` replaced by the k-th number (from 0) of ``evidence``."""
    numbers = [m.group(0).rstrip(",") for m in NUMBER.finditer(evidence)]

    def number(m: re.Match) -> str:
        k = int(m.group(1))
        if k >= len(numbers):
            raise ValueError(f"brief cites number #{{{k}}} but evidence has {len(numbers)}: {evidence!r}")
        return numbers[k]

    return CITE.sub(number, brief)


@dataclass(frozen=True)
class Claim:
    """One checkable claim of a note and what the computation found."""

    note: str  # a key of NOTES
    line: int  # where the note makes the claim (its line in the note's text); orders the table
    section: str  # the note's section, as a reader finds it ("3. Softmax", "Multi-head attention")
    says: str  # the claim, paraphrased in the book's words (never quoted)
    grade: str  # one of GRADES
    evidence: str  # the computed finding in full, with the numbers the computation produced
    chapter: str  # label of the chapter that derives it in full
    brief: str  # the one line of evidence the page shows (numbers filled in from evidence)


@dataclass
class Review:
    """The claims recorded so far, in the order they were added."""

    claims: list[Claim] = field(default_factory=list)

    def add(self, note: str, line: int, section: str, says: str, grade: str, evidence: str,
            chapter: str, *, brief: str) -> Claim:
        """Record one checked claim; refuses an entry the appendix could not render or would mislabel."""
        if note not in NOTES:
            raise ValueError(f"note must be one of {sorted(NOTES)}, got {note!r}")
        if grade not in GRADES:
            raise ValueError(f"grade must be one of {list(GRADES)}, got {grade!r}")
        if not isinstance(line, int) or isinstance(line, bool) or line < 1:
            raise ValueError(f"line must be a positive int (the claim's line in the note), got {line!r}")
        if chapter not in CHAPTER_LABELS:
            raise ValueError(f"chapter must be a chapter label ({sorted(CHAPTER_LABELS)}), got {chapter!r}")
        for name, text in (("section", section), ("says", says), ("evidence", evidence), ("brief", brief)):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{name} must be a non-empty string, got {text!r}")
        if len(says) > MAX_SAYS:
            raise ValueError(f"says must paraphrase the claim in at most {MAX_SAYS} characters, got {len(says)}")
        if any(q in says for q in ('"', "“", "”")):
            raise ValueError(f"says must paraphrase, not quote: {says!r}")
        shown = fill_brief(brief, evidence)
        if len(shown) > MAX_BRIEF:
            raise ValueError(f"brief must be one line of at most {MAX_BRIEF} characters, got {len(shown)}: {shown!r}")
        if "#{" in shown:
            raise ValueError(f"brief must cite evidence numbers as #{{k}} with k an integer, got {brief!r}")
        for name, text in (("evidence", evidence), ("brief", shown)):
            if (digits := ROUNDOFF.search(text)) is not None:
                raise ValueError(f"{name} must not print round-off digits ({digits.group(0)!r}): report the bound "
                                 f"it is asserted against, got {text!r}")
        claim = Claim(note, line, section, says, grade, evidence, chapter, shown)
        self.claims.append(claim)
        return claim

    def for_note(self, note: str) -> list[Claim]:
        """The claims of one note, in the order the note makes them."""
        return sorted((c for c in self.claims if c.note == note), key=lambda c: c.line)


    def for_chapter(self, chapter: str) -> list[Claim]:
        """The claims a chapter derives, in the order they were recorded."""
        return [c for c in self.claims if c.chapter == chapter]


def longest_stored_n(matrices: int, bytes_per_entry: int, memory_bytes: int, weight_bytes: int) -> int:
    """The longest n whose ``matrices`` n x n attention-weight matrices fit in the memory the model's own weights
    leave free: ``floor(sqrt((memory - weights) / (matrices * bytes_per_entry)))``."""
    free = memory_bytes - weight_bytes
    if free <= 0:
        raise ValueError(f"the weights ({weight_bytes} B) do not fit in {memory_bytes} B")
    return math.isqrt(int(free // (matrices * bytes_per_entry)))


def sample_dot_products(rng: np.random.Generator, pairs: int, d_k: int) -> tuple[np.ndarray, np.ndarray]:
    """``q . k`` and ``q . q`` for ``pairs`` pairs of independent vectors ``q``, ``k`` of ``d_k`` independent
    standard normal components.

    The pairs are drawn a block at a time (about 2**20 numbers per vector), so a large sample reuses a few
    megabytes instead of filling hundreds; every pair is an independent draw all the same.
    """
    qk, qq = np.empty(pairs), np.empty(pairs)
    block = max(1, 2**20 // d_k)
    for start in range(0, pairs, block):
        rows = slice(start, min(start + block, pairs))
        q, k = rng.standard_normal((2, rows.stop - start, d_k))
        qk[rows], qq[rows] = np.einsum("ij,ij->i", q, k), np.einsum("ij,ij->i", q, q)
    return qk, qq


@functools.cache
def standard_normal_moment(power: int):
    """``E[z**power]`` for a standard normal ``z``: the integral of ``z**power`` against its density (sympy)."""
    import sympy as sp

    z = sp.Symbol("z", real=True)
    return sp.integrate(z**power * sp.exp(-(z**2) / 2) / sp.sqrt(2 * sp.pi), (z, -sp.oo, sp.oo))


def normal_expectation(expr, normals: dict):
    """``E[expr]``, exactly, for a polynomial sympy ``expr`` in independent normal variables.

    ``normals`` maps each variable ``x`` of ``expr`` to its ``(mean, standard deviation)``, numbers or sympy
    symbols. Each is written ``x = mean + sd * z`` with ``z`` standard normal; the variables being independent,
    their joint density is the product of their densities, so a monomial ``z_1**a_1 * z_2**a_2 ...`` has the
    expectation ``E[z**a_1] E[z**a_2] ...`` (:func:`standard_normal_moment`). The value sympy.stats' ``E`` gives
    for these variables, without the Meijer G-function integrals it evaluates them with.
    """
    import sympy as sp

    z = {x: sp.Dummy(f"z_{x}") for x in normals}
    standardised = sp.expand(expr.subs({x: m + s * z[x] for x, (m, s) in normals.items()}, simultaneous=True))
    poly = sp.Poly(standardised, *z.values())
    return sp.expand(sum(c * sp.Mul(*map(standard_normal_moment, powers)) for powers, c in poly.terms()))


def check_module(module: str, review: Review) -> list[Claim]:
    """Run one module's checks into ``review`` and return the claims they added."""
    if module not in MODULES:
        raise ValueError(f"module must be one of {list(MODULES)}, got {module!r}")
    start = len(review.claims)
    importlib.import_module(f"{__name__}.{module}").check(review)
    added = review.claims[start:]
    if len(added) < MIN_CLAIMS:
        raise ValueError(f"module {module} recorded {len(added)} claims, fewer than {MIN_CLAIMS}")
    return added


def check_all() -> Review:
    """Every module's checks, run into one new review."""
    review = Review()
    for module in MODULES:
        check_module(module, review)
    return review
