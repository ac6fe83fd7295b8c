"""tools/nbval_run.py is nbval as pytest runs it: a notebook whose stored output is right passes, a wrong one fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path: Path, stored: str, code: str = "print(6 * 7)") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cell = nbformat.v4.new_code_cell(code, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored)]
    nb.cells = [cell]
    nbformat.write(nb, path)
    return path


def _nbval(notebook: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "nbval_run.py"), "-q", "-p", "no:cacheprovider",
                           "--nbval", "--nbval-current-env", str(notebook)],
                          cwd=notebook.parent, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_right_output_passes_and_wrong_output_fails(tmp_path: Path) -> None:
    right = _nbval(_notebook(tmp_path / "right.ipynb", "42\n"))
    assert right.returncode == 0, right.stdout[-2000:]
    wrong = _nbval(_notebook(tmp_path / "wrong.ipynb", "43\n"))
    assert wrong.returncode == 1 and "43" in wrong.stdout, wrong.stdout[-2000:]


def test_kernel_runs_without_the_iri_parser_and_binds_no_name(tmp_path: Path) -> None:
    """The kernel's configuration marks rfc3987_syntax absent (jsonschema then skips the iri formats) and leaves
    the notebook's namespace as a plain kernel's: no ``sys`` a chapter could use without importing it."""
    code = "import sys as _s\nprint(_s.modules.get('rfc3987_syntax', 'absent'), 'sys' in dir())"
    run = _nbval(_notebook(tmp_path / "kernel.ipynb", "None False\n", code))
    assert run.returncode == 0, run.stdout[-2000:]


def test_kernel_gets_the_headless_settings_whoever_calls_it(tmp_path: Path) -> None:
    """Static figures and unrendered slider frames in the kernel, whatever the caller's environment says: both
    runners (tools/nbval.sh and tools/nbval_parallel.py) rely on tools/nbval_run.py for them."""
    code = "import os\nprint(os.environ.get('BOOK_WIDGETS'), os.environ.get('BOOK_SLIDER_FRAMES'))"
    nb = _notebook(tmp_path / "env.ipynb", "static unrendered\n", code)
    env = {k: v for k, v in os.environ.items() if k not in ("BOOK_WIDGETS", "BOOK_SLIDER_FRAMES")}
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "nbval_run.py"), "-q", "-p", "no:cacheprovider",
                          "--nbval", "--nbval-current-env", str(nb)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env=dict(env, PYTHONPATH=str(ROOT), BOOK_SLIDER_FRAMES="png"))
    assert run.returncode == 0, run.stdout[-2000:]
