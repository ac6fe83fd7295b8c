"""The engine's description of a model, cached for the command line (issue 37 item 5): keyed by the config's digest
with transformers', torch's and the engine's versions, read back without building the model, never shared between
two configs, rebuilt when an entry is unreadable. A temporary folder stands in for the user's cache folder; the
time it saves is measured by benchmarks/bench_planner_cache.py, not here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lib.planner import engine
from lib.sizing import main

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(engine.CACHE_ENV, str(folder))
    return folder


def test_second_description_comes_from_the_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = json.loads((FIXTURES / "gpt-oss-20b.config.json").read_text())
    first = engine.describe(raw, cache=True)
    assert [p.suffix for p in cache.iterdir()] == [".json"]

    def no_build(raw):  # a second build would fail the test: the answer must come from the file
        raise AssertionError("built again")

    monkeypatch.setattr(engine, "_describe_or_refuse", no_build)
    assert engine.describe(raw, cache=True) == first
    changed = dict(raw, num_hidden_layers=2, layer_types=raw["layer_types"][:2])
    with pytest.raises(AssertionError, match="built again"):  # another config: another key
        engine.describe(changed, cache=True)


def test_unreadable_entry_rebuilt_and_cache_off(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = json.loads((FIXTURES / "Qwen3-Coder-Next.config.json").read_text())
    good = engine.describe(raw, cache=True)
    entry = next(cache.iterdir())
    entry.write_text("{not json")
    assert engine.describe(raw, cache=True) == good and json.loads(entry.read_text())
    monkeypatch.setenv(engine.CACHE_ENV, "")
    assert engine.cache_dir() is None and engine.describe(raw, cache=True) == good


def test_the_command_line_uses_it(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "AI21-Jamba-1.5-Mini.config.json")
    assert main([path, "--json"]) == 0
    first = capsys.readouterr().out
    assert len(list(cache.iterdir())) == 1
    assert main([path, "--json"]) == 0 and capsys.readouterr().out == first
    assert main([str(FIXTURES / "Llama-2-7b-hf.config.json")]) == 0  # a hand-read config caches nothing
    assert len(list(cache.iterdir())) == 1
