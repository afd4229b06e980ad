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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from PIL import Image

from banana_tests.atomic import append_json_line, exclusive_lock, fsync_dir, write_atomic
from banana_tests.editors.base import Editor, EditRequest, NoImage
from banana_tests.editors.generate_settings import check_settings
from banana_tests.editors.progress import Progress
from banana_tests.editors.prompts import Prompt
from banana_tests.editors.resume import read_resume, remove_temp_files
from banana_tests.editors.seed_images import open_image
from banana_tests.editors.twin_runs import Twins
from banana_tests.trajectories.records import METADATA, DataError

ASPECT_TOLERANCE = (2816 / 1504) / (5632 / 3072) - 1
"""The paper's crop, 2.1 %: Nano Banana Pro's first output 5632×3072 came back 2816×1504 at 2K. A
step whose aspect ratio moves further than this from the one asked for is flagged."""
LOCK = ".generate.lock"


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
    with exclusive_lock(out / LOCK, busy=busy, remove=True):  # the set is left as it was made
        check_settings(out, job.settings(editor), log)
        remove_temp_files(out)
        resume = read_resume(out, log)
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
                    image = open_image(path) if start == 0 else open_image(out / file_name)
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
                        append_json_line(fd, row, out / METADATA)
                        twins.check(name, run, step, row["sha256"])
                        made, requests = made + 1, requests + row["requests"]
                        progress.advance()
        finally:
            os.close(fd)
            progress.close()
    return Summary(total, done, made, requests, tuple(stopped))


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


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
