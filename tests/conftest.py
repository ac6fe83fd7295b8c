"""Shared test settings: a hypothesis profile sized for a 2-core CI machine. The one per-dtype tolerance
table (``TOL``) and the NumPy -> torch helper live in :mod:`tolerances`, re-exported here."""

from __future__ import annotations

import os

import pytest
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

# One BLAS/OpenMP thread per test process under pytest-xdist, which already runs one process per core: two
# threads per worker oversubscribe the cores, and torch's small matmuls then spend their time waiting on each
# other (an Adam loop on a 32-wide model: 5.8 s with one thread, 28.6 s with two, side by side). Set in-process,
# not through the environment, so the subprocesses of test_other_machine keep the settings they are given.
if os.environ.get("PYTEST_XDIST_WORKER"):
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)


def pytest_configure(config) -> None:
    # registered here rather than in pyproject.toml, which every chapter's inputs digest covers
    config.addinivalue_line("markers", "tools: an end-to-end test of the project's tools (make check runs these only "
                                       "when a tool, the configuration or the requirements changed)")


# lib.planner.engine.CACHE_ENV, named here rather than imported (test_engine checks that they agree): this file
# runs with every test, so `make check` would count every test as touched by a change to the planner it imported
# (tools/chapters.py affected-tests)
PLANNER_CACHE_ENV = "LIB_SIZING_CACHE_DIR"


@pytest.fixture(autouse=True)
def _temporary_planner_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner's command line caches the engine's descriptions (lib.planner.engine.CACHE_ENV): every test,
    and every process it starts, writes them to this run's temporary folder, never the user's cache folder (a
    test that needs a cache of its own sets the variable itself)."""
    monkeypatch.setenv(PLANNER_CACHE_ENV, str(tmp_path_factory.getbasetemp() / "planner-cache"))
