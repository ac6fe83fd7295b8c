"""No input makes ``python -m lib.sizing`` print a traceback: every fixture with one field corrupted is either
planned (exit 0, a report) or refused in one line ``error: ...`` (exit 2), whatever the hand reader, the engine or
transformers raise on the way.

The corrupted field is the model's width (``hidden_size``, ``d_model``, ``n_embd``; inside ``text_config`` for a
wrapper), its depth where it has no width field, and the value cycles through the kinds of damage a hand-edited
file shows: a string, a negative number, null, a list, a fraction, a boolean, zero.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lib.sizing import main

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
FILES = sorted(FIXTURES.rglob("*.config.json"))  # encoder-decoders and published checkpoints too
BAD_VALUES = ["4096x", -64, None, [4096], 0.5, True, 0]
WIDTH = ("hidden_size", "d_model", "n_embd", "num_hidden_layers", "num_layers", "n_layer")


def _corrupt(raw: dict, value: object) -> tuple[dict, str]:
    """``raw`` with its width (or depth) field set to ``value``, and the field's path."""
    for where, block in (("", raw), ("text_config.", raw.get("text_config"))):
        if not isinstance(block, dict):
            continue
        for key in WIDTH:
            if key in block:
                block[key] = value
                return raw, where + key
    raw["hidden_size"] = value
    return raw, "hidden_size"


@pytest.mark.parametrize("path", FILES, ids=[str(f.relative_to(FIXTURES)).removesuffix(".config.json") for f in FILES])
def test_one_corrupted_field_one_line(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    value = BAD_VALUES[FILES.index(path) % len(BAD_VALUES)]
    raw, field = _corrupt(json.loads(path.read_text()), value)
    bad = tmp_path / path.name
    bad.write_text(json.dumps(raw))
    code = main([str(bad)])  # an exception escaping main fails the test: that is the traceback a user would see
    captured = capsys.readouterr()
    if code == 0:  # transformers accepted the value (e.g. a boolean is an int): a report, no error
        assert captured.out.startswith(("model:", "ASSUMED", "WARNING", "NOTE")) and captured.err == ""
        return
    assert code == 2, (field, value)
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and lines[0].startswith("error: "), (field, value, captured.err)


@pytest.mark.parametrize("value", ["4096x", None, -1])
def test_every_damage_refused_in_a_real_process(tmp_path: Path, value: object) -> None:
    """The same in a process of its own (what a user runs): stderr is one line, no traceback."""
    raw, _ = _corrupt(json.loads((FIXTURES / "gpt-oss-20b.config.json").read_text()), value)
    bad = tmp_path / "gpt-oss-20b.config.json"
    bad.write_text(json.dumps(raw))
    out = subprocess.run([sys.executable, "-m", "lib.sizing", str(bad)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "gpt-oss-20b" in out.stderr or "gpt_oss" in out.stderr, out.stderr
