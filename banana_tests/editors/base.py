"""The editor protocol: one image and a prompt in, the next step of a trajectory out.

Every way of making a trajectory (an offline emulator, JPEG re-encoding, a hosted model, an
open pipeline) is an `Editor`, looked up by name. Built-in editors are listed in `BUILTIN`;
other packages add theirs through the entry point group `banana_tests.editors`, whose value
is a factory `(EditorConfig) -> Editor`. A built-in name always wins over an entry point.

`--option KEY=VALUE` is parsed to the type the editor declares for the key: a command line only
carries text, so each value is parsed against the types the receiving parameter accepts (an
annotation such as `float | None`, or a default's type): `False` becomes a bool, `2` an int, ` `
stays a one-space string. A value that fits none of them is an error naming the option and the
types it takes, before any request is made.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import types
import typing
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from PIL import Image

from metrics_under_test import extras

ENTRY_POINT_GROUP = "banana_tests.editors"
BUILTIN = {
    "emulate": "banana_tests.editors.offline_editors:make_emulate",
    "jpeg": "banana_tests.editors.offline_editors:make_jpeg",
    "gemini": "banana_tests.editors.gemini:make",
    "diffusers": "banana_tests.editors.diffusers_editor:make",
    "flux2-tiny-vae": "banana_tests.editors.offline_editors:make_tiny_vae",
}
PARAMETERS = ("seed", "temperature", "resolution")
"""Request parameters an editor may accept; the others must be left unset for it."""
OPTIONAL = (*PARAMETERS, "endpoint")
"""What `accepts` may name: the request parameters, and `endpoint` for an editor calling a service."""


class EditorError(Exception):
    """An editor cannot be built or cannot make this edit; the message is safe to print."""


class DeviceUnavailable(EditorError):
    """The `--device` asked for is not on this machine (`generate` exits 4, the environment's fault)."""


class NoImage(EditorError):
    """The editor answered this step without an image after its own retries: only this run
    stops; the other runs go on, and a rerun asks again."""

    def __init__(self, message: str, requests: int = 1) -> None:
        super().__init__(message)
        self.requests = requests


@dataclass(frozen=True)
class EditRequest:
    """One edit: `image` is step `step - 1` of run `run` of the trajectory named `key`."""

    image: Image.Image
    prompt: str
    step: int
    run: int
    key: str
    seed: int | None = None
    temperature: float | None = None
    resolution: str | None = None
    transform: str | None = None
    """The geometric op the prompt asks for ("mirror", "rotate"); offline editors apply it."""


@dataclass(frozen=True)
class EditResult:
    """The edited image, the model's text (reasoning summary or reply) if any, and its cost."""

    image: Image.Image
    text: str | None = None
    requests: int = 1
    seed: int | None = None
    """The seed the editor drew itself for a request without one: recorded, so the step can be redone."""


@dataclass(frozen=True)
class EditorConfig:
    """What the command line passes to an editor factory. Secrets never go in here."""

    model: str | None = None
    device: str = "auto"
    dtype: str = "bfloat16"
    max_requests: int | None = None
    price_per_image: float | None = None
    endpoint: str | None = None
    """The service's base URL, for editors that call one (a proxy, a regional or a test server)."""
    options: Mapping[str, str] = field(default_factory=dict)
    """Editor-specific `KEY=VALUE` settings (`--option`); an editor refuses keys it does not know."""


class Editor(Protocol):
    name: str
    model: str
    accepts: frozenset[str]
    """The subset of `OPTIONAL` this editor uses. An editor whose runs of one image are
    byte-identical may also set `deterministic = True`; `generate` then warns when runs > 1."""

    def settings(self) -> dict[str, Any]:
        """Everything that decides its outputs (never a secret): a rerun must match it."""
        ...

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        """A line to print before `edits` edits start, or None when they are free."""
        ...

    def edit(self, request: EditRequest) -> EditResult: ...


Factory = Callable[[EditorConfig], Editor]


def _entry_points() -> Iterable[importlib.metadata.EntryPoint]:
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def available() -> list[str]:
    """Names of all editors: the built-ins and those of installed packages."""
    return sorted({*BUILTIN, *(ep.name for ep in _entry_points())})


def create(name: str, config: EditorConfig) -> Editor:
    """Build the editor called `name`; an unknown name lists the known ones, a built-in one
    whose extra is missing names the extra (before its module, which imports torch, is)."""
    if name in BUILTIN:
        absent = extras.missing(f"editor {name!r}", extras.EDITORS.get(name))
        if absent is not None:
            raise EditorError(absent)
        module, _, attr = BUILTIN[name].partition(":")
        factory: Factory = getattr(importlib.import_module(module), attr)
    else:
        found = [ep for ep in _entry_points() if ep.name == name]
        if not found:
            raise EditorError(f"unknown editor {name!r}; known: {', '.join(available())}")
        factory = found[0].load()
    return factory(config)


def take_options(config: EditorConfig, editor: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """`config.options` converted to the types of `defaults`; unknown keys are refused."""
    unknown = sorted(set(config.options) - set(defaults))
    if unknown:
        known = ", ".join(sorted(defaults)) or "none"
        raise EditorError(f"editor {editor!r} has no option(s) {', '.join(unknown)} (known: {known})")
    out = dict(defaults)
    for key, text in config.options.items():
        kinds = (str,) if defaults[key] is None else (type(defaults[key]),)
        try:
            out[key] = parse_option(key, text, kinds)
        except OptionError as exc:
            raise EditorError(f"editor {editor!r}: {exc}") from None
    return out


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every non-trivial secret replaced, for messages that may quote a request."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "<redacted>")
    return text


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


def parse_option(key: str, text: str, kinds: Collection[type]) -> Any:
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
