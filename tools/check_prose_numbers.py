"""Fail when a chapter's prose states a result that no code computed.

The book promises that every number in its prose is computed by the chapter's code (myst-nb ``glue``) and
asserted there. This check keeps the promise: it reads every markdown cell of every chapter (and the front
page) and reports each *result-like* number that is typed by hand:

- a number with a decimal point (``7.4``, ``0.0515``),
- a percentage (``12 %``, ``99%``),
- a count with thousands separators (``1,024``, ``10 000``, ``10\\,000``),
- a factor (``3×``, ``×4``, ``40 times``).

Not reported: numbers inside a glue role (they are computed), code (inline or fenced), link targets,
directive options, labels, citations, and the entries of ``tools/prose_numbers_allow.txt``: inputs and
definitions (a model's published sizes, a setting such as vLLM's 0.9, a unit), each with the reason it is not
a result. An allow-list entry is ``CHAPTER<TAB>TEXT<TAB># why``: ``TEXT`` is the number as written, allowed in
that chapter (``*`` for every chapter).

Usage: ``python tools/check_prose_numbers.py [--list]`` (exit 1 and one line per finding when any).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALLOW = ROOT / "tools" / "prose_numbers_allow.txt"

# What is not prose: removed before looking for numbers.
STRIP = [
    re.compile(r"```.*?```", re.S),  # fenced blocks and directives (their bodies are checked separately)
    re.compile(r"\{glue(?::[a-z]+)?\}`[^`]*`"),  # glued: computed
    re.compile(r"\{(?:eq|numref|ref|doc|cite:p|cite:t|cite|term|download)\}`[^`]*`"),
    re.compile(r"`[^`]*`"),  # inline code
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"^\s*:[a-z-]+:.*$", re.M),  # directive options
    re.compile(r"^\(.*\)=\s*$", re.M),  # labels
    re.compile(r"<[^>]+>"),  # html tags
    re.compile(r"\\label\{[^}]*\}|\\tag\{[^}]*\}"),
    re.compile(r"\barXiv:\s*\d+\.\d+"),
    re.compile(r"\b(?:19|20)\d\d[a-z]?\b"),  # years
    re.compile(r"\bv?\d+\.\d+\.\d+\b"),  # versions
    re.compile(r"\d+\s*(?:×|\\times)\s*(?=\d)"),  # shapes "64 × 64" and "7 × 10^9": the product sign is not a factor
    re.compile(r"\d+\s*\\times\s*(?=[A-Za-z\\{(])"),  # products with a symbol in math: "1 \times d_model"
]
DIRECTIVE_BODY = re.compile(r"```\{(?:exercise|solution-start|solution-end|note|tip|warning|important|admonition)"
                            r"[^\n]*\n(.*?)```", re.S)
NUMBER = re.compile(
    r"(?<![\w.])(?:"
    r"\d+\.\d+\s*(?:%|\\%)?"  # decimal point
    r"|\d{1,3}(?:(?:,|\\,|\u2009|\u202f| )\d{3})+(?!\d)"  # thousands separators
    r"|\d+\s*(?:%|\\%)"  # percentage
    r"|\d+(?:\.\d+)?\s*(?:×|\\times)(?!\s*\d)"  # "3×" as a factor (not "3 × 4")
    r"|(?:×|\\times)\s*\d+(?:\.\d+)?(?!\s*(?:×|\\times))"  # "×4"
    r"|\d+(?:\.\d+)?\s+times\b"
    r")"
)


def _prose(cells: list[dict]) -> list[tuple[int, str]]:
    out = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        bodies = "\n".join(DIRECTIVE_BODY.findall(text))  # exercise and admonition text is prose too
        for pattern in STRIP:
            text = pattern.sub(" ", text)
            bodies = pattern.sub(" ", bodies)
        out.append((i, text + "\n" + bodies))
    return out


def load_allow(path: Path = ALLOW) -> set[tuple[str, str]]:
    allowed = set()
    if not path.exists():
        return allowed
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) < 3 or not parts[2].strip().startswith("#"):
            raise SystemExit(f"{path}:{n}: an entry is CHAPTER<TAB>TEXT<TAB># why, got {line!r}")
        allowed.add((parts[0].strip(), parts[1].strip()))
    return allowed


def findings(root: Path = ROOT, allow: set[tuple[str, str]] | None = None) -> list[str]:
    allow = load_allow() if allow is None else allow
    sources: list[tuple[str, list[dict]]] = []
    for nb in sorted((root / "chapters").glob("*.ipynb")):
        sources.append((nb.stem, json.loads(nb.read_text())["cells"]))
    intro = root / "intro.md"
    if intro.exists():
        sources.append(("intro", [{"cell_type": "markdown", "source": intro.read_text()}]))
    out = []
    for name, cells in sources:
        for i, text in _prose(cells):
            for m in NUMBER.finditer(text):
                token = " ".join(m.group(0).split())
                if (name, token) in allow or ("*", token) in allow:
                    continue
                context = " ".join(text[max(0, m.start() - 40):m.end() + 30].split())
                out.append(f"{name} cell {i}: {token!r} typed in prose: ...{context}...")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args(argv)
    found = findings()
    for line in found:
        print(line)
    if found:
        print(f"check_prose_numbers: {len(found)} hand-typed results: glue them from the cell that computes and "
              f"asserts them, or, for an input or a definition, add them to {ALLOW.relative_to(ROOT)} with why",
              file=sys.stderr)
        return 1
    print("check_prose_numbers: every result in the prose is glued")
    return 0


if __name__ == "__main__":
    sys.exit(main())
