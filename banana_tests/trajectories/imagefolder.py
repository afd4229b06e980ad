"""The canonical layout read: a folder with `metadata.jsonl`, one JSON object per image,
`file_name`, `seed_image`, `variant`, `run`, `step`, and optionally `editor`, `prompt`, `sha256`
and any other metadata. It is a Hugging Face imagefolder, so `datasets.load_dataset("imagefolder",
data_dir=...)` reads the same folder; this module reads `metadata.jsonl` directly because the
suite needs only paths and keys at collection time, and must not decode (or copy) a single image
there.

Every line is checked as it is read and nothing is coerced: a line that is not a usable record
becomes a `Problem` that keeps whatever part of its identity (seed image, variant, run, step)
it still shows, so that only the cases it could touch carry it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from banana_tests.trajectories.records import (
    METADATA,
    REQUIRED,
    DataError,
    Problem,
    Record,
    TrajectorySet,
    check_file_name,
    check_for_iqa,
    check_sha256,
    clipped,
    identity,
    resolve_inside,
)

BOM = b"\xef\xbb\xbf"
_JSON_BLANK = b" \t\r\n"  # the only whitespace JSON knows
_RECOVER = {  # a key of a line that is not JSON, where its text still shows it whole
    "seed_image": re.compile(r'[{,]\s*"seed_image"\s*:\s*("(?:[^"\\]|\\.)*")'),
    "variant": re.compile(r'[{,]\s*"variant"\s*:\s*("(?:[^"\\]|\\.)*")'),
    "run": re.compile(r'[{,]\s*"run"\s*:\s*([0-9]+)\s*[,}]'),  # a number cut short shows no [,}]
    "step": re.compile(r'[{,]\s*"step"\s*:\s*([0-9]+)\s*[,}]'),
}


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
        return _unparsed(where, f"a line must be a JSON object, got {clipped(text.strip())}", text)
    return row


def _record(root: Path, row: dict[str, Any], where: str) -> Record | Problem:
    known, errors = identity(row)
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        has = clipped(", ".join(sorted(row)) or "none", 120)
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
