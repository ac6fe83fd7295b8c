"""pytest for the nbval runs, without start-up costs nbval does not need (each run pays them once per chapter).

Usage: ``python tools/nbval_run.py PYTEST-ARGS...`` (what ``tools/nbval.sh`` and ``tools/nbval_parallel.py`` run).

- ``jsonschema`` (imported by ``nbformat``, in pytest for nbval and in the kernel by myst-nb's ``glue``) imports
  ``rfc3987_syntax`` when it is installed, to check the ``iri`` string formats, and that module builds a Lark
  parser at import: about 1.6 CPU s per process. No schema used here has a string format (nbformat's notebook
  schemas, myst-nb's), so every validation gives the same answer without it. It is marked absent in this
  process before anything imports jsonschema, and in each kernel by a kernel configuration
  (``InteractiveShellApp.exec_lines``, binding no name) in a temporary ``$IPYTHONDIR``.
- hypothesis's pytest plugin loads hypothesis (no chapter is a property test): ``-p no:hypothesispytest``.

The kernels also get the environment every headless execution of a chapter gets here (``NBVAL_ENV``):
``BOOK_WIDGETS=static`` (``lib.book.widgets`` draws figures, not sliders) and ``BOOK_SLIDER_FRAMES=unrendered``
(a slider's frames are drawn, so a stop whose drawing fails still fails, but not rasterised: nbval compares
neither images nor metadata).

Everything else is plain ``pytest.main``: the arguments, the exit status and the output are pytest's.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

BLOCK = "rfc3987_syntax"
NBVAL_ENV = {"BOOK_WIDGETS": "static", "BOOK_SLIDER_FRAMES": "unrendered"}
KERNEL_CONFIG = f'c.InteractiveShellApp.exec_lines = ["__import__(\'sys\').modules.setdefault({BLOCK!r}, None)"]\n'

sys.modules[BLOCK] = None  # type: ignore[assignment]  # `import rfc3987_syntax` raises ImportError

import pytest  # noqa: E402


def main(args: list[str]) -> int:
    ipython_dir = Path(tempfile.mkdtemp(prefix="nbval-ipython-"))
    try:
        (ipython_dir / "profile_default").mkdir()
        (ipython_dir / "profile_default" / "ipython_kernel_config.py").write_text(KERNEL_CONFIG)
        os.environ["IPYTHONDIR"] = str(ipython_dir)  # the kernels nbval starts inherit it
        os.environ.update(NBVAL_ENV)
        return int(pytest.main(["-p", "no:hypothesispytest", *args]))
    finally:
        shutil.rmtree(ipython_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
