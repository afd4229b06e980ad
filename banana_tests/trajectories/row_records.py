"""Records from rows of any table (a local layout or the hub): keys found by the field map,
selected on metadata, and image bytes written once to a cache keyed by their sha256, only for
the selected records, so that an image that arrives as bytes becomes a path like any other.

The field map says which column (or part of the image path) holds each key of a record:
explicit `--dataset-map` entries win, then named groups of `--dataset-path-pattern`, then common
column names. A set that still lacks a key gets an error listing its columns and sample paths,
because the layout of a foreign set (Banana100 on the hub included) cannot be assumed.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

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
from banana_tests.trajectories.selection import Loaded, Selection, cap_and_select
from banana_tests.trajectories.table_rows import EmbeddedImage, Row

KEYS = ("seed_image", "step", "run", "variant")
DEFAULTS: dict[str, Any] = {"run": 0, "variant": "replicate"}  # a set with one run, or one variant
COMMON_NAMES: dict[str, tuple[str, ...]] = {
    "seed_image": ("seed_image", "seed", "source_image", "source", "image_name", "initial_image", "scene"),
    "step": ("step", "iteration", "iter", "turn", "round", "step_idx"),
    "run": ("run", "trial", "repeat", "repetition", "run_id", "run_idx"),
    "variant": ("variant", "setting", "task", "prompt_type", "experiment"),
    "image": ("image", "file_name", "image_path", "path", "file", "img"),
}
DEFAULT_PATTERN = r"(?P<seed_image>[^/]+)/run_?(?P<run>\d+)/(?:step_?)?(?P<step>\d+)\.[A-Za-z]+$"


@dataclass(frozen=True)
class FieldMap:
    """Resolved sources of each key: a column name, or None to take it from the path pattern."""

    columns: Mapping[str, str] = field(default_factory=dict)
    pattern: re.Pattern[str] | None = None
    image: str = "image"

    def fields(self, row: Mapping[str, Any], path: str) -> dict[str, Any]:
        """The record keys of one row; `path` is the image path the pattern matches against."""
        out = dict(DEFAULTS)
        if self.pattern is not None:
            m = self.pattern.search(path)
            if m is None:
                raise DataError(f"image path {path!r} does not match --dataset-path-pattern")
            out.update({k: v for k, v in m.groupdict().items() if v is not None})
        out.update({key: row.get(col) for key, col in self.columns.items()})  # absent: null, refused
        return out


def parse_map(text: str | None) -> dict[str, str]:
    """`seed_image=name,step=turn` → {"seed_image": "name", "step": "turn"}; `image` may be mapped too."""
    if not text:
        return {}
    out = {}
    for item in text.split(","):
        key, sep, column = (s.strip() for s in item.partition("="))
        if not sep or not column or key not in (*KEYS, "image"):
            raise ValueError(
                f"--dataset-map takes key=column pairs with keys {', '.join((*KEYS, 'image'))}, got {item!r}"
            )
        out[key] = column
    return out


def resolve(
    columns: Sequence[str],
    sample_paths: Sequence[str],
    explicit: Mapping[str, str],
    pattern: str | None,
    image: str | None,
) -> FieldMap:
    """A FieldMap for a set with `columns`; a DataError that shows what was found if keys are missing."""
    compiled = _compile(pattern) if pattern else None
    from_pattern = set(compiled.groupindex) if compiled else set()
    unknown = [c for c in explicit.values() if c not in columns]
    if unknown:
        raise _mapping_error(
            f"--dataset-map names missing column(s) {', '.join(unknown)}", columns, sample_paths
        )
    chosen = {k: v for k, v in explicit.items() if k != "image"}
    for key in KEYS:
        if key in chosen or key in from_pattern:
            continue
        found = _common_column(columns, key)
        if found is not None:
            chosen[key] = found
    if compiled is None and not {"seed_image", "step"} <= set(chosen):
        fallback = re.compile(DEFAULT_PATTERN)
        if sample_paths and all(fallback.search(p) for p in sample_paths):
            compiled, from_pattern = fallback, set(fallback.groupindex) - set(chosen)
    missing = [k for k in ("seed_image", "step") if k not in chosen and k not in from_pattern]
    if missing:
        raise _mapping_error(f"cannot tell the {' and '.join(missing)} of each image", columns, sample_paths)
    if not image:
        raise _mapping_error("no image column", columns, sample_paths)
    return FieldMap(chosen, compiled, image)


def image_column(
    columns: Sequence[str], explicit: Mapping[str, str], image_features: Sequence[str]
) -> str | None:
    """The column holding images: mapped, else the first Image feature, else a common name."""
    return explicit.get("image") or next(iter(image_features), None) or _common_column(columns, "image")


def _common_column(columns: Sequence[str], key: str) -> str | None:
    """The column under one of `key`'s common names, matched case-insensitively, in their order."""
    lower = {c.lower(): c for c in columns}
    return next((lower[n] for n in COMMON_NAMES[key] if n in lower), None)


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise DataError(f"--dataset-path-pattern {pattern!r}: {exc}") from exc
    stray = set(compiled.groupindex) - set(KEYS)
    if stray:
        raise DataError(
            f"--dataset-path-pattern: unknown group(s) {', '.join(sorted(stray))}; use {', '.join(KEYS)}"
        )
    return compiled


def _mapping_error(what: str, columns: Sequence[str], sample_paths: Sequence[str]) -> DataError:
    samples = "".join(f"\n    {p}" for p in sample_paths[:3]) or " (none)"
    return DataError(
        f"{what}.\n  columns: {', '.join(columns) or '(none)'}\n  sample image paths:{samples}\n"
        "  map them with --dataset-map seed_image=<column>,step=<column>,run=<column>,variant=<column> "
        "or --dataset-path-pattern with named groups, e.g. "
        r"'(?P<seed_image>[^/]+)/run_?(?P<run>\d+)/(?P<step>\d+)\.png'"
    )


class RowSource(Protocol):
    """Rows to read records from: a local table (`table_rows.Table`) or a hub data set."""

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
