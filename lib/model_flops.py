from lib.planner.flops import *  # noqa: F403  moved to lib/planner/flops.py; shim removed when importers are updated
