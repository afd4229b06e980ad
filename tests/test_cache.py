"""The score cache: hits and misses, what the key covers, concurrent writers, corrupt files."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from banana_tests.scoring.score_book import ScoreBook
from banana_tests.scoring.score_cache import FILE, SCHEMA, CacheWarning, ScoreCache
from banana_tests.scoring.score_identity import code_hashes, identity, identity_key
from banana_tests.trajectories.imagefolder import read_imagefolder
from metrics_under_test import examples
from metrics_under_test.spec import Backend, MetricSpec, WeightFile
from tests.conftest import MakeSet, needs

SPEC = MetricSpec(name="mean", backend=Backend.CUSTOM, low=0.0, high=255.0, lower_better=False)


class Mean:
    name, lower_better, score_range = "mean", False, (0.0, 255.0)

    def __call__(self, images: Sequence[np.ndarray]) -> list[float]:
        return [float(img.mean()) for img in images]


def test_a_stored_score_is_found_by_image_and_metric_after_reopening(tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path)
    assert cache.get("m1", ["img-a", "img-b"]) == {}
    cache.put("m1", {"img-a": 1.5}, {"name": "m1"})
    cache.close()
    again = ScoreCache(tmp_path)
    assert again.get("m1", ["img-a", "img-b"]) == {"img-a": 1.5}
    assert again.get("m2", ["img-a"]) == {}
    assert again._db is not None and again._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_key_changes_with_weights_device_and_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs("pyiqa")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    spec = MetricSpec(
        "w", Backend.PYIQA, 0.0, 1.0, True, weights=(WeightFile("w.pth", "https://example/w.pth"),)
    )
    spec.weights[0].path.parent.mkdir(parents=True)
    spec.weights[0].path.write_bytes(b"weights v1")
    cpu = identity_key(identity(spec, "cpu"))
    assert cpu == identity_key(identity(spec, "cpu"))
    assert cpu != identity_key(identity(spec, "cuda"))
    spec.weights[0].path.write_bytes(b"weights v2")
    assert cpu != identity_key(identity(spec, "cpu"))
    assert identity(spec, "cpu") == {
        "name": "w",
        "backend": "pyiqa",
        "version": f"pyiqa {metadata.version('pyiqa')}; torch {metadata.version('torch')}",
        "weights": {"w.pth": hashlib.sha256(b"weights v2").hexdigest()},
        "device": "cpu",
        "precision": "float32",
        "suite": code_hashes(Backend.PYIQA),  # the suite's own code on the scoring path
    }
    spec.weights[0].path.unlink()
    assert identity(spec, "cpu")["weights"] == {}
    # the device is its kind: workers on different GPUs share their scores
    assert identity(spec, "cuda:1")["device"] == "cuda" and identity(spec, "cuda:1") == identity(spec, "cuda")


def test_a_custom_metrics_key_covers_its_version_precision_and_source() -> None:
    example = MetricSpec("n", Backend.CUSTOM, 0, 20, True, target="metrics_under_test.examples:NoiseSigma")
    description = identity(example, "cpu")
    sources = description.pop("sources")
    libraries = description.pop("libraries")
    assert description == {
        "name": "n",
        "backend": "custom",
        "version": "1",
        "files": {},
        "weights": {},
        "device": "cpu",
        "precision": "",
        "suite": code_hashes(Backend.CUSTOM),
    }
    assert isinstance(sources, dict)
    assert (
        sources["metrics_under_test.examples"]
        == hashlib.sha256(Path(examples.__file__).read_bytes()).hexdigest()
    )
    assert not any(name.startswith(("numpy", "torch", "math")) for name in sources)  # installed or stdlib
    assert isinstance(libraries, dict) and libraries["numpy"] == metadata.version("numpy")
    assert (
        identity_key(identity(example, "cpu"))
        == hashlib.sha256(json.dumps(identity(example, "cpu"), sort_keys=True).encode()).hexdigest()
    )


LC_CORE = "SCALE = 1.0\n"
LAZY = "OFFSET = 0.0\n"
MYMETRIC = """\
from pathlib import Path

import numpy as np

from {core} import SCALE
from metrics_under_test.protocol import metric


@metric("local_contrast", lower_better=False, score_range=(0.0, 100.0), cost="fast")
def local_contrast(images):
    from {lazy} import OFFSET  # imported when it first scores: read from source, not seen yet

    weight = float(Path(__file__).with_name("ckpt.txt").read_text())
    return [float(np.asarray(img, dtype=np.float64).std()) * SCALE * weight + OFFSET for img in images]


