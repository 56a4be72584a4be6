"""Markdown table rows and cells for the generated reference pages."""

from __future__ import annotations

from typing import Iterable, List, Sequence


def cell(text: str) -> str:
    """`text` as one table cell: on one line, with its pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> List[str]:
    """The lines of a Markdown table with `header` and `rows`."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]
