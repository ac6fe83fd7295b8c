"""The pitfalls behind the appendix "Common pitfalls, corrected" (chapters/errata): the registry refuses entries
the page could not place or show, the page and the registry name the same pitfalls under the right chapters,
every link on the page has a target, and the provenance the maintainers keep is what the audits settled.

The checks themselves (each pitfall's computation and asserts) run where the appendix runs them:
claims_checked.ipynb calls errata.compute_all(), natively and on the second machine of the test command.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "chapters"))
import errata  # noqa: E402  (a package of the chapters folder, as the appendix imports it)

from lib.planner.gpus import GPUS  # noqa: E402

PAGE = ROOT / "chapters" / "claims_checked.ipynb"
GLUE = re.compile(r"\{glue:text\}`([a-z0-9_]+)`")
LABEL = re.compile(r"^\(([\w-]+)\)=\s*$", re.M)
SOURCE = ("walkthrough", 19, "wrong")


def page_cells() -> list[str]:
    """The markdown of the appendix, one string per cell."""
    return ["".join(c["source"]) for c in json.loads(PAGE.read_text())["cells"] if c["cell_type"] == "markdown"]


def book_chapters() -> list[Path]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [ROOT / f"{ch['file']}.ipynb" for part in toc["parts"] for ch in part["chapters"]
            if (ROOT / f"{ch['file']}.ipynb").exists()]


@pytest.fixture(scope="module")
def pitfalls() -> dict[str, errata.Pitfall]:
    return errata.load()


@pytest.mark.parametrize(("args", "message"), [
    (("Softmax", SOURCE), "chapter must be one of"),
    (("softmax",), "needs at least one"),
    (("softmax", ("lab_report", 3, "wrong")), "a source is"),
    (("softmax", ("lab-report", 0, "wrong")), "a source is"),
    (("softmax", ("lab-report", True, "wrong")), "a source is"),
    (("softmax", ("lab-report", 3, "correct")), "grade must be one of"),
])
def test_pitfall_refuses_bad_registrations(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        errata.pitfall(*args)


def test_pitfall_refuses_a_second_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errata, "PITFALLS", {})

    def twice() -> dict[str, str]:
        return {"x": "1"}

    errata.pitfall("softmax", SOURCE)(twice)
    with pytest.raises(ValueError, match="registered twice"):
        errata.pitfall("softmax", SOURCE)(twice)


@pytest.mark.parametrize(("values", "message"), [
    ({}, "returned no numbers"),
    ({"Bad key": "1"}, "is not a lower-case identifier"),
    ({"x": 1.5}, "must be a printed"),
    ({"x": " "}, "must be a printed"),
    ({"x": "0.12345678"}, "prints round-off digits"),
])
def test_run_refuses_values_a_page_cannot_show(values: dict, message: str) -> None:
    p = errata.Pitfall("probe", "softmax", (SOURCE,), lambda: values)
    with pytest.raises(ValueError, match=message):
        errata.run(p)


def test_run_prefixes_keys_with_the_pitfall() -> None:
    p = errata.Pitfall("probe", "softmax", (SOURCE,), lambda: {"gap": "0.21", "n": "1,024"})
    assert errata.run(p) == {"probe_gap": "0.21", "probe_n": "1,024"}


def test_page_and_registry_name_the_same_pitfalls(pitfalls: dict[str, errata.Pitfall]) -> None:
    """Every glued key belongs to a pitfall, every pitfall is on the page, and in the section of its chapter."""
    for cell in page_cells():
        section = {f"claims-{c}" for c in errata.CHAPTERS} & set(LABEL.findall(cell))
        for key in GLUE.findall(cell):
            owners = [name for name in pitfalls if key.startswith(f"{name}_")]
            assert owners, f"{key} is glued by no pitfall"
            chapters = {pitfalls[name].chapter for name in owners}
            assert {f"claims-{c}" for c in chapters} & section, f"{key} is shown outside its chapter's section"
    shown = {key for cell in page_cells() for key in GLUE.findall(cell)}
    missing = [name for name in pitfalls if not any(key.startswith(f"{name}_") for key in shown)]
    assert not missing, f"pitfalls not on the page: {missing}"


def test_every_link_on_the_page_has_a_target() -> None:
    """{eq} and {ref} targets exist in the book's chapters (a renamed label would break the page's link)."""
    text = "\n".join(p.read_text() for p in book_chapters()) + (ROOT / "intro.md").read_text()
    page = "\n".join(page_cells())
    for kind, label in re.findall(r"\{(eq|ref)\}`(?:[^`<]*<)?([\w-]+)>?`", page):
        assert (f"({label})" in text) or (f"label: {label}" in text), f"{{{kind}}}`{label}` has no target"


def test_chapters_are_the_books() -> None:
    """Every chapter label a pitfall may name starts its chapter's file."""
    for label, stem in errata.CHAPTERS.items():
        assert f"({label})=" in (ROOT / "chapters" / f"{stem}.ipynb").read_text(), (label, stem)


def test_provenance_keeps_the_settled_grades(pitfalls: dict[str, errata.Pitfall]) -> None:
    """The maintainers' grades after the audits: a one-head n x n matrix at n = 10^4 is stored only by a standard
    kernel (an assumption, like its siblings); 'one matrix multiply' is imprecise; input = embeddings + PE is
    correct, so it is not a pitfall."""
    grades = {(note, line): grade for p in pitfalls.values() for note, line, grade in p.sources}
    assert grades[("theory-notes", 277)] == grades[("theory-notes", 48)] == grades[("theory-notes", 300)]
    assert grades[("theory-notes", 277)] == grades[("intro-article", 168)] == "assumption"
    assert grades[("theory-notes", 45)] == "imprecise"
    assert ("theory-notes", 167) not in grades and ("intro-article", 58) not in grades


def test_memory_limits_use_the_cuda_total() -> None:
    """'Fits on one H100' is sized with the memory a process gets (81,089 MiB), not nvidia-smi's 81,559 MiB."""
    from errata import cost

    assert cost.H100 == GPUS["H100-80GB"].plan_bytes == 81_089 * 2**20 < GPUS["H100-80GB"].memory_bytes


def test_longest_stored_n_counts_the_weights() -> None:
    bare = errata.longest_stored_n(32, 2, 80 * 2**30, 0)
    assert errata.longest_stored_n(32, 2, 80 * 2**30, 13 * 10**9) < bare
    assert bare**2 * 64 <= 80 * 2**30 < (bare + 1) ** 2 * 64
    with pytest.raises(ValueError, match="do not fit"):
        errata.longest_stored_n(32, 2, 10, 11)


def test_sample_dot_products_draws_blocks_of_pairs() -> None:
    """q . k and q . q of the vectors drawn, a block of pairs at a time: at d_k = 2**19, blocks of 2 pairs."""
    d_k = 2**19
    qk, qq = errata.sample_dot_products(np.random.default_rng(5), 3, d_k)
    g = np.random.default_rng(5)
    q, k = np.concatenate([g.standard_normal((2, 2, d_k)), g.standard_normal((2, 1, d_k))], axis=1)
    np.testing.assert_allclose(qk, (q * k).sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(qq, (q * q).sum(axis=1), rtol=1e-12)


def test_op_counter_counts_matrix_products() -> None:
    from errata.recurrence import MATMULS, OpCounter

    a, b = torch.randn(3, 4), torch.randn(4, 5)
    with OpCounter() as ops:
        torch.softmax(a @ b, dim=-1) @ b.T
    assert sum(c for name, c in ops.ops.items() if name in MATMULS) == 2 and ops.ops["_softmax"] == 1
