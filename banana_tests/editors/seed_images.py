"""The seed images of a `generate` job, found by name in the files and folders given."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from banana_tests.trajectories.records import DataError

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"})


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
