"""Tables written one way for the whole package, as CSV and as Markdown.

CSV: a cell a spreadsheet would run as a formula (one that begins with `=`, `+`, `-`, `@`, a tab
or a carriage return: a seed image named `=HYPERLINK(...)`, a message `+1+1`) is written as text,
behind a single quote, as OWASP advises against CSV injection. A number keeps its sign and digits
(`-3.5`, `-inf`, `1e-05`): a spreadsheet reads it as the number it is, and nothing else can start
a formula.

Markdown: every cell escaped, so a `|` in a metric's or seed image's name, or a line break in a
message, stays inside its cell instead of shifting the row.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import TextIO

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE)


def csv_cell(value: object) -> object:
    """`value` as written: a string that would start a formula and is no number gets a `'` first."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


class Writer:
    """csv.writer (`\n` line ends) whose every cell goes through `csv_cell`. A row with a carriage
    return in a cell is written with every cell quoted: csv quotes only the characters of its line
    end, and a bare carriage return ends a row for most readers (Python's csv among them)."""

    def __init__(self, out: TextIO) -> None:
        self._writer = csv.writer(out, lineterminator="\n")
        self._quoted = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)

    def writerow(self, cells: Iterable[object]) -> None:
        row = [csv_cell(c) for c in cells]
        returns = any(isinstance(c, str) and "\r" in c for c in row)
        (self._quoted if returns else self._writer).writerow(row)

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        for row in rows:
            self.writerow(row)


class Align(Enum):
    """A column's alignment row cell."""

    LEFT = "---"
    RIGHT = "---:"


def markdown_cell(text: object) -> str:
    """One cell's text: `|` as `\\|`, a line break as `<br>` (GitHub's way to keep it in the cell)."""
    return "<br>".join(str(text).replace("|", "\\|").splitlines())


def markdown_row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(markdown_cell(c) for c in cells) + " |"


def table(
    header: Sequence[object], rows: Iterable[Sequence[object]], align: Sequence[Align] | None = None
) -> list[str]:
    """The header row, the alignment row (left unless `align` says otherwise) and a line per row."""
    aligns = [Align.LEFT] * len(header) if align is None else list(align)
    if len(aligns) != len(header):
        raise ValueError(f"{len(aligns)} alignments for {len(header)} columns")
    return [
        markdown_row(header),
        "|" + "".join(a.value + "|" for a in aligns),
        *(markdown_row(r) for r in rows),
    ]
