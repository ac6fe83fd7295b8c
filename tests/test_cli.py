"""``python -m lib.sizing``: the report, its JSON form, and one-line errors with exit code 2 for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lib.constants import GB, GiB
from lib.planner.config import load_config
from lib.planner.gpus import GPUS
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
    # the H100 preset: torch's total 81,089 MiB (nvidia-smi: 81,559 MiB)
    assert "85.03 GB = 79.19 GiB as the serving engine sees it (nvidia-smi reports 79.65 GiB)" in text
    assert "rounded up, would be 3 GPU(s)" in text
    # the two plans are the same here, so it is printed once
    assert "serving plan (tensor parallel; no pipeline split does better): 4 GPU(s) = 4 replica(s) x" in text
    assert "serving plan, tensor x pipeline" not in text
    assert ("engine: vLLM 0.12 and later (V1 engine; validated on logs of early 2026 and 0.24), "
            "max_num_batched_tokens 8192, max_num_seqs 1024") in text
    assert "ASSUMED" not in text and "engine assumption: gpu_memory_utilization 0.9 bounds" in text


def test_json_matches_report(capsys: pytest.CaptureFixture[str]) -> None:
    mistral = FIXTURES / "Mistral-7B-v0.1.config.json"
    args = [str(mistral), "--context", "32768", "--users", "16", "--gpu-memory", "141GB", "--kv-dtype", "fp8", "--json"]
    assert main(args) == 0
    got = json.loads(capsys.readouterr().out)
    want = report(load_config(mistral), context=32768, users=16, gpu_memory_bytes=141 * GB, kv_dtype="fp8")
    assert got == json.loads(json.dumps(want))
    assert got["parameters"]["total"] == 7_241_732_096
    assert got["schema_version"] == 3 and got["assumptions"] == [] and got["warnings"] == []
    assert got["serving"]["max_num_seqs"] == 1024  # 141 GB >= 70 GiB and not an A100: vLLM's larger defaults
    byte_keys = [got[k] for k in ("weights_bytes", "kv_bytes_per_token", "kv_cache_bytes", "total_bytes")]
    byte_keys += [v for plan in ("tensor_parallel", "tensor_x_pipeline")
                  for k, v in got["serving"][plan].items() if k.endswith("_per_gpu")]
    assert all(isinstance(b, int) for b in byte_keys)  # whole bytes, never floats
    assert got["kv_bytes_per_token"] == 65_536 and got["workload"]["cached_token_layers"] == 32 * 4096  # the window
    assert got["kv_bytes_per_sequence"] == 65_536 * 4096


def test_unknown_model_type_refused_then_assumed(tmp_path: Path) -> None:
    raw = json.loads(LLAMA.read_text())
    raw["model_type"] = "llama_derivative"
    del raw["architectures"]  # nothing tells transformers which class it is either
    f = tmp_path / "x.json"
    f.write_text(json.dumps(raw))
    out = run(str(f))
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unsupported model_type 'llama_derivative'")
    assert "supported: deepseek_v2, deepseek_v3, falcon, gemma, gemma2, gemma3_text" in lines[0]
    assert "the transformers engine cannot read it either" in lines[0]
    out = run(str(f), "--assume-family", "llama", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["assumptions"] == ["model_type 'llama_derivative' read as 'llama' (assumed, not checked)"]
    assert got["family"] == "llama" and got["parameters"]["total"] == 6_738_415_616
    text = run(str(f), "--assume-family", "llama").stdout
    assert text.startswith("ASSUMED: model_type 'llama_derivative' read as 'llama'")


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The command line in this process (transformers imported once, not per call)."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code, out, err = _main(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_unread_field_decided_by_building(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a field transformers' llama ignores as well: read exactly, with a note saying it was checked
    raw = json.loads(LLAMA.read_text())
    raw["num_experts"] = 8
    f = tmp_path / "x.json"
    f.write_text(json.dumps(raw))
    got = _json(capsys, str(f))
    assert got["assumptions"] == [] and got["parameters"]["total"] == 6_738_415_616
    assert got["notes"] == ["num_experts: not read by the 'llama' reader, and transformers builds the same model"
                            " with or without it (checked by building it)"]
    # a field that changes what transformers builds (Falcon's feed-forward width): refused in one line
    # a field that changes what transformers builds (here its cache: a window on every layer): refused
    raw = json.loads(LLAMA.read_text())
    raw["sliding_window"] = 4096
    f.write_text(json.dumps(raw))
    code, out, err = _main(capsys, str(f))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "config field sliding_window=4096 in x changes the parameter count" in err
    assert "built by transformers, the model differs" in err


def test_the_two_over_refusals_are_gone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # falcon-40b: multi_query beside new_decoder_architecture, which transformers ignores
    got = _json(capsys, str(FIXTURES / "falcon-40b.config.json"))
    assert got["reader"] == "hand-written" and got["assumptions"] == []
    assert got["notes"][0].startswith("multi_query: not read by the 'falcon' reader")
    # Qwen3-Coder-480B-A35B carries qkv_bias, shared_expert_intermediate_size 0 and use_qk_norm beside a
    # qwen3_moe config: the same fields on a published qwen3_moe config
    raw = json.loads((FIXTURES / "Qwen3-30B-A3B.config.json").read_text())
    raw.update(qkv_bias=False, shared_expert_intermediate_size=0, use_qk_norm=True)
    f = tmp_path / "config.json"
    f.write_text(json.dumps(raw))
    got = _json(capsys, str(f))
    assert got["assumptions"] == [] and got["parameters"]["total"] == 30_532_122_624
    assert got["notes"][0].startswith("qkv_bias, shared_expert_intermediate_size, use_qk_norm: not read")


def test_model_only_transformers_knows(capsys: pytest.CaptureFixture[str]) -> None:
    got = _json(capsys, str(FIXTURES / "gpt-oss-20b.config.json"), "--context", "8192")
    assert got["reader"] == "transformers" and got["assumptions"] == []
    assert got["layers"] == "24 layers: 12 window 128 (sinks), 12 full (sinks)"
    assert got["kv_bytes_per_sequence"] == 2 * 8 * 64 * 2 * (12 * 8192 + 12 * 128)  # bf16
    plan = got["serving"]["tensor_parallel"]  # planned from the engine's per-layer description
    assert plan["gpus"] == 1 and got["serving"]["naive_gpus"] == 1
    # the plan holds what vLLM reserves: a window layer keeps min(window - 1 + max_num_batched_tokens, context)
    # tokens plus one block (16), a full layer the whole context
    assert plan["kv_bytes_per_gpu"] == 2 * 8 * 64 * 2 * (12 * 8192 + 12 * (8192 + 16)) == 403_046_400
    assert got["serving"]["activation_peak_bytes"] > 0
    hybrid = _json(capsys, str(FIXTURES / "Qwen3-Coder-Next.config.json"), "--users", "4")
    assert hybrid["state_bytes_per_sequence"] > 0
    assert hybrid["total_bytes"] == hybrid["weights_bytes"] + 4 * (
        hybrid["kv_bytes_per_sequence"] + hybrid["state_bytes_per_sequence"])
    text = _main(capsys, str(FIXTURES / "Qwen3-Coder-Next.config.json"))[1]
    assert "layers: 36 linear_attention, 12 full" in text and "recurrent state per sequence (bf16)" in text


def test_numpy_alone_reads_the_hand_families_and_names_the_rest() -> None:
    block = ("import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None;"
             " from lib.planner.cli import main; raise SystemExit(main(sys.argv[1:]))")
    ok = subprocess.run([sys.executable, "-c", block, str(LLAMA)], capture_output=True, text=True, timeout=60,
                        cwd=Path(__file__).resolve().parents[1])
    assert ok.returncode == 0 and "6,738,415,616 total" in ok.stdout
    out = subprocess.run([sys.executable, "-c", block, str(FIXTURES / "gpt-oss-20b.config.json")],
                         capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "needs the transformers engine, and transformers is not installed" in out.stderr


def test_help_shows_every_default() -> None:
    out = run("--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    for default in ["(default: 4096)", "(default: 1)", "(default: H100-80GB)", "(default: bf16)", "(default: 0.9)",
                    "(default: server)", "(default: 64)", "(default: 8)"]:
        assert default in text, default
    # vLLM's card-dependent batch defaults are spelled out, and every GPU alias is listed
    assert "8192 for the server on a card of >= 70 GiB other than an A100, else 2048" in text
    assert "1024 on a card of >= 70 GiB other than an A100, else 256" in text
    assert "also spelled 4090, a10, a100-40, a100-40gb, a100-80, a100-80gb, b200" in text
    assert "'a100' is refused: say A100-40GB or A100-80GB" in text


def test_ambiguous_gpu_refused_and_plans_use_the_engine_total() -> None:
    out = run(str(LLAMA), "--gpu", "a100")
    assert out.returncode == 2 and out.stderr.strip() == "error: GPU 'a100' is ambiguous: say A100-40GB or A100-80GB"
    r = report(load_config(LLAMA), gpu_name="a10")
    assert r["workload"]["gpu_memory_bytes"] == GPUS["A10"].engine_bytes < GPUS["A10"].memory_bytes
    assert (r["serving"]["max_num_batched_tokens"], r["serving"]["max_num_seqs"]) == (2048, 256)  # < 70 GiB
    r = report(load_config(LLAMA), gpu_name="A100-80GB")  # >= 70 GiB but an A100: the small defaults
    assert (r["serving"]["max_num_batched_tokens"], r["serving"]["max_num_seqs"]) == (2048, 256)
    # its engine total is not printed anywhere found: the one four vLLM logs on the card imply, said so
    assert r["workload"]["gpu_memory_bytes"] == GPUS["A100-80GB"].engine_bytes == round(79.26 * GiB)
    assert any("no public printout" in a and "79.26 GiB that vLLM logs on the card imply" in a
               for a in r["serving"]["assumptions"])
    r = report(load_config(LLAMA), gpu_name="L4")  # no figure at all: nvidia-smi's, said so
    assert r["workload"]["gpu_memory_bytes"] == GPUS["L4"].memory_bytes
    assert any("planning with nvidia-smi's memory.total" in a for a in r["serving"]["assumptions"])


def test_context_beyond_training_warned_and_config_json_named(tmp_path: Path) -> None:
    r = report(load_config(LLAMA), context=200_000)
    assert r["warnings"] == ["context 200,000 exceeds the model's max_position_embeddings 4,096: the model was not"
                             " trained for it, and serving engines refuse it unless told otherwise"]
    raw = json.loads(LLAMA.read_text())
    folder = tmp_path / "Llama-2-7b-hf"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(raw))
    assert load_config(folder / "config.json").name == "Llama-2-7b-hf"  # the folder's name, not "config"
    raw["_name_or_path"] = "meta-llama/Llama-2-7b-chat-hf"
    (folder / "config.json").write_text(json.dumps(raw))
    assert load_config(folder / "config.json").name == "Llama-2-7b-chat-hf"


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
    ("unknown gpu", lambda t: [str(LLAMA), "--gpu", "H800"], "unknown GPU 'H800'; presets: H100-80GB, H200"),
    ("unknown family", lambda t: [str(LLAMA), "--assume-family", "lama"], "--assume-family: invalid choice"),
    ("bad non-torch", lambda t: [str(LLAMA), "--non-torch", "1"], "has no unit"),
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


# --train: one training step's memory per GPU and FLOPs, in the same report


def test_train_text_report() -> None:
    out = run(str(LLAMA), "--train", "--context", "2048", "--micro-batch", "2", "--tokens", "2e12")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "serving plan" in text  # the serving report comes first, unchanged
    training = text[text.index("training, per GPU (1 GPUs: tp 1, pp 1, data parallel 1, ZeRO 0):"):]
    for part in ("weights", "gradients", "optimizer", "activations", "total"):
        assert f"\n  {part} " in training, part
    assert "[closed form]" in training and "trained parameters 6,738,415,616 of 6,738,415,616" in training
    assert "2e+12 tokens:" in training and "GPU-hours at MFU 0.4" in training
    assert "micro-batch 2 of 2048 tokens" in training  # --context is the sequence length


def test_train_says_whether_the_step_fits_the_gpu() -> None:
    """A 7B model with AdamW on one H100 needs more than the card; ZeRO-3 over 8 GPUs fits. The verdict compares the
    per-GPU total with the memory torch sees (the preset's plan bytes), and says by how much it is exceeded."""
    from lib.planner.gpus import gpu

    have = gpu("H100-80GB").plan_bytes
    one = run(str(LLAMA), "--train", "--context", "2048", "--gpu", "H100-80GB")
    assert one.returncode == 0, one.stderr
    line = one.stdout.strip().splitlines()[-1]
    need = float(line.split("per GPU ")[1].split(" GB")[0].replace(",", "")) * 1e9
    assert need > have and f"does NOT fit: {need / have:,.2f}x" in line, line
    eight = run(str(LLAMA), "--train", "--context", "2048", "--gpu", "H100-80GB", "--zero", "3", "--gpus", "8")
    assert eight.stdout.strip().splitlines()[-1].endswith(": fits (before allocator fragmentation and"
                                                         " communication buffers)")


def test_help_shows_no_none_defaults() -> None:
    out = run("--help")
    assert out.returncode == 0 and "(default: None)" not in out.stdout and "(default: 4096)" in out.stdout


def test_train_json_is_the_training_report(capsys: pytest.CaptureFixture[str]) -> None:
    from lib.planner.cli import JSON_KEYS, _parser
    from lib.planner.train_cli import TRAINING_KEYS, training_report

    argv = [str(LLAMA), "--train", "--context", "4096", "--dtype", "fp16", "--gpus", "8", "--tp", "2", "--zero", "1",
            "--json"]
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    want = training_report(json.loads(LLAMA.read_text()), _parser().parse_args(argv))
    assert got["training"] == json.loads(json.dumps(want))
    assert set(got) <= set(JSON_KEYS) and "training" in got
    assert set(got["training"]) - {"tokens", "mfu", "peak_flops_per_gpu"} == set(TRAINING_KEYS) - {"gpu_hours"}
    t = got["training"]
    assert t["parallelism"] == {"gpus": 8, "tp": 2, "pp": 1, "dp": 4, "zero": 1}
    assert t["total_bytes_per_gpu"] == sum(t[k] for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes",
                                                          "activation_bytes"))
    assert t["weights_bytes"] == t["parameters"]  # 2 bytes (fp16) per parameter, halved by tensor parallelism 2
    assert got["workload"]["dtype"] == "fp16"
    assert main([str(LLAMA), "--json"]) == 0 and "training" not in json.loads(capsys.readouterr().out)


