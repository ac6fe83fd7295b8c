"""The bibliography's labels in the citations' own form: "Vaswani et al., 2017", not "[VSP+17]".

The chapters cite author-year (``bibtex_reference_style: author_year`` in ``_config.yml``), so a reader who
follows "Vaswani et al. (2017)" to the bibliography looks for that name and year. This extension registers a
pybtex label style (``book-authoryear``) and a formatting style that uses it and sorts the list by author, year
and title, ignoring BibTeX's protecting braces (``book``, named by
``bibtex_default_style``). Two works with the same label get "2017a", "2017b".
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pybtex.plugin import register_plugin
from pybtex.style.formatting.alpha import Style as AlphaStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle as AuthorYearTitle


def _names(entry) -> str:  # noqa: ANN001 - a pybtex Entry
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    last = [" ".join(p.prelast_names + p.last_names).replace("{", "").replace("}", "") for p in persons]
    if not last:
        key = entry.fields.get("key") or entry.fields.get("organization") or entry.fields.get("title", "")
        return str(key).replace("{", "").replace("}", "")[:30]
    if len(last) == 1:
        return last[0]
    if len(last) == 2:
        return f"{last[0]} and {last[1]}"
    return f"{last[0]} et al."


def label(entry) -> str:  # noqa: ANN001 - a pybtex Entry
    year = str(entry.fields.get("year", "n.d.")).strip("{}")
    return f"{_names(entry)}, {year}"


class AuthorYearLabels(BaseLabelStyle):
    def format_labels(self, sorted_entries):  # noqa: ANN001, ANN201 - pybtex's interface
        entries = list(sorted_entries)
        labels = [label(e) for e in entries]
        counts = Counter(labels)
        seen: Counter = Counter()
        for lab in labels:
            if counts[lab] > 1:
                seen[lab] += 1
                yield lab + "abcdefghijklmnopqrstuvwxyz"[seen[lab] - 1]
            else:
                yield lab


class AuthorYearTitleSorting(AuthorYearTitle):
    """pybtex's author-year-title order, with BibTeX's protecting braces ignored: ``{DeepSeek-AI}`` sorts
    under D, not after Z (``{`` comes after every letter)."""

    def person_key(self, person):  # noqa: ANN001, ANN201 - pybtex's interface
        return super().person_key(person).replace("{", "").replace("}", "")


class BookStyle(AlphaStyle):
    default_label_style = "book-authoryear"
    default_sorting_style = "book-author-year-title"


def setup(app) -> dict[str, Any]:  # noqa: ANN001
    register_plugin("pybtex.style.labels", "book-authoryear", AuthorYearLabels)
    register_plugin("pybtex.style.sorting", "book-author-year-title", AuthorYearTitleSorting)
    register_plugin("pybtex.style.formatting", "book", BookStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
