"""One chain of a `generate` job, a seed image × one run: its steps, each fed the one before.

A chain's pixels depend only on its own key (seed image, run, step), so chains may be made in any
order and in any process. Making a step writes nothing: the one writer of the set records what
`steps` yields (banana_tests.editors.generate), so the crash-safety order of files and records
holds whichever process made the step.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from banana_tests.editors.base import Editor, EditorError, EditRequest, NoImage
from banana_tests.editors.prompts import Prompt
from banana_tests.editors.seed_images import open_image

ASPECT_TOLERANCE = (2816 / 1504) / (5632 / 3072) - 1
"""The paper's crop, 2.1 %: Nano Banana Pro's first output 5632×3072 came back 2816×1504 at 2K. A
step whose aspect ratio moves further than this from the one asked for is flagged."""


@dataclass(frozen=True)
class Chain:
    """Run `run` of seed image `name`, to be continued after its step `start` from `source`."""

    name: str
    run: int
    start: int
    source: Path

    def where(self, step: int) -> str:
        return f"{self.name} run {self.run} step {step}"


@dataclass(frozen=True)
class Made:
    """A finished step: its metadata record and its PNG bytes, not yet written."""

    row: dict[str, Any]
    data: bytes


@dataclass(frozen=True)
class Stopped:
    """The editor answered a step without an image: this chain stops, the others go on."""

    message: str
    requests: int


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
                    "seed_images": {n: sha256(p.read_bytes()) for n, p in sorted(self.seed_images.items())},
                }
            )
        )


class ChainFailed(EditorError):
    """A step of a chain failed; the message names the seed image, run and step, then the cause."""


def steps(job: Job, editor: Editor, chain: Chain) -> Iterator[Made | Stopped]:
    """The chain's steps after `start`, in order; any failure but `NoImage` raises `ChainFailed`."""
    step = chain.start + 1
    try:
        image = open_image(chain.source)
        for step in range(chain.start + 1, job.steps + 1):
            try:
                image, row = _edit(job, editor, image, chain, step)
            except NoImage as exc:  # one run's trouble: the others go on
                yield Stopped(f"{chain.where(step)}: {exc}", exc.requests)
                return
            data = png(image)
            row["sha256"] = sha256(data)
            yield Made(row, data)
    except ChainFailed:
        raise
    except Exception as exc:
        raise ChainFailed(f"{chain.where(step)}: {exc or type(exc).__name__}") from exc


def _edit(
    job: Job, editor: Editor, image: Image.Image, chain: Chain, step: int
) -> tuple[Image.Image, dict[str, Any]]:
    prompt = job.prompt.for_step(step)
    request = EditRequest(
        image, prompt, step, chain.run, chain.name, job.seed_for(chain.run, step), job.temperature,
        job.resolution_for(step), job.prompt.transform,
    )  # fmt: skip
    start = time.monotonic()
    result = editor.edit(request)
    wall = time.monotonic() - start
    width = max(3, len(str(job.steps)))
    row: dict[str, Any] = {
        "file_name": f"images/{chain.name}/run{chain.run}/step{step:0{width}d}.png",
        "seed_image": chain.name,
        "variant": job.variant,
        "run": chain.run,
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


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
