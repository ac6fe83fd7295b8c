from lib.planner.gpus import *  # noqa: F403  moved to lib/planner/gpus.py; shim removed when importers are updated
