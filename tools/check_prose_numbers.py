r"""Fail when a chapter's prose states a result that no code computed.

The book promises that every number in its prose is computed by the chapter's code (myst-nb ``glue``) and
asserted there. This check keeps the promise: it reads every markdown cell of every chapter (and the front
page) and reports each *result-like* number that is typed by hand:

- a number with a decimal point (``7.4``, ``0.0515``),
- a percentage (``12 %``, ``99%``),
- a count with thousands separators (``1,024``, ``10 000``, ``10\\,000``),
- a factor (``3×``, ``×4``, ``40 times``),
- an integer in the text (``about 128 tokens``, ``16 exact ones``), other than 0 and 1,
- a power (``2^{42}``, ``10^{-4}``), in the text or in math,
- in math: a number alone (``$128$``), a bound (``n > 50 b``, ``< 0.02``, ``\approx 7``), and the value an
  expression is set equal to (``2b/d = 4``, ``4 \cdot 8192 = 32768``); not the value given to a symbol
  (``$L = 32$``, ``d_\text{model} = 4096``: an input) nor a formula's own constants (``n(n+1)/2``).

Not reported: numbers inside a glue role (they are computed), code (inline or fenced), link targets,
directive options, labels, citations, model names (``Llama 2 70B``), and the allowed inputs and definitions
(a model's published sizes, a setting such as vLLM's 0.9, a unit), each with the reason it is not a result.
They are listed per chapter in ``tools/prose_numbers_allow/CHAPTER.txt``, one per line:
``TEXT<TAB>CONTEXT<TAB># why``: ``TEXT`` is the number as written, ``CONTEXT`` a few words of the sentence it
stands in (the entry allows it in that sentence only, wherever the sentence is in the chapter).

Usage: ``python tools/check_prose_numbers.py [chapters/NAME.ipynb ...]`` (exit 1 and one line per finding).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALLOW_DIR = ROOT / "tools" / "prose_numbers_allow"

# What is not prose: removed before looking for numbers.
STRIP = [
    re.compile(r"```.*?```", re.S),  # fenced blocks and directives (their bodies are checked separately)
    re.compile(r"\{glue(?::[a-z]+)?\}`[^`]*`"),  # glued: computed
    re.compile(r"\{(?:eq|numref|ref|doc|cite:p|cite:t|cite|term|download)\}`[^`]*`"),
    re.compile(r"`[^`]*`"),  # inline code
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"^\s*:[a-z-]+:.*$", re.M),  # directive options
    re.compile(r"^\(.*\)=\s*$", re.M),  # labels
    re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>"),  # html tags (not math such as "b/n < 0.02 > x")
    re.compile(r"\\label\{[^}]*\}|\\tag\{[^}]*\}"),
    re.compile(r"\barXiv:\s*\d+\.\d+"),
    re.compile(r"\b(?:19|20)\d\d[a-z]?\b"),  # years
    re.compile(r"\bv?\d+\.\d+\.\d+\b"),  # versions
    # shapes "64 × 64" and sizes "7 × 10^9": a product, not a factor (removed whole)
    re.compile(r"\d+(?:\.\d+)?\s*(?:×|\\times)\s*\d+(?:\s*\^\s*(?:\{[^}]*\}|-?\d+))?"),
    re.compile(r"\d+\s*\\times\s*(?=[A-Za-z\\{(])"),  # products with a symbol in math: "1 \times d_model"
    re.compile(r"^\s*(?:\d+\.|[-*+])\s", re.M),  # list markers
    re.compile(r"^#+ .*$", re.M),  # headings: titles, not results
    re.compile(r"\b[A-Z][\w-]*(?:\s\d+(?:\.\d+)?)?\s\d+(?:\.\d+)?[BMT]\b"),  # model names: Llama 2 70B, Mistral 7B
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


MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S)
POWER = re.compile(r"(?<![\w.^_{\\])\d+\s*\^\s*(?:\{\s*-?\s*\d+\s*\}|-?\d+)")
INTEGER = re.compile(r"(?<![\w.^_{\\/-])(?<!_\{)(?<!\^\{)\d+(?![\w.]|,\d|\s*\^)")
BOUND = re.compile(r"(?:<|>|\\le(?:q)?\b|\\ge(?:q)?\b|\\approx\b|\\lesssim\b|\\gtrsim\b|\\ll\b|\\gg\b)\s*"
                   r"(-?\d+(?:\.\d+)?(?:\s*\^\s*(?:\{[^}]*\}|-?\d+))?)(?![\d.,])")
SUBSCRIPT = re.compile(r"_\{[^}]*\}|_\w|\^\{[^}]*\}|\^\w")
TRIVIAL = {"0", "1"}


def _math_findings(body: str) -> list[str]:
    """Result-like numbers inside one math span (its text without the dollars)."""
    out = []
    if re.fullmatch(r"\s*(?:\\approx|\\sim|\\text\{about\})?\s*-?\d+\s*", body):
        out.append(body.strip())
        return out
    out += [m.group(0) for m in POWER.finditer(body)]
    out += [m.group(1) for m in BOUND.finditer(body) if m.group(1) not in TRIVIAL]
    parts = re.split(r"(?<![<>!\\])=", body)
    for lhs, rhs in zip(parts, parts[1:], strict=False):
        m = re.match(r"\s*(-?\d+(?:\.\d+)?)(?![\d.,^]|\s*(?:\\cdot|\\times|[A-Za-z(\\]))", rhs)
        if m and m.group(1) not in TRIVIAL and re.search(r"\d", SUBSCRIPT.sub("", lhs)):
            out.append(m.group(1))  # an expression set equal to a number: "2b/d = 4"
    return out


def result_numbers(text: str) -> list[tuple[int, str]]:
    """``(offset, text)`` of every result-like number in a piece of prose (already stripped of code etc.)."""
    found = [(m.start(), " ".join(m.group(0).split())) for m in NUMBER.finditer(MATH.sub(lambda m: " " * len(
        m.group(0)), text))]
    for m in MATH.finditer(text):
        found += [(m.start(), " ".join(t.split())) for t in _math_findings(m.group(0).strip("$"))]
    prose = MATH.sub(lambda m: " " * len(m.group(0)), text)
    taken = {off for off, _ in found}
    for m in POWER.finditer(prose):
        found.append((m.start(), " ".join(m.group(0).split())))
        taken.update(range(m.start(), m.end()))
    for m in INTEGER.finditer(prose):
        if m.group(0) in TRIVIAL or m.start() in taken:
            continue
        around = prose[max(0, m.start() - 12):m.end() + 12]
        if any(n.start() <= m.start() - max(0, m.start() - 12) < n.end() for n in NUMBER.finditer(around)):
            continue  # part of a decimal, percentage, separated count or factor, reported as that
        found.append((m.start(), m.group(0)))
    return sorted(found)


def sentence_at(text: str, offset: int) -> str:
    """The sentence of ``text`` around ``offset`` (split at ". ", "? ", "! ", ":" + newline and blank lines)."""
    starts = [0] + [m.end() for m in re.finditer(r"(?<=[.?!])\s+(?=[A-Z*_(\[$])|\n\s*\n|:\s*\n", text)]
    start = max(s for s in starts if s <= offset)
    ends = [m.start() for m in re.finditer(r"(?<=[.?!])\s+(?=[A-Z*_(\[$])|\n\s*\n|:\s*\n", text)
            if m.start() > offset]
    return " ".join(text[start:(min(ends) if ends else len(text))].split())


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


def load_allow(directory: Path = ALLOW_DIR) -> dict[str, list[tuple[str, str]]]:
    """``{chapter: [(text, context), ...]}`` from ``tools/prose_numbers_allow/CHAPTER.txt``."""
    allowed: dict[str, list[tuple[str, str]]] = {}
    if not directory.is_dir():
        return allowed
    for path in sorted(directory.glob("*.txt")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) != 3 or not parts[2].strip().startswith("#") or len(parts[2].strip()) < 8 \
                    or len(parts[1].split()) < 2:
                raise SystemExit(f"{path}:{n}: an entry is TEXT<TAB>CONTEXT<TAB># why, with a context of two "
                                 f"or more words of the sentence and a reason, got {line!r}")
            allowed.setdefault(path.stem, []).append((parts[0].strip(), " ".join(parts[1].split())))
    return allowed


def findings(root: Path = ROOT, allow: dict[str, list[tuple[str, str]]] | None = None,
             notebooks: list[Path] | None = None) -> list[str]:
    allow = load_allow(root / "tools" / "prose_numbers_allow") if allow is None else allow
    sources: list[tuple[str, list[dict]]] = []
    for nb in notebooks if notebooks is not None else sorted((root / "chapters").glob("*.ipynb")):
        sources.append((nb.stem, json.loads(nb.read_text())["cells"]))
    intro = root / "intro.md"
    if intro.exists() and notebooks is None:
        sources.append(("intro", [{"cell_type": "markdown", "source": intro.read_text()}]))
    out = []
    for name, cells in sources:
        entries = allow.get(name, [])
        used = set()
        for i, text in _prose(cells):
            for offset, token in result_numbers(text):
                sentence = sentence_at(text, offset)
                hits = {k for k, (t, ctx) in enumerate(entries) if t == token and ctx in sentence}
                if hits:
                    used |= hits
                    continue
                out.append(f"{name} cell {i}: {token!r} typed in prose: {sentence[:160]}")
        # an entry that allows nothing any more is a stale exemption: it would silently allow the number again
        out += [f"{name}: allow entry {t!r} in {ctx!r} matches no sentence: remove it from "
                f"tools/prose_numbers_allow/{name}.txt" for k, (t, ctx) in enumerate(entries) if k not in used]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter and the front page")
    args = ap.parse_args(argv)
    found = findings(notebooks=[p.resolve() for p in args.notebooks] or None)
    for line in found:
        print(line)
    if found:
        print(f"check_prose_numbers: {len(found)} hand-typed results: glue them from the cell that computes and "
              f"asserts them, or, for an input or a definition, add TEXT<TAB>CONTEXT<TAB># why to "
              f"{ALLOW_DIR.relative_to(ROOT)}/CHAPTER.txt",
              file=sys.stderr)
        return 1
    print("check_prose_numbers: every result in the prose is glued")
    return 0


if __name__ == "__main__":
    sys.exit(main())
