"""A set's rows in a `datasets` layout: a local one's read straight from its files, a hub one's
(`--dataset hf:owner/name`) through `datasets` with images left undecoded.

`datasets.load_dataset` on a local folder resolves every data-file pattern over every file
(7.4 s at 6,000 images), builds a streaming data set and imports torch, all to hand back rows
this module reads in a fraction of the time: metadata.jsonl/.csv/.parquet of an imagefolder
(or its image files alone), parquet files (parquet_rows.py: image bytes included, then from an
index), CSV and JSON files. Rows look as `datasets` gives them with images left undecoded: an
imagefolder's `file_name` becomes an `image` column holding the path relative to the set's root,
a parquet image cell with bytes an `EmbeddedImage`. Only a hub set goes through `datasets`, and
remote code is never run: the loader passes no `trust_remote_code`.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from banana_tests.safe_files import NotReadable, require_regular
from banana_tests.trajectories.imagefolder import BOM, parse_line
from banana_tests.trajectories.parquet_rows import INDEX_FOLDER, read_rows, read_schema
from banana_tests.trajectories.records import METADATA, DataError, Problem

Row = tuple[str, dict[str, Any]]  # where the row is (for messages), its values by column
METADATA_FILES = (METADATA, "metadata.csv", "metadata.parquet")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff", ".jfif", ".ppm", ".pgm")
IMAGE_COLUMN = "image"  # what an imagefolder's file_name is called in its rows, as in `datasets`
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Table:
    """A set's rows, with what is known of its columns before they are read."""

    label: str  # the source, for messages
    root: Path  # image paths must stay inside it
    files: tuple[Path, ...]
    kind: str  # "imagefolder", "parquet", "csv" or "json"
    image_columns: tuple[str, ...] = ()  # columns known to hold images
    columns: tuple[str, ...] = field(default=())  # from a schema; else found in the first rows
    index_dir: Path | None = None  # where parquet files keep their indexes

    def rows(self) -> Iterator[Row | Problem]:
        """Every row in file order; a line or file that cannot be read is a Problem naming it."""
        for path in self.files:
            if self.kind == "imagefolder" and path.name not in METADATA_FILES:
                yield str(path), {IMAGE_COLUMN: path.relative_to(self.root).as_posix()}
                continue
            base = path.parent.relative_to(self.root).as_posix() if self.kind == "imagefolder" else None
            for where, row in _read(path, self._where(path), self.index_dir):
                if base is not None and isinstance(row, dict):
                    row = _with_image(row, base)
                yield (where, row) if isinstance(row, dict) else row

    def _where(self, path: Path) -> str:
        """The label rows are named by: the file, or the source itself when it is that file."""
        return self.label if Path(self.label) == path else str(path)


def open_table(root: Path, kind: str, cache_dir: Path | None = None) -> Table:
    """The table of a local `root` read as `kind` (imagefolder, parquet, csv or json); parquet
    files keep their indexes in `cache_dir`, the image cache, when one is given."""
    index_dir = cache_dir / INDEX_FOLDER if cache_dir is not None else None
    if kind == "imagefolder":
        return _imagefolder(root, index_dir)
    suffixes = {"parquet": (".parquet",), "csv": (".csv",), "json": (".json", ".jsonl")}[kind]
    if root.is_dir():
        files = walk(root, lambda name: name.lower().endswith(suffixes) and name not in METADATA_FILES)
        if not files:
            raise DataError(f"{root}: no {'/'.join(suffixes)} files for --dataset-format {kind}")
    else:
        files = (root,)
    base = root if root.is_dir() else root.parent
    if kind == "parquet":
        _require_table_file(files[0])
    schema = read_schema(files[0], index_dir) if kind == "parquet" else None
    images, columns = (schema.image_columns, schema.columns) if schema else ((), ())
    return Table(str(root), Path(os.path.realpath(base)), files, kind, images, columns, index_dir)


def _imagefolder(root: Path, index_dir: Path | None) -> Table:
    """Its metadata files when it has any (rows for the images they name, as `datasets` reads
    it), else one row per image file, for a path pattern to take the keys from."""
    if root.is_file():
        raise DataError(f"{root}: an imagefolder is a folder")
    real = Path(os.path.realpath(root))  # walked, so every path found is relative to it
    metadata = walk(real, METADATA_FILES.__contains__)
    kinds = {p.suffix for p in metadata}
    if len(kinds) > 1:
        raise DataError(f"{root}: metadata files of different kinds ({', '.join(sorted(kinds))}); keep one")
    if metadata:
        return Table(str(root), real, metadata, "imagefolder", (IMAGE_COLUMN,), index_dir=index_dir)
    images = walk(real, lambda name: name.lower().endswith(IMAGE_SUFFIXES))
    if not images:
        raise DataError(f"{root}: no image files and no {' / '.join(METADATA_FILES)}")
    return Table(str(root), real, images, "imagefolder", (IMAGE_COLUMN,), (IMAGE_COLUMN,))


def walk(root: Path, keep: Callable[[str], bool] = bool) -> tuple[Path, ...]:
    """The files under `root` whose names `keep` takes, sorted, hidden ones skipped; one walk (no
    glob per pattern), and a Path made only for a file kept (a Path per image was a tenth of
    reading a 28,000-line metadata.jsonl)."""
    found: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(folder, n) for n in sorted(names) if not n.startswith(".") and keep(n)]
    return tuple(found)


def _require_table_file(path: Path) -> None:
    """A DataError unless `path` is a regular file: reading a FIFO blocks forever, a device never ends."""
    try:
        require_regular(path)
    except NotReadable as exc:
        raise DataError(f"{path}: cannot read it: {exc}") from None


