from lib.planner.cache import *  # noqa: F403  moved to lib/planner/cache.py; shim removed when importers are updated
