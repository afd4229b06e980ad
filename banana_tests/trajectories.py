"""Trajectory sets on disk: the canonical imagefolder layout, read and checked.

A set is a folder with `metadata.jsonl`, one JSON object per image:
`file_name`, `seed_image`, `variant`, `run`, `step`, and optionally `editor`, `prompt`,
`sha256` and any other metadata. It is a Hugging Face imagefolder, so
`datasets.load_dataset("imagefolder", data_dir=...)` reads the same folder; this module reads
`metadata.jsonl` directly because the suite needs only paths and keys at collection time,
and must not decode (or copy) a single image there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METADATA = "metadata.jsonl"
EMBEDDED = Path(__file__).resolve().parent.parent / "fixtures" / "emulated"  # the default data set
REQUIRED = ("file_name", "seed_image", "variant", "run", "step")


class DataError(Exception):
    """A trajectory set, or one record of it, cannot be used as it is."""


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


@dataclass(frozen=True)
class Problem:
    """A record that could not be used; `seed_image` names the cases it touches, when known."""

    where: str
    message: str
    seed_image: str | None = None
    variant: str | None = None

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


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
    """Read a canonical trajectory folder. A bad line becomes a problem, not a lost set."""
    root = Path(root)
    meta = root / METADATA
    if not meta.is_file():
        raise DataError(f"{root}: no {METADATA}; a trajectory set is an imagefolder with one line per image")
    records: list[Record] = []
    problems: list[Problem] = []
    with meta.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{meta}:{number}"
            row: Any = None
            try:
                row = json.loads(line)
                records.append(_record(root, row, where))
            except (DataError, json.JSONDecodeError) as exc:
                problems.append(_problem(where, exc, row))
    if not records:
        raise DataError(f"{meta}: no usable records" + "".join(f"\n  {p}" for p in problems[:5]))
    return TrajectorySet(root, tuple(records), tuple(problems))


def _problem(where: str, exc: Exception, row: Any) -> Problem:
    """A bad line, with the seed image and variant it names when it parsed, so the cases it
    touches can show it."""
    keys = {k: str(row[k]) for k in ("seed_image", "variant") if k in row} if isinstance(row, dict) else {}
    return Problem(where, str(exc), keys.get("seed_image"), keys.get("variant"))


def _record(root: Path, row: Mapping[str, Any], where: str) -> Record:
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        raise DataError(f"missing field(s) {', '.join(missing)} (has {', '.join(sorted(row))})")
    try:
        run, step = int(row["run"]), int(row["step"])
    except (TypeError, ValueError) as exc:
        raise DataError(
            f"run and step must be integers, got run={row['run']!r} step={row['step']!r}"
        ) from exc
    path = resolve_inside(root, str(row["file_name"]))
    extra = {k: v for k, v in row.items() if k not in (*REQUIRED, "sha256")}
    return Record(
        str(row["seed_image"]), str(row["variant"]), run, step, path, where, row.get("sha256"), extra
    )


def resolve_inside(root: Path, file_name: str) -> Path:
    """The image path, refusing names that escape the set's root (`../`, absolute paths)."""
    base = root.resolve()
    path = (base / file_name).resolve()
    if not path.is_relative_to(base):
        raise DataError(f"file_name {file_name!r} escapes the data set root {base}")
    return path


def by_key(records: Iterable[Record]) -> Iterator[tuple[tuple[str, int, int], list[Record]]]:
    """Group records by (seed_image, run, step); more than one per key is a duplicate."""
    groups: dict[tuple[str, int, int], list[Record]] = {}
    for r in records:
        groups.setdefault((r.seed_image, r.run, r.step), []).append(r)
    yield from groups.items()
