"""Make a trajectory set with an editor: resumable, loss-free, refusing mixed settings.

Layout (a canonical imagefolder, see `trajectories`): `images/<seed>/run<r>/step<NNN>.png`,
one `metadata.jsonl` line per image, and `generate.json` with the settings that decide the
pixels. Each step feeds the previous output back to the editor as a fresh request.

Crash safety: an image is written to a temporary sibling, fsynced and renamed into place; only
then is its metadata line appended with one `write` and an fsync. So a line exists only for a
complete image, and a kill at any moment leaves at most a stray temp file, an image without a
line (made again on resume) or a partial last line (trimmed on resume). A rerun of the same
command continues every run from its last recorded step; recorded images missing at the end of
a run are made again. Until a first step is recorded, a rerun may change the settings.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from PIL import Image

from banana_tests.atomic import exclusive_lock, fsync_dir, write_atomic
from banana_tests.editors.base import Editor, EditRequest, NoImage
from banana_tests.editors.progress import Progress
from banana_tests.editors.prompts import Prompt
from banana_tests.trajectories.records import METADATA, DataError

SETTINGS = "generate.json"
ASPECT_TOLERANCE = (2816 / 1504) / (5632 / 3072) - 1
"""The paper's crop, 2.1 %: Nano Banana Pro's first output 5632×3072 came back 2816×1504 at 2K. A
step whose aspect ratio moves further than this from the one asked for is flagged."""
LOCK = ".generate.lock"
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"})


class SettingsMismatch(DataError):
    """The output folder was made with other settings; mixing them would corrupt the set."""


@dataclass(frozen=True)
class Job:
    """What to generate: every seed image × `runs` runs × `steps` steps."""

    editor: str
    prompt: Prompt
    variant: str
    runs: int
    steps: int
    seed_images: dict[str, Path]
    seed: int | None = None
    vary_seed: bool = False
    temperature: float | None = None
    resolution: tuple[str, ...] = ()
    """Output sizes, one per step in turn (`1K, 2K, 4K` interleaves them, as the paper did); () for none."""

    def seed_for(self, run: int, step: int) -> int | None:
        """The request seed: fixed, or (`vary_seed`) different for every run and step."""
        if self.seed is None or not self.vary_seed:
            return self.seed
        return self.seed + 100_000 * run + step

    def resolution_for(self, step: int) -> str | None:
        return self.resolution[(step - 1) % len(self.resolution)] if self.resolution else None

    def settings(self, editor: Editor) -> dict[str, Any]:
        """Everything that decides the pixels, as stored in `generate.json` (no secrets)."""
        return json.loads(
            json.dumps(
                {
                    "editor": self.editor,
                    "editor_settings": editor.settings(),
                    "prompt": self.prompt.name,
                    "prompt_text": self.prompt.text,
                    "transform": self.prompt.transform,
                    "variant": self.variant,
                    "runs": self.runs,
                    "steps": self.steps,
                    "seed": self.seed,
                    "vary_seed": self.vary_seed,
                    "temperature": self.temperature,
                    "resolution": list(self.resolution)
                    if len(self.resolution) > 1
                    else self.resolution_for(1),
                    "seed_images": {n: _sha256(p.read_bytes()) for n, p in sorted(self.seed_images.items())},
                }
            )
        )


@dataclass(frozen=True)
class Summary:
    total: int
    already_done: int
    made: int
    requests: int
    stopped: tuple[str, ...] = ()
    """Runs that stopped at a step the editor answered without an image (`NoImage`)."""


def find_seed_images(items: Sequence[Path]) -> dict[str, Path]:
    """Seed images by name (file stem) from files and folders (their images, not recursive)."""
    found: dict[str, Path] = {}
    for item in map(Path, items):
        if item.is_dir():
            files = sorted(p for p in item.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
            if not files:
                raise DataError(f"{item}: no images ({', '.join(sorted(IMAGE_SUFFIXES))}) in this folder")
        elif item.is_file():
            files = [item]
        else:
            raise DataError(f"{item}: no such file or folder")
        for path in files:
            if path.stem in found and found[path.stem] != path:
                raise DataError(f"two seed images named {path.stem!r}: {found[path.stem]} and {path}")
            found[path.stem] = path
    if not found:
        raise DataError("no seed images given")
    return found


def generate(
    job: Job,
    editor: Editor,
    out: Path,
    *,
    stream: TextIO | None = None,
    log: Callable[[str], None] = print,
) -> Summary:
    """Make (or continue) the set in `out`; finished steps are never redone or lost."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    busy = DataError(f"another `banana-tests generate` is writing to {out}")  # one writer per folder
    with exclusive_lock(out / LOCK, busy=busy):
        _check_settings(out, job.settings(editor), log)
        _remove_temp_files(out)
        resume = _resume(out, log)
        total = len(job.seed_images) * job.runs * job.steps
        done = sum(
            min(resume.last.get((n, r), (0, ""))[0], job.steps)
            for n in job.seed_images
            for r in range(job.runs)
        )
        note = editor.cost_estimate(total - done, max(job.resolution, default=None))  # a cycle: its largest
        if note and done < total:
            log(note)
        twins = Twins(job.editor, resume.made_by, log)
        if job.runs > 1 and done < total and getattr(editor, "deterministic", False):
            twins.warn(f"editor {job.editor!r} is deterministic: its {job.runs} runs will be byte-identical")
        progress = Progress(total, done, stream)
        made = requests = 0
        stopped: list[str] = []
        fd = os.open(out / METADATA, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        fsync_dir(out)  # a new metadata.jsonl must survive with its first line
        try:
            for name, path in sorted(job.seed_images.items()):
                for run in range(job.runs):
                    start, file_name = resume.last.get((name, run), (0, ""))
                    if start >= job.steps:
                        continue
                    image = _open(path) if start == 0 else _open(out / file_name)
                    for step in range(start + 1, job.steps + 1):
                        try:
                            image, row = _edit(job, editor, image, name, run, step)
                        except NoImage as exc:  # one run's trouble: the others go on
                            stopped.append(f"{name} run {run} step {step}: {exc}")
                            requests += exc.requests
                            log(f"warning: {stopped[-1]}; this run stops here, the others go on")
                            break
                        if row["aspect_changed"]:
                            log(
                                f"warning: {name} run {run} step {step}: {job.editor!r} changed the aspect"
                                f" ratio ({row['input_size']} -> {row['output_size']}) beyond the paper's"
                                f" {ASPECT_TOLERANCE:.1%} crop; recorded as aspect_changed"
                            )
                        data = _png(image)
                        row["sha256"] = _sha256(data)
                        write_atomic(out / row["file_name"], data)
                        _append(fd, (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
                        twins.check(name, run, step, row["sha256"])
                        made, requests = made + 1, requests + row["requests"]
                        progress.advance()
        finally:
            os.close(fd)
            progress.close()
    return Summary(total, done, made, requests, tuple(stopped))


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


def _edit(
    job: Job, editor: Editor, image: Image.Image, name: str, run: int, step: int
) -> tuple[Image.Image, dict[str, Any]]:
    prompt = job.prompt.for_step(step)
    request = EditRequest(
        image, prompt, step, run, name, job.seed_for(run, step), job.temperature, job.resolution_for(step),
        job.prompt.transform,
    )  # fmt: skip
    start = time.monotonic()
    result = editor.edit(request)
    wall = time.monotonic() - start
    width = max(3, len(str(job.steps)))
    row: dict[str, Any] = {
        "file_name": f"images/{name}/run{run}/step{step:0{width}d}.png",
        "seed_image": name,
        "variant": job.variant,
        "run": run,
        "step": step,
        "editor": job.editor,
        "model": editor.model,
        "prompt": prompt,
        "seed": request.seed if result.seed is None else result.seed,
        "temperature": job.temperature,
        "resolution": request.resolution,
        "input_size": list(image.size),
        "output_size": list(result.image.size),
        "aspect_changed": aspect_changed(image.size, result.image.size, job.prompt.transform),
        "for_iqa": job.prompt.for_iqa,
        "wall_time_s": round(wall, 3),
        "requests": result.requests,
    }
    if result.text is not None:
        row["text"] = result.text
    return result.image, row


def aspect_changed(before: tuple[int, int], after: tuple[int, int], transform: str | None) -> bool:
    """Whether `after` is further from the aspect ratio asked for than the paper's crop (a
    `rotate` prompt asks for the turned one)."""
    width, height = reversed(before) if transform == "rotate" else before
    return abs((after[0] / after[1]) / (width / height) - 1) > ASPECT_TOLERANCE


def _check_settings(out: Path, settings: dict[str, Any], log: Callable[[str], None]) -> None:
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
        if path.read_bytes() != _settings_bytes(settings):
            log(f"{out}: no step was made with the settings in {SETTINGS}; this command's replace them")
            _write_settings(path, settings)
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
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
    data = meta.read_bytes()
    return bool(data[: data.rfind(b"\n") + 1].strip())


@dataclass(frozen=True)
class Resume:
    """Where each run continues, (seed, run) -> (last step, its file), and which run made each
    recorded (seed, step, sha256), to spot runs that are copies of each other."""

    last: dict[tuple[str, int], tuple[int, str]]
    made_by: dict[tuple[str, int, str], int]


Step = tuple[int, str, str | None]  # a recorded step: number, file, sha256


def _resume(out: Path, log: Callable[[str], None]) -> Resume:
    """Read `metadata.jsonl`, trimming a torn last line, and check each run's images.

    Images missing at the end of a run (deleted, or lost with a disk) are made again: their
    lines are dropped (one atomic rewrite) and the run continues from its last image left. A
    missing image with later steps after it, or a changed last image, stops with what to do.
    """
    meta = out / METADATA
    if not meta.exists():
        return Resume({}, {})
    data = meta.read_bytes()
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
    if sha is not None and _sha256((meta.parent / file_name).read_bytes()) != sha:
        raise DataError(
            f"{meta}: {file_name} ({name} run {run} step {step}) changed since it was recorded"
            " (sha256 differs); restore it, or delete it and rerun to make it again"
        )


def _remove_temp_files(out: Path) -> None:
    """Temporary files a killed run left behind (never a finished image)."""
    for path in out.rglob(".*.tmp"):
        path.unlink()


def _open(path: Path) -> Image.Image:
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read this image ({exc})") from exc


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _append(fd: int, line: bytes) -> None:
    """One `write` of a whole line, then fsync: the line is either all there or trimmed on resume."""
    written = os.write(fd, line)
    if written != len(line):
        raise OSError(f"short write to {METADATA}: {written} of {len(line)} bytes")
    os.fsync(fd)
