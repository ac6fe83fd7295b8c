"""Every numbered equation is executed as displayed, or marked as a definition.

Lists each ``$$ ... $$ (eq-label)`` of the chapters in ``_toc.yml`` and looks, in the same notebook's code
cells, for a call of :mod:`lib.book.equations` naming it: ``equations.check("eq-label", ...)``,
``equations.check_symbolic("eq-label", ...)`` or ``equations.definition("eq-label")``. The calls themselves
assert when the chapter runs (nbval re-executes it); this check makes sure no numbered equation is left out.

Exit status 1, naming each chapter and label, when an equation is neither checked nor marked, when a call
names a label the chapter does not display, or when a label is numbered twice.

Usage: python tools/check_equations.py [--list] [chapters/NAME.ipynb ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DISPLAY_RE = re.compile(r"\$\$\s*\((eq-[A-Za-z0-9_-]+)\)")
CALL_RE = re.compile(r"\b(check|check_symbolic|definition)\(\s*[\"'](eq-[A-Za-z0-9_-]+)[\"']")


def toc_chapters(root: Path = ROOT) -> list[Path]:
    toc = (root / "_toc.yml").read_text()
    files = re.findall(r"^\s*-?\s*file:\s*(\S+)\s*$", toc, flags=re.M)
    return [root / f"{f}.ipynb" for f in files if (root / f"{f}.ipynb").exists()]


def survey(path: Path) -> tuple[list[str], dict[str, str]]:
    """The labels a chapter numbers (in order) and, per label, how its code treats it."""
    nb = json.loads(path.read_text())
    labels: list[str] = []
    treated: dict[str, str] = {}
    for cell in nb["cells"]:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown":
            labels += DISPLAY_RE.findall(src)
        elif cell["cell_type"] == "code":
            for kind, label in CALL_RE.findall(src):
                treated[label] = "definition" if kind == "definition" else "checked"
    return labels, treated


def problems(paths: list[Path], root: Path = ROOT) -> tuple[list[str], Counter]:
    out: list[str] = []
    tally: Counter = Counter()
    for path in paths:
        rel = path.relative_to(root) if path.is_relative_to(root) else path
        labels, treated = survey(path)
        for label, n in Counter(labels).items():
            if n > 1:
                out.append(f"{rel}: {label} is numbered {n} times")
        for label in labels:
            kind = treated.get(label)
            if kind is None:
                out.append(f"{rel}: {label} is neither checked as displayed (lib.book.equations.check) "
                           f"nor marked a definition (lib.book.equations.definition)")
            else:
                tally[kind] += 1
        for label in sorted(set(treated) - set(labels)):
            out.append(f"{rel}: a cell checks {label}, which this chapter does not display")
    return out, tally


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print every numbered equation and its treatment")
    ap.add_argument("notebooks", nargs="*", type=Path)
    args = ap.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or toc_chapters()
    if args.list:
        for path in paths:
            labels, treated = survey(path)
            for label in labels:
                print(f"{path.name}\t{label}\t{treated.get(label, 'MISSING')}")
    found, tally = problems(paths)
    for line in found:
        print(line, file=sys.stderr)
    print(f"check_equations: {tally['checked']} equations checked as displayed, {tally['definition']} "
          f"definitions, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
