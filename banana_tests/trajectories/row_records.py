"""Records from rows of any table (a local layout or the hub): keys found by the field map,
selected on metadata, and image bytes written once to a cache keyed by their sha256, only for
the selected records, so that an image that arrives as bytes becomes a path like any other."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from banana_tests.trajectories.loaded import Loaded, cap_and_select
from banana_tests.trajectories.local_rows import Row
from banana_tests.trajectories.mapping import FieldMap, image_column, resolve
from banana_tests.trajectories.parquet_rows import EmbeddedImage
from banana_tests.trajectories.records import (
    DataError,
    Problem,
    Record,
    check_file_name,
    check_for_iqa,
    check_sha256,
    identity,
    resolve_inside,
)
from banana_tests.trajectories.selection import Selection


class RowSource(Protocol):
    """Rows to read records from: a local table (`local_rows.Table`) or a hub data set."""

    @property
    def label(self) -> str: ...
    @property
    def root(self) -> Path | None: ...  # local image paths must stay inside it; None for the hub
    @property
    def image_columns(self) -> tuple[str, ...]: ...
    @property
    def columns(self) -> tuple[str, ...]: ...  # empty: taken from the first rows

    def rows(self) -> Iterator[Row | Problem]: ...


def records_from_rows(
    source: RowSource,
    selection: Selection,
    *,
    field_map: Mapping[str, str],
    path_pattern: str | None,
    cache_dir: Path,
) -> Loaded:
    """Records from `source`'s rows: keys found by the field map (`--dataset-field`, `--dataset-
    path-pattern`), selected on metadata, and image bytes written to `cache_dir` only for the
    selected records."""
    rows = source.rows()
    head: list[Row | Problem] = []
    for item in rows:  # the first three rows show the columns and sample paths
        head.append(item)
        if sum(not isinstance(h, Problem) for h in head) == 3:
            break
    samples = [values for _, values in _good(head)]
    if not samples:
        shown = "".join(f"\n  {p}" for p in head)
        raise DataError(f"{source.label}: the data set has no rows" + (f"; unusable:{shown}" if head else ""))
    columns = list(source.columns or dict.fromkeys(k for row in samples for k in row))
    image = image_column(columns, field_map, source.image_columns)
    paths = _sample_paths(samples, image, source.root)
    fmap = resolve(columns, paths, field_map, path_pattern, image)
    records: list[Record] = []
    keys: list[tuple[str, int, int]] = []
    problems: list[Problem] = []
    variants: set[str] = set()
    seeds: set[str] = set()
    left_out = 0  # rows marked "for_iqa": false
    mapped = {fmap.image, "sha256", *fmap.columns.values()}  # the rest of a row is `extra`
    for item in itertools.chain(head, rows):
        if isinstance(item, Problem):
            problems.append(item)
            continue
        where, row = item
        shown, data, errors = "", None, []
        try:
            shown, data = _image_ref(row.get(fmap.image), source.root)
            where = f"{where} ({shown})"
        except DataError as exc:  # the row's other keys still say which cases it touches
            errors.append(str(exc))
        known, bad = _keys(fmap, row, shown)
        extra = {k: v for k, v in row.items() if k not in mapped and _scalar(v)}
        try:
            if errors or bad:
                raise DataError("; ".join(errors + bad))
            seed, variant, run, step = (known[k] for k in ("seed_image", "variant", "run", "step"))
            variants.add(variant)
            seeds.add(seed)
            check_for_iqa(extra.get("for_iqa"), columnar=True)
            if not selection.matches(seed, variant, extra):
                left_out += selection.leaves_out_as_not_for_iqa(seed, variant, extra)
                continue
            if not selection.wants_step(step):
                keys.append((seed, run, step))
                continue
            path, digest = _materialise(shown, data, source.root, cache_dir)
            digest = digest or check_sha256(row.get("sha256"))
            keys.append((seed, run, step))  # a step the run holds: its record is usable
            records.append(Record(seed, variant, run, step, path, where, digest, extra))
        except DataError as exc:
            problems.append(Problem(where, str(exc), **known, extra=extra))
    return cap_and_select(records, keys, problems, selection, sorted(variants), sorted(seeds), left_out)


def _good(items: Iterable[Row | Problem]) -> Iterator[Row]:
    return (item for item in items if not isinstance(item, Problem))


def _keys(fmap: FieldMap, row: Mapping[str, Any], shown: str) -> tuple[dict[str, Any], list[str]]:
    try:
        return identity(fmap.fields(row, shown), columnar=True)
    except DataError as exc:  # the image path does not match --dataset-path-pattern
        return {}, [str(exc)]


def _sample_paths(head: list[dict[str, Any]], image: str | None, root: Path | None) -> list[str]:
    """The image paths of the first rows, to find keys in; a bad one is that row's problem later."""
    paths = []
    for row in head:
        try:
            paths.append(_image_ref(row.get(image) if image else None, root)[0])
        except DataError:
            continue
    return paths


def _image_ref(value: Any, root: Path | None) -> tuple[str, EmbeddedImage | bytes | None]:
    """(a path to show and match, the image if it came as bytes)."""
    if isinstance(value, EmbeddedImage):
        return _shown(value.path, root) if value.path else "<bytes>", value
    if isinstance(value, Mapping):
        data, path = value.get("bytes"), value.get("path")
        return _shown(path, root) if path else "<bytes>", data
    if isinstance(value, bytes):
        return "<bytes>", value
    if isinstance(value, str):
        return _shown(check_file_name(value), root), None
    raise DataError(f"image column holds {type(value).__name__}, not a path or image bytes")


def _shown(path: str, root: Path | None) -> str:
    """A local path relative to the root (what path patterns see), other paths as given."""
    if root is not None and os.path.isabs(path):
        p = Path(path)
        if p.is_relative_to(root):
            return p.relative_to(root).as_posix()
    return path


def _materialise(
    shown: str, data: EmbeddedImage | bytes | None, root: Path | None, cache: Path
) -> tuple[Path, str | None]:
    """A local path for the image: its file inside the root, or its bytes written once to the
    cache under their sha256 (an indexed parquet image's bytes are read only if they are not there)."""
    if data is not None:
        image = data if isinstance(data, EmbeddedImage) else EmbeddedImage.holding(data)
        path = cache / image.sha256[:2] / image.sha256
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(image.read())
            os.replace(tmp, path)
        return path, image.sha256
    if root is None:
        raise DataError(f"image {shown!r} came without bytes and is not a local file")
    return resolve_inside(root, shown), None


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None