TRAIN_BAD = [
    ("quantised without LoRA", ["--dtype", "int8"], "error: --dtype int8 cannot be trained"),
    ("gpus vs tp x pp", ["--gpus", "3", "--tp", "2"], "error: --gpus 3 is not a multiple of --tp 2 x --pp 1"),
    ("zero with pipeline", ["--zero", "2", "--pp", "2", "--gpus", "4"], "error: --zero 2 with pipeline"),
    ("unknown lora target", ["--lora-rank", "8", "--lora-targets", "qkv"], "error: --lora-targets: LoRA targets"),
    ("unknown optimizer", ["--optimizer", "adam"], "error: argument --optimizer: invalid choice: 'adam'"),
    ("zero micro-batch", ["--micro-batch", "0"], "error: argument --micro-batch: must be positive, got 0"),
    ("mfu above one", ["--mfu", "1.5"], "error: argument --mfu: must be in (0, 1], got '1.5'"),
    ("tokens not a number", ["--tokens", "lots"], "error: argument --tokens: expected a number of tokens"),
]


@pytest.mark.parametrize("label, args, message", TRAIN_BAD, ids=[b[0] for b in TRAIN_BAD])
def test_train_bad_option_one_line_exit_2(capsys: pytest.CaptureFixture[str], label, args, message) -> None:
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main([str(LLAMA), "--train", *args]))
    assert exc.value.code == 2, label
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), captured.err


