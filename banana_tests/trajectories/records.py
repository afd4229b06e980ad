"""Trajectory sets on disk: the canonical imagefolder layout, read and checked.

A set is a folder with `metadata.jsonl`, one JSON object per image:
`file_name`, `seed_image`, `variant`, `run`, `step`, and optionally `editor`, `prompt`,
`sha256` and any other metadata. It is a Hugging Face imagefolder, so
`datasets.load_dataset("imagefolder", data_dir=...)` reads the same folder; this module reads
`metadata.jsonl` directly because the suite needs only paths and keys at collection time,
and must not decode (or copy) a single image there.

Every line is checked as it is read and nothing is coerced: a line that is not a usable record
becomes a `Problem` that keeps whatever part of its identity (seed image, variant, run, step)
it still shows, so that only the cases it could touch carry it.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import Any

METADATA = "metadata.jsonl"
REQUIRED = ("file_name", "seed_image", "variant", "run", "step")
IDENTITY = ("seed_image", "variant", "run", "step")
MAX_INDEX = 100_000  # the largest run or step number taken at its word; beyond it is a typo or garbage
BOM = b"\xef\xbb\xbf"
_JSON_BLANK = b" \t\r\n"  # the only whitespace JSON knows
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_RECOVER = {  # a key of a line that is not JSON, where its text still shows it whole
    "seed_image": re.compile(r'[{,]\s*"seed_image"\s*:\s*("(?:[^"\\]|\\.)*")'),
    "variant": re.compile(r'[{,]\s*"variant"\s*:\s*("(?:[^"\\]|\\.)*")'),
    "run": re.compile(r'[{,]\s*"run"\s*:\s*([0-9]+)\s*[,}]'),  # a number cut short shows no [,}]
    "step": re.compile(r'[{,]\s*"step"\s*:\s*([0-9]+)\s*[,}]'),
}


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


def read_imagefolder(root: Path) -> TrajectorySet:
    """Read a canonical trajectory folder. A bad line becomes a problem, not a lost set; only a
    file that cannot be read or holds no usable record at all is a DataError."""
    root = Path(root)
    meta = root / METADATA
    if not meta.is_file():
        raise DataError(f"{root}: no {METADATA}; a trajectory set is an imagefolder with one line per image")
    records: list[Record] = []
    problems: list[Problem] = []
    try:
        with meta.open("rb") as lines:  # bytes: one bad byte spoils its line, not the file
            for number, raw in enumerate(lines, start=1):
                raw = raw.removeprefix(BOM) if number == 1 else raw  # utf-8-sig, as editors write it
                if raw.strip(_JSON_BLANK):
                    item = _read_line(root, raw, f"{meta}:{number}")
                    if isinstance(item, Record):
                        records.append(item)
                    else:
                        problems.append(item)
    except OSError as exc:
        raise DataError(f"{meta}: cannot read it: {exc.strerror or exc}") from exc
    if not records:
        shown = "".join(f"\n  {p}" for p in problems[:5])
        more = f"\n  ... and {len(problems) - 5} more" if len(problems) > 5 else ""
        raise DataError(f"{meta}: no usable records" + (shown + more if problems else " (no lines)"))
    return TrajectorySet(root, tuple(records), tuple(problems))


def _read_line(root: Path, raw: bytes, where: str) -> Record | Problem:
    """One line of metadata.jsonl as a record, or the problem that keeps it from being one."""
    row = parse_line(raw, where)
    return row if isinstance(row, Problem) else _record(root, row, where)


def parse_line(raw: bytes, where: str) -> dict[str, Any] | Problem:
    """One JSON line as an object, or the problem that keeps it from being one (with whatever
    part of a record's identity its text still shows)."""
    torn = "" if raw.endswith(b"\n") else " (the last line has no newline: was its write cut short?)"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}"
        return _unparsed(where, bad, raw.decode("utf-8", "replace"))
    try:
        row = json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        return _unparsed(where, "not JSON: nested too deeply", text)
    except ValueError as exc:  # JSONDecodeError, a repeated key, an integer too long to convert
        return _unparsed(where, f"not JSON: {exc}{torn}", text)
    if not isinstance(row, dict):
        return _unparsed(where, f"a line must be a JSON object, got {_cut(text.strip())}", text)
    return row


def _record(root: Path, row: dict[str, Any], where: str) -> Record | Problem:
    known, errors = identity(row)
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        has = _cut(", ".join(sorted(row)) or "none", 120)
        errors.insert(0, f"missing field(s) {', '.join(missing)} (has {has})")
    for name, check in (("file_name", check_file_name), ("sha256", check_sha256), ("for_iqa", check_for_iqa)):
        try:
            if name in row:
                check(row[name])
        except DataError as exc:
            errors.append(str(exc))
    extra = {k: v for k, v in row.items() if k not in (*REQUIRED, "sha256")}
    path = None
    if not errors:
        try:
            path = resolve_inside(root, row["file_name"])
        except DataError as exc:
            errors.append(str(exc))
    if path is None:
        return Problem(where, "; ".join(errors), **known, extra=extra)
    return Record(**known, path=path, source=where, sha256=row.get("sha256"), extra=extra)


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
    a 6,500-line set. (os.path, not pathlib: Path.resolve took seconds at 28,000 lines.)"""
    base = _real(str(root))
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


def _unparsed(where: str, message: str, text: str) -> Problem:
    """A line that is no JSON object, with each key of its identity that its text shows exactly
    once and intact (a torn line usually still shows them all), so it can still find its cases."""
    known: dict[str, Any] = {}
    for name, pattern in _RECOVER.items():
        found = pattern.findall(text)
        if len(found) != 1 or "\ufffd" in found[0]:  # absent, twice, or holding bytes that were not UTF-8
            continue
        try:
            known.update(identity({name: json.loads(found[0])})[0])
        except ValueError:  # a string with a broken escape
            continue
    return Problem(where, message, **known)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different; json would silently keep the last of a repeated one."""
    out = dict(pairs)
    if len(out) < len(pairs):
        keys = [k for k, _ in pairs]
        again = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"key(s) {', '.join(map(repr, again))} appear more than once")
    return out


def _short(value: Any) -> str:
    """The value as JSON writes it (null, true, "five"), cut short so a huge one cannot flood an
    error message; repr() for what JSON cannot hold (a datasets row may)."""
    try:
        return _cut(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):  # not JSON, or an integer with more digits than str() converts
        return _cut(repr(value)) if not isinstance(value, int) else "an integer too long to show"


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
