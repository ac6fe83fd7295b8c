"""The planner's report as text: :func:`format_report` renders the dict of :func:`lib.planner.cli.report` for a
reader, GB (10**9 B) and GiB (2**30 B) labelled."""

from __future__ import annotations

from typing import Any

from ..constants import GB, GiB, KiB
from .units import format_bytes

__all__ = ["format_report"]


def _plan_line(label: str, g: dict[str, Any]) -> str:
    return (f"{label}: {g['gpus']} GPU(s) = {g['replicas']} replica(s) x tensor-parallel {g['tp_degree']}"
            f" x pipeline {g['pp_degree']}; {g['sequences_per_replica']} sequences per replica; per GPU: weights"
            f" {g['weight_bytes_per_gpu'] / GiB:,.2f} GiB, overhead {g['overhead_bytes_per_gpu'] / GiB:,.2f} GiB,"
            f" cache {g['kv_bytes_per_gpu'] / GiB:,.2f} GiB")


def format_report(r: dict[str, Any]) -> str:
    """The readable form of :func:`lib.planner.cli.report` (GB = 10**9 B and GiB = 2**30 B labelled)."""
    w, p, f, s = r["workload"], r["parameters"], r["flops_per_token"], r["serving"]
    lines = [f"ASSUMED: {a}" for a in r["assumptions"]] + [f"WARNING: {a}" for a in r["warnings"]]
    lines += [f"NOTE: {a}" for a in r.get("notes", [])]
    gpu_text = f"{w['gpu']}, " if w["gpu"] else ""
    smi = (f" (nvidia-smi reports {w['gpu_nvidia_smi_bytes'] / GiB:,.2f} GiB)"
           if w.get("gpu_nvidia_smi_bytes") and w["gpu_nvidia_smi_bytes"] != w["gpu_memory_bytes"] else "")
    read = "read by transformers" if r["reader"] == "transformers" else "hand-written reader"
    lines += [
        f"model: {r['model']} ({r['model_type']}, {r['attention']} attention; {read})",
        f"layers: {r['layers'].split(': ', 1)[-1]}",
        f"parameters: {p['total']:,} total, {p['active_per_token']:,} active per token"
        + (f" (language model {p['language_model']:,})"
           if p.get("language_model") not in (None, p["total"]) else ""),
        f"weights ({r['quantisation'] or w['dtype']}): {format_bytes(r['weights_bytes'])}",
        f"KV cache per token ({w['kv_dtype']}): {r['kv_bytes_per_token']:,.0f} B"
        f" = {r['kv_bytes_per_token'] / KiB:,.2f} KiB",
        f"KV cache for {w['users']} x {w['context']} tokens: {format_bytes(r['kv_cache_bytes'])}"
        f" ({w['cached_token_layers']:,} token-layers per sequence: cached tokens summed over the layers,"
        " each layer holding at most its window)",
    ]
    if r.get("checkpoint_bytes") and r["checkpoint_bytes"] != r["weights_bytes"]:
        lines.append(f"checkpoint as published (its safetensors as stored, the config's torch_dtype for"
                     f" unquantised tensors): {format_bytes(r['checkpoint_bytes'])}")
    ed = r.get("encoder_decoder")
    if ed:
        lines += [
            f"encoder-decoder: encoder {ed['encoder_params']:,} parameters, {ed['decoder_layers']} decoder layers;"
            f" the decoder caches {ed['self_attention_bytes_per_generated_token']:,} B per generated token"
            f" (self-attention) and {ed['cross_attention_bytes_per_source_token']:,} B per source position"
            f" (cross-attention)",
            f"cross-attention cache per request ({w['kv_dtype']}, {ed['source_tokens']:,} source positions):"
            f" {format_bytes(ed['cross_attention_bytes_per_request'])}",
        ]
    if r["state_bytes_per_sequence"] and not (ed and r["state_bytes_per_sequence"]
                                              == ed["cross_attention_bytes_per_request"]):
        lines.append(f"recurrent state per sequence ({w['kv_dtype']}): {format_bytes(r['state_bytes_per_sequence'])}"
                     f" (fixed, whatever the context)")
    lines.append(f"weights + cache{' + state' if r['state_bytes_per_sequence'] else ''}:"
                 f" {format_bytes(r['total_bytes'])}")
    if f is not None:
        lines += [
            f"forward FLOPs per token at context {w['context']}: {f['total']:.4g} (attention scores"
            f" {f['attention']:.4g}, projections {f['projections']:.4g}, feed-forward {f['ffn']:.4g}, LM head"
            f" {f['lm_head']:.4g})",
        ]
        if r["crossover_context"] is not None:
            lines.append(f"attention scores = feed-forward FLOPs at context {r['crossover_context']:,.0f}")
    lines.append(
        f"GPU: {gpu_text}{w['gpu_memory_bytes'] / GB:,.2f} GB = {w['gpu_memory_bytes'] / GiB:,.2f} GiB as the"
        f" serving engine sees it{smi}; (weights + cache) / memory, rounded up, would be"
        f" {s['naive_gpus']} GPU(s), before any engine overhead or parallelism constraint")
    if s["tensor_parallel"] is None:
        pass
    elif s["tensor_parallel"] == s["tensor_x_pipeline"]:
        lines.append(_plan_line("serving plan (tensor parallel; no pipeline split does better)",
                                s["tensor_parallel"]))
    else:
        lines.append(_plan_line("serving plan, tensor parallel", s["tensor_parallel"]))
        lines.append(_plan_line("serving plan, tensor x pipeline", s["tensor_x_pipeline"]))
    if s.get("verdict"):
        lines.append(f"verdict (tensor-parallel plan): {s['verdict']}")
    if s.get("max_num_seqs_limit"):
        lines.append(f"max_num_seqs: {s['max_num_seqs_limit']}")
    lines.append(f"engine: {s['vllm_version']}, max_num_batched_tokens {s['max_num_batched_tokens']},"
                 f" max_num_seqs {s['max_num_seqs']}")
    lines += [f"engine assumption: {a}" for a in s["assumptions"]]
    return "\n".join(lines)
