"""Trajectory records: what one image of a trajectory set is, what a record that cannot be used
keeps of its identity (`Problem`), and which values each field may hold. Every reader (the
canonical imagefolder, rows of other layouts) checks its fields here and coerces nothing, so a
value means the same whatever layout it came in.

The per-artifact trials' names are here too, light (no numpy), so the option parser and the
reports read them without importing the emulator: a trial set holds each embedded seed image
degraded by one artifact family alone, and its seed image ids are `<seed image>.<artifact>`
(`astronaut.static`), so one run can hold every family and the matrix, baselines and JUnit
records need no new field.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from numbers import Integral
from pathlib import Path
from typing import Any

METADATA = "metadata.jsonl"
REQUIRED = ("file_name", "seed_image", "variant", "run", "step")
IDENTITY = ("seed_image", "variant", "run", "step")
MAX_INDEX = 100_000  # the largest run or step number taken at its word; beyond it is a typo or garbage
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


class DataError(Exception):
    """A trajectory set, or one record of it, cannot be used as it is."""


class DataWarning(UserWarning):
    """A bad record that no case can carry: it is reported once instead of as an error."""


@dataclass(frozen=True)
class Record:
    """One image of a trajectory: `seed_image`'s `run`, after `step` edits."""

    seed_image: str
    variant: str
    run: int
    step: int
    path: Path
    source: str  # where the record came from, for error messages: "metadata.jsonl:12"
    sha256: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def named(self) -> str:
        """How a message names it: `source (path)`, or the path alone for an image file scored
        by its path (`Scorer.scores`), whose source is that path."""
        if self.is_file:
            return self.source
        return f"{self.source} ({self.path})"

    @property
    def is_file(self) -> bool:
        """An image file outside any trajectory set: its source is its own path."""
        return os.path.realpath(self.source) == str(self.path)


@dataclass(frozen=True)
class Problem:
    """A record that could not be used, with each part of its identity that it still shows
    (None where it does not); `extra` is its other fields, None when the line did not parse."""

    where: str
    message: str
    seed_image: str | None = None
    variant: str | None = None
    run: int | None = None
    step: int | None = None
    extra: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"

    @property
    def key(self) -> tuple[str, int, int] | None:
        """(seed_image, run, step) when the whole identity, variant included, is known."""
        if self.seed_image is None or self.variant is None or self.run is None or self.step is None:
            return None
        return self.seed_image, self.run, self.step


@dataclass(frozen=True)
class TrajectorySet:
    """All records of a set, plus the lines that could not become records."""

    root: Path
    records: tuple[Record, ...]
    problems: tuple[Problem, ...] = ()

    def select(self, variant: str) -> list[Record]:
        return [r for r in self.records if r.variant == variant]

    @property
    def variants(self) -> list[str]:
        return sorted({r.variant for r in self.records})


def identity(row: Mapping[str, Any], columnar: bool = False) -> tuple[dict[str, Any], list[str]]:
    """The seed_image, variant, run and step that `row` names, each kept only when it is valid,
    and what is wrong with the others. `columnar`: the row comes from typed columns (see
    `check_index`), not from a JSON line that says exactly what it means."""
    known: dict[str, Any] = {}
    errors: list[str] = []
    for name in IDENTITY:
        try:
            if name in ("run", "step") and name in row:
                known[name] = check_index(name, row[name], columnar)
            elif name in row:
                known[name] = check_name(name, row[name])
        except DataError as exc:
            errors.append(str(exc))
    return known, errors


def check_name(name: str, value: Any) -> str:
    """seed_image and variant: a non-empty string; never null or a number turned into one."""
    if not isinstance(value, str) or not value:
        raise DataError(f"{name} must be a non-empty string, got {_short(value)}")
    return value


def check_index(name: str, value: Any, columnar: bool = False) -> int:
    """run and step: a whole number from 0 to MAX_INDEX; never a bool, a fraction or a word. From
    typed columns (CSV, parquet, path patterns) a string of digits and a whole float are taken
    too: there an integer arrives as text, or as a float when its column also holds a gap."""
    integral = isinstance(value, Integral) and not isinstance(value, bool)
    if columnar and isinstance(value, float) and value.is_integer():
        integral, value = True, int(value)
    text = columnar and isinstance(value, str) and value.isascii() and value.isdigit()
    if not (integral or text):
        kind = "an integer" if columnar else "a JSON integer"
        raise DataError(f"{name} must be {kind}, got {_short(value)}")
    if (text and len(value.lstrip("0")) > len(str(MAX_INDEX))) or not 0 <= int(value) <= MAX_INDEX:
        raise DataError(f"{name} must be between 0 and {MAX_INDEX:,}, got {_short(value)}")
    return int(value)


def check_file_name(value: Any) -> str:
    """A non-empty string without NUL (no file system takes one); where it points is checked by
    `resolve_inside`."""
    if not isinstance(value, str) or not value:
        raise DataError(f"file_name must be a non-empty string, got {_short(value)}")
    if "\0" in value:
        raise DataError(f"file_name {_short(value)} contains a NUL character")
    return value


