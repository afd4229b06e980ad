"""Typed `--option KEY=VALUE` parsing: the text becomes the type the editor declares for the key.

A command line only carries text, so each value is parsed against the types the receiving
parameter accepts (an annotation such as `float | None`, or a default's type): `False` becomes a
bool, `2` an int, ` ` stays a one-space string. A value that fits none of them is an error naming
the option and the types it takes, before any request is made.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Collection
from typing import Any

TRUE, FALSE, NONE = (
    frozenset({"true", "yes", "1"}),
    frozenset({"false", "no", "0"}),
    frozenset({"none", "null"}),
)
SCALARS: tuple[type, ...] = (bool, int, float, str)
"""Tried in this order, so `1` is an int where both int and str fit, and `True` a bool."""


class OptionError(ValueError):
    """An option value that fits none of the types its parameter takes."""


def scalar_types(annotation: Any) -> tuple[type, ...]:
    """The command-line types an annotation admits, plus NoneType when it is optional.

    `float | None` gives (float, NoneType); `str | list[str]` gives (str,); an annotation that
    names no scalar (a tensor, a callback) gives () and so cannot be set from the command line.
    """
    if annotation is None or annotation is type(None):
        return (type(None),)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        found: list[type] = []
        for arg in typing.get_args(annotation):
            found += [kind for kind in scalar_types(arg) if kind not in found]
        return tuple(found)
    if annotation in SCALARS:
        return (annotation,)
    return ()


def parse(key: str, text: str, kinds: Collection[type]) -> Any:
    """`text` as the first of `kinds` (in `SCALARS` order, None last) that reads it."""
    word = text.strip().lower()
    for kind in SCALARS:
        if kind not in kinds:
            continue
        if kind is bool:
            if word in TRUE | FALSE:
                return word in TRUE
        elif kind is str:
            return text
        else:
            try:
                return kind(text)
            except ValueError:
                pass
    if type(None) in kinds and word in NONE:
        return None
    expected = " or ".join(kind.__name__ if kind is not type(None) else "None" for kind in kinds)
    if bool in kinds:
        expected += " (a bool is true/false, yes/no or 1/0)"
    raise OptionError(f"option {key}={text!r} is not a {expected or 'value the command line can give'}")
