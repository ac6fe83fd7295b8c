"""The capacity planner's entry point: ``python -m lib.sizing CONFIG.json --help``.

The planner lives in :mod:`lib.planner` (one module per concern); this module re-exports its public names so
that ``import lib.sizing as sz`` keeps one short name for them, and runs the command line.
"""

from __future__ import annotations

from lib.planner import *  # noqa: F403
from lib.planner import __all__ as __all__  # noqa: F401
from lib.planner import main

if __name__ == "__main__":
    raise SystemExit(main())