def _with_image(row: dict[str, Any], base: str) -> dict[str, Any]:
    """An imagefolder metadata row as `datasets` gives it: `file_name` (relative to the metadata
    file's folder) as the `image` column, the other fields after it."""
    name = row.pop("file_name", None)
    if isinstance(name, str) and base != ".":
        name = f"{base}/{name}"
    return {IMAGE_COLUMN: name, **row}


def _read(path: Path, label: str, index_dir: Path | None) -> Iterator[tuple[str, dict[str, Any] | Problem]]:
    suffix = path.suffix.lower()
    _require_table_file(path)
    try:
        if suffix == ".parquet":
            yield from read_rows(path, label, index_dir)
        elif suffix == ".csv":
            yield from _csv_rows(path, label)
        else:
            yield from _json_rows(path, label)
    except OSError as exc:
        raise DataError(f"{path}: cannot read it: {exc.strerror or exc}") from exc


def _json_rows(path: Path, label: str) -> Iterator[tuple[str, dict[str, Any] | Problem]]:
    """JSON lines (one object a line, each bad line a problem of its own), or one JSON array."""
    with path.open("rb") as text:
        first = text.read(64).lstrip(BOM + b" \t\r\n")[:1]
        text.seek(0)
        if first == b"[":
            yield from _json_array(path, label, text.read())
            return
        for number, raw in enumerate(text, start=1):
            raw = raw.removeprefix(BOM) if number == 1 else raw
            if raw.strip():
                where = f"{label}:{number}"
                yield where, parse_line(raw, where)


def _json_array(path: Path, label: str, data: bytes) -> Iterator[tuple[str, dict[str, Any] | Problem]]:
    try:
        items = json.loads(data.removeprefix(BOM))
    except (ValueError, RecursionError) as exc:
        raise DataError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(items, list):
        raise DataError(f"{path}: a JSON data file is an array of objects or one object per line")
    for number, item in enumerate(items, start=1):
        where = f"{label} row {number}"
        if isinstance(item, dict):
            yield where, item
        else:
            yield where, Problem(where, f"a row must be a JSON object, got {type(item).__name__}")


def _csv_rows(path: Path, label: str) -> Iterator[tuple[str, dict[str, Any] | Problem]]:
    """Rows with each column typed as a whole, as pandas (and so `datasets`) reads CSV: a column
    of whole numbers holds ints, one with a fraction floats, anything else strings; an empty
    cell is null."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        try:
            reader = csv.reader(handle)
            header = next(reader, None)
            cells = list(reader)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: not CSV: {exc}") from exc
    if not header:
        raise DataError(f"{path}: no header row")
    width = len(header)
    padded = [(c + [""] * width)[:width] for c in cells]  # a short row's last cells are empty
    columns = [_typed([row[i] for row in padded]) for i in range(width)]
    for number, raw in enumerate(cells, start=1):
        where = f"{label} row {number}"
        if len(raw) > width:
            yield where, Problem(where, f"{len(raw)} cells for the {width} columns of the header")
        else:
            yield where, {name: column[number - 1] for name, column in zip(header, columns, strict=True)}


def _typed(cells: Sequence[str]) -> list[Any]:
    filled = [c for c in cells if c != ""]
    if all(_INTEGER.fullmatch(c) for c in filled):
        return [int(c) if c != "" else None for c in cells]
    try:
        return [float(c) if c != "" else None for c in cells]
    except ValueError:
        return [c if c != "" else None for c in cells]


HUB = "hf:"


@dataclass(frozen=True)
class HubRows:
    """A hub data set's rows through `datasets` (downloaded once, then read from its cache),
    images left undecoded."""

    label: str
    data: Any  # a datasets Dataset or IterableDataset
    image_columns: tuple[str, ...]
    root: None = None
    columns: tuple[str, ...] = ()
    batch: int = 1000

    @classmethod
    def open(cls, source: str, split: str, *, streaming: bool, revision: str | None) -> HubRows:
        """`source` is `hf:owner/name`; `revision` a branch, tag or commit (None: the default branch)."""
        import datasets

        repo = source[len(HUB) :]
        kwargs: dict[str, Any] = {"split": split, "streaming": streaming}
        if revision:
            kwargs["revision"] = revision
        try:
            ds = datasets.load_dataset(repo, **kwargs)
        except Exception as exc:
            raise _hub_error(source, revision, exc) from exc
        features = ds.features or {}
        images = tuple(k for k, f in features.items() if isinstance(f, datasets.Image))
        for column in images:
            ds = ds.cast_column(column, datasets.Image(decode=False))
        label = f"{source}[{split}]"
        return cls(label, ds, images, columns=tuple(features))

    def rows(self) -> Iterator[Row]:
        number = 0
        try:
            for batch in self.data.iter(batch_size=self.batch):  # columns of a batch, not rows
                names = list(batch)
                for values in zip(*(batch[n] for n in names), strict=True):
                    number += 1
                    yield f"{self.label} row {number}", dict(zip(names, values, strict=True))
        except Exception as exc:  # datasets, pyarrow and pandas each raise their own kinds for a bad file
            raise DataError(f"{self.label}: reading rows failed: {type(exc).__name__}: {exc}") from exc


def _hub_error(source: str, revision: str | None, exc: Exception) -> DataError:
    from huggingface_hub import constants

    download = f"huggingface-cli download --repo-type dataset {source[len(HUB) :]}"
    download += f" --revision {revision}" if revision else ""
    if constants.HF_HUB_OFFLINE:
        return DataError(
            f"{source}: the data set is not cached here and HF_HUB_OFFLINE is set. Get it once "
            f"online with `{download}` (or run once "
            f"without HF_HUB_OFFLINE), or download it and pass the folder as --dataset PATH. ({exc})"
        )
    return DataError(f"{source}: datasets could not load it: {type(exc).__name__}: {exc}")
