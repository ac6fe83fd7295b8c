"""The page shows the argument; the checks run out of sight.

For every chapter in ``_toc.yml`` (or the notebooks given), reads the notebook as the book renders it and
reports, per cell:

- a testing line in code a reader can see (``assert``, ``np.testing``, ``torch.testing``, ``pytest``): a cell
  whose input is shown, or only collapsed (``hide-input``), is visible; ``remove-cell`` and ``remove-input``
  hide it;
- a shown code cell (not hidden or collapsed) of more than 30 lines;
- a line of shown code wider than 76 characters, the width of the book's code column, as ruff measures it
  (its ``line-too-long`` rule at that length, run on the notebook, findings in hidden cells dropped), or of
  shown text output (a stream or a plain-text result), which no linter reads;
- prose that speaks about the project instead of the subject: test paths, CI, "this machine", briefs, or the
  names of the source notes the book answers.

Exit status 1 and one line per finding when there is any. Usage:
``python tools/check_reader_layer.py [--summary] [chapters/NAME.ipynb ...]``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 30
MAX_WIDTH = 76
HIDDEN = {"remove-cell", "remove-input"}
COLLAPSED = {"hide-input", "hide-cell"}
TESTING = re.compile(r"^\s*assert\b|\braise AssertionError\b|\bnp\.testing\.|\bnumpy\.testing\b"
                     r"|\btorch\.testing\.|\bpytest\b")
PROCESS_TALK = re.compile(
    r"\btests?/|\bCI\b|\bnbval\b|this machine|the machine that built|\bthe brief\b|brief's"
    r"|Theory Notes|Lab Report|Introductory Article|First-Principles Walkthrough|a first version",
    flags=re.I,
)
STRIP_MD = [re.compile(r"```.*?```", re.S), re.compile(r"`[^`]*`"), re.compile(r"\]\([^)]*\)"),
            re.compile(r"^\(.*\)=\s*$", re.M), re.compile(r"^\s*:[a-z-]+:.*$", re.M)]


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _text_outputs(cell: dict) -> list[str]:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append("".join(o.get("text", "")))
        elif o.get("output_type") in {"execute_result", "display_data"}:
            data = o.get("data", {})
            if "text/plain" in data and not ({"image/png", "image/svg+xml", "text/html"} & set(data)):
                out.append("".join(data["text/plain"]))
    return out


def _wide_code(path: Path) -> dict[int, list[tuple[int, str]]]:
    """``{cell index: [(line, ruff's message)]}``: ruff's E501 at ``MAX_WIDTH`` over every code cell."""
    from ruff.__main__ import find_ruff_bin

    proc = subprocess.run([find_ruff_bin(), "check", "--isolated", "--select", "E501", "--line-length",
                           str(MAX_WIDTH), "--output-format", "json", "--exit-zero", str(path)],
                          capture_output=True, text=True, check=True)
    out: dict[int, list[tuple[int, str]]] = {}
    for f in json.loads(proc.stdout):
        out.setdefault(f["cell"] - 1, []).append((f["location"]["row"], f["message"]))
    return out


def findings(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    name = path.stem
    wide = _wide_code(path)
    out = []
    for i, cell in enumerate(nb["cells"]):
        tags = _tags(cell)
        if cell["cell_type"] == "markdown":
            text = _src(cell)
            for pat in STRIP_MD:
                text = pat.sub(" ", text)
            for m in PROCESS_TALK.finditer(text):
                ctx = " ".join(text[max(0, m.start() - 40):m.end() + 40].split())
                out.append(f"{name} cell {i}: prose speaks about the project ({m.group(0)!r}): ...{ctx}...")
            continue
        if cell["cell_type"] != "code" or "remove-cell" in tags:
            continue
        src = _src(cell)
        if not tags & HIDDEN:
            for n, line in enumerate(src.splitlines(), 1):
                if TESTING.search(line):
                    out.append(f"{name} cell {i}: visible testing line {n}: {line.strip()[:70]}")
            out += [f"{name} cell {i}: code line {n}: {message}" for n, message in wide.get(i, [])]
            n_lines = len(src.rstrip().splitlines())
            if not tags & COLLAPSED and n_lines > MAX_LINES:
                out.append(f"{name} cell {i}: shown code cell of {n_lines} lines (> {MAX_LINES})")
        if "remove-output" in tags or "hide-output" in tags:
            continue
        for text in _text_outputs(cell):
            for n, line in enumerate(text.splitlines(), 1):
                if len(line) > MAX_WIDTH:
                    out.append(f"{name} cell {i}: output line {n} is {len(line)} characters wide (> {MAX_WIDTH})")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summary", action="store_true", help="one count per chapter instead of every finding")
    ap.add_argument("notebooks", nargs="*", type=Path)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tools"))
    from chapters import toc_chapters

    paths = [p.resolve() for p in args.notebooks] or toc_chapters(ROOT)
    total = 0
    for path in paths:
        found = findings(path)
        total += len(found)
        if args.summary:
            print(f"{len(found):5d}  {path.name}")
        else:
            for line in found:
                print(line)
    print(f"check_reader_layer: {total} findings in {len(paths)} chapters", file=sys.stderr)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
