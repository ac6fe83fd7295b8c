"""The review of the four notes: every checkable claim, its grade and the computation behind the grade.

The appendix ``claims_checked.ipynb`` renders this review. Each note has one module here (``lab_report``,
``theory_notes``, ``intro_article``, ``walkthrough``) whose ``check(review)`` recomputes, with ``lib``, every
checkable claim of that note in the order the note makes it, asserts what it finds and records it with
``review.add``. A claim whose check fails raises, so the appendix (and nbval) fails with it.

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
from dataclasses import dataclass, field

NOTES = {  # key: (the name the book gives the note, the label of its section in the appendix)
    "lab-report": ("Lab Report", "note-lab-report"),
    "theory-notes": ("Theory Notes", "note-theory-notes"),
    "intro-article": ("Introductory Article", "note-intro-article"),
    "walkthrough": ("First-Principles Walkthrough", "note-walkthrough"),
}
MODULES = {  # note key: the module of this package that checks it
    "lab-report": "lab_report",
    "theory-notes": "theory_notes",
    "intro-article": "intro_article",
    "walkthrough": "walkthrough",
}
GRADES = ("wrong", "imprecise", "assumption", "rounding", "correct")
CHAPTER_LABELS = frozenset({  # the target that starts each chapter, e.g. (softmax)= in chapters/softmax.ipynb
    "notation", "softmax", "scaling", "attention-backward", "multihead", "positional", "layernorm-ffn",
    "blocks", "training", "flops", "kv-cache", "capacity-planner", "tiled-attention", "beyond",
})
MAX_SAYS = 320  # characters: a claim is paraphrased, or quoted in a short phrase, never at length


@dataclass(frozen=True)
class Claim:
    """One checkable claim of a note and what the computation found."""

    note: str  # a key of NOTES
    line: int  # where the note makes the claim (its line in the note's text); orders the table
    section: str  # the note's section, as a reader finds it ("3. Softmax", "Multi-head attention")
    says: str  # what the note claims: a paraphrase, or a short quoted phrase in quotation marks
    grade: str  # one of GRADES
    evidence: str  # the computed finding, with the numbers the computation produced
    chapter: str | None = None  # label of the chapter that derives it in full, if one does


@dataclass
class Review:
    """The claims recorded so far, in the order they were added."""

    claims: list[Claim] = field(default_factory=list)

    def add(self, note: str, line: int, section: str, says: str, grade: str, evidence: str,
            chapter: str | None = None) -> Claim:
        """Record one checked claim; refuses an entry the appendix could not render or would mislabel."""
        if note not in NOTES:
            raise ValueError(f"note must be one of {sorted(NOTES)}, got {note!r}")
        if grade not in GRADES:
            raise ValueError(f"grade must be one of {list(GRADES)}, got {grade!r}")
        if not isinstance(line, int) or isinstance(line, bool) or line < 1:
            raise ValueError(f"line must be a positive int (the claim's line in the note), got {line!r}")
        if chapter is not None and chapter not in CHAPTER_LABELS:
            raise ValueError(f"chapter must be a chapter label ({sorted(CHAPTER_LABELS)}) or None, got {chapter!r}")
        for name, text in (("section", section), ("says", says), ("evidence", evidence)):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{name} must be a non-empty string, got {text!r}")
        if len(says) > MAX_SAYS:
            raise ValueError(f"says must paraphrase the claim in at most {MAX_SAYS} characters, got {len(says)}")
        claim = Claim(note, line, section, says, grade, evidence, chapter)
        self.claims.append(claim)
        return claim

    def for_note(self, note: str) -> list[Claim]:
        """The claims of one note, in the order the note makes them."""
        return sorted((c for c in self.claims if c.note == note), key=lambda c: c.line)


def check_note(note: str, review: Review) -> list[Claim]:
    """Run one note's checks into ``review`` and return the claims they added."""
    if note not in MODULES:
        raise ValueError(f"note must be one of {sorted(MODULES)}, got {note!r}")
    start = len(review.claims)
    importlib.import_module(f"{__name__}.{MODULES[note]}").check(review)
    return review.claims[start:]