def check_sha256(value: Any) -> str | None:
    """Absent or null, or 64 hex digits: anything else could never match and would blame the image."""
    if value is not None and not (isinstance(value, str) and _SHA256.fullmatch(value)):
        raise DataError(f"sha256 must be 64 hexadecimal digits, got {_short(value)}")
    return value


def check_for_iqa(value: Any, columnar: bool = False) -> bool | None:
    """Absent or null, or a boolean: whether the record is an IQA test case (see selection.py).
    From typed columns (CSV) the text true or false, in any case, and an empty cell too."""
    if value is None or isinstance(value, bool):
        return value
    if columnar and isinstance(value, str) and value.strip().lower() in ("true", "false", ""):
        return {"true": True, "false": False}.get(value.strip().lower())
    raise DataError(f"for_iqa must be true or false, got {_short(value)}")


def resolve_inside(root: Path, file_name: str) -> Path:
    """The image path, refusing names that escape the set's root (`../`, absolute paths, symlinks
    out of it) and names no file system can hold. Each folder is resolved once and each file
    costs one lstat: a full realpath per file (an lstat per path component) took 40 % of reading
    a 6,500-line set. (os.path, not pathlib: Path.resolve took seconds at 28,000 lines.) The
    cache is keyed by absolute paths: a relative root means another folder after a chdir."""
    base = _real(os.path.abspath(root))
    joined = os.path.join(base, file_name)
    folder, name = os.path.split(joined)
    try:
        if "\0" in joined:
            raise ValueError("embedded null byte")
        if name in ("", ".", "..") or os.path.islink(joined):
            path = os.path.realpath(joined)
        else:
            path = os.path.join(_real(folder), name)
    except (OSError, ValueError) as exc:  # a NUL byte
        raise DataError(f"file_name {_short(file_name)} cannot be resolved: {exc}") from exc
    if not path.startswith(base.rstrip(os.sep) + os.sep):
        raise DataError(f"file_name {file_name!r} escapes the data set root {base}")
    return Path(path)


@functools.lru_cache(maxsize=4096)
def _real(folder: str) -> str:
    return os.path.realpath(folder)


def by_key(records: Iterable[Record]) -> Iterator[tuple[tuple[str, int, int], list[Record]]]:
    """Group records by (seed_image, run, step); more than one per key is a duplicate."""
    groups: dict[tuple[str, int, int], list[Record]] = {}
    for r in records:
        groups.setdefault((r.seed_image, r.run, r.step), []).append(r)
    yield from groups.items()


def _short(value: Any) -> str:
    """The value as JSON writes it (null, true, "five"), cut short so a huge one cannot flood an
    error message; repr() for what JSON cannot hold (a datasets row may)."""
    try:
        return clipped(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):  # not JSON, or an integer with more digits than str() converts
        return clipped(repr(value)) if not isinstance(value, int) else "an integer too long to show"


def clipped(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Artifact(StrEnum):
    """What a trial set's images went through: the composite recipe, or one artifact family alone,
    in the composite's order. Each family in banana_tests.editors.artifacts bears its
    value as its name (reframing is no trial: it is in every set, step 1 is the reference)."""

    REPLICATE = "replicate"
    SOFTEN = "soften"
    RESYNTHESIS = "resynthesis"
    TINT = "tint"
    STATIC = "static"
    SCATTER = "scatter"
    VAE_ROUNDTRIP = "vae_roundtrip"


COMPOSITE = Artifact.REPLICATE
"""The composite recipe: every family, as in the embedded set."""
TRIALS = tuple(artifact for artifact in Artifact if artifact is not COMPOSITE)
"""The artifact families with a trial set of their own, in the composite's order."""
ARTIFACTS = tuple(Artifact)
ALL = "all"
SEPARATOR = "."


def artifact_named(name: str) -> Artifact:
    """The artifact called `name`; ValueError listing the known ones for any other name."""
    if name not in ARTIFACTS:
        raise ValueError(f"unknown artifact {name!r}; known: {', '.join(ARTIFACTS)}")
    return Artifact(name)


def trial_id(seed_image: str, artifact: Artifact) -> str:
    return f"{seed_image}{SEPARATOR}{artifact}"


def split_trial(seed_image: str) -> tuple[str, Artifact] | None:
    """(seed image, artifact) of a trial's seed image id; None for any other id."""
    seed, sep, artifact = seed_image.rpartition(SEPARATOR)
    return (seed, Artifact(artifact)) if sep and seed and artifact in ARTIFACTS else None


def parse_artifacts(text: str) -> tuple[Artifact, ...]:
    """`--artifact`'s value: a comma list of artifact names, or `all` (the composite and every
    family). ValueError naming the option for anything else."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if names == [ALL]:
        return ARTIFACTS
    unknown = [n for n in names if n not in ARTIFACTS]
    if not names or unknown:
        raise ValueError(
            f"--artifact={text}: {', '.join(map(repr, unknown)) or 'no name'} is not an artifact; "
            f"known: {', '.join(ARTIFACTS)}, or {ALL}"
        )
    return tuple(dict.fromkeys(map(Artifact, names)))
