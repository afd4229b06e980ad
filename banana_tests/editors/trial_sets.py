"""The per-artifact trial sets: built on first use from the shipped seeds, checked against the
shipped sha256s, kept in the image cache.

Shipping them would make the wheel several times larger (docs/research/speed.md); their recipe and the
clean seeds are already in it, so `ensure` rebuilds them once and refuses any
image whose bytes differ from `fixtures/emulated/trials.json` (another numpy, scipy, Pillow or
zlib can change them; the error names the file). `banana-tests fixtures refresh` rewrites that
manifest with the embedded set.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from banana_tests.atomic import exclusive_lock, write_atomic
from banana_tests.data import EMBEDDED, SEEDS
from banana_tests.editors.fixture_recipe import RECIPE, Recipe, build_images, load_recipe, write_metadata
from banana_tests.trajectories.records import ARTIFACTS, COMPOSITE, Artifact, trial_id

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
