"""Rows of a parquet file: read through pyarrow once, then from an index kept in the image cache.

Collecting a parquet set imported pyarrow, and numpy with it (52 of the 157 MiB a 6,500-image
collection peaked at), only to read a few small columns and hash the image bytes. The first read
of a file writes an index beside the cached images: every column with the image bytes left out,
and each image's sha256, the name its bytes are cached under. A later read of the same file (same
size, mtime and ctime, which any rewrite changes) reads the index instead and imports nothing;
an image whose cached copy has gone is read back from the file, and its bytes must still match.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from banana_tests.safe_files import read_regular
from banana_tests.trajectories.records import DataError

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
