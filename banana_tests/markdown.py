"""Markdown tables, written one way for the whole package: every cell escaped, so a `|` in a metric's
or seed image's name, or a line break in a message, stays inside its cell instead of shifting the row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum


class Align(Enum):
    """A column's alignment row cell."""

    LEFT = "---"
    RIGHT = "---:"


def cell(text: object) -> str:
    """One cell's text: `|` as `\\|`, a line break as `<br>` (GitHub's way to keep it in the cell)."""
    return "<br>".join(str(text).replace("|", "\\|").splitlines())


def row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def table(
    header: Sequence[object], rows: Iterable[Sequence[object]], align: Sequence[Align] | None = None
) -> list[str]:
    """The header row, the alignment row (left unless `align` says otherwise) and a line per row."""
    aligns = [Align.LEFT] * len(header) if align is None else list(align)
    if len(aligns) != len(header):
        raise ValueError(f"{len(aligns)} alignments for {len(header)} columns")
    return [row(header), "|" + "".join(a.value + "|" for a in aligns), *(row(r) for r in rows)]
