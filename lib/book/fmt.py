"""Printing numbers so that a stored output holds on every machine.

A chapter's stored outputs are compared, character by character, with a fresh execution on another
machine (nbval). Round-off digits are not a property of the code: the processor's vector width, the BLAS
kernel, the thread count and even memory alignment change the last bits of a float result. So every number a
chapter prints goes through one of these helpers, which print only what the computation guarantees:

- :func:`bound` / :func:`agree`: round-off-level agreement is printed as the bound it is asserted against
  (``max |lib - torch| < 1e-12``), never as the digits of the error;
- :func:`fixed`, :func:`sig`, :func:`percent`: a float is printed to a stated precision, and the helper
  refuses (``ValueError``) when the value lies so close to a rounding boundary that a perturbation of
  ``slack`` could change the printed digits: such a number would print differently on another machine;
- :func:`count`: integers print as integers (with thousands separators), and a non-integer is refused.

Every helper returns a string, so a cell can both print it and glue it.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = ["agree", "bound", "count", "fixed", "max_abs_diff", "percent", "sig"]


def _real(x: Any, name: str) -> float:
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real | np.floating | np.integer):
        try:  # 0-d arrays and 1-element tensors
            x = x.item()
        except (AttributeError, ValueError, RuntimeError):
            raise TypeError(f"{name} must be a real number, got {type(x).__name__}") from None
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {type(x).__name__}")
    return float(x)


def _tol(tol: Any) -> float:
    t = _real(tol, "tol")
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"tol must be a positive finite number, got {tol!r}")
    return t


def max_abs_diff(a: Any, b: Any) -> float:
    """``max |a - b|`` over all elements, in float64, for NumPy arrays or torch tensors of one shape."""
    a_np, b_np = (np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=np.float64) for x in (a, b))
    if a_np.shape != b_np.shape:
        raise ValueError(f"a and b must have the same shape, got a.shape={a_np.shape}, b.shape={b_np.shape}")
    if a_np.size == 0:
        return 0.0
    nan_a, nan_b = np.isnan(a_np), np.isnan(b_np)
    if (nan_a != nan_b).any():
        raise ValueError("a and b disagree on where NaN is: no bound on their difference holds")
    same = (a_np == b_np) | (nan_a & nan_b)  # equal infinities and matching NaNs differ by 0
    with np.errstate(invalid="ignore"):  # inf - inf where they are equal; masked by `same`
        diff = np.where(same, 0.0, np.abs(a_np - b_np))
    return float(diff.max())


def bound(err: Any, tol: Any, label: str = "max |difference|") -> str:
    """Assert ``0 <= err < tol`` and return ``"{label} < {tol:.0e}"``.

    The digits of a round-off error change from machine to machine; the bound it is checked against does not.
    Even an error that happens to be 0 here prints as its bound; for a zero that the computation guarantees on
    every machine, use :func:`agree` with ``exact=True``.
    """
    e, t = _real(err, "err"), _tol(tol)
    if math.isnan(e) or e < 0:
        raise ValueError(f"err must be a non-negative number, got {err!r}")
    if not e < t:
        raise AssertionError(f"{label} = {e:.3e} is not below the bound {t:.0e}")
    return f"{label} < {t:.0e}"


def agree(a: Any, b: Any, tol: Any, label: str = "max |difference|", *, exact: bool = False) -> str:
    """Assert that ``a`` and ``b`` agree to ``tol`` (max absolute difference) and return the bound as text.

    With ``exact=True`` the two must be bit-for-bit equal (a property of the computation, e.g. a masked
    position that cannot influence the result), and the text says ``= 0``.
    """
    err = max_abs_diff(a, b)
    if exact:
        if err != 0:
            raise AssertionError(f"{label} = {err:.3e}, expected exactly 0")
        return f"{label} = 0"
    return bound(err, tol, label)


def _check_slack(x: float, scaled: float, slack: float, what: str) -> None:
    """Refuse when ``scaled`` (x in units of its last printed digit) is within ``slack`` of a rounding tie."""
    frac = scaled - math.floor(scaled)
    if abs(frac - 0.5) < slack:
        raise ValueError(
            f"{x!r} lies within {slack:g} (in units of the last digit) of a rounding boundary when printed "
            f"{what}: another machine could print a different digit; print fewer digits or a bound"
        )


def fixed(x: Any, decimals: int, *, slack: float = 1e-3) -> str:
    """``x`` with ``decimals`` digits after the point, refused if a change of ``slack`` units of the last digit
    could change what is printed (the default 1e-3 covers round-off many orders of magnitude above float64's).
    """
    v = _real(x, "x")
    if isinstance(decimals, bool) or not isinstance(decimals, numbers.Integral) or decimals < 0:
        raise ValueError(f"decimals must be a non-negative integer, got {decimals!r}")
    if not math.isfinite(v):
        raise ValueError(f"x must be finite, got {x!r}")
    _check_slack(v, abs(v) * 10**decimals, slack, f"with {decimals} decimals")
    out = f"{v:,.{decimals}f}"
    return out[1:] if out.startswith("-") and float(out.replace(",", "")) == 0 else out  # never "-0.00"


def sig(x: Any, digits: int = 2, *, slack: float = 1e-3) -> str:
    """``x`` in scientific notation with ``digits`` significant digits (``4.8e-03``), refused near a tie."""
    v = _real(x, "x")
    if isinstance(digits, bool) or not isinstance(digits, numbers.Integral) or digits < 1:
        raise ValueError(f"digits must be a positive integer, got {digits!r}")
    if not math.isfinite(v) or v == 0:
        raise ValueError(f"x must be finite and non-zero, got {x!r}")
    exp = math.floor(math.log10(abs(v)))
    _check_slack(v, abs(v) / 10 ** (exp - digits + 1), slack, f"with {digits} significant digits")
    out = f"{v:.{digits - 1}e}"
    # rounding can carry into the exponent (9.96 -> 1.0e+01); the check above already used the true exponent
    return out


def percent(frac: Any, decimals: int = 1, *, slack: float = 1e-3) -> str:
    """A fraction in [0, 1] as a percentage with ``decimals`` decimals (``0.875`` -> ``87.5%``)."""
    v = _real(frac, "frac")
    if not (0.0 <= v <= 1.0):
        raise ValueError(f"frac must be a fraction in [0, 1], got {frac!r}")
    return fixed(100.0 * v, decimals, slack=slack) + "%"


def count(n: Any) -> str:
    """An integer with thousands separators (``111624`` -> ``111,624``); a float that is not integral is refused."""
    if isinstance(n, bool):
        raise TypeError("n must be an integer, got bool")
    if isinstance(n, numbers.Integral | np.integer):
        return f"{int(n):,}"
    v = _real(n, "n")
    if not (math.isfinite(v) and v == int(v)):
        raise ValueError(f"n must be an integer, got {n!r}")
    return f"{int(v):,}"
