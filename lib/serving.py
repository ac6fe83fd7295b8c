from lib.planner.serving import *  # noqa: F403  moved to lib/planner/serving.py; shim removed when importers are updated
