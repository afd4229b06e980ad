"""One chain of a `generate` job, a seed image × one run: its seed image, and its steps, each fed
the one before.

A chain's pixels depend only on its own key (seed image, run, step), so chains may be made in any
order and in any process. Making a step writes nothing: the one writer of the set records what
`steps` yields (banana_tests.editors.generation), so the crash-safety order of files and records
holds whichever process made the step.

Seed images are found by name in the files and folders given, and read as the data-set reader
reads an image: a regular file, within its pixel limit, as 8-bit RGB. A seed's name (its file
stem) becomes its folder, `images/<name>/`, so it must be a plain name: `...png` would write
beside `images/`. A 16-bit grayscale seed is scaled to 8 bits (PIL's `convert("RGB")` clips it,
turning a photograph white). PIL's own decompression-bomb limit (`Image.MAX_IMAGE_PIXELS`) is
left as the process has it: the limit here is checked on the header.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image
from PIL.ImageFile import ImageFile

from banana_tests.editors.base import Editor, EditorError, EditRequest, NoImage
from banana_tests.editors.prompts import Prompt
from banana_tests.safe_files import NotReadable, read_regular, require_regular
from banana_tests.trajectories.images import DEFAULT_MAX_PIXELS, max_file_bytes
from banana_tests.trajectories.records import DataError

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


IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"})
SIXTEEN_BIT = frozenset({"I;16", "I;16B", "I;16L", "I;16N"})


def find_seed_images(items: Sequence[Path]) -> dict[str, Path]:
    """Seed images by name (file stem) from files and folders (their images, not recursive)."""
    found: dict[str, Path] = {}
    for item in map(Path, items):
        if item.is_dir():
            files = sorted(p for p in item.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
            if not files:
                raise DataError(f"{item}: no images ({', '.join(sorted(IMAGE_SUFFIXES))}) in this folder")
        elif item.exists():
            try:
                require_regular(item)
            except NotReadable as exc:
                raise DataError(f"{item}: cannot read this seed image: {exc}") from None
            files = [item]
        else:
            raise DataError(f"{item}: no such file or folder")
        for path in files:
            _check_name(path)
            if path.stem in found and found[path.stem] != path:
                raise DataError(f"two seed images named {path.stem!r}: {found[path.stem]} and {path}")
            found[path.stem] = path
    if not found:
        raise DataError("no seed images given")
    return found


def _check_name(path: Path) -> None:
    """The stem names the seed's folder: no `.`/`..`, hidden name, separator or control character."""
    stem = path.stem
    if not stem or stem.startswith(".") or "\\" in stem or any(ord(c) < 32 or ord(c) == 127 for c in stem):
        raise DataError(
            f"{path}: seed image name {stem!r} is not a plain file name (it names the folder "
            "images/<name>/ of its runs): rename the file"
        )


def open_image(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """The image at `path` as 8-bit RGB, or a DataError naming the file: not a regular file, over
    the data-set reader's byte or pixel limit, undecodable, or of a mode with no 8-bit reading."""
    with _opened(path, max_pixels) as image:
        return _eight_bit_rgb(path, image)


def check_image(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
    """What `open_image` refuses from the file and its header (not its pixels, left to decode when
    its chain starts): every editor's seeds are checked so before any step is made."""
    with _opened(path, max_pixels) as image:
        _check_mode(path, image)


@contextmanager
def _opened(path: Path, max_pixels: int) -> Iterator[ImageFile]:
    """The file read within the byte limit and opened by PIL, its size checked on the header; what
    goes wrong decoding it in the block is one line naming the file too."""
    try:
        data = read_regular(path, max_file_bytes(max_pixels))
    except NotReadable as exc:
        raise DataError(f"{path}: cannot read this image: {exc}") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                if width * height > max_pixels:
                    raise DataError(f"{path}: {width}x{height} is over the {max_pixels:,}-pixel limit")
                yield image
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise DataError(f"{path}: over the {max_pixels:,}-pixel limit ({exc})") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"{path}: cannot read this image ({exc})") from exc


def _eight_bit_rgb(path: Path, image: ImageFile) -> Image.Image:
    """16-bit grayscale scaled to 8 bits, other modes through PIL's conversion; 32-bit integer and
    float images refused (their range is not known)."""
    if _sixteen_bit(image):
        import numpy as np

        wide = np.asarray(image, dtype=np.uint32)
        return Image.fromarray(((wide * 255 + 32767) // 65535).astype(np.uint8), mode="L").convert("RGB")
    _check_mode(path, image)
    return image.convert("RGB")


def _check_mode(path: Path, image: ImageFile) -> None:
    """32-bit integer and floating-point images have no known range: refused."""
    if image.mode in ("I", "F") and not _sixteen_bit(image):
        kind = "32-bit integer" if image.mode == "I" else "floating-point"
        raise DataError(f"{path}: a {kind} image (mode {image.mode}); convert it to 8-bit RGB first")


def _sixteen_bit(image: ImageFile) -> bool:
    """A 16-bit grayscale image, as PIL opens one: mode I;16 (or I, its tile read as I;16)."""
    if image.mode in SIXTEEN_BIT:
        return True
    args = image.tile[0].args if image.mode == "I" and image.tile else None
    rawmode = args[0] if isinstance(args, tuple) and args else args
    return isinstance(rawmode, str) and rawmode.startswith("I;16")
