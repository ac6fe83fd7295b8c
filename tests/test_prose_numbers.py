"""tools/check_prose_numbers.py: typed results in prose are found; glued numbers, code and inputs are not."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("check_prose_numbers", ROOT / "tools" / "check_prose_numbers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _book(tmp: Path, *markdown: str) -> Path:
    (tmp / "chapters").mkdir()
    cells = [{"cell_type": "markdown", "metadata": {}, "source": m} for m in markdown]
    (tmp / "chapters" / "ch.ipynb").write_text(json.dumps({"cells": cells}))
    return tmp


@pytest.mark.parametrize("typed", [
    "The error is 7.4 % of the total.", "It needs 13.48 GB.", "About 1.05 million parameters.",
    "The model has 46,700 layers.", "It is 40 times slower.", "That is a 4× saving.", "Cut to ×2 the memory.",
    "Accuracy reaches 99%.", "A run of 10\\,000 tokens.",
    "It moves the crossover by about 128 tokens.", "There are 16 exact ones.", "It is $2^{42}$ operations.",
    "The error is nearly 10^{-4}.", "It holds while $b/n < 0.02$.", "So $2b/d = 4$ here.", "For $n > 50 b$.",
    "The crossover is at $n = 4 \\cdot 8192 = 32768$.", "The overlap is about $128$.",
])
def test_typed_results_are_found(tmp_path: Path, typed: str) -> None:
    found = _tool().findings(_book(tmp_path, typed), allow={})
    assert len(found) == 1 and found[0].startswith("ch cell 0:"), found


@pytest.mark.parametrize("fine", [
    "It needs {glue:text}`gb:.2f` GB.", "Run `x = 1.5 * y` first.", "See [v1.2](https://example.org/1.5).",
    "A $64 \\times 64$ matrix and $7 \\times 10^9$ parameters.", "A row $x \\in \\mathbb{R}^{1 \\times d}$.",
    "Published in 2017 (arXiv:1706.03762).",
    "```python\nx = 3.14\n```", "With $L = 32$ layers and $d_\\text{model} = 4096$.",
    "It costs $n(n+1)/2$ pairs and $2 \\cdot 2\\, n d$ FLOPs.", "Between 0 and 1.", "Llama 2 70B and Mistral 7B.",
    "1. First item\n2. Second item", "## Section heading 3",
])
def test_glued_code_and_shapes_are_not_results(tmp_path: Path, fine: str) -> None:
    assert _tool().findings(_book(tmp_path, fine), allow={}) == []


def test_allow_list_entries_are_scoped_to_their_sentence(tmp_path: Path) -> None:
    tool = _tool()
    allow = tmp_path / "allow"
    allow.mkdir()
    (allow / "ch.txt").write_text("0.9\tvLLM uses\t# vLLM's default gpu_memory_utilization: an input\n")
    entries = tool.load_allow(allow)
    assert entries == {"ch": [("0.9", "vLLM uses")]}
    book = _book(tmp_path, "vLLM uses 0.9 by default. The ratio comes out at 0.9 as well.")
    found = tool.findings(book, allow=entries)
    assert len(found) == 1 and "The ratio comes out at 0.9" in found[0], found
    for bad in ("0.9\tvLLM uses\n", "0.9\tvLLM\t# an input here\n", "0.9\t# why only\n"):
        (allow / "ch.txt").write_text(bad)
        with pytest.raises(SystemExit, match="TEXT<TAB>CONTEXT<TAB># why"):
            tool.load_allow(allow)


def test_an_allow_entry_that_matches_no_sentence_is_reported(tmp_path: Path) -> None:
    tool = _tool()
    entries = {"ch": [("0.9", "vLLM uses"), ("80", "A card sold as")]}
    found = tool.findings(_book(tmp_path, "vLLM uses 0.9 by default."), allow=entries)
    assert found == ["ch: allow entry '80' in 'A card sold as' matches no sentence: remove it from "
                     "tools/prose_numbers_allow/ch.txt"], found
