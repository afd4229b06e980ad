"""The page's building blocks: escaped table cells (numbers right-aligned, short words unbroken),
sortable tables written a row at a time, embedded figures and the numbers' precision."""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from html import escape
from pathlib import Path

from banana_tests.cases import CaseKey

RIGHT = frozenset(
    {"step", "Δ", "score (reference)", "score (step)", "reference step", "runs"}
    | {"cases", "passed", "failed", "skipped", "error", "worst Δ", "run Δ", "paper Δ"}
    | {"unresolved", "not valid trial", "run Δ range", "run Δ sd", "PSNR (dB)", "SSIM"}
    | {"clean images", "clean range", "clean spread", "detected", "PSNR range (dB)", "SSIM range"}
    | {"cells matched", "agree in sign", "run failures", "paper failures", "cells that differ"}
)
SHORT = frozenset({"outcome", "run"})
"""Text columns of a few words that read badly broken ("mea|n"); numbers never break either."""


def numeric(header: str) -> bool:
    return header in RIGHT or header.startswith("AUC step")


Html = str
"""Markup already escaped, as opposed to text."""
Value = str | tuple[str, Html]
"""A table cell: text, or (text to sort by, markup to show)."""


def cell(header: str, value: Value) -> Html:
    """A td; a (text, markup) value is a link or other markup whose text sorts."""
    markup = value[1] if isinstance(value, tuple) else escape(value)
    if numeric(header):
        return f'<td class="num">{markup}</td>'
    return f'<td class="short">{markup}</td>' if header in SHORT else f"<td>{markup}</td>"


def table(headers: Sequence[str], rows: Iterable[Sequence[Value]], kind: str = "sortable") -> Html:
    """A table (sortable unless `kind` says otherwise)."""
    return "".join(table_chunks(headers, ((row, "", "") for row in rows), kind))


def table_chunks(
    headers: Sequence[str], rows: Iterable[tuple[Sequence[Value], str, str]], kind: str = "sortable"
) -> Iterator[Html]:
    """A table piece by piece, a body row a piece; each row comes with its CSS class (its
    outcome) and its anchor to link to, either may be empty. No cell breaks a word or number
    (`hubble_deep_f|ield`, `82.0|5`): a table wider than the page scrolls in its own box."""
    head = "".join(
        f'<th class="num">{escape(h)}</th>' if numeric(h) else f"<th>{escape(h)}</th>" for h in headers
    )
    yield f'<div class="scroll"><table class="{kind}"><thead><tr>{head}</tr></thead><tbody>'
    for row, css, ident in rows:
        cells = "".join(cell(h, v) for h, v in zip(headers, row, strict=True))
        cls = f' class="{css}"' if css else ""
        anchor = f' id="{escape(ident)}"' if ident else ""
        yield f"<tr{anchor}{cls}>{cells}</tr>"
    yield "</tbody></table></div>"


def anchor(key: CaseKey) -> str:
    """The id of a case's row under "Every case", for links to it."""
    return "case-" + re.sub(r"\s", "_", key.test_id)


def number(value: float | None, places: int = 3, sign: bool = False) -> str:
    if value is None:
        return ""
    if math.isnan(value):
        return "nan"
    return f"{value:+.{places}f}" if sign else f"{value:.{places}f}"


def figure(png: Path, name: str | None = None) -> Html:
    """An embedded PNG, captioned with its file's name, or `name` (a seed image's real name)."""
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    label = png.name if name is None else f"{name}: {png.name}"
    return (
        f'<figure><img alt="{escape(name or png.stem)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{escape(label)} (SVG beside it)</figcaption></figure>"
    )
