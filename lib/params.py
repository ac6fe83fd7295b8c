from lib.planner.counts import *  # noqa: F403  moved to lib/planner/counts.py; shim removed when importers are updated
