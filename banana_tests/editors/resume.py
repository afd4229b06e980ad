"""Where an interrupted `generate` continues: each run from its last recorded step, after
trimming what a kill left behind (a torn last line, temporary files) and checking the images
the records name."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from banana_tests.editors.generate_settings import MAX_METADATA_BYTES
from banana_tests.safe_files import NotReadable, read_regular, write_atomic
from banana_tests.trajectories.records import METADATA, DataError


@dataclass(frozen=True)
class Resume:
    """Where each run continues, (seed, run) -> (last step, its file), and which run made each
    recorded (seed, step, sha256), to spot runs that are copies of each other."""

    last: dict[tuple[str, int], tuple[int, str]]
    made_by: dict[tuple[str, int, str], int]


Step = tuple[int, str, str | None]  # a recorded step: number, file, sha256


def read_resume(out: Path, log: Callable[[str], None]) -> Resume:
    """Read `metadata.jsonl`, trimming a torn last line, and check each run's images.

    Images missing at the end of a run (deleted, or lost with a disk) are made again: their
    lines are dropped (one atomic rewrite) and the run continues from its last image left. A
    missing image with later steps after it, or a changed last image, stops with what to do.
    """
    meta = out / METADATA
    if not meta.exists():
        return Resume({}, {})
    try:
        data = read_regular(meta, MAX_METADATA_BYTES)
    except NotReadable as exc:
        raise DataError(f"{meta}: {exc}; choose a new --out folder") from exc
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
        os.truncate(meta, len(data))  # a write cut short by a kill: its image is made again
    lines = data.splitlines(keepends=True)
    runs: dict[tuple[str, int], list[Step]] = {}
    keys: list[tuple[str, int, int]] = []
    for number, line in enumerate(lines, start=1):
        where = f"{meta}:{number}"
        try:
            row = json.loads(line)
            key, step, file_name = (
                (str(row["seed_image"]), int(row["run"])),
                int(row["step"]),
                row["file_name"],
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{where}: not a generate record ({exc}); fix or remove this line") from exc
        steps = runs.setdefault(key, [])
        if step != len(steps) + 1:
            raise DataError(
                f"{where}: {key[0]} run {key[1]} jumps to step {step}, expected step {len(steps) + 1}"
            )
        steps.append((step, str(file_name), row.get("sha256")))
        keys.append((*key, step))
    dropped: set[tuple[str, int, int]] = set()
    for (name, run), steps in runs.items():
        kept = _standing(meta, name, run, steps)
        dropped |= {(name, run, step) for step, _, _ in steps[kept:]}
        del steps[kept:]
        if steps:
            _check_unchanged(meta, name, run, steps[-1])
    if dropped:
        write_atomic(
            meta, b"".join(line for line, key in zip(lines, keys, strict=True) if key not in dropped)
        )
        log(f"{meta}: {len(dropped)} recorded image(s) missing at the end of their runs; making them again")
    return Resume(
        {key: steps[-1][:2] for key, steps in runs.items() if steps},
        {(name, step, sha): run for (name, run), steps in runs.items() for step, _, sha in steps if sha},
    )


def _standing(meta: Path, name: str, run: int, steps: list[Step]) -> int:
    """How many steps of a run stand: all but the missing ones at its end."""
    present = [(meta.parent / file_name).is_file() for _, file_name, _ in steps]
    kept = len(present)
    while kept and not present[kept - 1]:
        kept -= 1
    if not all(present[:kept]):
        gap = present.index(False)
        step, file_name, _ = steps[gap]
        later = steps[gap + 1][1] + (f" to {steps[kept - 1][1]}" if kept - gap > 2 else "")
        raise DataError(
            f"{meta}: {file_name} ({name} run {run} step {step}) is missing, but later steps of this run"
            f" were made from it; restore it, or delete the run's later images ({later}) and rerun:"
            f" steps {step}-{len(steps)} are then made again"
        )
    return kept


def _check_unchanged(meta: Path, name: str, run: int, last: Step) -> None:
    """A run's last image is the next input: it must be the one recorded."""
    step, file_name, sha = last
    if sha is None:
        return
    with (meta.parent / file_name).open("rb") as image:
        changed = hashlib.file_digest(image, "sha256").hexdigest() != sha
    if changed:
        raise DataError(
            f"{meta}: {file_name} ({name} run {run} step {step}) changed since it was recorded"
            " (sha256 differs); restore it, or delete it and rerun to make it again"
        )


def remove_temp_files(out: Path) -> None:
    """Temporary files a killed run left behind (never a finished image)."""
    for path in out.rglob(".*.tmp"):
        path.unlink()
