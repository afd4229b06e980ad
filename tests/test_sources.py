"""`--dataset SOURCE`: the same trajectories in every layout give the same cases and deltas."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from banana_tests.cases import CaseKey
from banana_tests.trajectories.case_plans import plan_cases
from banana_tests.trajectories.records import DataError
from banana_tests.trajectories.row_records import parse_map
from banana_tests.trajectories.selection import Loaded, Selection, parse_where
from banana_tests.trajectories.sources import DatasetFormat, SourceOptions, detect_format, load
from banana_tests.trajectories.table_rows import INDEX_FOLDER
from tests.conftest import MakeSet

datasets = pytest.importorskip("datasets")

SEEDS, RUNS, STEPS = ("alpha", "beta"), (0, 1), (1, 5, 10)


def rows(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "metadata.jsonl").read_text().splitlines()]


def as_parquet(canonical: Path, target: Path) -> Path:
    """The set as one parquet file: image bytes embedded, columns under other common names."""
    table: dict[str, list] = {"image": [], "source": [], "iteration": [], "trial": []}
    for r in rows(canonical):
        table["image"].append({"bytes": (canonical / r["file_name"]).read_bytes(), "path": r["file_name"]})
        table["source"].append(r["seed_image"])
        table["iteration"].append(r["step"])
        table["trial"].append(r["run"])
    features = datasets.Features(
        image=datasets.Image(),
        source=datasets.Value("string"),
        iteration=datasets.Value("int32"),
        trial=datasets.Value("int32"),
    )
    target.mkdir(parents=True)
    datasets.Dataset.from_dict(table, features=features).to_parquet(str(target / "part-0.parquet"))
    return target


def as_path_pattern(canonical: Path, target: Path) -> Path:
    """The set as `<seed>/run_<r>/<step>.png`, with no metadata at all."""
    for r in rows(canonical):
        dest = target / r["seed_image"] / f"run_{r['run']}" / f"{r['step']}.png"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(canonical / r["file_name"], dest)
    return target


def as_metadata(canonical: Path, target: Path, drop: tuple[str, ...], kind: str = "metadata.jsonl") -> Path:
    """The set's images under `target` with metadata lacking the `drop` fields, written as
    `kind`: an imagefolder's metadata.jsonl or metadata.csv, or a data file (set.csv, set.json)."""
    shutil.copytree(canonical, target, ignore=shutil.ignore_patterns("metadata.jsonl"))
    kept = [{k: v for k, v in r.items() if k not in drop and k != "sha256"} for r in rows(canonical)]
    if kind.endswith(".csv"):
        columns = list(kept[0])
        lines = [",".join(columns)] + [",".join(str(r[c]) for c in columns) for r in kept]
        (target / kind).write_text("\n".join(lines) + "\n")
    elif kind.endswith(".json"):
        (target / kind).write_text(json.dumps(kept))
    else:
        (target / kind).write_text("".join(json.dumps(r) + "\n" for r in kept))
    return target


@pytest.fixture
def layouts(make_set: MakeSet, tmp_path: Path) -> dict[str, SourceOptions]:
    """The same set in every local layout the docs accept, each read from its own files."""
    canonical = make_set(seeds=SEEDS, runs=RUNS, steps=STEPS)
    cache = tmp_path / "cache"

    def local(path: Path, **kwargs: str) -> SourceOptions:
        return SourceOptions(str(path), cache_dir=cache, **kwargs)  # type: ignore[arg-type]

    return {
        "canonical": local(canonical),
        "imagefolder": local(canonical, format=DatasetFormat.IMAGEFOLDER),
        "no variant": local(as_metadata(canonical, tmp_path / "nv", ("variant",))),
        "metadata.csv": local(as_metadata(canonical, tmp_path / "mc", ("variant",), "metadata.csv")),
        "csv file": local(as_metadata(canonical, tmp_path / "cf", ("variant",), "set.csv") / "set.csv"),
        "json array": local(as_metadata(canonical, tmp_path / "ja", ("variant",), "set.json") / "set.json"),
        "parquet": local(as_parquet(canonical, tmp_path / "pq")),
        "path-pattern": local(as_path_pattern(canonical, tmp_path / "pp")),
    }


