"""`--dataset SOURCE`: the canonical folder, a hub data set or local files in a `datasets` layout.

Local sets are read from their files, never through `datasets`: the canonical folder by its
own strict reader (records.py), any other layout row by row (local_rows.py), its keys found by
the field map (mapping.py). Only a hub id goes through `datasets.load_dataset`, with images cast
to `Image(decode=False)`. Collection never decodes: an image that arrives as bytes (parquet, the
hub) is written once to a cache keyed by its sha256 and becomes a path like any other. Records
are selected on metadata before their bytes are kept. Remote code is never run: the loader
passes no `trust_remote_code`.
"""

from __future__ import annotations

import itertools
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from banana_tests.cases import CaseKey, sort_key
from banana_tests.trajectories.local_rows import METADATA_FILES, Row, open_table, walk
from banana_tests.trajectories.mapping import FieldMap, image_column, resolve
from banana_tests.trajectories.parquet_rows import EmbeddedImage
from banana_tests.trajectories.plan import CasePlan
from banana_tests.trajectories.records import (
    BOM,
    METADATA,
    REQUIRED,
    DataError,
    DataWarning,
    Problem,
    Record,
    check_file_name,
    check_for_iqa,
    check_sha256,
    identity,
    read_imagefolder,
    resolve_inside,
)
from banana_tests.trajectories.selection import Selection

HUB = "hf:"
FORMATS = ("auto", "canonical", "imagefolder", "parquet", "csv", "json")
_SUFFIX_FORMAT = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}


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
    format: str = "auto"
    field_map: Mapping[str, str] = field(default_factory=dict)
    path_pattern: str | None = None
    cache_dir: Path = field(default_factory=default_cache_dir)


@dataclass(frozen=True)
class Loaded:
    """The selected records, the problems that could concern them, what the set holds overall,
    and the steps each selected (seed image, run) holds before the steps are selected."""

    records: list[Record]
    problems: list[Problem]
    variants: list[str]
    seed_images: list[str]
    held: Mapping[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)
    not_for_iqa: int = 0  # records left out only because they are marked "for_iqa": false


def load(options: SourceOptions, selection: Selection) -> Loaded:
    """Read `options.source` and keep what `selection` wants; a set that cannot be read is a DataError."""
    if options.source.startswith(HUB):
        return _from_rows(HubRows.open(options), options, selection)
    root = Path(options.source)
    if not root.exists():
        raise DataError(f"{root}: no such file or folder")
    fmt = detect_format(root) if options.format == "auto" else options.format
    if fmt == "canonical":
        return _canonical(root, selection)
    return _from_rows(open_table(root, fmt, options.cache_dir), options, selection)


def detect_format(root: Path) -> str:
    """canonical when metadata.jsonl has our fields; else what the files are (an imagefolder when
    it has metadata files of its own), found in one walk of the folder."""
    if root.is_file():
        fmt = _SUFFIX_FORMAT.get(root.suffix.lower())
        if fmt is None:
            raise DataError(f"{root}: cannot tell the format; use --dataset-format {'|'.join(FORMATS[2:])}")
        return fmt
    meta = root / METADATA
    if meta.is_file() and _ours(meta):
        return "canonical"
    if any((root / name).is_file() for name in METADATA_FILES):
        return "imagefolder"
    suffixes = {p.suffix.lower() for p in walk(root) if p.name not in METADATA_FILES}
    return next((fmt for suffix, fmt in _SUFFIX_FORMAT.items() if suffix in suffixes), "imagefolder")


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
    loaded = _selected(
        [r for r in records if selection.matches(r.seed_image, r.variant, r.extra)],
        [
            (r.seed_image, r.run, r.step)
            for r in records
            if selection.matches(r.seed_image, r.variant, r.extra)
        ],
        trajectories.problems,
        selection,
        trajectories.variants,
        sorted({r.seed_image for r in records}),
    )
    left_out = sum(selection.leaves_out_as_not_for_iqa(r.seed_image, r.variant, r.extra) for r in records)
    return replace(loaded, not_for_iqa=left_out)


def _selected(
    records: Sequence[Record],
    keys: Sequence[tuple[str, int, int]],
    problems: Sequence[Problem],
    selection: Selection,
    variants: list[str],
    seed_images: list[str],
) -> Loaded:
    """Cap the runs and select the steps of `records` (all steps or the wanted ones, with the
    keys of every step matching the rest of the selection), keeping the problems that could
    concern them. The run cap counts the runs bad records name too: a run whose every record
    is bad is still one of the first runs, and its cases say why."""
    concerned = [p for p in problems if selection.concerns(p)]
    runs: dict[str, set[int]] = {}
    for seed, run, _ in keys:
        runs.setdefault(seed, set()).add(run)
    for p in concerned:
        if p.seed_image is not None and p.run is not None:
            runs.setdefault(p.seed_image, set()).add(p.run)
    first = selection.first_runs(runs)

    def kept(seed: str | None, run: int | None) -> bool:
        return first is None or seed is None or run is None or run in first[seed]

    held: dict[tuple[str, int], set[int]] = {}
    for seed, run, step in keys:
        if kept(seed, run):
            held.setdefault((seed, run), set()).add(step)
    return Loaded(
        [r for r in records if kept(r.seed_image, r.run) and selection.wants_step(r.step)],
        [p for p in concerned if kept(p.seed_image, p.run)],
        variants,
        seed_images,
        {key: tuple(sorted(steps)) for key, steps in held.items()},
    )


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


