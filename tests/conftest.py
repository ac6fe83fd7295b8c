"""Shared test settings: a hypothesis profile sized for a 2-core CI machine. The one per-dtype tolerance
table (``TOL``) and the NumPy -> torch helper live in :mod:`tolerances`, re-exported here."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from tolerances import TOL, dtype_name, to_torch, tol  # noqa: F401  (the one table, re-exported)

settings.register_profile(
    "book",
    max_examples=60,
    deadline=None,  # CPU time on a shared 2-core machine varies; speed is measured in benchmarks/, not here
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("CI", "").lower() == "true",  # CI runs the same examples every time
)
settings.load_profile("book")