def test_train_bad_option_in_a_real_process_has_no_traceback() -> None:
    out = run(str(LLAMA), "--train", "--dtype", "int4")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: --dtype int4 cannot be trained: use bf16, fp16 or fp32 (a frozen base in fp8, int8, int4 needs"
        " --lora-rank)"]


def test_engine_plans_a_hybrid_over_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    """A model only transformers reads gets serving plans too: Qwen3-Coder-Next (80B, linear attention) for 256
    users of 32,768 tokens needs several H100s; the plan's per-GPU cache holds each sequence's per-token cache
    and its fixed recurrent state, split over the tensor-parallel group."""
    got = _json(capsys, str(FIXTURES / "Qwen3-Coder-Next.config.json"), "--users", "256", "--context", "32768")
    tp, tpp = got["serving"]["tensor_parallel"], got["serving"]["tensor_x_pipeline"]
    assert tp["gpus"] >= got["serving"]["naive_gpus"] > 1 and tpp["gpus"] <= tp["gpus"]
    t, kv_heads = tp["tp_degree"], json.loads((FIXTURES / "Qwen3-Coder-Next.config.json").read_text())[
        "num_key_value_heads"]
    share = max(1, t // kv_heads) / t  # beyond the key/value heads, each head's cache is held on t / kv_heads GPUs
    per_seq = got["kv_bytes_per_sequence"] * share + got["state_bytes_per_sequence"] / t
    busiest = -(-256 // tp["replicas"])
    assert tp["kv_bytes_per_gpu"] == pytest.approx(busiest * per_seq, rel=1e-9)
    text = _main(capsys, str(FIXTURES / "Qwen3-Coder-Next.config.json"), "--users", "256", "--context", "32768")[1]
    assert "serving plan" in text and "recurrent state split over a tensor-parallel group" in text


def test_verdict_and_max_num_seqs_have_lines_of_their_own(capsys: pytest.CaptureFixture[str]) -> None:
    """The verdict and the max_num_seqs limit are results, not assumptions: each has its line in the text and its key
    in the JSON, and neither is among the engine's assumptions."""
    mistral = str(FIXTURES / "Mistral-7B-v0.1.config.json")
    assert main([mistral, "--gpu", "H200", "--users", "1500", "--context", "512"]) == 0
    lines = capsys.readouterr().out.splitlines()
    verdict = [x for x in lines if x.startswith("verdict (tensor-parallel plan): fits with ")]
    limit = [x for x in lines if x.startswith("max_num_seqs: one replica's cache holds ")]
    assert len(verdict) == len(limit) == 1 and "476 users would wait" in limit[0]
    assert not [x for x in lines if x.startswith("engine assumption:") and ("verdict" in x or "would wait" in x)]
    assert main([mistral, "--gpu", "H200", "--users", "1500", "--context", "512", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)["serving"]
    assert verdict[0].endswith(s["verdict"]) and limit[0].endswith(s["max_num_seqs_limit"])
    assert not any("verdict" in a or "would wait" in a for a in s["assumptions"])
    assert report(load_config(LLAMA))["serving"]["max_num_seqs_limit"] is None  # one user: the cap does not bind


def test_quantisation_assumptions_reach_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    """What a checkpoint's quantisation assumes (AutoAWQ's fp16 tensors whatever torch_dtype says) is in the report's
    assumptions list, and in the text as ASSUMED."""
    awq = FIXTURES / "checkpoints" / "CodeLlama-7B-AWQ.config.json"
    assert main([str(awq), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["quantisation"] and "unquantised tensors at fp16, as AutoAWQ writes them whatever torch_dtype says" in (
        r["assumptions"])
    assert main([str(awq)]) == 0
    assert "ASSUMED: unquantised tensors at fp16, as AutoAWQ writes them" in capsys.readouterr().out


def test_one_report_for_both_readers() -> None:
    """report() takes a hand-read description or an engine-read one (with its config.json) and returns the same
    keys."""
    pytest.importorskip("transformers")
    from lib.planner import engine as eng
    from lib.planner.cli import JSON_KEYS

    raw = json.loads(LLAMA.read_text())
    em = eng.describe(raw)
    hand, by_engine = report(load_config(LLAMA), raw), report(em, raw, name="Llama-2-7b-hf")
    assert set(hand) == set(by_engine) == set(JSON_KEYS) - {"training"}  # training: only with --train
    for key in ("weights_bytes", "kv_bytes_per_token", "kv_bytes_per_sequence", "total_bytes", "model"):
        assert hand[key] == by_engine[key], key
    assert hand["flops_per_token"]["total"] == by_engine["flops_per_token"]["total"]
    assert hand["serving"]["tensor_parallel"]["gpus"] == by_engine["serving"]["tensor_parallel"]["gpus"]
    with pytest.raises(ValueError, match="needs its config.json"):
        report(em)


def test_readme_lists_every_json_key() -> None:
    """The README's --json paragraph names every top-level key, every key of serving and of its plans, and every
    key of speed, as the report writes them."""
    from lib.planner.cli import JSON_KEYS
    from lib.planner.speed import SPEED_KEYS

    text = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = text[text.index("`--json` writes one object"):text.index("### Training: `--train`")]
    r = report(load_config(LLAMA), users=8)
    keys = set(JSON_KEYS) | set(r["serving"]) | set(r["serving"]["tensor_parallel"]) | set(SPEED_KEYS)
    keys = (keys | {"from_kv_available"}) - {"training"}  # training: the --train section describes it
    assert "`training`" in text[text.index("### Training: `--train`"):]
    missing = sorted(k for k in keys if f"`{k}`" not in section)
    assert not missing, f"README's JSON section does not name {missing}"
