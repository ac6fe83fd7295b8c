"""pytest for the nbval runs, without two start-up costs nbval does not need (each run pays them once per chapter).

Usage: ``python tools/nbval_run.py PYTEST-ARGS...`` (what ``tools/nbval.sh`` and ``tools/nbval_parallel.py`` run).

- ``jsonschema`` (imported by ``nbformat``) imports ``rfc3987_syntax`` when it is installed, to check the
  ``iri`` string formats, and that module builds a Lark parser at import: about 1.6 CPU s. nbformat's notebook
  schemas use no string format, so validating a notebook gives the same answer without it; it is marked absent
  here, before anything imports jsonschema.
- hypothesis's pytest plugin loads hypothesis (no chapter is a property test): ``-p no:hypothesispytest``.

Everything else is plain ``pytest.main``: the arguments, the exit status and the output are pytest's.
"""

from __future__ import annotations

import sys

sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # `import rfc3987_syntax` raises ImportError

import pytest  # noqa: E402

if __name__ == "__main__":
    sys.exit(pytest.main(["-p", "no:hypothesispytest", *sys.argv[1:]]))
