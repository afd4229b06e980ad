"""`--dataset SOURCE`: the canonical folder, a hub data set or local files in a `datasets` layout.

The canonical folder keeps the fast reader (metadata.jsonl only). Anything else goes through
`datasets.load_dataset` with images cast to `Image(decode=False)`, so collection never decodes:
an image that arrives as bytes (parquet, the hub) is written once to a cache keyed by its
sha256 and becomes a path like any other. Records are selected on metadata before their
bytes are kept, and local files are streamed, so nothing is copied into an Arrow cache.
Remote code is never run: the loader passes no `trust_remote_code`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from banana_tests.cases import CaseKey
from banana_tests.mapping import image_column, parse_map, resolve
from banana_tests.plan import CasePlan
from banana_tests.selection import Selection, parse_where
from banana_tests.trajectories import (
    METADATA,
    REQUIRED,
    DataError,
    Problem,
    Record,
    read_imagefolder,
    resolve_inside,
)

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
    """The selected records, every problem met on the way, and what the set holds overall."""

    records: list[Record]
    problems: list[Problem]
    variants: list[str]
    seed_images: list[str]


def from_options(
    opt: Callable[[str], Any], default: Path, steps: list[int] | None
) -> tuple[SourceOptions, Selection]:
    """The source and selection the --dataset* options ask for; ValueError for malformed ones."""
    cache = opt("dataset_cache")
    source = SourceOptions(
        source=opt("dataset") or str(default),
        revision=opt("dataset_revision"),
        split=opt("dataset_split"),
        streaming=opt("dataset_streaming"),
        format=opt("dataset_format"),
        field_map=parse_map(opt("dataset_map")),
        path_pattern=opt("dataset_path_pattern"),
        cache_dir=Path(cache) if cache else default_cache_dir(),
    )
    runs = opt("runs")
    if runs is not None and runs < 1:
        raise ValueError(f"--runs takes a positive number, got {runs}")
    selection = Selection(
        variant=opt("variant"),
        seed_images=tuple(opt("seed_image") or ()),
        where=parse_where(opt("where")),
        runs=runs,
        steps=None if steps is None else tuple(steps),
        reference_step=opt("reference_step"),
    )
    return source, selection


def load(options: SourceOptions, selection: Selection) -> Loaded:
    """Read `options.source` and keep what `selection` wants; a set that cannot be read is a DataError."""
    fmt = options.format
    if not options.source.startswith(HUB):
        root = Path(options.source)
        if not root.exists():
            raise DataError(f"{root}: no such file or folder")
        fmt = detect_format(root) if fmt == "auto" else fmt
        if fmt == "canonical":
            return _canonical(root, selection)
    return _through_datasets(options, fmt, selection)


def detect_format(root: Path) -> str:
    """canonical when metadata.jsonl has our fields; else what the files are."""
    if root.is_file():
        fmt = _SUFFIX_FORMAT.get(root.suffix.lower())
        if fmt is None:
            raise DataError(f"{root}: cannot tell the format; use --dataset-format {'|'.join(FORMATS[2:])}")
        return fmt
    meta = root / METADATA
    if meta.is_file():
        with meta.open(encoding="utf-8") as lines:
            first = next((line for line in lines if line.strip()), "{}")
        try:
            if set(REQUIRED) <= set(json.loads(first)):
                return "canonical"
        except json.JSONDecodeError:
            return "canonical"  # the fast reader names the bad line
    for suffix, fmt in _SUFFIX_FORMAT.items():
        if suffix != ".jsonl" and next(root.rglob(f"*{suffix}"), None) is not None:
            return fmt
    return "imagefolder"


def _canonical(root: Path, selection: Selection) -> Loaded:
    trajectories = read_imagefolder(root)
    problems = list(trajectories.problems)
    records = trajectories.records
    return Loaded(
        selection.apply(records),
        problems,
        trajectories.variants,
        sorted({r.seed_image for r in records}),
    )


def _through_datasets(options: SourceOptions, fmt: str, selection: Selection) -> Loaded:
    import datasets

    ds, label, root = _open(datasets, options, fmt)
    image_features = [k for k, f in (ds.features or {}).items() if isinstance(f, datasets.Image)]
    for column in image_features:
        ds = ds.cast_column(column, datasets.Image(decode=False))
    head = list(_rows(ds, label, limit=3))
    if not head:
        raise DataError(f"{label}: the data set has no rows")
    columns = list(head[0])
    image = image_column(columns, options.field_map, image_features)
    samples = [_image_ref(row[image], root)[0] for row in head if image in row]
    fmap = resolve(columns, samples, options.field_map, options.path_pattern, image)
    records: list[Record] = []
    problems: list[Problem] = []
    variants: set[str] = set()
    seeds: set[str] = set()
    mapped = {fmap.image, "sha256", *fmap.columns.values()}  # the rest of a row is `extra`
    for number, row in enumerate(_rows(ds, label), start=1):
        where = f"{label} row {number}"
        seed = variant = None
        try:
            shown, data = _image_ref(row.get(fmap.image), root)
            where = f"{where} ({shown})"
            keys = fmap.fields(row, shown)
            seed, variant = str(keys["seed_image"]), str(keys["variant"])
            run, step = _integer(keys, "run"), _integer(keys, "step")
            variants.add(variant)
            seeds.add(seed)
            extra = {k: v for k, v in row.items() if k not in mapped and _scalar(v)}
            if not selection.keeps(seed, variant, step, extra):
                continue
            path, digest = _materialise(shown, data, root, options.cache_dir)
            digest = digest or row.get("sha256")
            records.append(Record(seed, variant, run, step, path, where, digest, extra))
        except DataError as exc:
            problems.append(Problem(where, str(exc), seed, variant))
    return Loaded(selection.cap_runs(records), problems, sorted(variants), sorted(seeds))


def _open(datasets: Any, options: SourceOptions, fmt: str) -> tuple[Any, str, Path | None]:
    """The (iterable) data set, a label for messages, and the local root image paths must stay in."""
    if options.source.startswith(HUB):
        repo = options.source[len(HUB) :]
        label = f"{options.source}[{options.split}]"
        kwargs: dict[str, Any] = {"split": options.split, "streaming": options.streaming}
        if options.revision:
            kwargs["revision"] = options.revision
        try:
            return datasets.load_dataset(repo, **kwargs), label, None
        except Exception as exc:
            raise _hub_error(repo, options, exc) from exc
    root = Path(options.source)
    base = root if root.is_dir() else root.parent
    if fmt == "imagefolder":
        spec: dict[str, Any] = {"data_dir": str(root)}
    elif root.is_dir():
        suffixes = [s for s, f in _SUFFIX_FORMAT.items() if f == fmt]
        files = sorted(str(p) for s in suffixes for p in root.rglob(f"*{s}") if p.name != METADATA)
        if not files:
            raise DataError(f"{root}: no {'/'.join(suffixes)} files for --dataset-format {fmt}")
        spec = {"data_files": files}
    else:
        spec = {"data_files": [str(root)]}
    try:
        ds = datasets.load_dataset(fmt, split=options.split, streaming=True, **spec)
    except (OSError, ValueError) as exc:
        raise DataError(f"{root}: datasets cannot read it as {fmt}: {exc}") from exc
    return ds, str(root), base.resolve()


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


def _rows(ds: Any, label: str, limit: int | None = None) -> Iterator[dict[str, Any]]:
    rows: Iterable[dict[str, Any]] = ds.take(limit) if limit is not None else ds
    try:
        yield from rows
    except (OSError, ValueError) as exc:
        raise DataError(f"{label}: reading rows failed: {exc}") from exc


def _image_ref(value: Any, root: Path | None) -> tuple[str, bytes | None]:
    """(a path to show and match, the bytes if the image came as bytes)."""
    if isinstance(value, Mapping):
        data, path = value.get("bytes"), value.get("path")
        return _shown(path, root) if path else "<bytes>", data
    if isinstance(value, bytes):
        return "<bytes>", value
    if isinstance(value, str):
        return _shown(value, root), None
    raise DataError(f"image column holds {type(value).__name__}, not a path or image bytes")


def _shown(path: str, root: Path | None) -> str:
    """A local path relative to the root (what path patterns see), other paths as given."""
    if root is not None and os.path.isabs(path):
        p = Path(path)
        if p.is_relative_to(root):
            return p.relative_to(root).as_posix()
    return path


def _materialise(shown: str, data: bytes | None, root: Path | None, cache: Path) -> tuple[Path, str | None]:
    """A local path for the image: its file inside the root, or its bytes written once to the cache."""
    if data is not None:
        digest = hashlib.sha256(data).hexdigest()
        path = cache / digest[:2] / digest
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return path, digest
    if root is None:
        raise DataError(f"image {shown!r} came without bytes and is not a local file")
    return resolve_inside(root, shown), None


def _integer(keys: Mapping[str, Any], name: str) -> int:
    value = keys[name]
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{name} must be an integer, got {value!r}") from exc


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def with_problems(
    plans: list[CasePlan], problems: list[Problem], selection: Selection, metrics: list[str]
) -> list[CasePlan]:
    """Problems as errors on the cases they touch: their seed image's, or every case when the bad
    record cannot say which seed image it belongs to. A seed image whose every record is bad gets
    error cases of its own, at the steps the others are tested at. Problems outside the selection
    are dropped."""
    touching = _touching(problems, selection)
    out = [_with_errors(plan, touching) for plan in plans]
    steps = sorted({p.key.step for p in plans}) or [selection.reference_step]
    seeds = {p.key.seed_image for p in plans}
    for seed in sorted(s for s in touching if s is not None and s not in seeds):
        for metric in metrics:
            out += [
                _with_errors(CasePlan(CaseKey(metric, seed, step), selection.reference_step), touching)
                for step in steps
            ]
    return out


def _touching(problems: list[Problem], selection: Selection) -> dict[str | None, list[str]]:
    touching: dict[str | None, list[str]] = {}
    for p in problems:
        if p.variant not in (None, selection.variant):
            continue
        if p.seed_image is not None and selection.seed_images and p.seed_image not in selection.seed_images:
            continue
        touching.setdefault(p.seed_image, []).append(str(p))
    return touching


def _with_errors(plan: CasePlan, touching: dict[str | None, list[str]]) -> CasePlan:
    found = touching.get(None, []) + touching.get(plan.key.seed_image, [])
    if not found:
        return plan
    errors = [plan.error] if plan.error else []
    errors.append("unusable record(s): " + "; ".join(found))
    return replace(plan, error="; ".join(errors))
