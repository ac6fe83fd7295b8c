"""lib.book.fmt: what a stored output may print."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lib.book.fmt import agree, bound, count, fixed, max_abs_diff, percent, sig


def test_bound_prints_the_bound_not_the_digits() -> None:
    assert bound(4.4e-16, 1e-12, "max |lib - torch|") == "max |lib - torch| < 1e-12"
    assert bound(8.9e-16, 1e-12, "max |lib - torch|") == bound(4.4e-16, 1e-12, "max |lib - torch|")
    assert bound(0.0, 1e-14) == "max |difference| < 1e-14"


@pytest.mark.parametrize("err", [1e-12, 2e-12, math.inf])
def test_bound_fails_when_the_error_is_not_below(err: float) -> None:
    with pytest.raises(AssertionError, match="is not below the bound 1e-12"):
        bound(err, 1e-12)


@pytest.mark.parametrize("err", [-1e-16, math.nan])
def test_bound_refuses_a_meaningless_error(err: float) -> None:
    with pytest.raises(ValueError, match="err must be a non-negative number"):
        bound(err, 1e-12)


@pytest.mark.parametrize("tol", [0, -1e-12, math.inf, math.nan])
def test_bound_refuses_a_bad_tolerance(tol: float) -> None:
    with pytest.raises(ValueError, match="tol must be a positive finite number"):
        bound(0.0, tol)


def test_agree_numpy_and_torch() -> None:
    a = np.linspace(0, 1, 7)
    assert agree(a, torch.from_numpy(a) + 1e-15, 1e-12, "max |lib - torch|") == "max |lib - torch| < 1e-12"
    with pytest.raises(AssertionError, match="not below"):
        agree(a, a + 1e-9, 1e-12)
    assert agree(a, a.copy(), 1e-12, exact=True) == "max |difference| = 0"
    with pytest.raises(AssertionError, match="expected exactly 0"):
        agree(a, a + 1e-300 + 1e-17, 1e-12, exact=True)


def test_max_abs_diff_handles_infinities_nan_and_shapes() -> None:
    assert max_abs_diff(np.array([-np.inf, 1.0, np.nan]), np.array([-np.inf, 1.5, np.nan])) == 0.5
    with pytest.raises(ValueError, match="disagree on where NaN is"):
        max_abs_diff(np.array([np.nan]), np.array([0.0]))
    with pytest.raises(ValueError, match=r"same shape, got a.shape=\(2,\), b.shape=\(3,\)"):
        max_abs_diff(np.zeros(2), np.zeros(3))
    assert max_abs_diff(np.zeros(0), np.zeros(0)) == 0.0


def test_fixed_refuses_values_near_a_rounding_tie() -> None:
    assert fixed(0.19612, 3) == "0.196"
    assert fixed(1234.5678, 1) == "1,234.6"
    assert fixed(-0.0001, 2) == "0.00"  # never "-0.00"
    with pytest.raises(ValueError, match="rounding boundary"):
        fixed(0.1225, 3)  # 0.1225 could print 0.122 or 0.123 depending on its last bit
    with pytest.raises(ValueError, match="decimals must be a non-negative integer"):
        fixed(1.0, -1)
    with pytest.raises(ValueError, match="x must be finite"):
        fixed(math.inf, 2)
    with pytest.raises(TypeError, match="x must be a real number, got str"):
        fixed("1.0", 2)


@given(st.floats(-1e6, 1e6, allow_nan=False), st.integers(0, 4))
def test_fixed_is_stable_under_a_small_perturbation(x: float, decimals: int) -> None:
    """Whatever fixed() prints, a perturbation far below its slack prints the same (or fixed() refused)."""
    try:
        printed = fixed(x, decimals)
    except ValueError:
        return
    nudge = 1e-6 * 10.0**-decimals
    assert fixed(x + nudge, decimals) == printed and fixed(x - nudge, decimals) == printed


def test_sig_and_percent() -> None:
    assert sig(0.0048123, 2) == "4.8e-03"
    with pytest.raises(ValueError, match="rounding boundary"):
        sig(0.00485, 2)
    with pytest.raises(ValueError, match="finite and non-zero"):
        sig(0.0)
    assert percent(0.875) == "87.5%"
    assert percent(1.0, 0) == "100%"
    with pytest.raises(ValueError, match=r"frac must be a fraction in \[0, 1\]"):
        percent(1.5)


def test_count() -> None:
    assert count(111624) == "111,624"
    assert count(111624.0) == "111,624"
    assert count(np.int64(7)) == "7"
    assert count(torch.tensor(12)) == "12"
    with pytest.raises(ValueError, match="n must be an integer, got 1.5"):
        count(1.5)
    with pytest.raises(TypeError, match="got bool"):
        count(True)
