from lib.planner.units import *  # noqa: F403  moved to lib/planner/units.py; shim removed when importers are updated
