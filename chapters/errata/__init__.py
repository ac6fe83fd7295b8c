"""Common pitfalls of the Transformer's mathematics, each recomputed: the numbers behind the appendix.

The appendix ``claims_checked.ipynb`` ("Common pitfalls, corrected") states each pitfall and its fix in one
sentence; every number in that sentence is glued from a function here. A function is registered with
:func:`pitfall`, recomputes its numbers with ``lib``, PyTorch or sympy, asserts what the sentence says about them,
and returns them as printed strings (``lib.book.fmt``: only digits that hold on every machine). A failing assert
raises in :func:`compute_all`, so the appendix, and nbval with it, fails.

The modules are named after what they hold: ``attention`` (softmax, scaling, the backward pass, heads),
``architecture`` (positions, LayerNorm and the FFN, blocks), ``cost`` (FLOPs, the KV cache, decode speed, planning a
deployment, memory limits on sequence length) and ``recurrence`` (what attention replaced).

For maintainers: the slips were collected from tutorial texts on the Transformer; the page names none of them.
Where a chapter measures the same quantity, the pitfall computes it as the chapter does (same function, seed
and sizes), so the two pages print the same number; ``tests/test_errata.py`` compares them.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TOL = 1e-12  # float64 agreement between two ways of computing one quantity

CHAPTERS = {  # the label that starts each chapter, e.g. (softmax)= in chapters/softmax.ipynb: its file stem
    "softmax": "softmax", "scaling": "scaling", "attention-backward": "attention_backward",
    "multihead": "multihead", "positional": "positional", "layernorm-ffn": "layernorm_ffn", "blocks": "blocks",
    "flops": "flops", "kv-cache": "kv_cache", "speed": "speed", "train-memory": "train_memory",
    "capacity-planner": "capacity_planner", "tiled-attention": "tiled_attention", "beyond": "beyond",
}
MODULES = ("attention", "architecture", "cost", "recurrence")
ROUNDOFF = re.compile(r"\d\.\d{7,}")  # seven or more decimals: digits that round-off could change
KEY = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Pitfall:
    """One pitfall of the appendix: the function that computes its numbers, and the chapter it links to."""

    name: str  # the function's name: the prefix of its glue keys (``name_key``)
    chapter: str  # label of the chapter that derives the correction
    compute: Callable[[], dict[str, str]]


PITFALLS: dict[str, Pitfall] = {}


def pitfall(chapter: str) -> Callable:
    """Register the decorated function as a pitfall; refuses an entry the appendix could not place."""
    if chapter not in CHAPTERS:
        raise ValueError(f"chapter must be one of {sorted(CHAPTERS)}, got {chapter!r}")

    def register(fn: Callable[[], dict[str, str]]) -> Callable[[], dict[str, str]]:
        if fn.__name__ in PITFALLS:
            raise ValueError(f"pitfall {fn.__name__!r} is registered twice")
        PITFALLS[fn.__name__] = Pitfall(fn.__name__, chapter, fn)
        return fn

    return register


def run(p: Pitfall) -> dict[str, str]:
    """One pitfall's printed numbers, keyed ``name_key``; refuses a value a page could not show as it is."""
    values = p.compute()
    if not values:
        raise ValueError(f"pitfall {p.name} returned no numbers")
    out = {}
    for key, text in values.items():
        if not (isinstance(key, str) and KEY.fullmatch(key)):
            raise ValueError(f"pitfall {p.name}: key {key!r} is not a lower-case identifier")
        if not (isinstance(text, str) and text.strip()):
            raise ValueError(f"pitfall {p.name}: {key} must be a printed, non-empty string, got {text!r}")
        if (digits := ROUNDOFF.search(text)) is not None:
            raise ValueError(f"pitfall {p.name}: {key} prints round-off digits ({digits.group(0)!r})")
        out[f"{p.name}_{key}"] = text
    return out


def load() -> dict[str, Pitfall]:
    """Every pitfall, its module imported (registration happens at import)."""
    for module in MODULES:
        importlib.import_module(f"{__name__}.{module}")
    return PITFALLS


def compute_all() -> dict[str, str]:
    """Every pitfall's numbers, recomputed and asserted: ``{name_key: printed value}``."""
    values: dict[str, str] = {}
    for p in load().values():
        values |= run(p)
    return values


def longest_stored_n(matrices: int, bytes_per_entry: int, memory_bytes: int, weight_bytes: int) -> int:
    """The longest n whose ``matrices`` n x n attention-weight matrices fit in the memory the model's own weights
    leave free: ``floor(sqrt((memory - weights) / (matrices * bytes_per_entry)))``."""
    free = memory_bytes - weight_bytes
    if free <= 0:
        raise ValueError(f"the weights ({weight_bytes} B) do not fit in {memory_bytes} B")
    return math.isqrt(int(free // (matrices * bytes_per_entry)))


def sample_dot_products(rng: np.random.Generator, pairs: int, d_k: int) -> tuple[np.ndarray, np.ndarray]:
    """``q . k`` and ``q . q`` for ``pairs`` pairs of independent vectors ``q``, ``k`` of ``d_k`` independent
    standard normal components, drawn a block of about 2**20 numbers per vector at a time."""
    qk, qq = np.empty(pairs), np.empty(pairs)
    block = max(1, 2**20 // d_k)
    for start in range(0, pairs, block):
        rows = slice(start, min(start + block, pairs))
        q, k = rng.standard_normal((2, rows.stop - start, d_k))
        qk[rows], qq[rows] = np.einsum("ij,ij->i", q, k), np.einsum("ij,ij->i", q, q)
    return qk, qq
