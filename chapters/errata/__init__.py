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
``lib.book.fmt``), never typed; round-off agreement is reported as the bound it is asserted against.
"""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

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


def check_module(module: str, review: Review) -> list[Claim]:
    """Run one module's checks into ``review`` and return the claims they added."""
    if module not in MODULES:
        raise ValueError(f"module must be one of {list(MODULES)}, got {module!r}")
    start = len(review.claims)
    importlib.import_module(f"{__name__}.{module}").check(review)
    return review.claims[start:]


def check_all() -> Review:
    """Every module's checks, run into one new review."""
    review = Review()
    for module in MODULES:
        check_module(module, review)
    return review
