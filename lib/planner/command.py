"""The command line ``python -m lib.sizing CONFIG.json`` (also ``python -m lib.planner``): argparse, its
validators, and :func:`main`, which reads the config (:func:`lib.planner.cli.read_model`), builds the report
(:mod:`lib.planner.cli`), renders it (:mod:`lib.planner.text`) and turns every failure into one line, exit 2."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..constants import GB, GiB
from .cli import SCHEMA_VERSION, read_model, report
from .config import SUPPORTED_MODEL_TYPES, ConfigError, model_name
from .gpus import ALIASES, GPUS, gpu
from .serving import VLLM_VERSION, ServingAssumptions, fit_verdict, kv_available_plan, vllm_band
from .speed import DEFAULT_EFFICIENCY, Efficiency, speed_text
from .text import format_report
from .train_cli import TrainingInputError, add_train_arguments, training_report, training_text
from .units import parse_bytes

__all__ = ["main", "training_fit"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return value


def _efficiency_arg(text: str) -> Efficiency:
    """``prefill=0.7,decode_bandwidth=0.8``: the default efficiencies with these replaced."""
    values: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in Efficiency.__dataclass_fields__:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE with KEY one of"
                                             f" {', '.join(Efficiency.__dataclass_fields__)}, got {part!r}")
        try:
            values[key] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{key}: expected a number, got {value!r}") from None
    try:
        return replace(DEFAULT_EFFICIENCY, **values)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _fraction_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the usage too; we don't)
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m lib.sizing", formatter_class=_DefaultsHelp,
                 description="Capacity planner: parameters, memory, FLOPs and GPUs for a model's config.json. "
                             "Unsupported model types and unread count-changing fields are refused (exit 2). "
                             "Sizes take explicit units: GB = 10**9 B, GiB = 2**30 B.")
    ap.add_argument("config", help="a model's config.json")
    ap.add_argument("--assume-family", choices=SUPPORTED_MODEL_TYPES, default=None, metavar="FAMILY",
                    help="read an unsupported config with this family's reader; the report lists the assumptions"
                         f" (one of: {', '.join(SUPPORTED_MODEL_TYPES)})")
    ap.add_argument("--context", type=_positive_int, default=4096, help="tokens per sequence")
    ap.add_argument("--users", type=_positive_int, default=1, help="concurrent sequences")
    ap.add_argument("--gpu", default="H100-80GB",
                    help=f"GPU preset: {', '.join(GPUS)}; also spelled {', '.join(sorted(ALIASES))}"
                         " ('a100' is refused: say A100-40GB or A100-80GB). Plans use the total that"
                         " torch.cuda.mem_get_info() reports (what vLLM multiplies by its utilization),"
                         " nvidia-smi's memory.total where that is not known")
    ap.add_argument("--gpu-memory", default=None,
                    help="memory per GPU with a unit (81559MiB, 80GiB, 141GB); overrides --gpu")
    ap.add_argument("--dtype", default="bf16", help="weight format (fp32, bf16, fp16, fp8, int8, int4)")
    ap.add_argument("--kv-dtype", default=None, help="cache format (default: the --dtype)")
    ap.add_argument("--gpu-memory-utilization", "--memory-fraction", dest="utilization", type=_fraction_arg,
                    default=0.9, help="vLLM's bound on everything it allocates per GPU")
    ap.add_argument("--max-num-batched-tokens", type=_positive_int, default=None,
                    help=f"tokens in vLLM's profiling forward pass (sets the activation estimate); default:"
                         f" {VLLM_VERSION}'s for the card and --vllm-entry (8192 for the server on a card of"
                         " >= 70 GiB other than an A100, else 2048; offline 16384 and 8192)")
    ap.add_argument("--max-num-seqs", type=_positive_int, default=None,
                    help="sequences whose logits are profiled; default: vLLM's for the card (1024 on a card of"
                         " >= 70 GiB other than an A100, else 256)")
    ap.add_argument("--vllm-entry", choices=("server", "offline"), default="server",
                    help="which vLLM defaults apply: 'vllm serve' (server) or the LLM class (offline)")
    ap.add_argument("--non-torch", default=None,
                    help="memory outside PyTorch per GPU, with a unit; default: vLLM V1's figure, 0.14 GiB on a"
                         " replica of one GPU and 0.55 GiB when it spans several")
    ap.add_argument("--vllm-version", default=None, metavar="VERSION",
                    help="the vLLM release whose accounting to follow (0.12 or later, 0.10/0.11, v0); default:"
                         f" {VLLM_VERSION}")
    ap.add_argument("--block-size", type=_positive_int, default=16, help="vLLM --block-size (tokens per block)")
    ap.add_argument("--kv-available", default=None, metavar="GIB",
                    help="plan from the 'Available KV cache memory' a running vLLM printed (per GPU, with a unit;"
                         " a bare number is GiB) for a replica of --tp x --pp GPUs (the running vLLM's"
                         " degrees), instead of estimating it")
    ap.add_argument("--overhead", default=None,
                    help="a fixed overhead per GPU with a unit, replacing the activation and non-torch estimates")
    ap.add_argument("--max-tp", type=_positive_int, default=64, help="largest tensor-parallel degree tried")
    ap.add_argument("--max-pp", type=_positive_int, default=8, help="most pipeline stages tried")
    ap.add_argument("--input-tokens", type=_positive_int, default=None,
                    help="prompt tokens per request for time and throughput (default: --context minus the output)")
    ap.add_argument("--output-tokens", type=_positive_int, default=None,
                    help="generated tokens per request (default: min(256, --context / 2), or --context minus"
                         " --input-tokens)")
    ap.add_argument("--tokens-per-second-per-user", type=_positive_float, default=None,
                    help="target output tokens/s each user sees: the report gives the GPUs that reach it")
    ap.add_argument("--tokens-per-second", type=_positive_float, default=None,
                    help="target output tokens/s of the whole service: the report gives the GPUs that reach it")
    ap.add_argument("--gpu-hour-price", type=_positive_float, default=None,
                    help="price of one GPU-hour (any currency): the report gives the cost per million output tokens")
    ap.add_argument("--efficiency", type=_efficiency_arg, default=None, metavar="KEY=VALUE,...",
                    help="replace assumed efficiencies of the time model, e.g. prefill=0.7,decode_bandwidth=0.8 (keys:"
                         " prefill, decode_bandwidth, decode_compute, moe, allreduce_seconds; default: fitted to"
                         " published measurements, printed with the answer)")
    ap.add_argument("--json", action="store_true", help=f"print JSON (schema_version {SCHEMA_VERSION}) instead of text")
    add_train_arguments(ap)
    return ap


def main(argv: list[str] | None = None) -> int:
    """``python -m lib.sizing CONFIG.json [options]`` (``--help`` lists them with their defaults).

    With ``--train`` the report also carries one training step's memory per GPU and FLOPs (JSON key
    ``training``, :func:`lib.planner.train_cli.training_report`; ``--context`` is the sequence length, ``--dtype``
    the format of weights and activations).

    Prints the report (or JSON) and returns 0; on bad input, an unsupported ``model_type`` or an unread
    count-changing field prints one line ``error: ...`` to stderr and returns 2 (no traceback).
    """
    args = _parser().parse_args(argv)
    try:
        cfg, em, notes = read_model(args.config, assume_family=args.assume_family, cache=True)
        memory = parse_bytes(args.gpu_memory) if args.gpu_memory is not None else None
        name = None if memory is not None else gpu(args.gpu).name
        settings: dict[str, Any] = {"gpu_memory_utilization": args.utilization, "block_size": args.block_size,
                                    "vllm_version": vllm_band(args.vllm_version)}
        if args.non_torch is not None:
            settings["non_torch_bytes"] = parse_bytes(args.non_torch, allow_zero=True)
        if args.max_num_batched_tokens is not None:
            settings["max_num_batched_tokens"] = args.max_num_batched_tokens
        if args.max_num_seqs is not None:
            settings["max_num_seqs"] = args.max_num_seqs
        engine = ServingAssumptions.vllm_defaults(memory if memory is not None else GPUS[name].plan_bytes,
                                                  name or "", args.vllm_entry, **settings)
        overhead = parse_bytes(args.overhead, allow_zero=True) if args.overhead is not None else None
        speed = {k: v for k, v in (("input_tokens", args.input_tokens), ("output_tokens", args.output_tokens),
                                   ("tokens_per_second_per_user", args.tokens_per_second_per_user),
                                   ("tokens_per_second", args.tokens_per_second),
                                   ("gpu_hour_price", args.gpu_hour_price), ("eff", args.efficiency))
                 if v is not None}
        raw = json.loads(Path(args.config).read_text(encoding="utf-8"))
        r = report(cfg if cfg is not None else em, raw, name=model_name(Path(args.config), raw),
                   context=args.context, users=args.users, gpu_memory_bytes=memory, gpu_name=name, dtype=args.dtype,
                   kv_dtype=args.kv_dtype, engine=engine, notes=notes, overhead_bytes=overhead, max_tp=args.max_tp,
                   max_pp=args.max_pp, speed=speed)
        if args.kv_available is not None:
            _from_kv_available(r, cfg if cfg is not None else em, args, engine)
        if args.train:
            r["training"] = training_report(json.loads(Path(args.config).read_text(encoding="utf-8")), args)
    except TrainingInputError as err:
        text = str(err)
        sys.stderr.write(f"error: {text if text.startswith('--') else '--train: ' + text}\n")
        return 2
    except (ConfigError, ValueError, TypeError) as err:
        sys.stderr.write(f"error: {_one_line(err)}\n")
        return 2
    except Exception as err:  # noqa: BLE001  (whatever transformers or torch raise: one line, never a traceback)
        sys.stderr.write(f"error: {Path(args.config).name}: cannot plan this model: {type(err).__name__}:"
                         f" {_one_line(err)}\n")
        return 2
    text = json.dumps(r, indent=2) if args.json else format_report(r) + "\n" + speed_text(r["speed"])
    if args.train and not args.json:
        text += "\n" + training_text(r["training"]) + "\n" + training_fit(r)
    sys.stdout.write(text + "\n")
    return 0


def _from_kv_available(r: dict[str, Any], model: Any, args: argparse.Namespace, engine: ServingAssumptions) -> None:
    """``--kv-available``: the plan from the KV memory a running vLLM printed (JSON ``serving.from_kv_available``,
    and a note), exact where the estimate of weights, activations and non-torch memory is not."""
    text = args.kv_available.strip()
    kv = parse_bytes(text + "GiB" if text.replace(".", "", 1).isdigit() else text)
    w = r["workload"]
    plan = kv_available_plan(model, kv, users=w["users"], context=w["context"], tp=args.tp, pp=args.pp,
                             kv_dtype=w["kv_dtype"], assumptions=engine)
    verdict = fit_verdict(plan, 0.005 * GiB)  # the log prints the figure to 0.01 GiB
    r["serving"]["from_kv_available"] = {**asdict(plan), "verdict": verdict}
    cap = (f" (its cache holds {plan.cache_sequences_per_replica:,}; vLLM runs at most max_num_seqs ="
           f" {plan.max_num_seqs:,} at once)" if plan.cache_sequences_per_replica > plan.sequences_per_replica else "")
    r["notes"].append(
        f"from the KV memory vLLM printed ({kv / GiB:,.2f} GiB per GPU, tensor-parallel {args.tp} x pipeline"
        f" {args.pp}): {plan.sequences_per_replica:,} sequences of {w['context']:,} tokens per replica{cap};"
        f" {plan.replicas:,} replica(s) = {plan.gpus:,} GPU(s) for {w['users']:,} users; {verdict}")


def _one_line(err: BaseException) -> str:
    """An exception's message on one line (the first non-empty line; transformers' messages run to several)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


class _DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default, except where there is none (None) or its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or "default:" in (action.help or ""):
            return action.help or ""
        return super()._get_help_string(action)


def training_fit(r: dict[str, Any]) -> str:
    """One line: does the training step's per-GPU total fit the GPU of the workload (as torch sees it)?"""
    need, have = r["training"]["total_bytes_per_gpu"], r["workload"]["gpu_memory_bytes"]
    card = f"{r['workload']['gpu']}, " if r["workload"]["gpu"] else ""
    verdict = "fits" if need <= have else f"does NOT fit: {need / have:,.2f}x the memory"
    return (f"  per GPU {need / GB:,.2f} GB against {card}{have / GB:,.2f} GB as torch sees it: {verdict}"
            " (before allocator fragmentation and communication buffers)")
