"""The one per-dtype tolerance table every test file uses, and the NumPy -> torch conversion helper.

A plain module (not ``conftest``): ``tests/browser/conftest.py`` would shadow a ``from conftest import``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: Cross-backend (and low-precision vs float64) agreement, per dtype, as in JAX's one tolerance table. Used
#: as both rtol and atol (an absolute tolerance relative to values of order 1; scale it for larger values).
#: float64: different kernels, summation orders; float32: a few ulps (1.2e-7) times accumulation length;
#: float16 (ulp 9.8e-4 at 1) and bfloat16 (ulp 7.8e-3 at 1): a few ulps after the inputs' own rounding.
TOL: dict[str, float] = {"float64": 1e-12, "float32": 1e-5, "float16": 5e-3, "bfloat16": 4e-2}


def dtype_name(dtype: Any) -> str:
    """``"float32"`` for ``np.float32``, ``np.dtype("float32")`` and ``torch.float32`` alike."""
    if isinstance(dtype, (str, torch.dtype)):
        return str(dtype).removeprefix("torch.")
    return np.dtype(dtype).name


def tol(dtype: Any) -> float:
    """The tolerance of :data:`TOL` for a NumPy or torch dtype."""
    return TOL[dtype_name(dtype)]


def to_torch(*arrays: Any, grad: bool = False, dtype: torch.dtype | None = None) -> list[Any]:
    """NumPy arrays as torch tensors (``None`` stays ``None``); floating ones cast to ``dtype`` if given and
    marked ``requires_grad`` if ``grad``."""
    out = []
    for a in arrays:
        t = None if a is None else torch.from_numpy(np.ascontiguousarray(a))
        if t is not None and t.is_floating_point():
            t = t if dtype is None else t.to(dtype)
            t = t.requires_grad_() if grad else t
        out.append(t)
    return out
