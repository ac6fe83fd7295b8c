"""tools/nbval_run.py is nbval as pytest runs it: a notebook whose stored output is right passes, a wrong one fails.

One run of tools/nbval_run.py over four small notebooks (a run starts pytest and nbval once; each notebook gets its
own kernel), each test reading its notebook's outcome from that run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = {  # name: (code, the stored output)
    "right": ("print(6 * 7)", "42\n"),
    "wrong": ("print(6 * 7)", "43\n"),
    # the kernel's configuration marks rfc3987_syntax absent (jsonschema then skips the iri formats) and leaves the
    # notebook's namespace as a plain kernel's: no ``sys`` a chapter could use without importing it
    "kernel": ("import sys as _s\nprint(_s.modules.get('rfc3987_syntax', 'absent'), 'sys' in dir())", "None False\n"),
    # static figures and unrendered slider frames in the kernel, whatever the caller's environment says (the run's
    # environment has no BOOK_WIDGETS and asks for PNG frames): both runners rely on tools/nbval_run.py for them
    "env": ("import os\nprint(os.environ.get('BOOK_WIDGETS'), os.environ.get('BOOK_SLIDER_FRAMES'))",
            "static unrendered\n"),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> tuple[dict[str, str], str]:
    """``({notebook name: PASSED or FAILED}, the run's output)``."""
    folder = tmp_path_factory.mktemp("nbval")
    for name, (code, stored) in NOTEBOOKS.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        cell = nbformat.v4.new_code_cell(code, execution_count=1)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored)]
        nb.cells = [cell]
        nbformat.write(nb, folder / f"{name}.ipynb")
    env = {k: v for k, v in os.environ.items() if k not in ("BOOK_WIDGETS", "BOOK_SLIDER_FRAMES")}
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "nbval_run.py"), "-v", "-p", "no:cacheprovider",
                          "--nbval", "--nbval-current-env", *(f"{name}.ipynb" for name in NOTEBOOKS)],
                         cwd=folder, capture_output=True, text=True, timeout=300,
                         env=dict(env, PYTHONPATH=str(ROOT), BOOK_SLIDER_FRAMES="png"))
    found = dict(re.findall(r"^(\w+)(?:\.|::)ipynb::Cell 0 (PASSED|FAILED)", run.stdout, flags=re.M))
    return found, run.stdout


def test_right_output_passes_and_wrong_output_fails(outcomes) -> None:
    found, out = outcomes
    assert found.get("right") == "PASSED", out[-2000:]
    assert found.get("wrong") == "FAILED" and "43" in out, out[-2000:]


def test_kernel_runs_without_the_iri_parser_and_binds_no_name(outcomes) -> None:
    found, out = outcomes
    assert found.get("kernel") == "PASSED", out[-2000:]


def test_kernel_gets_the_headless_settings_whoever_calls_it(outcomes) -> None:
    found, out = outcomes
    assert found.get("env") == "PASSED", out[-2000:]
