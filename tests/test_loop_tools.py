"""The maintainer's tools: the equation check, the reader-layer check, the nbval queue and the step timer."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", ROOT / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _notebook(path: Path, cells: list[dict]) -> Path:
    for c in cells:
        c.setdefault("metadata", {})
        if c["cell_type"] == "code":
            c.setdefault("outputs", [])
            c.setdefault("execution_count", None)
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_equation_check_finds_unchecked_and_unknown_labels(tmp_path: Path) -> None:
    tool = _tool("check_equations")
    nb = _notebook(tmp_path / "ch.ipynb", [
        {"cell_type": "markdown", "source": "$$ a = b $$ (eq-one)\n\n$$ c = d $$ (eq-two)\n$$ e $$ (eq-three)"},
        {"cell_type": "code", "source": "equations.check('eq-one', x, y, atol=1e-12)\nequations.definition('eq-three')"
                                        "\nequations.check_symbolic(\"eq-four\", a, b)"},
    ])
    found, tally = tool.problems([nb], tmp_path)
    assert tally == {"checked": 1, "definition": 1}
    assert any("eq-two is neither checked" in f for f in found)
    assert any("eq-four, which this chapter does not display" in f for f in found)
    assert len(found) == 2


def test_equations_check_can_fail() -> None:
    import numpy as np

    from lib.book import equations

    assert "eq-x" in equations.check("eq-x", np.ones(3), np.ones(3) + 1e-13, atol=1e-12)
    with pytest.raises(AssertionError, match="differs from the reference"):
        equations.check("eq-x", np.ones(3), np.ones(3) + 1e-3, atol=1e-12)
    with pytest.raises(AssertionError, match="shape"):
        equations.check("eq-x", np.ones(3), np.ones((3, 1)))
    with pytest.raises(ValueError, match="label must be"):
        equations.check("softmax", 1.0, 1.0)
    with pytest.raises(AssertionError, match="simplifies to"):
        equations.check_symbolic("eq-y", "x**2", "x*x + 1")
    assert equations.definition("eq-z") == "eq-z: definition"


def test_reader_layer_findings(tmp_path: Path) -> None:
    tool = _tool("check_reader_layer")
    long_cell = "\n".join(f"x{i} = {i}" for i in range(31))
    nb = _notebook(tmp_path / "ch.ipynb", [
        {"cell_type": "markdown", "source": "As the Lab Report says, the tests/ folder runs on this machine."},
        {"cell_type": "code", "source": "y = f(x)\nassert y == 1"},
        {"cell_type": "code",
         "source": "try:\n    g(0)\n    raise AssertionError('accepted 0')\nexcept ValueError:\n    pass"},
        {"cell_type": "code", "source": "assert hidden", "metadata": {"tags": ["remove-input"]}},
        {"cell_type": "code", "source": long_cell},
        {"cell_type": "code", "source": "print('x' * 90)",
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "x" * 90 + "\n"}]},
        {"cell_type": "code", "source": "z = 1  # " + "w" * 80},
    ])
    found = tool.findings(nb)
    assert sum("prose speaks about the project" in f for f in found) == 3
    assert sum("visible testing line" in f for f in found) == 2
    assert sum("shown code cell of 31 lines" in f for f in found) == 1
    assert sum("output line 1 is 90 characters" in f for f in found) == 1
    assert sum("code line 1: Line too long (89 > 76)" in f for f in found) == 1


def test_nbval_queue_reads_the_other_machine_like_the_shell_does() -> None:
    tool = _tool("nbval_parallel")
    env = tool.other_machine_env()
    shell = subprocess.run(["bash", "tools/other_machine.sh", "env"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout
    from_shell = dict(line.split("=", 1) for line in shell.splitlines() if "=" in line)
    assert env and all(from_shell.get(k) == v for k, v in env.items()), env
    assert {"ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS"} <= set(env)
    assert tool.job_env("native", True)["OMP_NUM_THREADS"] == "1"
    assert tool.job_env("other", False)["ATEN_CPU_CAPABILITY"] == env["ATEN_CPU_CAPABILITY"]


def test_nbval_queue_runs_native_only_chapters_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """make check's queue: an edited chapter on both machines, one affected through its inputs (--native-only)
    on this machine only; with only the latter given, not every chapter."""
    tool = _tool("nbval_parallel")
    ran = []
    monkeypatch.setattr(tool, "SECONDS_FILE", tmp_path / "seconds.json")
    monkeypatch.setattr(tool, "run_job", lambda nb, machine, single: ran.append((nb.name, machine)) or (
        nb, machine, 0, 0.0, "1 passed"))
    a, b = (str(ROOT / "chapters" / f"{n}.ipynb") for n in ("notation", "softmax"))
    assert tool.main(["-j", "2", "--native-only", b, a]) == 0
    assert sorted(ran) == [("notation.ipynb", "native"), ("notation.ipynb", "other"), ("softmax.ipynb", "native")]
    ran.clear()
    assert tool.main(["-j", "1", "--native-only", b]) == 0
    assert ran == [("softmax.ipynb", "native")]


def test_chapters_options_may_follow_the_notebooks() -> None:
    """`execute -j 2 chapters/a.ipynb ...`, the command `check` prints, parses (options after the command)."""
    tool = _tool("chapters")
    nb = str(ROOT / "chapters" / "notation.ipynb")
    assert tool.main(["deps", "-j", "2", nb]) == 0
    assert tool.main(["deps", nb, "-j", "2"]) == 0
    with pytest.raises(SystemExit):
        tool.main(["execute", "-j", "0", nb])


def test_step_timer_reads_the_summary() -> None:
    tool = _tool("time_test")
    text = ("==> lint\nSummary:\n  PASS  set-up (91s)\n  FAIL  nbval (exit 1, 300s, cpu 590s)\n"
            "  PASS  pdf-build (210s, cpu 40s, alongside browser)\n  SKIP  browser (BOOK_SKIP...)\n")
    assert tool.parse_summary(text) == [
        {"step": "set-up", "status": "PASS", "seconds": 91},
        {"step": "nbval", "status": "FAIL", "seconds": 300, "cpu_seconds": 590},
        {"step": "pdf-build", "status": "PASS", "seconds": 210, "cpu_seconds": 40},
    ]


def test_steps_record_cpu_seconds(tmp_path: Path) -> None:
    """tools/steps.sh records each step's CPU seconds (its processes' user + system time), not the shell's."""
    script = tmp_path / "s.sh"
    script.write_text(f". {ROOT / 'tools' / 'steps.sh'}\n"
                      "step busy python3 -c 'import time\nwhile time.process_time() < 1.2: pass'\nstep idle sleep 1\n"
                      "printf '%s\\n' \"${summary[@]}\"\n")
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=True).stdout
    busy, idle = _tool("time_test").parse_summary("Summary:\n" + out)
    assert busy["step"] == "busy" and busy["cpu_seconds"] >= 1
    assert idle["step"] == "idle" and idle["cpu_seconds"] == 0 and idle["seconds"] >= 1


