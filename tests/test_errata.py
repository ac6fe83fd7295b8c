"""The pitfalls behind the appendix "Common pitfalls, corrected" (chapters/errata): the registry refuses entries
the page could not place or show, the page and the registry name the same pitfalls under the right chapters,
every link on the page has a target, and a number the appendix shares with a chapter is the chapter's.

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
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "chapters"))
import errata  # noqa: E402  (a package of the chapters folder, as the appendix imports it)

from lib.planner.gpus import GPUS  # noqa: E402

PAGE = ROOT / "chapters" / "claims_checked.ipynb"
GLUE = re.compile(r"\{glue:text\}`([a-z0-9_]+)`")
LABEL = re.compile(r"^\(([\w-]+)\)=\s*$", re.M)


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


def test_pitfall_refuses_an_unknown_chapter() -> None:
    with pytest.raises(ValueError, match="chapter must be one of"):
        errata.pitfall("Softmax")


def test_pitfall_refuses_a_second_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errata, "PITFALLS", {})

    def twice() -> dict[str, str]:
        return {"x": "1"}

    errata.pitfall("softmax")(twice)
    with pytest.raises(ValueError, match="registered twice"):
        errata.pitfall("softmax")(twice)


@pytest.mark.parametrize(("values", "message"), [
    ({}, "returned no numbers"),
    ({"Bad key": "1"}, "is not a lower-case identifier"),
    ({"x": 1.5}, "must be a printed"),
    ({"x": " "}, "must be a printed"),
    ({"x": "0.12345678"}, "prints round-off digits"),
])
def test_run_refuses_values_a_page_cannot_show(values: dict, message: str) -> None:
    p = errata.Pitfall("probe", "softmax", lambda: values)
    with pytest.raises(ValueError, match=message):
        errata.run(p)


def test_run_prefixes_keys_with_the_pitfall() -> None:
    p = errata.Pitfall("probe", "softmax", lambda: {"gap": "0.21", "n": "1,024"})
    assert errata.run(p) == {"probe_gap": "0.21", "probe_n": "1,024"}


def test_page_and_registry_name_the_same_pitfalls(pitfalls: dict[str, errata.Pitfall]) -> None:
    """Every glued key belongs to a pitfall, every pitfall is on the page, and in the section of its chapter."""
    for cell in page_cells()[1:]:  # the opening's line of defaults may quote any pitfall's number
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


def glued(notebook: Path) -> dict[str, str]:
    """The values a notebook's stored outputs glue, as the page shows them (quotes of a str glue removed)."""
    out = {}
    for cell in json.loads(notebook.read_text())["cells"]:
        for o in cell.get("outputs", []):
            text = o.get("data", {}).get("application/papermill.record/text/plain")
            if text is not None:
                out[o["metadata"]["scrapbook"]["name"]] = "".join(text).strip("'")
    return out


# a number the appendix prints that a chapter also prints: (appendix key, chapter file, chapter key, format)
SHARED = [
    ("size_eight_peak_long", "scaling", "sc_max64_raw", str),
    ("one_hot_minority_p64", "scaling", "sc_sat64_raw", str),
    ("one_hot_minority_p1024", "scaling", "sc_sat1024_raw", str),
    ("gradient_by_row_length_raw_long", "scaling", "sc_jac1024_raw", str),
    ("gradient_by_row_length_scaled_long", "scaling", "sc_jac_std", str),
    ("projections_count_with_proj", "flops", "fl_walk_proj", lambda v: f"{int(v):,}"),
    ("projections_count_scores_only", "flops", "fl_nstar_4096", lambda v: f"{int(v):,}"),
    ("projections_count_ratio", "flops", "fl_grow_sub", str),
    ("projections_count_lo", "flops", "fl_dbl_lo", lambda v: f"{int(v):,}"),
    ("projections_count_hi", "flops", "fl_dbl_hi", lambda v: f"{int(v):,}"),
    ("even_split_stage", "kv_cache", "stage_layers", str),
    ("even_split_stage_gib", "kv_cache", "stage_gib", str),
    ("even_split_kept_gib", "kv_cache", "uM_gib", str),
    ("decode_by_flops_ms", "speed", "sp_tpot1_ms", str),
    ("moe_active_memory_active", "capacity_planner", "active_b", str),
    ("moe_active_memory_total", "capacity_planner", "total_b", str),
    ("moe_active_memory_gib", "capacity_planner", "w_gib", str),
    ("moe_active_memory_gpu", "capacity_planner", "m_gib", str),
    ("equal_gpus_equal_speed_pairs", "capacity_planner", "tps22", str),
    ("equal_gpus_equal_speed_four", "capacity_planner", "tps41", str),
]


@pytest.mark.parametrize(("key", "chapter", "chapter_key", "form"), SHARED, ids=[s[0] for s in SHARED])
def test_shared_numbers_are_the_chapters(key: str, chapter: str, chapter_key: str, form) -> None:
    """One source of truth: the appendix recomputes these as the chapter does, and both pages print the same."""
    page, book = glued(PAGE), glued(ROOT / "chapters" / f"{chapter}.ipynb")
    assert page[key] == form(book[chapter_key]), (key, page[key], chapter_key, book[chapter_key])


def test_memory_limits_use_the_cuda_total() -> None:
    """'Fits on one H100' is sized with the memory a process gets (81,089 MiB), not nvidia-smi's 81,559 MiB."""
    from errata import cost

    assert cost.H100 == GPUS["H100-80GB"].plan_bytes == 81_089 * 2**20 < GPUS["H100-80GB"].memory_bytes


def test_longest_sequence_is_the_last_length_that_fits() -> None:
    """The bisection returns n with peak(n) <= free < peak(n + 1), and refuses a range that cannot hold it."""
    from errata.cost import longest_sequence

    peak = lambda n: 3 * n * n + 10  # noqa: E731
    n = longest_sequence(peak, 10**6)
    assert peak(n) <= 10**6 < peak(n + 1) and n == 577
    with pytest.raises(AssertionError):
        longest_sequence(peak, 5)


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


def test_head_logit_variance_is_the_sampled_variance() -> None:
    """The closed form read off the weights matches Var(q.k / sqrt(d_k)) over sampled independent inputs."""
    from errata.attention import head_logit_variance

    g = np.random.default_rng(4)
    d_model, d_k = 32, 8
    w_q, w_k = g.normal(0, 0.3, (2, d_model, d_model))
    x, y = g.standard_normal((2, 200_000, d_model))
    sampled = np.mean([((x @ w_q[:, h:h + d_k]) * (y @ w_k[:, h:h + d_k])).sum(1).var() / d_k
                       for h in range(0, d_model, d_k)])
    assert abs(head_logit_variance(w_q, w_k, d_k) / sampled - 1) < 0.02


def test_jacobian_norm_is_the_matrix_norm() -> None:
    """The scaling chapter's closed form equals ||diag(a) - a a^T||_F, and is 0 for a one-hot row."""
    from errata.attention import jacobian_norm

    from lib.softmax import softmax

    a = softmax(np.random.default_rng(6).normal(0, 3, (5, 7)))
    direct = [np.linalg.norm(np.diag(r) - np.outer(r, r)) for r in a]
    np.testing.assert_allclose(jacobian_norm(a), direct, rtol=1e-12)
    assert jacobian_norm(np.eye(4)[:1])[0] == 0