@pytest.mark.slow
def test_every_layout_gives_the_same_cases_and_deltas(layouts: dict[str, SourceOptions]) -> None:
    from banana_tests.scoring.score_book import ScoreBook
    from banana_tests.verdicts.gaps import gap
    from metrics_under_test.registry import resolve

    spec = resolve("piqe")[0]
    deltas: dict[str, dict[CaseKey, float]] = {}
    for name, options in layouts.items():
        loaded = load(options, Selection(steps=(5, 10)))
        assert loaded.problems == [], name
        book = ScoreBook("cpu")
        deltas[name] = {}
        for plan in plan_cases(loaded.records, ["piqe"], [5, 10], 1):
            assert plan.error is None, (name, plan.error)
            refs = book.scores(spec, [a for a, _ in plan.pairs])
            steps = book.scores(spec, [b for _, b in plan.pairs])
            deltas[name][plan.key] = gap(spec.scale, refs, steps).delta
    expected = {CaseKey("piqe", s, i) for s in SEEDS for i in (5, 10)}
    for name, by_key in deltas.items():
        assert set(by_key) == expected, name
        assert by_key == pytest.approx(deltas["canonical"], abs=1e-9), name


def test_bytes_are_cached_once_by_sha256(layouts: dict[str, SourceOptions]) -> None:
    options = layouts["parquet"]
    loaded = load(options, Selection(steps=(5,)))
    assert len(loaded.records) == len(SEEDS) * len(RUNS) * 2
    for r in loaded.records:
        assert r.path.parent.parent == options.cache_dir and r.path.name == r.sha256
        assert r.source.startswith(f"{Path(options.source) / 'part-0.parquet'} row ")  # file and row
        assert r.source.endswith(f"/run{r.run}/step{r.step:03d}.png)")  # and the image's own path
    cached = [p for p in options.cache_dir.glob("??/*")]
    assert sorted(p.name for p in cached) == sorted(r.sha256 for r in loaded.records)


def test_the_format_option_and_the_settings_share_one_enum() -> None:
    from banana_tests.core.settings import settings_from_args

    assert settings_from_args([]).source.format is DatasetFormat.AUTO
    for fmt in DatasetFormat:
        assert settings_from_args([f"--dataset-format={fmt.value}"]).source.format is fmt
    with pytest.raises(SystemExit):
        settings_from_args(["--dataset-format=xml"])


def test_formats_are_detected(layouts: dict[str, SourceOptions]) -> None:
    found = {name: detect_format(Path(o.source)) for name, o in layouts.items()}
    assert found == {
        "canonical": "canonical",
        "imagefolder": "canonical",
        "no variant": "imagefolder",
        "metadata.csv": "imagefolder",
        "csv file": "csv",
        "json array": "json",
        "parquet": "parquet",
        "path-pattern": "imagefolder",
    }


