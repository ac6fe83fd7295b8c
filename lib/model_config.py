from lib.planner.config import *  # noqa: F403  moved to lib/planner/config.py; shim removed when importers are updated