def test_book_wide_equation_budget_can_fail() -> None:
    """The browser tests' book-wide budget (tests/browser/page_checks.py), summed over per-chapter records."""
    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    try:
        from page_checks import MAX_SCROLLING_NUMBERED_ON_PHONE as limit
        from page_checks import budget_verdict
    finally:
        sys.path.remove(str(ROOT / "tests" / "browser"))
    assert budget_verdict([], []) == ""  # nothing measured (another selection of tests)
    assert budget_verdict([3, 4], ["a (1.1)"]) == ""
    assert "no numbered equation" in budget_verdict([0, 0], [])
    too_many = [f"chapters/x.html ({k})" for k in range(limit + 1)]
    assert f"{limit + 1} of 20 numbered equations scroll" in budget_verdict([10, 10], too_many)


def test_browser_and_pdf_tests_live_where_the_test_command_collects_them() -> None:
    """make test collects the browser tests from tests/browser/ and the PDF tests from tests/test_pdf.py only (not
    every test module, whose imports cost seconds per process); the library step deselects both markers. A test
    marked ``browser`` or ``pdf`` anywhere else would therefore run in no step at all."""
    script = (ROOT / "tools" / "test.sh").read_text()
    assert "pytest -q -n \"$JOBS\" tests/browser -m browser" in script
    assert "pytest -q tests/test_pdf.py -m pdf" in script
    steps = (ROOT / "tools" / "steps.sh").read_text()
    assert len(re.findall(r"^LIB_TESTS=", steps, flags=re.M)) == 1  # one definition, which both loops run
    assert re.search(r'^LIB_TESTS=\(.* tests -m "not browser and not pdf"\)$', steps, flags=re.M)
    for loop in (script, (ROOT / "tools" / "check.sh").read_text()):
        assert 'step lib-tests "${LIB_TESTS[@]}"' in loop and "LIB_TESTS=" not in loop
    marked = re.compile(r"\bmark\.(browser|pdf)\b")
    home = {"browser": "tests/browser/", "pdf": "tests/test_pdf.py"}
    found, misplaced = set(), []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path == Path(__file__).resolve():  # this test names the markers itself
            continue
        rel = path.relative_to(ROOT).as_posix()
        for marker in marked.findall(path.read_text()):
            found.add(marker)
            if not rel.startswith(home[marker]):
                misplaced.append(f"{rel}: {marker}")
    assert found == {"browser", "pdf"}  # the scan sees both markers where they are used
    assert misplaced == [], misplaced


