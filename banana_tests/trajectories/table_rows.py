"""A set's rows in a `datasets` layout: a local one's read straight from its files, a hub one's
(`--dataset hf:owner/name`) through `datasets` with images left undecoded.

`datasets.load_dataset` on a local folder resolves every data-file pattern over every file
(7.4 s at 6,000 images), builds a streaming data set and imports torch, all to hand back rows
this module reads in a fraction of the time: metadata.jsonl/.csv/.parquet of an imagefolder
(or its image files alone), parquet files (image bytes included, then from an
index), CSV and JSON files. Rows look as `datasets` gives them with images left undecoded: an
imagefolder's `file_name` becomes an `image` column holding the path relative to the set's root,
a parquet image cell with bytes an `EmbeddedImage`. Only a hub set goes through `datasets`, and
remote code is never run: the loader passes no `trust_remote_code`.

A parquet file's rows are read through pyarrow once, then from an index kept in the image cache.
Collecting a parquet set imported pyarrow, and numpy with it (52 of the 157 MiB a 6,500-image
collection peaked at), only to read a few small columns and hash the image bytes. The first read
of a file writes an index beside the cached images: every column with the image bytes left out,
and each image's sha256, the name its bytes are cached under. A later read of the same file (same
size, mtime and ctime, which any rewrite changes) reads the index instead and imports nothing;
an image whose cached copy has gone is read back from the file, and its bytes must still match.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from banana_tests.safe_files import NotReadable, read_regular, require_regular
from banana_tests.trajectories.imagefolder import BOM, parse_line
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


INDEX_FOLDER = "parquet-index"  # inside the image cache, beside the two-hex-digit folders
INDEX_VERSION = 1
MAX_INDEX_BYTES = 256 * 2**20  # row offsets, a few dozen bytes a row
PARQUET_BATCH = 256  # rows decoded at a time: a 64 px image is ~12 KB, a 1024 px one ~2 MB
_PLAIN = frozenset({str, int, float, bool, type(None)})


@dataclass(frozen=True)
class EmbeddedImage:
    """An image held as bytes in a parquet cell, known by the sha256 of those bytes."""

    path: str | None  # the path stored beside the bytes, if any
    sha256: str
    data: bytes | None = field(default=None, repr=False, compare=False)  # there on a first read
    origin: _CellReader | None = field(default=None, repr=False, compare=False)  # else read from here
    row: int = field(default=0, repr=False, compare=False)
    column: str = field(default="", repr=False, compare=False)

    @classmethod
    def holding(cls, data: bytes, path: str | None = None) -> EmbeddedImage:
        return cls(path, hashlib.sha256(data).hexdigest(), data)

    def read(self) -> bytes:
        """The bytes: kept from the first read, or read back from the file (which must still hold them)."""
        if self.data is not None:
            return self.data
        assert self.origin is not None, "an indexed image knows its file"
        data = self.origin.bytes_at(self.row, self.column)
        if data is None or hashlib.sha256(data).hexdigest() != self.sha256:
            where = f"{self.origin.path} row {self.row + 1}"
            raise DataError(f"{where}: its {self.column} changed while the set was read; run again")
        return data


@dataclass(frozen=True)
class Schema:
    """A file's columns, and which of them hold images."""

    columns: tuple[str, ...]
    image_columns: tuple[str, ...]


def read_schema(path: Path, index_dir: Path | None) -> Schema:
    """From the file's index when it is current, else from the file."""
    index = _current_index(path, index_dir)
    if index is not None:
        return Schema(tuple(index["columns"]), tuple(index["image_columns"]))
    return _file_schema(path)


