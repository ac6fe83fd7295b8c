r"""Weights as a checkpoint stores them: quantised matrices with their scales, the rest at 16 bit.

A quantised checkpoint says how it was quantised in ``config.json``'s ``quantization_config``. This module reads
it (:func:`read_quantisation`) and counts the bytes of every tensor as the checkpoint stores it
(:meth:`Quantisation.tensor_bytes`): the packed weights, their scales (per block, group or row, in the scale's own
dtype), zero points and index tensors where the format has them. Layouts, as transformers and vLLM read them:

* ``fp8`` (DeepSeek-V3, Qwen3-*-FP8): one byte per weight, and with ``weight_block_size`` ``[n, k]`` one fp32
  ``weight_scale_inv`` per ``n x k`` block (:math:`\lceil r/n\rceil\lceil c/k\rceil` of them for an ``r x c``
  matrix); without it one fp32 scale per matrix (plus one per input for a static activation scheme);
* ``mxfp4`` (gpt-oss): two 4-bit values per byte (``*_blocks``) and one 8-bit power-of-two scale per 32 weights
  (``*_scales``): :math:`N/2 + N/32` bytes;
* ``modelopt`` NVFP4 and compressed-tensors ``nvfp4-pack-quantized``: :math:`N/2` plus one fp8 scale per 16
  weights, plus a global fp32 weight scale and an fp32 input scale per matrix;
* ``awq``: ``qweight`` packs 8 four-bit values per int32; per group of ``group_size`` inputs and per output an fp16
  ``scales`` entry and a 4-bit ``qzeros`` entry;
* ``gptq``: as AWQ, plus ``g_idx``, one int32 per input (AutoAWQ and AutoGPTQ write every unquantised tensor in
  fp16, whatever ``torch_dtype`` says: a float32 config would otherwise double the token table);
* compressed-tensors ``pack-quantized`` (int4 in groups): :math:`N/2`, one 16-bit scale per group (and a packed
  zero point when asymmetric), and ``weight_shape`` (two int64) per matrix; ``float-quantized`` / ``int-quantized``
  (8 bit): one byte per weight and one 16-bit scale per output channel (or per matrix);
* ``bitsandbytes`` 4-bit (NF4/FP4): :math:`\lceil N/2\rceil` bytes, one absmax per 64 weights (fp32, or with
  double quantisation one byte plus one fp32 per 256 of those) and the 16-entry code table (and the 256-entry
  nested one); 8-bit: one byte per weight and one fp32 scale (``SCB``) per output row.

What the config does not state is an assumption, one line each in :attr:`Quantisation.assumptions` (the fp8 block
scales' dtype; the per-matrix bias buffers of AutoGPTQ and ``quant_state`` blobs of bitsandbytes, each well under
0.1 %); a layout that cannot be counted from the config (AWQ at another width, a repacked AWQ version, an unknown
method or algorithm) is refused in one line (:class:`QuantisationError`).

What is quantised: the weight of every linear layer (and the fused expert tensors of a mixture of experts), except
the output head, the embeddings (not linear layers) and the modules the config lists in ``modules_to_not_convert``
/ ``ignore`` / ``exclude_modules`` / ``llm_int8_skip_modules``. Everything else (norms, biases, routers where
listed) keeps the checkpoint's 16-bit dtype.

``--dtype int8 / fp8 / int4`` on a 16-bit checkpoint (:func:`for_dtype`) quantises the same matrices and keeps the
embeddings and the head at 16 bit, as published quantised checkpoints do: fp8 with one fp32 scale per matrix
(vLLM's on-the-fly fp8), int8 with one fp32 scale per output row, int4 in groups of 128 with an fp16 scale and a
4-bit zero point per group (the AWQ layout).
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["QuantisationError", "Quantisation", "read_quantisation", "for_dtype", "stored_bytes", "stored_dtype_bytes",
           "checkpoint_bytes", "MTP_CHECKPOINTS"]


class QuantisationError(ValueError):
    """A ``quantization_config`` this planner cannot count (the message says which field and why)."""


@dataclass(frozen=True)
class Quantisation:
    """How a checkpoint stores its quantised matrices (see the module)."""

    method: str  #: "fp8", "mxfp4", "nvfp4", "awq", "gptq", "int4-group", "int8-channel", "fp8-channel",
    #: "fp8-tensor", "bnb-4bit", "bnb-8bit"
    bits: int  #: bits per stored weight
    group: int | tuple[int, int] | None = None  #: inputs per scale (a block ``(n, k)`` for fp8)
    scale_bytes: float = 0.0  #: bytes of one scale
    zero_bits: int = 0  #: bits of one zero point per group (0: symmetric)
    skip: tuple[str, ...] = ()  #: modules kept at 16 bit (patterns as the config writes them)
    double_quant: bool = False  #: bitsandbytes' nested quantisation of the absmax
    static_input_scale: bool = False  #: one fp32 activation scale per matrix
    description: str = ""  #: e.g. "fp8 (e4m3) weights, fp32 scale per 128x128 block (quantization_config)"
    other_bytes: int | None = None  #: bytes per element of every unquantised tensor when the format fixes it
    #: (AutoAWQ and AutoGPTQ write fp16 whatever ``torch_dtype`` says); None: the config's ``torch_dtype``
    assumptions: tuple[str, ...] = ()  #: what the count assumes that the config does not state, one line each

    def quantises(self, module: str) -> bool:
        """Whether the linear layer ``module`` (e.g. ``model.layers.0.mlp.down_proj``) is stored quantised."""
        if module.split(".")[-1] == "lm_head" or module.endswith("lm_head"):
            return False
        return not any(_matches(p, module) for p in self.skip)

    def tensor_bytes(self, shape: tuple[int, ...]) -> float:
        """Bytes of one quantised weight of ``shape`` (``(out, in)``, or ``(experts, out, in)`` for fused experts;
        the last dimension is the one grouped) with its scales, zero points and index tensors."""
        experts = shape[0] if len(shape) == 3 else 1
        rows, cols = (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[0])
        n = experts * rows * cols
        per_row_groups = math.ceil(cols / self.group) if isinstance(self.group, int) and self.group > 0 else 1
        groups = experts * rows * per_row_groups
        m = self.method
        if m == "fp8":
            bn, bk = self.group
            return n + experts * math.ceil(rows / bn) * math.ceil(cols / bk) * 4
        if m == "fp8-tensor":
            return n + experts * 4 * (2 if self.static_input_scale else 1)
        if m in ("fp8-channel", "int8-channel", "bnb-8bit"):
            return n + experts * rows * self.scale_bytes
        if m == "mxfp4":
            return n / 2 + math.ceil(n / 32)
        if m == "nvfp4":
            return n / 2 + math.ceil(n / 16) + experts * 8
        if m in ("awq", "int4-group"):
            return n * self.bits / 8 + groups * (self.scale_bytes + self.zero_bits / 8)
        if m == "gptq":
            return n * self.bits / 8 + groups * (self.scale_bytes + self.bits / 8) + experts * 4 * cols
        if m == "ct-int4":
            return n * self.bits / 8 + groups * (self.scale_bytes + self.zero_bits / 8) + experts * 16
        if m == "bnb-4bit":
            blocks = math.ceil(n / 64)
            if self.double_quant:
                return math.ceil(n / 2) + blocks + 4 * math.ceil(blocks / 256) + 4 + 1024 + 64
            return math.ceil(n / 2) + 4 * blocks + 64
        raise QuantisationError(f"no storage rule for {m!r}")


def _matches(pattern: str, module: str) -> bool:
    """transformers' and compressed-tensors' rules: ``re:`` a regular expression; a glob with ``*``; else the name
    or a dotted component run of it."""
    if not isinstance(pattern, str) or not pattern:
        return False
    if pattern.startswith("re:"):
        return re.match(pattern[3:], module) is not None
    if "*" in pattern:
        parts = module.split(".")
        return any(fnmatch.fnmatchcase(".".join(parts[:i]), pattern) for i in range(1, len(parts) + 1))
    return module == pattern or f".{module}.".find(f".{pattern}.") >= 0 or module.endswith("." + pattern)


def _skip_list(q: dict[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    for key in ("modules_to_not_convert", "ignore", "exclude_modules", "llm_int8_skip_modules", "ignored_layers"):
        v = q.get(key)
        if isinstance(v, list):
            out += [x for x in v if isinstance(x, str)]
    return tuple(out)


def _int(q: dict[str, Any], key: str, default: int) -> int:
    v = q.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise QuantisationError(f"quantization_config.{key} must be an integer, got {v!r}")
    return v


def read_quantisation(raw: dict[str, Any]) -> Quantisation | None:
    """The quantisation ``raw`` (a parsed ``config.json``) declares, or None for a checkpoint stored unquantised.

    Raises :class:`QuantisationError` (one line) for a method or layout this planner does not count.
    """
    q = raw.get("quantization_config")
    if q is None and isinstance(raw.get("text_config"), dict):
        q = raw["text_config"].get("quantization_config")
    if q is None:
        return None
    if not isinstance(q, dict):
        raise QuantisationError(f"quantization_config must be an object, got {type(q).__name__}")
    method = str(q.get("quant_method", "")).lower()
    skip = _skip_list(q)
    src = "(quantization_config)"
    if method == "fp8":
        block = q.get("weight_block_size")
        static = q.get("activation_scheme") == "static"
        if block is None:
            return Quantisation("fp8-tensor", 8, None, 4, skip=skip, static_input_scale=static,
                                description=f"fp8 weights, one fp32 scale per matrix {src}")
        if (not isinstance(block, list) or len(block) != 2
                or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
            raise QuantisationError(f"quantization_config.weight_block_size must be two positive integers, got"
                                    f" {block!r}")
        return Quantisation("fp8", 8, (block[0], block[1]), 4, skip=skip,
                            description=f"fp8 ({q.get('fmt', 'e4m3')}) weights, one fp32 scale per"
                                        f" {block[0]}x{block[1]} block {src}",
                            assumptions=(f"the block scales' dtype is not in the config: counted as fp32"
                                         f" (DeepSeek-V3's); in bf16 they would be"
                                         f" {100 * 2 / (block[0] * block[1]):.3g} % of the weights smaller",))
    if method == "fbgemm_fp8":
        return Quantisation("fp8-channel", 8, None, 4, skip=skip,
                            description=f"fp8 weights, one fp32 scale per output row (fbgemm) {src}")
    if method == "mxfp4":
        return Quantisation("mxfp4", 4, 32, 1, skip=skip,
                            description=f"mxfp4 weights, one 8-bit scale per 32 {src}")
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        if algo == "NVFP4":
            return Quantisation("nvfp4", 4, _int(q, "group_size", 16), 1, skip=skip,
                                description=f"nvfp4 weights, one fp8 scale per 16 (modelopt) {src}")
        if algo == "FP8":
            return Quantisation("fp8-tensor", 8, None, 4, skip=skip, static_input_scale=True,
                                description=f"fp8 weights, one fp32 scale per matrix (modelopt) {src}")
        raise QuantisationError(f"modelopt quant_algo {algo!r} is not one this planner counts (NVFP4, FP8)")
    if method in ("awq", "gptq"):
        # AutoAWQ's own quant_config.json spells the fields w_bit / q_group_size
        bits = _int(q, "bits" if "bits" in q or "w_bit" not in q else "w_bit", 4)
        group = _int(q, "group_size" if "group_size" in q or "q_group_size" not in q else "q_group_size", 128)
        fp16 = "unquantised tensors at fp16, as Auto{} writes them whatever torch_dtype says"
        if method == "awq":
            if bits != 4:
                raise QuantisationError(f"quantization_config.bits {bits}: AWQ checkpoints pack 4-bit weights"
                                        " (AutoAWQ, transformers and vLLM read no other width)")
            version = str(q.get("version", "gemm")).lower()
            if version not in ("gemm", "gemv"):
                raise QuantisationError(f"quantization_config.version {q.get('version')!r}: this planner counts"
                                        " AWQ's gemm and gemv layouts, not a repacked one")
            zero = bool(q.get("zero_point", True))
            notes = (fp16.format("AWQ"),)
            if version == "gemv":
                notes += ("gemv pads each row's scales and zeros to a multiple of 8 groups: counted unpadded",)
            return Quantisation("awq", bits, group if group > 0 else None, 2, bits if zero else 0, skip=skip,
                                description=f"awq int{bits} weights, groups of {group} with fp16 scales"
                                            f"{' and zero points' if zero else ''} {src}",
                                other_bytes=2, assumptions=notes)
        return Quantisation("gptq", bits, group if group > 0 else None, 2, bits, skip=skip,
                            description=f"gptq int{bits} weights, groups of {group if group > 0 else 'a row'}"
                                        f" with fp16 scales, packed zeros and g_idx {src}",
                            other_bytes=2,
                            assumptions=(fp16.format("GPTQ"), "the fp16 bias buffer AutoGPTQ writes beside every"
                                         " quantised matrix (zeros for bias-free models, 2 B per output) is not"
                                         " counted"))
    if method == "bitsandbytes":
        if q.get("load_in_4bit"):
            dq = bool(q.get("bnb_4bit_use_double_quant", False))
            kind = q.get("bnb_4bit_quant_type", "fp4")
            return Quantisation("bnb-4bit", 4, 64, 4, skip=skip, double_quant=dq,
                                description=f"bitsandbytes 4-bit ({kind}) weights, one absmax per 64"
                                            f"{', double-quantised' if dq else ''} {src}",
                                assumptions=("the quant_state JSON bitsandbytes writes beside every quantised"
                                             " matrix (about 170 B) is not counted",))
        if q.get("load_in_8bit"):
            return Quantisation("bnb-8bit", 8, None, 4, skip=skip,
                                description=f"bitsandbytes 8-bit weights, one fp32 scale per row {src}")
        raise QuantisationError("a bitsandbytes quantization_config with neither load_in_4bit nor load_in_8bit")
    if method == "compressed-tensors":
        return _compressed_tensors(q, skip)
    raise QuantisationError(f"quant_method {q.get('quant_method')!r} is not one this planner counts (fp8, mxfp4,"
                            " modelopt, awq, gptq, bitsandbytes, compressed-tensors, fbgemm_fp8)")


def _compressed_tensors(q: dict[str, Any], skip: tuple[str, ...]) -> Quantisation:
    fmt = str(q.get("format", ""))
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise QuantisationError("compressed-tensors quantization_config without config_groups")
    w = next(iter(groups.values())).get("weights") or {}
    bits, kind = w.get("num_bits", 8), w.get("type", "int")
    strategy, group = w.get("strategy", "tensor"), w.get("group_size")
    sym = w.get("symmetric", True)
    src = "(quantization_config, compressed-tensors)"
    if fmt == "nvfp4-pack-quantized" or (kind == "float" and bits == 4):
        return Quantisation("nvfp4", 4, 16, 1, skip=skip, description=f"nvfp4 weights, one fp8 scale per 16 {src}")
    if fmt == "pack-quantized" or (kind == "int" and bits == 4):
        g = group if isinstance(group, int) and group > 0 else None
        return Quantisation("ct-int4", bits, g, 2, 0 if sym else bits, skip=skip,
                            description=f"int{bits} weights packed in int32, {strategy} scales"
                                        f"{f' per {g}' if g else ''} {src}")
    if bits == 8:
        method = "fp8-channel" if kind == "float" else "int8-channel"
        if strategy == "tensor":
            return Quantisation("fp8-tensor", 8, None, 4, skip=skip,
                                description=f"{kind}8 weights, one scale per matrix {src}")
        return Quantisation(method, 8, None, 2, skip=skip,
                            description=f"{kind}8 weights, one 16-bit scale per output channel {src}")
    raise QuantisationError(f"compressed-tensors format {fmt!r} with {bits}-bit {kind} weights is not one this"
                            " planner counts")


def for_dtype(dtype: str) -> Quantisation | None:
    """The storage ``--dtype`` asks of a 16-bit checkpoint (None for a 16- or 32-bit dtype: every tensor in it)."""
    d = dtype.lower()
    if d in ("fp8", "float8", "fp8_e4m3", "fp8_e5m2"):
        return Quantisation("fp8-tensor", 8, None, 4, description="fp8 weights, one fp32 scale per matrix"
                            " (--dtype fp8; embeddings and output head at 16 bit)")
    if d == "int8":
        return Quantisation("int8-channel", 8, None, 4, description="int8 weights, one fp32 scale per output row"
                            " (--dtype int8; embeddings and output head at 16 bit)")
    if d == "int4":
        return Quantisation("int4-group", 4, 128, 2, 4, description="int4 weights, groups of 128 with an fp16"
                            " scale and a 4-bit zero (--dtype int4, the AWQ layout; embeddings and output head at"
                            " 16 bit)")
    return None


def stored_bytes(tensors: Iterable[tuple[str, tuple[int, ...], bool]], q: Quantisation | None,
                 other_bytes: float) -> float:
    """Bytes of ``tensors`` (name, shape, is a linear layer's weight or a fused expert tensor) as stored: those
    ``q`` quantises with their scales, every other at ``other_bytes`` per element."""
    total = 0.0
    for name, shape, linear in tensors:
        module = name.rsplit(".", 1)[0] if name.endswith(".weight") else name
        if q is not None and linear and q.quantises(module):
            total += q.tensor_bytes(shape)
        else:
            total += math.prod(shape) * other_bytes
    return total


#: model types whose checkpoint stores DeepSeek-V3's multi-token-prediction module beside the model transformers
#: builds: per ``num_nextn_predict_layers``, one more decoder layer, ``eh_proj`` (2d x d, quantised like the other
#: matrices), ``enorm``, ``hnorm``, ``shared_head.norm`` and its own copies of the token table and output head.
MTP_CHECKPOINTS = ("deepseek_v3", "deepseek_v32", "kimi_k2")

_STORED_DTYPE = {"float32": 4, "float": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2}


def stored_dtype_bytes(raw: dict[str, Any]) -> int:
    """Bytes per element of a checkpoint's unquantised tensors: its ``torch_dtype`` (or ``dtype``; a wrapper's text
    config's), 2 when it states none."""
    for block in (raw, raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}):
        for key in ("torch_dtype", "dtype"):
            v = block.get(key)
            if isinstance(v, str) and v.lower() in _STORED_DTYPE:
                return _STORED_DTYPE[v.lower()]
    return 2


