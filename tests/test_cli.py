"""``python -m lib.sizing``: the report, its JSON form, and one-line errors with exit code 2 for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lib.constants import GB
from lib.model_config import load_config
from lib.sizing import main, report

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
LLAMA = FIXTURES / "Llama-2-7b-hf.config.json"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lib.sizing", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)


def test_text_report_end_to_end() -> None:
    out = run(str(LLAMA), "--context", "2048", "--users", "200", "--dtype", "fp16")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "6,738,415,616 total" in text
    assert "KV cache per token (fp16): 524,288 B = 512.00 KiB" in text
    assert "214,748,364,800 B = 214.75 GB = 200.00 GiB" in text  # GB and GiB both labelled
    assert "naive 3; planned 4" in text


def test_json_matches_report(capsys: pytest.CaptureFixture[str]) -> None:
    mistral = FIXTURES / "Mistral-7B-v0.1.config.json"
    args = [str(mistral), "--context", "32768", "--users", "16", "--gpu-memory", "141GB", "--kv-dtype", "fp8", "--json"]
    assert main(args) == 0
    got = json.loads(capsys.readouterr().out)
    want = report(load_config(mistral), context=32768, users=16, gpu_memory_bytes=141 * GB, kv_dtype="fp8")
    assert got == json.loads(json.dumps(want))
    assert got["parameters"]["total"] == 7_241_732_096
    assert got["kv_bytes_per_token"] == 65_536 and got["workload"]["cached_tokens"] == 4096  # the window


def test_unknown_model_type_warns_on_stderr(tmp_path: Path) -> None:
    raw = json.loads(LLAMA.read_text())
    raw["model_type"] = "llama_derivative"
    f = tmp_path / "x.json"
    f.write_text(json.dumps(raw))
    out = run(str(f))
    assert out.returncode == 0
    assert out.stderr.startswith("warning: unknown model_type 'llama_derivative'")


def _write(tmp_path: Path, text: str) -> str:
    f = tmp_path / "config.json"
    f.write_text(text)
    return str(f)


def _with(change: dict) -> str:
    raw = json.loads(LLAMA.read_text())
    raw.update(change)
    return json.dumps(raw)


BAD = [
    ("missing file", lambda t: ["/nonexistent/config.json"], "config file not found"),
    ("malformed JSON", lambda t: [_write(t, '{"hidden_size": 4096,')], "is not valid JSON"),
    ("wrong type", lambda t: [_write(t, _with({"hidden_size": "4096"}))], "'hidden_size' must be an integer"),
    ("zero layers", lambda t: [_write(t, _with({"num_hidden_layers": 0}))], "'num_hidden_layers' must be positive"),
    ("negative count", lambda t: [_write(t, _with({"vocab_size": -1}))], "'vocab_size' must be positive, got -1"),
    ("heads vs d_model", lambda t: [_write(t, _with({"num_attention_heads": 30}))], "not divisible by 30 attention"),
    ("heads vs kv heads", lambda t: [_write(t, _with({"num_key_value_heads": 5}))], "not divisible by 5 key/value"),
    ("missing field", lambda t: [_write(t, _with({"hidden_size": None}))], "missing required field 'hidden_size'"),
    ("not an object", lambda t: [_write(t, "[1, 2]")], "must be a JSON object"),
    ("unknown unit", lambda t: [str(LLAMA), "--gpu-memory", "80XB"], "unknown unit 'XB'"),
    ("no unit", lambda t: [str(LLAMA), "--gpu-memory", "80"], "has no unit"),
    ("unknown dtype", lambda t: [str(LLAMA), "--dtype", "fp12"], "unknown dtype 'fp12'"),
    ("unknown kv dtype", lambda t: [str(LLAMA), "--kv-dtype", "int3"], "unknown dtype 'int3'"),
    ("negative users", lambda t: [str(LLAMA), "--users", "-3"], "--users: must be positive"),
    ("zero context", lambda t: [str(LLAMA), "--context", "0"], "--context: must be positive"),
    ("non-integer context", lambda t: [str(LLAMA), "--context", "2k"], "expected a whole number"),
    ("bad fraction", lambda t: [str(LLAMA), "--memory-fraction", "1.5"], "must be in (0, 1]"),
    ("does not fit", lambda t: [str(LLAMA), "--gpu-memory", "100MB"], "the model does not fit"),
    ("no config", lambda t: [], "the following arguments are required: config"),
]


@pytest.mark.parametrize("label, args, message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], label, args, message) -> None:
    with pytest.raises(SystemExit) as exc:  # argparse errors exit; the rest return 2
        raise SystemExit(main(args(tmp_path)))
    assert exc.value.code == 2, label
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert message in lines[0]


def test_bad_input_in_a_real_process_has_no_traceback(tmp_path: Path) -> None:
    out = run(_write(tmp_path, _with({"num_key_value_heads": 5})))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
