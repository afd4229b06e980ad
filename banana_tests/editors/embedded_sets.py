"""The shipped sets, rebuilt from a recorded recipe: the embedded default data set, and the
per-artifact trial sets built from it on first use.

`fixtures/emulated/` is a trajectory set (an imagefolder, see `trajectories`) made offline:
public-domain images shipped inside scikit-image (`skimage.data`) are sent through
`ReplicaEmulator` round after round, as a model asked for "an exact replica" would be.
`recipe.json` records everything that decides the pixels, so

    banana-tests fixtures refresh [--out DIR] [--seeds-out DIR]

rebuilds the same files, byte for byte, given the same numpy/scipy/Pillow/zlib. The step-0
images go to `fixtures/seeds/`, so the control family runs from a wheel without scikit-image.

The trial sets are not shipped: that would make the wheel several times larger
(docs/research/speed.md); their recipe and the clean seeds are already in it, so `ensure` builds
them once into the image cache and refuses any image whose bytes differ from
`fixtures/emulated/trials.json` (another numpy, scipy, Pillow or zlib can change them; the error
names the file). `banana-tests fixtures refresh` rewrites that manifest with the embedded set.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from banana_tests.data import EMBEDDED, SEEDS
from banana_tests.editors.offline_editors import EmulatorParams, ReplicaEmulator
from banana_tests.safe_files import NotReadable, exclusive_lock, read_regular, write_atomic
from banana_tests.trajectories.records import ARTIFACTS, COMPOSITE, Artifact, trial_id

DEFAULT_DIR = EMBEDDED
RECIPE = "recipe.json"
MAX_RECIPE_BYTES = 2**20  # a few kilobytes written
METADATA = "metadata.jsonl"
PROMPT = "Produce an exact replica of the provided image, with no alterations."
# All bundled with scikit-image 0.26 (no download). Eight, not more, to keep the set under 25 MB
# (noisy 384 px PNGs are ~0.25 MB each); `grass` and `immunohistochemistry` also load offline.
SEED_IMAGES = (
    "astronaut",
    "brick",
    "chelsea",
    "coffee",
    "gravel",
    "hubble_deep_field",
    "motorcycle_left",
    "rocket",
)
# Seed ids that are not a plain `skimage.data.<name>()`: id -> (function, index into its tuple).
_ALIASES = {"motorcycle_left": ("stereo_motorcycle", 0)}
_ID = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class Recipe:
    """Everything that decides the pixels of the data set."""

    editor: str = "emulate"
    prompt: str = PROMPT
    variant: str = "replicate"
    seed: int = 0
    seed_images: tuple[str, ...] = SEED_IMAGES
    runs: tuple[int, ...] = (0, 1, 2)
    steps: int = 20
    """Edits generated per run; only `stored_steps` are written (noise makes PNGs large)."""
    stored_steps: tuple[int, ...] = (1, 5, 10, 20)
    seed_long_side: int = 384
    """Step 0, the model's input, is the seed image resized (LANCZOS) to this long side."""
    params: EmulatorParams = field(default_factory=EmulatorParams)

    def to_json(self) -> dict[str, Any]:
        return {
            "editor": self.editor,
            "prompt": self.prompt,
            "variant": self.variant,
            "seed": self.seed,
            "seed_source": "skimage.data",
            "seed_images": list(self.seed_images),
            "runs": list(self.runs),
            "steps": self.steps,
            "stored_steps": list(self.stored_steps),
            "seed_long_side": self.seed_long_side,
            "output_long_side": self.params.long_side,
            "emulator": self.params.to_json(),
        }


