"""A block of a doc page generated from the code or data, between two marker lines: what
tests/layout_doc.py and tests/costs_doc.py share."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GeneratedBlock:
    """`make()` is the block's body; it sits in `doc` between `begin` and `end` (marker lines)."""

    doc: Path
    begin: str
    end: str
    make: Callable[[], str]

    def block(self) -> str:
        return self.begin + self.make() + self.end

    def refreshed(self, text: str) -> str:
        """`text` with its generated block replaced by the current one."""
        start, stop = text.index(self.begin), text.index(self.end) + len(self.end)
        return text[:start] + self.block() + text[stop:]

    def main(self) -> None:
        """`--write`: refresh the page; otherwise print the block."""
        if "--write" in sys.argv[1:]:
            self.doc.write_text(self.refreshed(self.doc.read_text(encoding="utf-8")), encoding="utf-8")
        else:
            sys.stdout.write(self.block())
