"""`--dataset SOURCE`: which kind of source it is, and `load`, reading it with the reader for
that kind: the canonical folder, a hub data set or local files in a `datasets` layout.

Local sets are read from their files, never through `datasets`: the canonical folder by its
own strict reader (imagefolder.py), any other layout row by row (table_rows.py). Only a hub id goes
through `datasets.load_dataset` (table_rows.py too). Rows of either become records the same way
(row_records.py). Collection never decodes an image.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from banana_tests.trajectories.imagefolder import BOM, read_imagefolder
from banana_tests.trajectories.records import METADATA, REQUIRED, DataError
from banana_tests.trajectories.row_records import RowSource, records_from_rows
from banana_tests.trajectories.selection import Loaded, Selection, cap_and_select
from banana_tests.trajectories.table_rows import HUB, METADATA_FILES, HubRows, open_table, walk


class DatasetFormat(StrEnum):
    """How a local source is read: `--dataset-format`'s choices and `SourceOptions.format`."""

    AUTO = "auto"
    CANONICAL = "canonical"
    IMAGEFOLDER = "imagefolder"
    PARQUET = "parquet"
    CSV = "csv"
    JSON = "json"


_SUFFIX_FORMAT = {
    ".parquet": DatasetFormat.PARQUET,
    ".csv": DatasetFormat.CSV,
    ".json": DatasetFormat.JSON,
    ".jsonl": DatasetFormat.JSON,
}
_FILE_FORMATS = "|".join(f for f in DatasetFormat if f not in (DatasetFormat.AUTO, DatasetFormat.CANONICAL))


def default_cache_dir() -> Path:
    """Where image bytes from parquet or the hub are written once: $BANANA_CACHE_DIR or ~/.cache."""
    env = os.environ.get("BANANA_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "banana-tests" / "images"


@dataclass(frozen=True)
class SourceOptions:
    """Where the trajectories come from and how their fields are found."""

    source: str
    revision: str | None = None
    split: str = "train"
    streaming: bool = False
    format: DatasetFormat = DatasetFormat.AUTO
    field_map: Mapping[str, str] = field(default_factory=dict)
    path_pattern: str | None = None
    cache_dir: Path = field(default_factory=default_cache_dir)


def load(options: SourceOptions, selection: Selection) -> Loaded:
    """Read `options.source` and keep what `selection` wants; a set that cannot be read is a DataError."""
    rows: RowSource
    if options.source.startswith(HUB):
        rows = HubRows.open(
            options.source, options.split, streaming=options.streaming, revision=options.revision
        )
    else:
        root = Path(options.source)
        if not root.exists():
            raise DataError(f"{root}: no such file or folder")
        fmt = detect_format(root) if options.format is DatasetFormat.AUTO else options.format
        if fmt is DatasetFormat.CANONICAL:
            return _canonical(root, selection)
        rows = open_table(root, fmt, options.cache_dir)
    return records_from_rows(
        rows,
        selection,
        field_map=options.field_map,
        path_pattern=options.path_pattern,
        cache_dir=options.cache_dir,
    )


def detect_format(root: Path) -> DatasetFormat:
    """canonical when metadata.jsonl has our fields; else what the files are (an imagefolder when
    it has metadata files of its own), found in one walk of the folder."""
    if root.is_file():
        fmt = _SUFFIX_FORMAT.get(root.suffix.lower())
        if fmt is None:
            raise DataError(f"{root}: cannot tell the format; use --dataset-format {_FILE_FORMATS}")
        return fmt
    meta = root / METADATA
    if meta.is_file() and _ours(meta):
        return DatasetFormat.CANONICAL
    if any((root / name).is_file() for name in METADATA_FILES):
        return DatasetFormat.IMAGEFOLDER
    suffixes = {p.suffix.lower() for p in walk(root) if p.name not in METADATA_FILES}
    found = (fmt for suffix, fmt in _SUFFIX_FORMAT.items() if suffix in suffixes)
    return next(found, DatasetFormat.IMAGEFOLDER)


def _ours(meta: Path, lines: int = 20) -> bool:
    """Whether a metadata.jsonl is for the fast reader: one of its first objects has all our
    fields, or none of its first lines is an object at all (empty, blank or garbled: the reader
    then names the file or the lines). Objects without our fields are a foreign imagefolder's."""
    try:
        with meta.open("rb") as text:
            head = list(itertools.islice((line for line in text if line.strip()), lines))
    except OSError as exc:
        raise DataError(f"{meta}: cannot read it: {exc.strerror or exc}") from exc
    objects = []
    for raw in head:
        try:
            row = json.loads(raw.removeprefix(BOM).decode("utf-8"))
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict):
            objects.append(row)
    return not objects or any(set(REQUIRED) <= set(row) for row in objects)


def _canonical(root: Path, selection: Selection) -> Loaded:
    trajectories = read_imagefolder(root)
    records = trajectories.records
    matching = [r for r in records if selection.matches(r.seed_image, r.variant, r.extra)]
    return cap_and_select(
        matching,
        [(r.seed_image, r.run, r.step) for r in matching],
        trajectories.problems,
        selection,
        trajectories.variants,
        sorted({r.seed_image for r in records}),
        sum(selection.leaves_out_as_not_for_iqa(r.seed_image, r.variant, r.extra) for r in records),
    )