local_contrast.files = ("ckpt.txt",)
"""


@pytest.fixture
def own_metric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], Path]:
    """`mymetric_*.py` importing `lc_core_*.py` (and a lazy helper), reading `ckpt.txt`; unique
    module names, since the modules stay imported in this process."""
    tag = uuid.uuid4().hex[:8]
    names = {"core": f"lc_core_{tag}", "lazy": f"lc_lazy_{tag}", "metric": f"mymetric_{tag}"}
    (tmp_path / f"{names['core']}.py").write_text(LC_CORE)
    (tmp_path / f"{names['lazy']}.py").write_text(LAZY)
    (tmp_path / f"{names['metric']}.py").write_text(MYMETRIC.format(**names))
    (tmp_path / "ckpt.txt").write_text("1.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    return lambda: tmp_path / names["metric"]


def _key_of(target: str) -> str:
    from metrics_under_test.registry import resolve

    (spec,) = resolve(target)
    return identity_key(identity(spec, "cpu"))


def test_a_change_to_any_module_of_the_users_that_the_metric_imports_is_a_miss(
    own_metric: Callable[[], Path],
) -> None:
    """Issue 25: the key hashed only the module defining the callable; an edit of `lc_core.py`,
    which it imports, kept the cached scores."""
    metric_file = own_metric()
    target = f"{metric_file.stem}:local_contrast"
    first = _key_of(target)
    assert _key_of(target) == first
    core = next(metric_file.parent.glob("lc_core_*.py"))
    core.write_text("SCALE = 1.1\n")
    second = _key_of(target)
    assert second != first
    lazy = next(metric_file.parent.glob("lc_lazy_*.py"))
    lazy.write_text("OFFSET = 0.5\n")  # imported inside the function only
    assert _key_of(target) != second


LIBRARY_USER = """\
import json
import torch
import torch.classes
import piq
from skimage.measure import blur_effect
import {zipped}
import {namespace}.helper


class M:
    name, lower_better, score_range = "m", True, (0.0, 1.0)

    def __call__(self, images):
        return [0.5 for _ in images]
"""


def test_installed_libraries_are_keyed_by_version_and_only_real_files_are_hashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33: `import torch` at the top of a metric raised FileNotFoundError '_classes.py' (the
    key hashed torch.classes' bare `__file__`), and no installed library was in the key. Now each
    library the code imports is keyed by its distribution's version, and a module with no file of
    its own (torch.classes, a namespace package, a zip-imported module) is never read."""
    needs("torch")
    import zipfile

    tag = uuid.uuid4().hex[:8]
    names = {"zipped": f"zipped_{tag}", "namespace": f"nsp_{tag}"}
    with zipfile.ZipFile(tmp_path / "lib.zip", "w") as archive:
        archive.writestr(f"{names['zipped']}.py", "VALUE = 1\n")
    (tmp_path / names["namespace"]).mkdir()  # no __init__.py: a namespace package
    (tmp_path / names["namespace"] / "helper.py").write_text("HELP = 2\n")
    (tmp_path / f"libuser_{tag}.py").write_text(LIBRARY_USER.format(**names))
    monkeypatch.syspath_prepend(str(tmp_path / "lib.zip"))
    monkeypatch.syspath_prepend(str(tmp_path))
    from metrics_under_test.registry import resolve

    (spec,) = resolve(f"libuser_{tag}:M")
    description = identity(spec, "cpu")
    libraries = description["libraries"]
    assert isinstance(libraries, dict)
    assert {
        dist: metadata.version(dist) for dist in ("piq", "scikit-image", "torch")
    }.items() <= libraries.items()
    assert isinstance(description["sources"], dict)
    assert description["sources"].keys() == {f"libuser_{tag}", f"{names['namespace']}.helper"}


def test_a_change_to_a_declared_checkpoint_is_a_miss(own_metric: Callable[[], Path]) -> None:
    metric_file = own_metric()
    target = f"{metric_file.stem}:local_contrast"
    from metrics_under_test.registry import resolve

    (spec,) = resolve(target)
    checkpoint = metric_file.with_name("ckpt.txt")
    assert spec.files == (checkpoint.resolve(),)
    first = _key_of(target)
    checkpoint.write_text("2.0")
    assert _key_of(target) != first
    checkpoint.unlink()
    assert identity(spec, "cpu")["files"] == {str(checkpoint.resolve()): "missing"}