def test_background_steps_are_recorded_with_their_own_status_and_cpu(tmp_path: Path) -> None:
    """tools/steps.sh in_background/bg_run/bg_record (how make test runs the builds): a step in the background is
    recorded with its exit status and its own CPU seconds, its log is printed, and one that wrote no result
    (never ran) is recorded as failed; an environment given to `step` reaches its command."""
    script = tmp_path / "s.sh"
    script.write_text(f". {ROOT / 'tools' / 'steps.sh'}\n"
                      f"D={tmp_path}\n"
                      "job() { bg_run \"$D\" busy python3 -c 'import time\nwhile time.process_time() < 1.2: pass\n"
                      "print(\"busy says hi\")'\n"
                      "        bg_run \"$D\" broken sh -c 'exit 3'; }\n"
                      "in_background job\n"
                      "wait $!\n"
                      "bg_record \"$D\" busy 'in the background'\n"
                      "bg_record \"$D\" broken 'in the background' 5\n"
                      "bg_record \"$D\" never 'in the background'\n"
                      "PROBE=seen step env-probe sh -c 'test \"$PROBE\" = seen'\n"
                      "echo Summary:\n"
                      "printf '%s\\n' \"${summary[@]}\"\n")
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=True).stdout
    assert "busy says hi" in out
    steps = _tool("time_test").parse_summary(out[out.index("Summary:"):])
    assert [(s["step"], s["status"]) for s in steps] == [("busy", "PASS"), ("broken", "FAIL"), ("env-probe", "PASS")]
    assert f"  FAIL  never (not run, or it ended without a result: {tmp_path}/never.log)" in out
    assert steps[0]["cpu_seconds"] >= 1 and steps[1]["cpu_seconds"] == 0


def test_the_pdf_files_stay_out_of_the_web_pages() -> None:
    """Jupyter Book links every .css and .js under _static/ into every page: the HTML build leaves out the PDF's
    print styles and layout script (_static/pdf/), which tools/build_pdf.py loads itself."""
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("book_html_under_test", ROOT / "_ext" / "book_html.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    pdf_files = sorted(p.relative_to(ROOT / "_static").as_posix() for p in (ROOT / "_static" / "pdf").iterdir())
    assert {"pdf/print.css", "pdf/book.js", "pdf/cover.html"} <= set(pdf_files)
    config = SimpleNamespace(html_css_files=["book.css", "pdf/print.css"],
                             html_js_files=["explore.js", ("pdf/book.js", {"defer": "defer"})])
    ext._drop_pdf_assets(None, config)
    assert config.html_css_files == ["book.css"] and config.html_js_files == ["explore.js"]
