"""``python -m lib.planner CONFIG.json``: the same command line as ``python -m lib.sizing``."""

from .cli import main

raise SystemExit(main())
