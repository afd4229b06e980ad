"""Make a trajectory set with an editor: resumable, loss-free, refusing mixed settings.

Layout (a canonical imagefolder, see `trajectories`): `images/<seed>/run<r>/step<NNN>.png`,
one `metadata.jsonl` line per image, and `generate.json` with the settings that decide the
pixels, written with the set's first step and then the one set of settings every later step must
be made with. Each step feeds the previous output back to the editor as a fresh request.

Crash safety: an image is written to a temporary sibling, fsynced and renamed into place; only
then is its metadata line appended with one `write` and an fsync. So a line exists only for a
complete image, and a kill at any moment leaves at most a stray temp file, an image without a
line (made again on resume) or a partial last line (trimmed on resume). A rerun of the same
command continues every run from its last recorded step, after checking the images the records
name; recorded images missing at the end of a run are made again. Until a first step is
recorded, a rerun may change the settings. Replicate runs that come out as copies of each other
are warned of once; a one-line progress bar stays silent off a terminal.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from banana_tests.editors.base import Editor
from banana_tests.editors.chains import ASPECT_TOLERANCE, Chain, Job, Made, Stopped, check_image, steps
from banana_tests.safe_files import (
    NotReadable,
    append_json_line,
    exclusive_lock,
    fsync_dir,
    read_regular,
    write_atomic,
)
from banana_tests.trajectories.records import METADATA, DataError

LOCK = ".generate.lock"


@dataclass(frozen=True)
class Summary:
    total: int
    already_done: int
    made: int
    requests: int
    stopped: tuple[str, ...] = ()
    """Runs that stopped at a step the editor answered without an image (`NoImage`)."""


def generate(
    job: Job,
    editor: Editor,
    out: Path,
    *,
    stream: TextIO | None = None,
    log: Callable[[str], None] = print,
    workers: int = 1,
) -> Summary:
    """Make (or continue) the set in `out`; finished steps are never redone or lost. With
    `workers` > 1 the chains are made in that many processes (banana_tests.editors.workers), with
    the same bytes; this process stays the set's one writer."""
    out = Path(out)
    for path in job.seed_images.values():  # a bad seed is refused before any step of any chain
        check_image(path)
    out.mkdir(parents=True, exist_ok=True)
    busy = DataError(f"another `banana-tests generate` is writing to {out}")  # one writer per folder
    with exclusive_lock(out / LOCK, busy=busy, remove=True):  # the set is left as it was made
        check_settings(out, job.settings(editor), log)
        remove_temp_files(out)
        resume = read_resume(out, log)
        chains = [
            Chain(name, run, start, path if start == 0 else out / file_name)
            for name, path in sorted(job.seed_images.items())
            for run in range(job.runs)
            for start, file_name in [resume.last.get((name, run), (0, ""))]
            if start < job.steps
        ]
        total = len(job.seed_images) * job.runs * job.steps
        done = total - sum(job.steps - chain.start for chain in chains)
        note = editor.cost_estimate(total - done, max(job.resolution, default=None))  # a cycle: its largest
        if note and done < total:
            log(note)
        twins = Twins(job.editor, resume.made_by, log)
        if job.runs > 1 and done < total and getattr(editor, "deterministic", False):
            twins.warn(f"editor {job.editor!r} is deterministic: its {job.runs} runs will be byte-identical")
        progress = Progress(total, done, stream)
        counts = {"made": 0, "requests": 0}
        stopped: list[str] = []
        fd = os.open(out / METADATA, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        fsync_dir(out)  # a new metadata.jsonl must survive with its first line

        def take(event: Made | Stopped) -> None:
            """Record one finished step (image, then its line), or a chain that stopped."""
            if isinstance(event, Stopped):
                stopped.append(event.message)
                counts["requests"] += event.requests
                log(f"warning: {event.message}; this run stops here, the others go on")
                return
            row = event.row
            if row["aspect_changed"]:
                log(
                    f"warning: {row['seed_image']} run {row['run']} step {row['step']}: {job.editor!r}"
                    f" changed the aspect ratio ({row['input_size']} -> {row['output_size']}) beyond the"
                    f" paper's {ASPECT_TOLERANCE:.1%} crop; recorded as aspect_changed"
                )
            write_atomic(out / row["file_name"], event.data)
            append_json_line(fd, row, out / METADATA)
            twins.check(row["seed_image"], row["run"], row["step"], row["sha256"])
            counts["made"] += 1
            counts["requests"] += row["requests"]
            progress.advance()

        try:
            if workers > 1 and len(chains) > 1:
                from banana_tests.editors.workers import run_parallel

                run_parallel(job, editor, chains, workers, take)
            else:
                for chain in chains:
                    for event in steps(job, editor, chain):
                        take(event)
        finally:
            os.close(fd)
            progress.close()
    return Summary(total, done, counts["made"], counts["requests"], tuple(stopped))


SETTINGS = "generate.json"
MAX_SETTINGS_BYTES = 2**20  # a few hundred bytes written
MAX_METADATA_BYTES = 2**30  # a few hundred bytes a step: millions of steps


class SettingsMismatch(DataError):
    """The output folder was made with other settings; mixing them would corrupt the set."""


def check_settings(out: Path, settings: dict[str, Any], log: Callable[[str], None]) -> None:
    """Refuse other settings once a step is recorded; before that (a first attempt that failed
    before its first step) nothing depends on them, so the new ones replace them."""
    path = out / SETTINGS
    recorded = _has_records(out / METADATA)
    if not path.exists():
        if recorded:
            raise SettingsMismatch(
                f"{out} holds a {METADATA} but no {SETTINGS}: it was not made by `banana-tests generate`;"
                " choose a new --out folder"
            )
        _write_settings(path, settings)
        return
    if not recorded:
        if _read(path, MAX_SETTINGS_BYTES) != _settings_bytes(settings):
            log(f"{out}: no step was made with the settings in {SETTINGS}; this command's replace them")
            _write_settings(path, settings)
        return
    try:
        old = json.loads(_read(path, MAX_SETTINGS_BYTES).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not JSON ({exc}); restore it or choose a new --out folder") from exc
    if old != settings:
        old = old if isinstance(old, dict) else {}
        diffs = "".join(
            f"\n  {key}: folder has {old.get(key)!r}, this command asks for {settings.get(key)!r}"
            for key in sorted(set(old) | set(settings))
            if old.get(key) != settings.get(key)
        )
        raise SettingsMismatch(
            f"{out} was generated with other settings ({path}); refusing to mix them into one set:{diffs}"
            "\nrerun with the folder's settings to continue it, or choose a new --out folder"
        )


def _settings_bytes(settings: dict[str, Any]) -> bytes:
    return (json.dumps(settings, indent=2) + "\n").encode("utf-8")


def _write_settings(path: Path, settings: dict[str, Any]) -> None:
    write_atomic(path, _settings_bytes(settings))


def _has_records(meta: Path) -> bool:
    """Whether `meta` holds a complete line (a torn last line is no record: it is trimmed)."""
    if not meta.exists():
        return False
    data = _read(meta, MAX_METADATA_BYTES)
    return bool(data[: data.rfind(b"\n") + 1].strip())


def _read(path: Path, limit: int) -> bytes:
    """A file of the set through the regular-file reader: a FIFO or device there is refused."""
    try:
        return read_regular(path, limit)
    except NotReadable as exc:
        raise DataError(f"{path}: {exc}; choose a new --out folder") from exc


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


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """`advance()` after each step; steps done before this process started count as done."""

    def __init__(self, total: int, done: int = 0, stream: TextIO | None = None, width: int = 30) -> None:
        self.total, self.done, self.width = total, done, width
        self.stream = stream if stream is not None else sys.stdout
        self.enabled = self.stream.isatty()
        self._start, self._start_done = time.monotonic(), done
        self._draw()

    def advance(self) -> None:
        self.done += 1
        self._draw()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()

    def line(self) -> str:
        fraction = self.done / self.total if self.total else 1.0
        filled = round(self.width * fraction)
        made = self.done - self._start_done
        elapsed = time.monotonic() - self._start
        eta = _clock(elapsed / made * (self.total - self.done)) if made else "?"
        bar = "#" * filled + "." * (self.width - filled)
        return f"[{bar}] {self.done}/{self.total} steps  elapsed {_clock(elapsed)}  ETA {eta}"

    def _draw(self) -> None:
        if self.enabled:
            self.stream.write("\r" + self.line())
            self.stream.flush()


class Twins:
    """Warns once when runs are not independent: replicate runs of a deterministic editor (or of
    a fixed seed) are copies, and averaging copies only pretends to measure run-to-run spread."""

    def __init__(
        self, editor: str, made_by: dict[tuple[str, int, str], int], log: Callable[[str], None]
    ) -> None:
        self.editor, self.made_by, self.log, self.warned = editor, made_by, log, False

    def warn(self, what: str) -> None:
        if not self.warned:
            self.warned = True
            self.log(
                f"warning: {what}, so replicate runs add no information; use --runs 1, or give the"
                " runs different seeds (--seed with --vary-seed) if the editor takes one"
            )

    def check(self, name: str, run: int, step: int, sha: str) -> None:
        other = self.made_by.setdefault((name, step, sha), run)
        if other != run:
            self.warn(
                f"editor {self.editor!r} made byte-identical images in runs {other} and {run}"
                f" of {name} at step {step}"
            )