def _from_rows(source: RowSource, options: SourceOptions, selection: Selection) -> Loaded:
    """Records from `source`'s rows: keys found by the field map, selected on metadata, and
    image bytes written to the cache only for the selected records."""
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
    image = image_column(columns, options.field_map, source.image_columns)
    paths = _sample_paths(samples, image, source.root)
    fmap = resolve(columns, paths, options.field_map, options.path_pattern, image)
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
            keys.append((seed, run, step))
            if not selection.wants_step(step):
                continue
            path, digest = _materialise(shown, data, source.root, options.cache_dir)
            digest = digest or check_sha256(row.get("sha256"))
            records.append(Record(seed, variant, run, step, path, where, digest, extra))
        except DataError as exc:
            problems.append(Problem(where, str(exc), **known, extra=extra))
    loaded = _selected(records, keys, problems, selection, sorted(variants), sorted(seeds))
    return replace(loaded, not_for_iqa=left_out)


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
    def open(cls, options: SourceOptions) -> HubRows:
        import datasets

        repo = options.source[len(HUB) :]
        kwargs: dict[str, Any] = {"split": options.split, "streaming": options.streaming}
        if options.revision:
            kwargs["revision"] = options.revision
        try:
            ds = datasets.load_dataset(repo, **kwargs)
        except Exception as exc:
            raise _hub_error(repo, options, exc) from exc
        features = ds.features or {}
        images = tuple(k for k, f in features.items() if isinstance(f, datasets.Image))
        for column in images:
            ds = ds.cast_column(column, datasets.Image(decode=False))
        label = f"{options.source}[{options.split}]"
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


def _hub_error(repo: str, options: SourceOptions, exc: Exception) -> DataError:
    from huggingface_hub import constants

    revision = f" --revision {options.revision}" if options.revision else ""
    if constants.HF_HUB_OFFLINE:
        return DataError(
            f"{options.source}: the data set is not cached here and HF_HUB_OFFLINE is set. Get it once "
            f"online with `huggingface-cli download --repo-type dataset {repo}{revision}` (or run once "
            f"without HF_HUB_OFFLINE), or download it and pass the folder as --dataset PATH. ({exc})"
        )
    return DataError(f"{options.source}: datasets could not load it: {type(exc).__name__}: {exc}")


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


def with_problems(
    plans: list[CasePlan], problems: list[Problem], selection: Selection, metrics: list[str]
) -> list[CasePlan]:
    """Problems (those within the selection, as `load` returns them) as errors on the cases they
    could touch, and on no other case:

    - a problem whose whole identity is known (seed image, variant, run, step; and its other
      fields under --where) errors the cases that use that record: its step's cases and, at the
      reference step, every case of its run (of its seed image, for run means);
    - one that shows only part of its identity errors the cases that lack a record it could be;
    - a known record that no case uses gets error cases of its own: at its step, or at the
      steps tested when it is a reference (a seed image whose every record is bad, a run of its
      own under per-run cases, a step of its own under --steps all); so does any problem of a
      seed image that has no case at all;
    - any other is a DataWarning naming its file and line: no case lacks a record it could be.
    """
    found = _Attached(problems, selection)
    out = [found.on(plan) for plan in plans]
    planned = {p.key.seed_image for p in plans}
    per_run = any(p.key.run is not None for p in plans)
    tested = sorted({p.key.step for p in plans}) if selection.steps is None else list(selection.steps)
    reference = selection.reference_step
    own: dict[CaseKey, list[Problem]] = {}
    for p in found.orphans():
        if p.seed_image is None or (p.seed_image in planned and not found.definite(p)):
            warnings.warn(DataWarning(f"{p} (no case lacks the record it could be)"), stacklevel=2)
            continue
        steps = [p.step] if p.step is not None and (p.step != reference or not tested) else tested
        for step in steps or [reference]:
            for metric in metrics:
                own.setdefault(CaseKey(metric, p.seed_image, step, p.run if per_run else None), []).append(p)
    return out + [CasePlan(key, reference, error=_unusable(own[key])) for key in sorted(own, key=sort_key)]


class _Attached:
    """The problems indexed so each case finds those that touch it; remembers which found one."""

    def __init__(self, problems: Sequence[Problem], selection: Selection) -> None:
        self.problems = problems
        self.where = bool(selection.where)
        self.by_step: dict[tuple[str, int], list[Problem]] = {}  # whole identities
        self.partial: dict[str | None, list[Problem]] = {}  # by seed image, None when unknown
        for p in problems:
            if p.key is not None and self.definite(p):
                self.by_step.setdefault((p.key[0], p.key[2]), []).append(p)
            else:
                self.partial.setdefault(p.seed_image, []).append(p)
        self.used: set[Problem] = set()

    def definite(self, p: Problem) -> bool:
        """The record is known: all of its identity, and its other fields when --where asks."""
        return p.key is not None and (p.extra is not None or not self.where)

    def on(self, plan: CasePlan) -> CasePlan:
        key, reference = plan.key, plan.reference_step
        candidates = self.by_step.get((key.seed_image, key.step), [])
        if reference != key.step:
            candidates = candidates + self.by_step.get((key.seed_image, reference), [])
        touching = [p for p in candidates if key.run in (None, p.run)]
        if plan.missing:
            loose = self.partial.get(key.seed_image, []) + self.partial.get(None, [])
            touching += [p for p in loose if any(_could_be(p, run, step) for run, step in plan.missing)]
        if not touching:
            return plan
        self.used.update(touching)
        return replace(plan, pairs=(), error="; ".join([*filter(None, [plan.error]), _unusable(touching)]))

    def orphans(self) -> list[Problem]:
        return [p for p in self.problems if p not in self.used]


def _unusable(problems: Sequence[Problem]) -> str:
    return "unusable record(s): " + "; ".join(map(str, problems))


def _could_be(p: Problem, run: int, step: int) -> bool:
    return p.run in (None, run) and p.step in (None, step)