def test_a_declared_folder_is_keyed_by_every_file_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = uuid.uuid4().hex[:8]
    (tmp_path / "model" / "sub").mkdir(parents=True)
    (tmp_path / "model" / "sub" / "weights.bin").write_bytes(b"v1")
    (tmp_path / f"foldered_{tag}.py").write_text(
        "class M:\n    name, lower_better, score_range = 'm', True, (0.0, 1.0)\n"
        "    files = 'model'\n    def __call__(self, images):\n        return [0.5 for _ in images]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    first = _key_of(f"foldered_{tag}:M")
    (tmp_path / "model" / "sub" / "weights.bin").write_bytes(b"v2")
    assert _key_of(f"foldered_{tag}:M") != first


def _rewrite_keeping_mtime(path: Path, data: bytes) -> None:
    """`path` rewritten in place with its mtime put back, as `cp -p` or `rsync -a` leave it; waits
    until the kernel's (coarse) ctime clock has moved, as it has between any two real runs."""
    before = path.stat()
    while True:
        path.write_bytes(data)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        if path.stat().st_ctime_ns != before.st_ctime_ns:
            return
        time.sleep(0.01)


def test_file_hashes_are_remembered_until_size_mtime_ctime_or_inode_change(tmp_path: Path) -> None:
    """Issue 33: a weights file rewritten to the same size with its mtime put back was served the
    old hash (the memo was path, size and mtime). The ctime moves with every write and utime."""
    cache, weights = ScoreCache(tmp_path / "c"), tmp_path / "w.bin"
    weights.write_bytes(b"a" * 1000)
    first = cache.file_hash(weights)
    assert first == hashlib.sha256(b"a" * 1000).hexdigest()
    assert ScoreCache(tmp_path / "c").file_hash(weights) == first
    _rewrite_keeping_mtime(weights, b"b" * 1000)
    assert cache.file_hash(weights) == hashlib.sha256(b"b" * 1000).hexdigest()
    replaced = tmp_path / "w.new"
    replaced.write_bytes(b"c" * 1000)
    os.replace(replaced, weights)  # another inode at the same path
    assert cache.file_hash(weights) == hashlib.sha256(b"c" * 1000).hexdigest()
    stamp = weights.stat()
    assert cache._run("SELECT size, mtime_ns, ctime_ns, inode FROM file_hashes", ()) == [
        (1000, stamp.st_mtime_ns, stamp.st_ctime_ns, stamp.st_ino)
    ]


OLD_FILE_HASHES = (
    "CREATE TABLE file_hashes (path TEXT PRIMARY KEY, size INTEGER NOT NULL, "
    "mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL)"
)


def test_a_cache_of_the_former_schema_keeps_its_scores_and_rebuilds_its_file_memo(tmp_path: Path) -> None:
    """A scores.sqlite written before the memo had ctime and inode: the memo table is rebuilt
    empty (its rows cannot be trusted), every score is kept, and nothing is set aside."""
    db = sqlite3.connect(tmp_path / FILE)
    with db:
        db.execute(SCHEMA["scores"])
        db.execute(SCHEMA["identities"])
        db.execute(OLD_FILE_HASHES)
        db.execute("INSERT INTO scores VALUES ('img', 'm', 2.5)")
        db.execute("INSERT INTO file_hashes VALUES ('/w.bin', 3, 1, 'stale')")
    db.close()
    cache = ScoreCache(tmp_path)
    assert cache.set_aside is None and cache.get("m", ["img"]) == {"img": 2.5}
    assert cache._run("SELECT sql FROM sqlite_master WHERE name = 'file_hashes'", ()) == [
        (SCHEMA["file_hashes"],)
    ]
    assert cache._run("SELECT * FROM file_hashes", ()) == []
    assert list(tmp_path.glob("*.corrupt-*")) == []


def test_a_second_book_scores_nothing_and_says_so(tmp_path: Path, make_set: MakeSet) -> None:
    records = read_imagefolder(make_set(seeds=("alpha",), runs=(0,), steps=(1, 5))).select("replicate")
    built: list[str] = []

    def loader(spec: MetricSpec, device: str) -> Mean:
        built.append(spec.name)
        return Mean()

    first = ScoreBook("cpu", loader=loader, cache=ScoreCache(tmp_path / "c"))
    scores = first.scores(SPEC, records)
    assert first.cached(SPEC, records) == [False, False]
    second = ScoreBook("cpu", loader=loader, cache=ScoreCache(tmp_path / "c"))
    assert second.scores(SPEC, records) == scores
    assert second.cached(SPEC, records) == [True, True]
    assert built == ["mean"] and second.images.decodes == 0
    third = ScoreBook("cuda", loader=loader, cache=ScoreCache(tmp_path / "c"))
    third.scores(SPEC, records)
    assert built == ["mean", "mean"]  # another device is another key


def _write(directory: str, worker: int, rounds: int) -> None:
    cache = ScoreCache(Path(directory))
    for r in range(rounds):
        cache.put("m", {f"w{worker}-{r}-{i}": float(i) for i in range(20)}, {"name": "m"})
        cache.get("m", [f"w{1 - worker}-{r}-0"])
    cache.close()


@pytest.mark.slow
def test_two_processes_write_at_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write, args=(str(tmp_path), w, 100)) for w in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    cache = ScoreCache(tmp_path)
    keys = [f"w{w}-{r}-{i}" for w in (0, 1) for r in range(100) for i in range(20)]
    assert len(cache.get("m", keys)) == 4000


