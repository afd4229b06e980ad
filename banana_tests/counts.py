"""Whole numbers as a user writes them in an option: plain ASCII digits within stated bounds.

Python's `int()` alone takes a fullwidth `１`, `1_000`, spaces and numbers of any size; every
count the suite reads from a command line goes through `whole_number` instead (docs/options.md).
"""

from __future__ import annotations

MAX_COUNT = 2**63 - 1  # the largest count any option takes (SQLite's and numpy's int64)


def whole_number(
    option: str, given: object, low: int, high: int = MAX_COUNT, what: str = "a whole number"
) -> int:
    """`given` as a whole number in digits 0-9 with `low <= n <= high`; ValueError naming the
    option, what it takes and what was given otherwise."""
    text = str(given)
    if text.isascii() and text.isdigit() and low <= int(text) <= high:
        return int(text)
    bounds = f"of {low} or more" if high == MAX_COUNT else f"from {low} to {high}"
    raise ValueError(f"{option} takes {what} {bounds}, in digits 0-9, got {text!r}")