def load_recipe(path: Path) -> Recipe:
    """Read and check `recipe.json`; a recipe that cannot be built exactly is refused here."""
    try:
        raw = json.loads(read_regular(path, MAX_RECIPE_BYTES).decode("utf-8"))
    except NotReadable as exc:
        raise ValueError(f"{path}: {exc}") from None
    try:
        params = EmulatorParams.from_json(dict(raw["emulator"]))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: emulator: {exc}") from None
    recipe = Recipe(
        editor=str(raw["editor"]),
        prompt=str(raw["prompt"]),
        variant=str(raw.get("variant", "replicate")),
        seed=int(raw["seed"]),
        seed_images=tuple(str(s) for s in raw["seed_images"]),
        runs=tuple(int(r) for r in raw["runs"]),
        steps=int(raw["steps"]),
        stored_steps=tuple(int(s) for s in raw["stored_steps"]),
        seed_long_side=int(raw["seed_long_side"]),
        params=params,
    )
    problems = []
    if recipe.editor != "emulate":
        problems.append(f"editor {recipe.editor!r} is not 'emulate', the only offline editor")
    if "output_long_side" in raw and int(raw["output_long_side"]) != recipe.params.long_side:
        problems.append("output_long_side disagrees with emulator.long_side")
    problems += [
        f"seed image id {s!r} is not [A-Za-z0-9_]+" for s in recipe.seed_images if not _ID.fullmatch(s)
    ]
    if len(set(recipe.seed_images)) != len(recipe.seed_images) or len(set(recipe.runs)) != len(recipe.runs):
        problems.append("seed_images and runs must not repeat")
    if not recipe.stored_steps or not all(1 <= s <= recipe.steps for s in recipe.stored_steps):
        problems.append(f"stored_steps must lie in 1..{recipe.steps}")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return recipe


def save_recipe(recipe: Recipe, path: Path) -> None:
    write_atomic(Path(path), (json.dumps(recipe.to_json(), indent=2) + "\n").encode("utf-8"))


def seed_image(name: str, long_side: int) -> Image.Image:
    """Step 0: the named `skimage.data` image as RGB, resized so its long side is `long_side`."""
    import skimage.data  # only when building: importing the package must stay light

    function, index = _ALIASES.get(name, (name, None))
    array = getattr(skimage.data, function)()
    array = np.asarray(array if index is None else array[index])
    if array.ndim == 2:  # grayscale textures: three equal channels
        array = np.stack([array] * 3, axis=-1)
    image = Image.fromarray(np.ascontiguousarray(array[..., :3]).astype(np.uint8), mode="RGB")
    scale = long_side / max(image.size)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)


def write_seeds(recipe: Recipe, out_dir: Path) -> list[Path]:
    """The step-0 images as `<seed image>.png`, the clean crops the control family draws from."""
    paths = []
    for name in sorted(recipe.seed_images):
        paths.append(Path(out_dir) / f"{name}.png")
        write_atomic(paths[-1], _png(seed_image(name, recipe.seed_long_side)))
    return paths


def build(recipe: Recipe, out_dir: Path) -> list[dict[str, Any]]:
    """Write the images, `metadata.jsonl` and `recipe.json` under `out_dir`; return the rows."""
    out_dir = Path(out_dir)
    seeds = {name: seed_image(name, recipe.seed_long_side) for name in recipe.seed_images}
    rows = build_images(recipe, out_dir, seeds)
    _remove_stale(out_dir / "images", {out_dir / r["file_name"] for r in rows})
    write_metadata(out_dir, rows)
    save_recipe(recipe, out_dir / RECIPE)
    return rows


def build_images(
    recipe: Recipe, out_dir: Path, seeds: dict[str, Image.Image], artifact: Artifact = COMPOSITE
) -> list[dict[str, Any]]:
    """Every run of every seed image through `recipe` with only `artifact` on (the composite:
    all of it); the stored steps written under `out_dir`, their metadata rows returned. A trial
    (any artifact but the composite) names its seed images `<seed>.<artifact>` and its files
    `images/<artifact>/...`."""
    emulator = ReplicaEmulator(recipe.params.only(artifact), seed=recipe.seed)
    rows: list[dict[str, Any]] = []
    for name in sorted(seeds):
        for run in sorted(recipe.runs):
            image = seeds[name]
            for step in range(1, recipe.steps + 1):
                image = emulator.edit(image, step=step, run=run, key=name)
                if step in recipe.stored_steps:
                    rows.append(_store(recipe, out_dir, image, name, run, step, artifact))
    return rows


def write_metadata(out_dir: Path, rows: list[dict[str, Any]]) -> None:
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    write_atomic(Path(out_dir) / METADATA, lines.encode("utf-8"))


def _store(
    recipe: Recipe, out_dir: Path, image: Image.Image, name: str, run: int, step: int, artifact: Artifact
) -> dict[str, Any]:
    data = _png(image)
    trial = artifact is not COMPOSITE
    folder = f"images/{artifact}/{name}" if trial else f"images/{name}"
    file_name = f"{folder}/run{run}/step{step:03d}.png"
    write_atomic(out_dir / file_name, data)
    return {
        "file_name": file_name,
        "seed_image": trial_id(name, artifact) if trial else name,
        "variant": recipe.variant,
        "run": run,
        "step": step,
        "editor": recipe.editor,
        "prompt": recipe.prompt,
        "artifact": artifact,
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True, compress_level=9)
    return buffer.getvalue()


