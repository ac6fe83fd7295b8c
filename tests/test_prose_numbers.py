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
])
def test_typed_results_are_found(tmp_path: Path, typed: str) -> None:
    found = _tool().findings(_book(tmp_path, typed), allow=set())
    assert len(found) == 1 and found[0].startswith("ch cell 0:"), found


@pytest.mark.parametrize("fine", [
    "It needs {glue:text}`gb:.2f` GB.", "Run `x = 1.5 * y` first.", "See [v1.2](https://example.org/1.5).",
    "A $64 \\times 64$ matrix and $7 \\times 10^9$ parameters.", "A row $x \\in \\mathbb{R}^{1 \\times d}$.",
    "Published in 2017 (arXiv:1706.03762).",
    "Heads: 8, layers: 6.", "```python\nx = 3.14\n```",
])
def test_glued_code_and_shapes_are_not_results(tmp_path: Path, fine: str) -> None:
    assert _tool().findings(_book(tmp_path, fine), allow=set()) == []


def test_allow_list_entries_need_a_reason(tmp_path: Path) -> None:
    tool = _tool()
    good = tmp_path / "good.txt"
    good.write_text("ch\t0.9\t# vLLM's default gpu_memory_utilization: an input\n")
    assert tool.load_allow(good) == {("ch", "0.9")}
    assert tool.findings(_book(tmp_path, "vLLM uses 0.9 by default."), allow=tool.load_allow(good)) == []
    bad = tmp_path / "bad.txt"
    bad.write_text("ch\t0.9\n")
    with pytest.raises(SystemExit, match="CHAPTER<TAB>TEXT<TAB># why"):
        tool.load_allow(bad)
