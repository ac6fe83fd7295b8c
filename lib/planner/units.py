"""Memory sizes and number formats for the capacity planner: bytes per element by dtype name, and sizes such as
``"80GB"`` or ``"81559MiB"`` read with their unit (``GB = 10**9``, ``GiB = 2**30``, from :mod:`lib.constants`,
never swapped). Also the small argument checks the sizing modules share."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ..constants import BYTES_PER_DTYPE, GB, KB, MB, TB, GiB, KiB, MiB, TiB

__all__ = ["DTYPE_ALIASES", "bytes_per_element", "parse_bytes", "format_bytes"]

#: Names accepted for a number format (config.json's ``torch_dtype`` spellings included).
DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "float64": "fp64",
}


def as_count(value: Any, name: str, *, minimum: int = 1) -> int:
    """An int count of at least ``minimum`` (booleans refused), or a ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        what = "positive" if minimum == 1 else f"at least {minimum}"
        raise ValueError(f"{name} must be {what}, got {value}")
    return int(value)


def as_fraction(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0 < value <= 1:
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)


def as_nonneg_bytes(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number of bytes, got {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite, non-negative number of bytes, got {value!r}")
    return value


def bytes_per_element(dtype: str) -> float:
    """Bytes per element of ``dtype`` (``"fp16"``, ``"bf16"``, ``"fp8"``, ``"int8"``, ``"int4"``, ``"fp32"``, or a
    ``torch_dtype`` spelling such as ``"bfloat16"``), from ``lib.constants.BYTES_PER_DTYPE``."""
    if not isinstance(dtype, str):
        raise ValueError(f"dtype must be a string such as 'bf16', got {type(dtype).__name__} {dtype!r}")
    key = DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
    if key not in BYTES_PER_DTYPE:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(BYTES_PER_DTYPE)}")
    return BYTES_PER_DTYPE[key]


_UNITS = {"b": 1, "kb": KB, "mb": MB, "gb": GB, "tb": TB, "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB}


def parse_bytes(text: str, *, allow_zero: bool = False) -> int:
    """Parse a memory size such as ``"80GB"`` (80·10⁹ bytes), ``"80 GiB"`` (80·2³⁰), ``"81559MiB"`` or ``"512MiB"``.

    A unit is required (a bare number is ambiguous between GB and GiB, the very confusion this module exists to
    avoid); units are case-insensitive: B, KB, MB, GB, TB (powers of 10) and KiB, MiB, GiB, TiB (powers of 2).
    Zero is refused unless ``allow_zero`` (an overhead may be zero, a GPU's memory may not).
    """
    if not isinstance(text, str):
        raise ValueError(f"memory size must be a string such as '80GB', got {type(text).__name__} {text!r}")
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m:
        raise ValueError(f"cannot read memory size {text!r}: expected a number and a unit, e.g. '80GB' or '80GiB'")
    number, unit = float(m.group(1)), m.group(2).lower()
    if not unit:
        raise ValueError(f"memory size {text!r} has no unit: write GB (10**9 bytes) or GiB (2**30 bytes)")
    if unit not in _UNITS:
        raise ValueError(f"unknown unit {m.group(2)!r} in {text!r}; use one of B, KB, MB, GB, TB, KiB, MiB, GiB, TiB")
    value = number * _UNITS[unit]
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"memory size must be positive, got {text!r}")
    return round(value)


def format_bytes(b: float) -> str:
    """``"214,748,364,800 B = 214.75 GB = 200.00 GiB"``: bytes with both units labelled."""
    return f"{b:,.0f} B = {b / GB:,.2f} GB = {b / GiB:,.2f} GiB"