def _remove_stale(images: Path, keep: set[Path]) -> None:
    """Drop PNGs a previous recipe left behind: an imagefolder would load them too."""
    if not images.is_dir():
        return
    for path in sorted(images.rglob("*.png")):
        if path not in keep:
            path.unlink()
    for folder in sorted((p for p in images.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()


MANIFEST = "trials.json"


class TrialSetError(Exception):
    """A trial set could not be rebuilt as shipped; the message names the file."""


def shipped_seeds(recipe: Recipe, seeds_dir: Path = SEEDS) -> dict[str, Image.Image]:
    """The recipe's step-0 images from the shipped `fixtures/seeds/` (no scikit-image needed)."""
    seeds = {}
    for name in recipe.seed_images:
        path = Path(seeds_dir) / f"{name}.png"
        if not path.is_file():
            raise TrialSetError(f"{path}: the shipped seed image is missing")
        with Image.open(path) as image:
            seeds[name] = image.convert("RGB")
    return seeds


def manifest(recipe: Recipe, seeds: dict[str, Image.Image], artifacts: Sequence[Artifact]) -> dict[str, Any]:
    """{artifact: {file_name: sha256}} of each artifact's set, built in a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="banana-trials-") as tmp:
        return {
            a: {r["file_name"]: r["sha256"] for r in build_images(recipe, Path(tmp), seeds, a)}
            for a in artifacts
        }


def write_manifest(recipe: Recipe, seeds: dict[str, Image.Image], out_dir: Path = EMBEDDED) -> Path:
    """`trials.json` beside the embedded set: every artifact set's sha256s (the composite's too)."""
    path = Path(out_dir) / MANIFEST
    write_atomic(
        path, (json.dumps(manifest(recipe, seeds, ARTIFACTS), indent=1, sort_keys=True) + "\n").encode()
    )
    return path


def ensure(
    artifacts: Sequence[Artifact], cache_dir: Path, embedded: Path = EMBEDDED, seeds_dir: Path = SEEDS
) -> Path:
    """A canonical trajectory folder holding the trial sets of `artifacts`, built once into
    `cache_dir/trials/` and reused; every image checked against the shipped manifest."""
    recipe = load_recipe(embedded / RECIPE)
    shipped = json.loads((embedded / MANIFEST).read_text(encoding="utf-8"))
    wanted = json.dumps([shipped[a] for a in artifacts], sort_keys=True)
    key = hashlib.sha256(wanted.encode("utf-8")).hexdigest()[:16]
    folder = Path(cache_dir) / "trials" / f"{'+'.join(artifacts)}-{key}"
    if (folder / "metadata.jsonl").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(folder.parent / f".{folder.name}.lock"):
        if (folder / "metadata.jsonl").is_file():  # another process built it while this one waited
            return folder
        seeds = shipped_seeds(recipe, seeds_dir)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            rows = []
            for artifact in artifacts:
                made = build_images(recipe, tmp, seeds, artifact)
                _check(made, shipped[artifact], tmp, artifact)
                rows += [_as_trial(r) for r in made]
            write_metadata(tmp, rows)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _as_trial(row: dict[str, Any]) -> dict[str, Any]:
    """The composite's rows named as a trial too (`astronaut.replicate`), so a run over several
    sets reports the composite beside the families; its files are the embedded set's."""
    if row["artifact"] is not COMPOSITE:
        return row
    return {**row, "seed_image": trial_id(row["seed_image"], COMPOSITE)}


def _check(rows: list[dict[str, Any]], expected: dict[str, str], root: Path, artifact: Artifact) -> None:
    made = {r["file_name"]: r["sha256"] for r in rows}
    if set(made) != set(expected):
        raise TrialSetError(
            f"the {artifact} trial set's files differ from {MANIFEST}'s: rerun fixtures refresh"
        )
    for name, sha in sorted(made.items()):
        if sha != expected[name]:
            raise TrialSetError(
                f"{root / name}: rebuilt with sha256 {sha[:12]}…, shipped {expected[name][:12]}…: this "
                "machine's numpy/scipy/Pillow/zlib do not rebuild the trial sets byte for byte"
            )
