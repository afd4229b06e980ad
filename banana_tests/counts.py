"""Numbers as a user writes them in an option: plain ASCII digits within stated bounds.

Python's `int()` alone takes a fullwidth `１`, `1_000`, spaces and numbers of any size, and
`float()` also takes `inf`, `nan` and `-3`; every count and every amount (seconds, hours, a
tolerance) the suite reads from a command line goes through `whole_number` or `decimal_number`
instead (docs/options.md), or through their argparse `type`s for the `banana-tests` commands.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

MAX_COUNT = 2**63 - 1  # the largest count any option takes (SQLite's and numpy's int64)
MAX_SECONDS = 7 * 24 * 3600.0  # a week: the longest time limit or interval any option takes
DECIMAL = re.compile(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)
"""Digits 0-9 with an optional point and exponent (`30`, `0.5`, `1e-3`); no sign, `inf` or `nan`."""


def whole_number(
    option: str, given: object, low: int, high: int = MAX_COUNT, what: str = "a whole number"
) -> int:
    """`given` as a whole number in digits 0-9 with `low <= n <= high`; ValueError naming the
    option, what it takes and what was given otherwise."""
    text = str(given)
    if text.isascii() and text.isdigit() and low <= int(text) <= high:
        return int(text)
    raise ValueError(f"{option} {_takes_whole(what, low, high)}, got {text!r}")


def decimal_number(
    option: str, given: object, low: float, high: float, what: str = "a number", *, above_low: bool = False
) -> float:
    """`given` as a finite number in digits 0-9 (a point and an exponent allowed) with `low <= x`
    (`low < x` when `above_low`) and `x <= high`; ValueError naming the option, what it takes and
    what was given otherwise."""
    text = str(given)
    if DECIMAL.fullmatch(text):
        number = float(text)
        if math.isfinite(number) and (low < number if above_low else low <= number) and number <= high:
            return number
    raise ValueError(f"{option} {_takes_decimal(what, low, high, above_low)}, got {text!r}")


def whole_number_type(low: int, high: int = MAX_COUNT, what: str = "a whole number") -> Callable[[str], int]:
    """An argparse `type` for `whole_number`: argparse names the option in its error line."""

    def parse(text: str) -> int:
        try:
            return whole_number("", text, low, high, what)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_takes_whole(what, low, high)}, got {text!r}") from None

    return parse


def decimal_number_type(
    low: float, high: float, what: str = "a number", *, above_low: bool = False
) -> Callable[[str], float]:
    """An argparse `type` for `decimal_number`: argparse names the option in its error line."""

    def parse(text: str) -> float:
        try:
            return decimal_number("", text, low, high, what, above_low=above_low)
        except ValueError:
            message = _takes_decimal(what, low, high, above_low)
            raise argparse.ArgumentTypeError(f"{message}, got {text!r}") from None

    return parse


def _takes_whole(what: str, low: int, high: int) -> str:
    bounds = f"of {low} or more" if high == MAX_COUNT else f"from {low} to {high}"
    return f"takes {what} {bounds}, in digits 0-9"


def _takes_decimal(what: str, low: float, high: float, above_low: bool) -> str:
    bounds = f"above {low:g} and at most {high:g}" if above_low else f"from {low:g} to {high:g}"
    return f"takes {what} {bounds}, in digits 0-9"