def _filled(directory: Path) -> Path:
    cache = ScoreCache(directory)
    cache.put("m", {f"img{i:05d}": float(i) for i in range(5000)}, {"name": "m"})
    cache.close()
    return directory / FILE


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.write_bytes(b"this is not a database" * 100), id="garbage"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]), id="truncated"),
        pytest.param(
            lambda p: p.write_bytes(p.read_bytes()[:100] + b"\xff" * 3000 + p.read_bytes()[3100:]),
            id="scribbled",
        ),
        pytest.param(
            lambda p: sqlite3.connect(p).execute("DROP TABLE identities").connection.commit(), id="schema"
        ),
    ],
)
def test_a_damaged_file_is_set_aside_and_rebuilt(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    path = _filled(tmp_path)
    damage(path)
    before = path.read_bytes()
    with pytest.warns(CacheWarning, match="moved it to scores.sqlite.corrupt-"):
        cache = ScoreCache(tmp_path)
    assert cache.set_aside is not None and cache.set_aside.read_bytes() == before
    assert cache.get("m", ["img00001"]) == {}
    cache.put("m", {"img00001": 9.0}, {"name": "m"})
    assert ScoreCache(tmp_path).get("m", ["img00001"]) == {"img00001": 9.0}


SNAPSHOT_MODULE = (
    "from banana_tests.families.snapshot.test_snapshots import "
    "pytest_generate_tests, test_scores_match_snapshot"
    "  # noqa: F401\n"
)


@pytest.mark.slow
def test_an_edited_helper_module_rescores_and_fails_the_snapshot(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's repro end to end: record, change `SCALE = 1.0` to `1.1` in the module the
    metric imports, run again with the cache on. On f958bf8 the second run passed from the cache."""
    from tests.conftest import suite_folder

    suite_folder(pytester, monkeypatch, SNAPSHOT_MODULE, seeds=("alpha",), runs=(0,), steps=(1, 5))
    names = {"core": "lc_core", "lazy": "lc_lazy", "metric": "mymetric"}
    (pytester.path / "lc_core.py").write_text(LC_CORE)
    (pytester.path / "lc_lazy.py").write_text(LAZY)
    (pytester.path / "mymetric.py").write_text(MYMETRIC.format(**names))
    (pytester.path / "ckpt.txt").write_text("1.0")
    args = ("--dataset=data", "--metric=mymetric:local_contrast")
    pytester.runpytest_subprocess(*args, "--snapshot-update").assert_outcomes(passed=1)
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)  # from the cache

    (pytester.path / "lc_core.py").write_text("SCALE = 1.1\n")
    edited = pytester.runpytest_subprocess(*args)
    edited.assert_outcomes(failed=1)
    edited.stdout.fnmatch_lines(["*2 score(s) moved*", "*replicate/alpha/run0/step1: * (+10.00%)*"])

    (pytester.path / "lc_core.py").write_text(LC_CORE)
    (pytester.path / "ckpt.txt").write_text("1.1")
    pytester.runpytest_subprocess(*args).assert_outcomes(failed=1)


def test_a_vlm_metrics_key_holds_its_adapters_code_its_libraries_and_its_hub_revision() -> None:
    """A VLM scores by the adapters' code, transformers, torch and pyiqa, and the hub commit of its
    files: a change to any of them is a miss."""
    needs("transformers"), needs("pyiqa")
    from metrics_under_test import vlm
    from metrics_under_test.registry import lookup

    spec = lookup("qalign")
    description = identity(spec, "cuda:0")
    libraries = "; ".join(f"{n} {metadata.version(n)}" for n in ("transformers", "torch", "pyiqa"))
    assert description == {
        "name": "qalign",
        "backend": "vlm",
        "suite": code_hashes(Backend.VLM),  # the adapters' code, with the suite's scoring path
        "version": f"vlm; {libraries}",
        "revision": vlm.revision(spec),
        "precision": "model default",
        "weights": {},
        "device": "cuda",
    }
