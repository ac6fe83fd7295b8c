"""Every numbered equation of a chapter is either executed as displayed or marked as a definition.

A chapter numbers an equation with MyST's ``$$ ... $$ (eq-label)``. For each label the same notebook calls,
in a hidden cell, one of

- :func:`check` -- the equation evaluated *literally* (the same transposes, the same order of factors, the
  same constants as the page shows) against an independent reference: ``lib``, ``torch.autograd``, finite
  differences or sympy. It raises ``AssertionError`` when the two differ by more than the tolerance, so the
  equation as printed cannot drift from the code that is tested;
- :func:`check_symbolic` -- the same for an identity checked with sympy (``sympy.simplify(lhs - rhs) == 0``);
- :func:`definition` -- the equation only introduces a symbol or names a quantity; there is nothing to check.

``tools/check_equations.py`` (a step of the test command) lists every numbered equation of the book and fails
on any label that no cell checks or marks, and on a call naming a label the chapter does not display.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

LABEL_RE = re.compile(r"^eq-[a-z0-9][a-z0-9-]*$")

#: label -> "checked" | "definition", filled as a chapter's cells run (one kernel per chapter).
registry: dict[str, str] = {}


def _label(label: Any) -> str:
    if not isinstance(label, str) or not LABEL_RE.match(label):
        raise ValueError(f"label must be an equation label like 'eq-softmax', got {label!r}")
    return label


def check(label: str, displayed: Any, reference: Any, *, rtol: float = 0.0, atol: float = 0.0) -> str:
    """Assert that ``displayed`` (the equation evaluated as printed) equals ``reference`` within
    ``|displayed - reference| <= atol + rtol * |reference|`` elementwise, and record ``label`` as checked.

    Both arguments may be NumPy arrays, torch tensors, or numbers; shapes must match exactly. Returns a short
    line for a hidden cell's output (the bound, never the digits of the error).
    """
    _label(label)
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not isinstance(tol, (int, float)) or tol < 0 or not np.isfinite(tol):
            raise ValueError(f"{name} must be a finite number >= 0, got {tol!r}")
    a = _as_array(displayed, "displayed")
    b = _as_array(reference, "reference")
    if a.shape != b.shape:
        raise AssertionError(f"{label}: the displayed equation gives shape {a.shape}, the reference {b.shape}")
    if a.size == 0:
        raise ValueError(f"{label}: nothing to compare (empty arrays)")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise AssertionError(f"{label}: non-finite values (displayed or reference)")
    err = np.abs(a - b)
    allowed = atol + rtol * np.abs(b)
    if not np.all(err <= allowed):
        worst = float(np.max(err - allowed))
        raise AssertionError(f"{label}: the displayed equation differs from the reference by up to "
                             f"{worst:.3g} beyond the tolerance (rtol={rtol}, atol={atol})")
    registry[label] = "checked"
    return f"{label}: as displayed = reference (rtol={rtol:g}, atol={atol:g})"


def check_symbolic(label: str, lhs: Any, rhs: Any) -> str:
    """Assert with sympy that ``lhs - rhs`` simplifies to zero, and record ``label`` as checked."""
    import sympy

    _label(label)
    diff = sympy.simplify(sympy.sympify(lhs) - sympy.sympify(rhs))
    if diff != 0:
        raise AssertionError(f"{label}: lhs - rhs simplifies to {diff}, not 0")
    registry[label] = "checked"
    return f"{label}: identity holds symbolically"


def definition(label: str) -> str:
    """Record that ``label`` only defines a symbol or names a quantity (nothing computable to check)."""
    registry[_label(label)] = "definition"
    return f"{label}: definition"


def _as_array(x: Any, name: str) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor, on any device
        x = x.detach().cpu().double().numpy()
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be numeric (an array, a tensor or a number), got {type(x).__name__}") from exc
    return arr