def read_rows(path: Path, label: str, index_dir: Path | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every row of the file as `datasets` gives it, an image cell with bytes as an EmbeddedImage."""
    index = _current_index(path, index_dir)
    if index is not None:
        yield from _indexed_rows(path, label, index)
        return
    stamp = _stamp(path)  # before the read: a file rewritten meanwhile gets a stamp of its own
    schema = _file_schema(path)
    kept: dict[str, list[Any]] | None = {c: [] for c in schema.columns} if index_dir else None
    digests: dict[str, list[str | None]] = {c: [] for c in schema.image_columns}
    for number, row in enumerate(_arrow_rows(path), start=1):
        for column in schema.image_columns:
            row[column] = _embedded(row.get(column), digests[column])
        if kept is not None:
            kept = _keep(kept, row, schema)
        yield f"{label} row {number}", row
    if kept is not None and index_dir is not None:
        _write_index(path, index_dir, stamp, schema, kept, digests)


def _embedded(cell: Any, digests: list[str | None]) -> Any:
    """An image cell as an EmbeddedImage when it holds bytes, its digest noted for the index."""
    if isinstance(cell, dict) and isinstance(cell.get("bytes"), bytes):
        image = EmbeddedImage.holding(cell["bytes"], cell.get("path"))
        digests.append(image.sha256)
        return image
    digests.append(None)
    return cell


def _keep(kept: dict[str, list[Any]], row: dict[str, Any], schema: Schema) -> dict[str, list[Any]] | None:
    """The row's values for the index (an image as its path alone); None once a value is one
    JSON cannot give back as it was (dates, bytes outside an image, ...): that file keeps no index."""
    for column in schema.columns:
        value = row.get(column)
        if isinstance(value, EmbeddedImage):
            value = {"bytes": None, "path": value.path}
        if not _plain(value):
            return None
        kept[column].append(value)
    return kept


def _plain(value: Any) -> bool:
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is list:
        return all(map(_plain, value))
    return kind is dict and all(type(k) is str and _plain(v) for k, v in value.items())


def _indexed_rows(path: Path, label: str, index: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    columns: list[str] = index["columns"]
    values: dict[str, list[Any]] = index["values"]
    digests: dict[str, list[str | None]] = index["sha256"]
    origin = _CellReader(path)
    for number, cells in enumerate(zip(*(values[c] for c in columns), strict=True)):
        row = dict(zip(columns, cells, strict=True))
        for column, shas in digests.items():
            sha = shas[number]
            if sha is not None:
                stored = row[column]["path"]
                row[column] = EmbeddedImage(stored, sha, origin=origin, row=number, column=column)
        yield f"{label} row {number + 1}", row


class _CellReader:
    """Reads image bytes back from an indexed file, a row group at a time (they are asked for in
    row order), for images whose cached copies have gone."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: Any = None
        self._group: tuple[int, int, str, list[Any]] = (0, 0, "", [])

    def bytes_at(self, row: int, column: str) -> bytes | None:
        start, end, held, cells = self._group
        if not (start <= row < end and held == column):
            try:
                self._group = self._read_group(row, column)
            except Exception as exc:  # pyarrow raises its own kinds for a bad file, and OSError
                raise DataError(f"{self.path}: cannot read it again: {type(exc).__name__}: {exc}") from exc
            start, _, _, cells = self._group
        cell = cells[row - start] if 0 <= row - start < len(cells) else None
        return cell.get("bytes") if isinstance(cell, dict) else None

    def _read_group(self, row: int, column: str) -> tuple[int, int, str, list[Any]]:
        if self._handle is None:
            self._handle = pyarrow_parquet().ParquetFile(self.path, pre_buffer=False)
        start = 0
        for group in range(self._handle.num_row_groups):
            end = start + self._handle.metadata.row_group(group).num_rows
            if row < end:
                table = self._handle.read_row_group(group, columns=[column], use_threads=False)
                return start, end, column, table.column(0).to_pylist()
            start = end
        return start, start, column, []


def _stamp(path: Path) -> list[int]:
    """What any rewrite of the file changes: size, mtime, and ctime (which a copy that keeps the
    mtime, or a `touch -r`, still moves)."""
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _index_path(path: Path, index_dir: Path) -> Path:
    return index_dir / (hashlib.sha256(os.path.realpath(path).encode()).hexdigest()[:32] + ".json")


def _current_index(path: Path, index_dir: Path | None) -> dict[str, Any] | None:
    """The file's index if it was written for the file as it is now; an unreadable one is none."""
    if index_dir is None:
        return None
    try:
        index = json.loads(read_regular(_index_path(path, index_dir), MAX_INDEX_BYTES))  # NotReadable: none
        current = (
            index["version"] == INDEX_VERSION
            and index["file"] == os.path.realpath(path)
            and index["stamp"] == _stamp(path)
        )
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return index if current else None


def _write_index(
    path: Path,
    index_dir: Path,
    stamp: list[int],
    schema: Schema,
    values: dict[str, list[Any]],
    digests: dict[str, list[str | None]],
) -> None:
    """Written whole and renamed into place; a cache that cannot hold it just means no index."""
    index = {
        "version": INDEX_VERSION,
        "file": os.path.realpath(path),
        "stamp": stamp,
        "columns": list(schema.columns),
        "image_columns": list(schema.image_columns),
        "values": values,
        "sha256": digests,
    }
    target = _index_path(path, index_dir)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    try:
        index_dir.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(index, separators=(",", ":")))
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)


def _file_schema(path: Path) -> Schema:
    """Image columns are those `datasets` wrote as Image features, or any struct of bytes and
    path (how an Image is stored)."""
    pq = pyarrow_parquet()
    try:
        schema = pq.read_schema(path)
    except OSError as exc:
        raise DataError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    except Exception as exc:  # pyarrow raises its own kinds (ArrowInvalid) for a bad file
        raise DataError(f"{path}: not a parquet file: {type(exc).__name__}: {exc}") from exc
    features: dict[str, Any] = {}
    meta = (schema.metadata or {}).get(b"huggingface")
    if meta:
        try:
            features = json.loads(meta).get("info", {}).get("features", {})
        except (ValueError, AttributeError):
            features = {}
    images = []
    for column in schema:
        feature = features.get(column.name)
        typ = column.type
        stored = typ.__class__.__name__ == "StructType" and {"bytes", "path"} <= {f.name for f in typ}
        if (isinstance(feature, dict) and feature.get("_type") == "Image") or stored:
            images.append(column.name)
    return Schema(tuple(schema.names), tuple(images))


def _arrow_rows(path: Path) -> Iterator[dict[str, Any]]:
    pq = pyarrow_parquet()
    try:
        # One row group at a time, in this thread: iter_batches buffered a whole file's column
        # chunks first (24 MB for 2,000 images of 64 px), and arrow's thread pool kept ~5 MB more.
        handle = pq.ParquetFile(path, pre_buffer=False)
        for group in range(handle.num_row_groups):
            table = handle.read_row_group(group, use_threads=False)
            for batch in table.to_batches(max_chunksize=PARQUET_BATCH):
                yield from batch.to_pylist()
    except OSError:
        raise
    except Exception as exc:  # pyarrow raises its own kinds for a bad file
        raise DataError(f"{path}: cannot read it as parquet: {type(exc).__name__}: {exc}") from exc


def pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pyarrow comes with `datasets`, an optional dependency
        raise DataError(f"reading parquet needs pyarrow (pip install pyarrow): {exc}") from exc
    return pq