def checkpoint_bytes(m: Any, raw: dict[str, Any], quant: Quantisation | None = None) -> float:
    """Bytes of the published checkpoint of ``m`` (an :class:`~lib.planner.engine.EngineModel` read from ``raw``):
    every tensor as stored (:func:`read_quantisation`'s layout, the rest at the config's ``torch_dtype`` or at the
    dtype the format fixes, :attr:`Quantisation.other_bytes`), plus a
    multi-token-prediction module the checkpoint carries and transformers does not build (:data:`MTP_CHECKPOINTS`).
    What ``metadata.total_size`` of ``model.safetensors.index.json`` states."""
    from .engine import weight_bytes

    quant = read_quantisation(raw) if quant is None else quant
    other = quant.other_bytes if quant is not None and quant.other_bytes else stored_dtype_bytes(raw)
    total, per_layer, _, _ = weight_bytes(m, quant, other)
    k = raw.get("num_nextn_predict_layers") or 0
    if raw.get("model_type") in MTP_CHECKPOINTS and isinstance(k, int) and k > 0:
        d = m.d_model
        eh = quant.tensor_bytes((d, 2 * d)) if quant is not None else 2 * d * d * other
        head = 0 if m.tied_head else m.vocab_size * d
        total += k * (per_layer[-1] + eh + 3 * d * other + (m.vocab_size * d + head) * other)
    return total
