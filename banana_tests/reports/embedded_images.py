"""Which images `report` embeds: a JUnit property names a file, and a JUnit file may come from an
untrusted shard, so a named file is embedded only when it is what a run writes there, never any
file of the machine that merges (`degraded_png=/etc/passwd` was embedded as base64).

An image is embedded when its real path (symlinks resolved) lies in the folder tree of a JUnit file
the report was given, or of a score cache (a folder holding `scores.sqlite`: the search writes its
pairs in the run's cache), is a regular file of at most MAX_PNG_BYTES, and starts with the PNG
signature. Otherwise the report names the file and says why, and embeds nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from banana_tests.safe_files import NotReadable, read_regular
from banana_tests.scoring.score_cache import FILE as CACHE_FILE

MAX_PNG_BYTES = 16 * 2**20  # a search pair's PNG is a crop of a few hundred kB
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Shown:
    """A file a JUnit property names, as the report shows it: its PNG bytes, or why not."""

    named: str
    png: bytes | None
    why: str = ""

    @property
    def name(self) -> str:
        return Path(self.named).name


def input_folders(junit_files: Iterable[Path]) -> tuple[Path, ...]:
    """The real folders of the JUnit files a report was given: the trees it may embed from."""
    return tuple(dict.fromkeys(Path(os.path.realpath(path)).parent for path in junit_files))


def shown(named: str, folders: Sequence[Path]) -> Shown:
    """The file `named` (a property's value) as the report may show it, given its inputs' folders."""
    try:
        real = Path(os.path.realpath(named))
    except (OSError, ValueError) as exc:  # a NUL in the value, a symlink loop
        return Shown(named, None, f"not a usable path ({exc})")
    if not any(real.is_relative_to(folder) for folder in folders) and not _in_score_cache(real):
        return Shown(named, None, "outside the folders of the JUnit files given and of any score cache")
    try:
        data = read_regular(real, MAX_PNG_BYTES)
    except NotReadable as exc:
        return Shown(named, None, str(exc))
    if not data.startswith(PNG_SIGNATURE):
        return Shown(named, None, "not a PNG (no PNG signature)")
    return Shown(named, data)


def _in_score_cache(real: Path) -> bool:
    """Whether a folder above `real` holds a score cache's file (never opened: stat alone)."""
    return any((folder / CACHE_FILE).is_file() for folder in real.parents)