def test_local_layouts_are_read_from_their_files_not_through_datasets(
    layouts: dict[str, SourceOptions], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`datasets.load_dataset` globbed every pattern over every file of a local folder (10 s at
    6,000 images) and imported torch; local layouts never call it."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"datasets.load_dataset{args} called for a local set")

    monkeypatch.setattr(datasets, "load_dataset", forbidden)
    for name, options in layouts.items():
        loaded = load(options, Selection(steps=(5, 10)))
        assert len(loaded.records) == len(SEEDS) * len(RUNS) * 3 and loaded.problems == [], name


def without(canonical: Path, target: Path, drop: tuple[str, ...], kind: str) -> Path:
    """The set as an imagefolder (metadata.jsonl) or one parquet file of image bytes (columns as
    `datasets` writes them), lacking the `drop` columns."""
    if kind == "imagefolder":
        return as_metadata(canonical, target, drop)
    kept = [{k: v for k, v in r.items() if k not in (*drop, "sha256")} for r in rows(canonical)]
    table = {k: [r[k] for r in kept] for k in kept[0] if k != "file_name"}
    table["image"] = [
        {"bytes": (canonical / r["file_name"]).read_bytes(), "path": r["file_name"]} for r in kept
    ]
    features = {k: datasets.Value("string" if k in ("seed_image", "variant") else "int64") for k in table}
    features["image"] = datasets.Image()
    target.mkdir(parents=True)
    data = datasets.Dataset.from_dict(table, features=datasets.Features(features))
    data.to_parquet(str(target / "train-0.parquet"))
    return target


@pytest.mark.parametrize("kind", ["imagefolder", "parquet"])
@pytest.mark.parametrize("drop", [(), ("variant",), ("run",), ("variant", "run")], ids="-".join)
def test_every_local_layout_is_read_by_the_fast_reader(
    kind: str, drop: tuple[str, ...], make_set: MakeSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With or without `variant` and `run` columns, an imagefolder or parquet of image bytes: no
    call to `datasets.load_dataset`, which globbed every pattern over every file of a local folder
    (10 s at 6,000 images) and imported torch."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"datasets.load_dataset{args} called for a local set")

    monkeypatch.setattr(datasets, "load_dataset", forbidden)
    canonical = make_set(seeds=SEEDS, runs=(0,), steps=STEPS)
    options = SourceOptions(
        str(without(canonical, tmp_path / "layout", drop, kind)), cache_dir=tmp_path / "c"
    )
    readers = {
        "imagefolder": ("canonical", "imagefolder"),
        "parquet": ("parquet",),
    }  # with all our fields: canonical
    assert detect_format(Path(options.source)) in readers[kind]
    for _ in range(2):  # parquet: read through pyarrow, then from its index
        loaded = load(options, Selection())
        assert loaded.problems == []
        assert sorted((r.seed_image, r.variant, r.run, r.step) for r in loaded.records) == [
            (s, "replicate", 0, i) for s in SEEDS for i in STEPS
        ]


def _records(loaded: Loaded) -> list[tuple]:
    return sorted((r.seed_image, r.run, r.step, r.sha256, r.path.read_bytes()) for r in loaded.records)


READ_AGAIN = """
import json, sys
from pathlib import Path
from banana_tests.trajectories.selection import Selection
from banana_tests.trajectories.sources import SourceOptions, load
loaded = load(SourceOptions(sys.argv[1], cache_dir=Path(sys.argv[2])), Selection())
print(json.dumps({
    "records": sorted([r.seed_image, r.run, r.step, r.sha256, str(r.path)] for r in loaded.records),
    "pyarrow": "pyarrow" in sys.modules,
}))
"""


@pytest.mark.slow
def test_a_parquet_set_is_read_from_its_index_until_the_file_changes(
    make_set: MakeSet, tmp_path: Path
) -> None:
    """The second read of an unchanged parquet file imports no pyarrow (52 MiB at collection);
    a rewrite of the same size with the mtime put back is still seen (its ctime moved)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    canonical = make_set(seeds=SEEDS, runs=RUNS, steps=STEPS)
    target = tmp_path / "pq"
    target.mkdir()
    file, cache = target / "part-0.parquet", tmp_path / "cache"

    def write(seed_names: dict[str, str]) -> None:
        rs = rows(canonical)
        table = {
            "image": [
                {"bytes": (canonical / r["file_name"]).read_bytes(), "path": r["file_name"]} for r in rs
            ],
            "seed_image": [seed_names.get(r["seed_image"], r["seed_image"]) for r in rs],
            "run": [r["run"] for r in rs],
            "step": [r["step"] for r in rs],
        }
        plain = {"compression": "none", "use_dictionary": False, "write_statistics": False}
        pq.write_table(pa.table(table), file, row_group_size=4, **plain)  # same size for a same-length name

    def read_again() -> dict:
        done = subprocess.run(
            [sys.executable, "-c", READ_AGAIN, str(target), str(cache)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    write({})
    first = load(SourceOptions(str(target), cache_dir=cache), Selection())
    assert len(list((cache / INDEX_FOLDER).glob("*.json"))) == 1
    again = read_again()
    assert again["pyarrow"] is False
    assert again["records"] == sorted(
        [r.seed_image, r.run, r.step, r.sha256, str(r.path)] for r in first.records
    )

    for image in cache.glob(
        "??/*"
    ):  # the cached copies gone: read back from the file, still no index rebuild
        image.unlink()
    assert _records(load(SourceOptions(str(target), cache_dir=cache), Selection())) == _records(first)

    before = file.stat()
    write({"alpha": "gamma"})
    os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert file.stat().st_size == before.st_size and file.stat().st_mtime_ns == before.st_mtime_ns
    changed = read_again()
    assert changed["pyarrow"] is True
    assert {seed for seed, *_ in changed["records"]} == {"gamma", "beta"}
    assert read_again() == {**changed, "pyarrow": False}  # indexed afresh


def test_a_parquet_column_json_cannot_hold_keeps_the_file_unindexed(
    make_set: MakeSet, tmp_path: Path
) -> None:
    """A timestamp column (or any value JSON would give back changed) means no index: every read
    goes through pyarrow, with the same records."""
    import datetime

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    canonical = make_set(seeds=("alpha",), runs=(0,), steps=STEPS)
    rs = rows(canonical)
    target = tmp_path / "pq"
    target.mkdir()
    table = {
        "image": [{"bytes": (canonical / r["file_name"]).read_bytes(), "path": r["file_name"]} for r in rs],
        "seed_image": [r["seed_image"] for r in rs],
        "step": [r["step"] for r in rs],
        "taken": [datetime.datetime(2026, 1, 1) for _ in rs],
    }
    pq.write_table(pa.table(table), target / "part-0.parquet")
    options = SourceOptions(str(target), cache_dir=tmp_path / "cache")
    first, second = (load(options, Selection()) for _ in range(2))
    assert not (tmp_path / "cache" / INDEX_FOLDER).exists() or not any(
        (tmp_path / "cache" / INDEX_FOLDER).iterdir()
    )
    assert _records(first) == _records(second) and len(first.records) == len(STEPS)


@pytest.mark.slow
def test_reading_a_local_layout_imports_neither_datasets_nor_torch(layouts: dict[str, SourceOptions]) -> None:
    sources = json.dumps({name: o.source for name, o in layouts.items()})
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from banana_tests.trajectories.selection import Selection\n"
        "from banana_tests.trajectories.sources import SourceOptions, load\n"
        f"for name, source in json.loads({sources!r}).items():\n"
        f"    assert load(SourceOptions(source, cache_dir=Path({str(layouts['parquet'].cache_dir)!r})),"
        " Selection()).records, name\n"
        "print(sorted(m for m in ('datasets', 'torch', 'pandas') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_set_without_variant_or_run_columns_is_one_run_of_replicate(
    make_set: MakeSet, tmp_path: Path
) -> None:
    canonical = make_set(seeds=SEEDS, runs=(0,), steps=STEPS)
    bare = as_metadata(canonical, tmp_path / "bare", ("variant", "run"))
    loaded = load(SourceOptions(str(bare)), Selection())
    assert sorted((r.seed_image, r.variant, r.run, r.step) for r in loaded.records) == [
        (s, "replicate", 0, i) for s in SEEDS for i in STEPS
    ]
    assert all(r.source.startswith(f"{tmp_path / 'bare' / 'metadata.jsonl'}:") for r in loaded.records)


def test_explicit_map_and_path_pattern(make_set: MakeSet, tmp_path: Path) -> None:
    canonical = make_set(seeds=("alpha",), runs=(3,), steps=(1, 7))
    target = tmp_path / "odd"
    for r in rows(canonical):
        dest = target / f"scene-{r['seed_image']}" / f"t{r['run']}_i{r['step']}.png"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(canonical / r["file_name"], dest)
    pattern = r"scene-(?P<seed_image>\w+)/t(?P<run>\d+)_i(?P<step>\d+)\.png$"
    loaded = load(SourceOptions(str(target), path_pattern=pattern), Selection())
    assert sorted((r.seed_image, r.run, r.step) for r in loaded.records) == [("alpha", 3, 1), ("alpha", 3, 7)]


def test_an_unmappable_set_lists_its_columns_and_three_sample_paths(
    make_set: MakeSet, tmp_path: Path
) -> None:
    canonical = make_set(seeds=("alpha",), runs=(0,), steps=(1, 5, 10, 20))
    flat = tmp_path / "flat"
    flat.mkdir()
    for i, r in enumerate(rows(canonical)):
        shutil.copy(canonical / r["file_name"], flat / f"img{i}.png")
    csv = flat / "list.csv"
    csv.write_text("file_name,who,when\n" + "".join(f"img{i}.png,x,{i}\n" for i in range(4)))
    with pytest.raises(DataError) as info:
        load(SourceOptions(str(csv)), Selection())
    text = str(info.value)
    assert "cannot tell the seed_image and step" in text
    assert "columns: file_name, who, when" in text
    assert "img0.png" in text and "img2.png" in text and "img3.png" not in text
    mapped = SourceOptions(str(csv), field_map=parse_map("seed_image=who,step=when"))
    loaded = load(mapped, Selection(reference_step=0))
    assert sorted((r.seed_image, r.step, r.path.name) for r in loaded.records) == [
        ("x", i, f"img{i}.png") for i in range(4)
    ]


def test_selection_filters_on_metadata(make_set: MakeSet) -> None:
    root = make_set(seeds=("a", "b", "c"), runs=(0, 1, 2), steps=(1, 5, 10), extra={"temperature": 0.4})
    options = SourceOptions(str(root))
    chosen = Selection(seed_images=("a", "c"), runs=2, steps=(5,), where=parse_where(["temperature=0.4"]))
    got = {(r.seed_image, r.run, r.step) for r in load(options, chosen).records}
    assert got == {(s, r, i) for s in ("a", "c") for r in (0, 1) for i in (1, 5)}
    assert load(options, Selection(where={"temperature": "0"})).records == []
    assert load(options, Selection(variant="mirror")).variants == ["replicate"]


@pytest.mark.slow
def test_hub_offline_and_not_cached_fails_fast_with_advice(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    env.pop("HF_DATASETS_CACHE", None)
    code = (
        "from banana_tests.trajectories.sources import SourceOptions, load\n"
        "from banana_tests.trajectories.selection import Selection\n"
        "load(SourceOptions('hf:some/repo'), Selection())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "hf:some/repo: the data set is not cached here and HF_HUB_OFFLINE is set" in done.stderr
    assert "huggingface-cli download --repo-type dataset some/repo" in done.stderr


def test_a_hub_id_reads_the_data_set_datasets_has_cached(
    layouts: dict[str, SourceOptions], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A hub id goes through `datasets.load_dataset` (downloaded once, then its cache); here a
    local parquet set stands in for the download, with the same rows and image bytes."""
    parquet = sorted(Path(layouts["parquet"].source).glob("*.parquet"))
    real = datasets.load_dataset
    calls = []

    def cached(repo: str, **kwargs: object) -> object:
        calls.append((repo, kwargs))
        return real("parquet", data_files=[str(p) for p in parquet], cache_dir=str(tmp_path / "hf"), **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", cached)
    hub = load(SourceOptions("hf:someone/trajectories", cache_dir=tmp_path / "cache"), Selection(steps=(5,)))
    local = load(layouts["canonical"], Selection(steps=(5,)))
    assert calls == [("someone/trajectories", {"split": "train", "streaming": False})]
    key = lambda r: (r.seed_image, r.run, r.step)  # noqa: E731
    assert sorted(map(key, hub.records)) == sorted(map(key, local.records))
    for h, c in zip(sorted(hub.records, key=key), sorted(local.records, key=key), strict=True):
        assert h.sha256 == c.sha256 and h.path.read_bytes() == c.path.read_bytes()
        assert h.source.startswith("hf:someone/trajectories[train] row ")
