"""CSV files, written one way for the whole package: a cell a spreadsheet would run as a formula
(one that begins with `=`, `+`, `-`, `@`, a tab or a carriage return: a seed image named
`=HYPERLINK(...)`, a message `+1+1`) is written as text, behind a single quote, as OWASP advises
against CSV injection. A number keeps its sign and digits (`-3.5`, `-inf`, `1e-05`): a spreadsheet
reads it as the number it is, and nothing else can start a formula."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import TextIO

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE)


def cell(value: object) -> object:
    """`value` as written: a string that would start a formula and is no number gets a `'` first."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


class Writer:
    """csv.writer (`\n` line ends) whose every cell goes through `cell`. A row with a carriage
    return in a cell is written with every cell quoted: csv quotes only the characters of its line
    end, and a bare carriage return ends a row for most readers (Python's csv among them)."""

    def __init__(self, out: TextIO) -> None:
        self._writer = csv.writer(out, lineterminator="\n")
        self._quoted = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)

    def writerow(self, cells: Iterable[object]) -> None:
        row = [cell(c) for c in cells]
        returns = any(isinstance(c, str) and "\r" in c for c in row)
        (self._quoted if returns else self._writer).writerow(row)

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        for row in rows:
            self.writerow(row)
