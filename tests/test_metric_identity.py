"""A metric's identity covers the distributions its libraries pull in, not only those its own code
imports: a change in any of them rescores (issue 40, item 5)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from banana_tests.scoring.score_identity import MEMO, distributions_of
from tests.conftest import needs, suite_folder

METRIC = """\
import numpy as np

import tdep_a


class Contrast:
    name, lower_better, score_range, cost = "contrast", True, (0.0, 100.0), "fast"

    def __call__(self, images):
        return [tdep_a.score(np.asarray(img, dtype=np.float64)) for img in images]
"""
LIBRARY_A = "from tdep_b import FACTOR\n\n\ndef score(pixels):\n    return float(pixels.std()) * FACTOR\n"


def wheel(folder: Path, name: str, version: str, source: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of one module `name`, as a build backend would write it."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": source,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/top_level.txt": f"{name}\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name_in_wheel, text in files.items():
            archive.writestr(name_in_wheel, text)
    return path


def pip_install(target: Path, wheel_file: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--upgrade",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(wheel_file),
        ],
        check=True,
        capture_output=True,
    )


def cached(junit: Path) -> list[str]:
    """Each Δ case's `score_cached` property."""
    return [p.get("value", "") for p in ET.parse(junit).iter("property") if p.get("name") == "score_cached"]


@pytest.mark.slow
def test_a_transitive_dependencys_version_change_rescores(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The metric imports `tdep_a` only; `tdep_a` requires and imports `tdep_b`. On 3466396 a new
    `tdep_b` served every score from the cache (CPBD → scikit-image's `canny` in the issue)."""
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    pip_install(site, wheel(wheels, "tdep_a", "1.0", LIBRARY_A, requires=("tdep_b>=1",)))
    pip_install(site, wheel(wheels, "tdep_b", "1.0", "FACTOR = 1.0\n"))
    suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))
    (pytester.path / "contrast.py").write_text(METRIC)
    monkeypatch.setenv("PYTHONPATH", str(site))

    def run(junit: str) -> list[str]:
        args = ("--dataset=data", "--steps=5", "--metric=contrast:Contrast", f"--junitxml={junit}")
        result = pytester.runpytest_subprocess(*args)
        result.assert_outcomes(passed=1)  # noise raises the std-dev: lower is better
        return cached(pytester.path / junit)

    assert run("first.xml") == ["false"]
    assert run("again.xml") == ["true"]
    pip_install(site, wheel(wheels, "tdep_b", "1.0.1", "FACTOR = 1.0\n"))  # the same code, a new release
    assert run("upgraded.xml") == ["false"]
    assert run("upgraded_again.xml") == ["true"]


def test_the_requirements_tree_of_a_real_library_is_keyed() -> None:
    """piq requires torchvision, scikit-image requires scipy: both in the key of a metric that
    imports only piq and scikit-image, whatever this process imported before."""
    needs("piq")
    from importlib import metadata

    from metrics_under_test.own_code import distribution_versions

    versions = distribution_versions({"piq", "skimage"})
    for dist in ("piq", "scikit-image", "torchvision", "torch", "scipy", "numpy", "pillow"):
        assert versions[metadata.metadata(dist)["Name"]] == metadata.version(dist)
    assert "pytest" not in versions  # only an extra of scikit-image's requires it


USES_PIQ = """
import piq


class M:
    name, lower_better, score_range = "m", True, (0.0, 1.0)

    def __call__(self, images):
        return [0.5 for _ in images]
"""
KEY = (
    "{before}\n"
    "from banana_tests.scoring.score_identity import identity, identity_key\n"
    "from metrics_under_test.registry import resolve\n"
    "(spec,) = resolve('uses_piq:M')\n"
    "print(identity_key(identity(spec, 'cpu')))\n"
)


@pytest.mark.slow
def test_the_key_is_the_same_whatever_the_process_imported_before(tmp_path: Path) -> None:
    """An xdist worker where another metric loaded torch and scikit-image first, and one where
    nothing did, key the metric alike: the tree is read from metadata, not from sys.modules."""
    (tmp_path / "uses_piq.py").write_text(USES_PIQ)
    keys = {
        subprocess.run(
            [sys.executable, "-c", KEY.format(before=before)],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(tmp_path)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for before in ("", "import torch, skimage.feature, torchvision")
    }
    assert len(keys) == 1 and len(keys.pop().strip()) == 64


UNDECLARED_A = "from udep_b import FACTOR\n\n\ndef score(pixels):\n    return float(pixels.std()) * FACTOR\n"


@pytest.mark.slow
@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_an_undeclared_import_of_a_library_is_keyed_by_what_loaded(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, workers: tuple[str, ...]
) -> None:
    """`udep_a` imports `udep_b` without declaring it (no Requires-Dist), as pyiqa's Q-Align
    imports icecream: `udep_b`'s version is in the identity because the metric loaded it while it
    was built and probed (found once by xdist's controller, handed to its workers). The metric
    declares itself a VLM, as Q-Align is: VLMs are looked at too (docs/metrics.md)."""
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    pip_install(site, wheel(wheels, "udep_a", "1.0", UNDECLARED_A.replace("tdep", "udep")))
    pip_install(site, wheel(wheels, "udep_b", "1.0", "FACTOR = 1.0\n"))
    suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))
    (pytester.path / "contrast.py").write_text(METRIC.replace("tdep_a", "udep_a").replace('"fast"', '"vlm"'))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    )

    def run(junit: str) -> list[str]:
        args = ("--dataset=data", "--steps=5", "--metric=contrast:Contrast", f"--junitxml={junit}")
        result = pytester.runpytest_subprocess(*args, "--cache-dir=scores", *workers)
        result.assert_outcomes(passed=1)
        return cached(pytester.path / junit)

    assert run("first.xml") == ["false"]
    assert run("again.xml") == ["true"]
    pip_install(site, wheel(wheels, "udep_b", "1.0.1", "FACTOR = 1.0\n"))  # the same code, a new release
    assert run("upgraded.xml") == ["false"]
    assert run("upgraded_again.xml") == ["true"]
    memo = json.loads((pytester.path / "scores" / MEMO).read_text())
    assert [a["distributions"]["udep_b"] for a in memo["contrast"]] == ["1.0.1", "1.0"]  # newest first


@pytest.mark.slow
def test_a_real_library_that_torch_loads_undeclared_is_keyed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """PIQE through pyiqa: torch loads dill whenever it is installed (torch.utils.data.graph) and
    declares it nowhere, so neither pyiqa's nor torch's requirements name it. A new dill release,
    here the installed code under a new version, rescores; before, the old scores were served."""
    from importlib import metadata

    dill = metadata.distribution("dill")
    site = tmp_path / "site"
    shutil.copytree(Path(str(dill.locate_file("dill"))), site / "dill")
    newer = f"{dill.version}.post7"
    info = site / f"dill-{newer}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: dill\nVersion: {newer}\n")
    (info / "top_level.txt").write_text("dill\n")
    suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))

    def run(junit: str, *path: Path) -> list[str]:
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(map(str, path)))
        args = ("--dataset=data", "--steps=5", "--metric=piqe", f"--junitxml={junit}", "--cache-dir=scores")
        result = pytester.runpytest_subprocess(*args)
        assert result.ret in (0, 1), result.stdout.str()[-2000:]
        return cached(pytester.path / junit)

    assert run("first.xml") == ["false"]
    assert run("again.xml") == ["true"]
    assert run("new_dill.xml", site) == ["false"]
    memo = json.loads((pytester.path / "scores" / MEMO).read_text())
    assert [a["distributions"]["dill"] for a in memo["piqe"]] == [newer, dill.version]


def test_loaded_modules_map_to_their_distributions_by_name() -> None:
    """torch.classes' fake `__file__`, a built-in module (no file) and the standard library do no
    harm: a module is mapped by its top-level name; the suite's own code is not a library."""
    needs("torch")
    from importlib import metadata

    found = distributions_of(["torch.classes", "sys", "json.decoder", "yaml", "banana_tests.cli"])
    assert found == {"torch": metadata.version("torch"), "PyYAML": metadata.version("PyYAML")}


# The suite's own code on the scoring path (issue 56, item 2): an edit of the pyiqa adapter served
# the old scores (14 misses cached, 10 with --no-cache).


def suite_imports(module: str) -> set[str]:
    """The suite's modules that `module`'s import statements name, lazy ones included."""
    from metrics_under_test.own_code import imported_names

    path = module_file(module)
    names = set(imported_names(path, module))
    return {
        n for n in names if n.partition(".")[0] in ("banana_tests", "metrics_under_test") and is_module(n)
    }


def is_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # `from package.module import function`: the function's name
        return False


def module_file(name: str) -> Path:
    from banana_tests.scoring.score_identity import module_file as found

    return found(name)


def test_the_scoring_code_list_covers_every_suite_module_the_scoring_path_imports() -> None:
    """Every module of the suite's that a listed module imports, at module level or inside a
    function, is listed too, or is in UNSCORED with why it cannot change a stored score; and
    UNSCORED names no module the path does not reach, so the list cannot rot either way."""
    from banana_tests.scoring.score_identity import BACKENDS, SCORING, UNSCORED
    from metrics_under_test.spec import Backend

    assert set(BACKENDS) == set(Backend), "a backend without its adapter's code in the key"
    listed = {*SCORING, *(m for modules in BACKENDS.values() for m in modules)}
    assert not listed & set(UNSCORED)
    reached: set[str] = set()
    for module in listed:
        reached |= suite_imports(module)
    assert reached - listed - set(UNSCORED) == set(), (
        "imported on the scoring path, neither hashed nor UNSCORED"
    )
    assert set(UNSCORED) - reached == set(), "UNSCORED names a module the scoring path does not import"
    assert {"banana_tests.scoring.score_book", "banana_tests.trajectories.images"} <= listed


@pytest.mark.parametrize(
    "request_text, adapter, not_adapter",
    [
        ("piqe", "metrics_under_test.pyiqa_backend", "metrics_under_test.custom"),
        (
            "metrics_under_test.examples:laplacian_variance",
            "metrics_under_test.custom",
            "metrics_under_test.pyiqa_backend",
        ),
    ],
    ids=["pyiqa", "custom"],
)
def test_a_metrics_identity_holds_the_sha256_of_the_suite_code_that_scores_it(
    request_text: str, adapter: str, not_adapter: str
) -> None:
    """The key of a pyiqa metric holds the adapter's source (`100 - score` there rescores), the
    decoder's and the batching's; a custom metric's holds its own adapter's, not pyiqa's."""
    if adapter == "metrics_under_test.pyiqa_backend":
        needs("pyiqa")
    from banana_tests.scoring.score_identity import identity
    from metrics_under_test.own_code import file_sha256
    from metrics_under_test.registry import resolve

    (spec,) = resolve(request_text)
    suite = identity(spec, "cpu")["suite"]
    assert isinstance(suite, dict)
    for module in (adapter, "banana_tests.trajectories.images", "banana_tests.scoring.batching"):
        assert suite[module] == file_sha256(module_file(module))
    assert not_adapter not in suite
    assert "banana_tests.reports.junit" not in suite  # a report's edit rescores nothing


# Modules a metric's library tried to import and could not (issue 56, item 3): a library's
# `try: import fast_path` kept its cached scores once fast_path was installed (9 misses cached,
# 15 uncached), and a memo with no distributions was accepted for ever.


def test_a_failed_import_is_recorded_and_a_module_found_since_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look's finder, last on sys.meta_path, records each name no finder found; a name found
    since (a finder added after it, or the file written) is not missing."""
    import importlib

    from banana_tests.scoring.score_identity import _Misses

    monkeypatch.syspath_prepend(str(tmp_path))
    misses = _Misses()
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, misses])
    for name in ("fast_path_56", "fast_path_56_later"):
        with pytest.raises(ImportError):
            importlib.import_module(name)
    (tmp_path / "fast_path_56_later.py").write_text("FAST = True\n")
    importlib.invalidate_caches()
    assert {"fast_path_56", "fast_path_56_later"} <= misses.names
    assert "fast_path_56" in misses.missing() and "fast_path_56_later" not in misses.missing()


def test_importable_finds_a_module_without_importing_it_or_its_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`importlib.util.find_spec("package.module")` would import the package (scipy for a missing
    `scipy._fast`): the memo's check must be cheap and run no library's code."""
    import importlib

    from banana_tests.scoring.score_identity import importable

    monkeypatch.syspath_prepend(str(tmp_path))
    package = tmp_path / "pkg_56"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (package / "plain.py").write_text("")
    importlib.invalidate_caches()
    assert importable("pkg_56") and importable("pkg_56.plain")
    assert (
        not importable("pkg_56.fast") and not importable("pkg_56.plain.sub") and not importable("nopkg_56.x")
    )
    assert "pkg_56" not in sys.modules
    (package / "fast.py").write_text("")
    importlib.invalidate_caches()
    assert importable("pkg_56.fast") and "pkg_56" not in sys.modules


def dist_info(site: Path, name: str, version: str) -> None:
    """A real installed distribution of one module, as `pip install --target` leaves it."""
    for old in site.glob(f"{name}-*.dist-info"):
        shutil.rmtree(old)
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "top_level.txt").write_text(f"{name}\n")
    (site / f"{name}.py").write_text("")


def test_a_remembered_answer_is_current_while_its_versions_hold_and_its_missing_modules_stay_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version changed, a missing module now found, or an answer of an earlier version (it did
    not record failed imports, so a memo with no distributions was accepted for ever): looked at again."""
    import importlib

    from banana_tests.scoring.score_identity import Answer, _current

    monkeypatch.syspath_prepend(str(tmp_path))
    dist_info(tmp_path, "slow_path_56", "1.0")
    importlib.invalidate_caches()
    answer: Answer = {"key": "k", "distributions": {"slow_path_56": "1.0"}, "missing": ["fast_path_56"]}
    assert _current(answer)
    assert not _current({"key": "k", "distributions": {}})  # an earlier version's answer
    assert _current({"key": "k", "distributions": {}, "missing": []})
    dist_info(tmp_path, "fast_path_56", "1.0")
    importlib.invalidate_caches()
    assert not _current(answer)
    assert _current({**answer, "missing": []})
    dist_info(tmp_path, "slow_path_56", "1.1")
    importlib.invalidate_caches()
    assert not _current({**answer, "missing": []})


def test_what_a_metric_failed_to_import_is_in_its_score_key(tmp_path: Path) -> None:
    """A module with no distribution (a plain file on PYTHONPATH) found since changes no version:
    the modules missing at the look key the scores, so its arrival rescores."""
    import numpy as np

    from banana_tests.scoring.score_book import ScoreBook
    from banana_tests.scoring.score_cache import ScoreCache
    from metrics_under_test.registry import resolve

    (spec,) = resolve("metrics_under_test.examples:laplacian_variance")
    image = np.random.default_rng(56).integers(0, 256, (32, 32, 3), dtype=np.uint8)

    def cached(missing: list[str]) -> bool:
        found = {spec.name: {"distributions": {"numpy": np.__version__}, "missing": missing}}
        book = ScoreBook("cpu", cache=ScoreCache(tmp_path), loaded=found)
        book.score_pixels(spec, [image])
        book.cache.close()
        return bool(book.pixels.hits)

    assert [cached(["fast_path_56"]), cached(["fast_path_56"]), cached([]), cached([])] == [
        False,
        True,
        False,
        True,
    ]


def deltas(junit: Path) -> list[tuple[float, str]]:
    """Each Δ case's (Δ, score_cached)."""
    out = []
    for case in ET.parse(junit).iter("testcase"):
        props = {p.get("name"): p.get("value", "") for p in case.iter("property")}
        out.append((float(props["delta"]), props["score_cached"]))
    return out


@pytest.mark.slow
def test_an_edit_of_the_pyiqa_adapter_rescores(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The suite's own code is part of a score's identity: the same run with `100 - score` in the
    pyiqa adapter (a copy of the tree first on PYTHONPATH, as an upgrade of banana-tests would
    install it) scores again and gets the edited adapter's Δ, which is PIQE's negated; on
    f6361d6 the old scores were served and the Δ kept its sign (14 misses cached, 10 with
    --no-cache in the issue)."""
    root = Path(__file__).parents[1]
    tree = tmp_path / "tree"
    for package in ("banana_tests", "metrics_under_test"):
        shutil.copytree(root / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "banana_tests" / "data").symlink_to(root / "fixtures")
    adapter = tree / "metrics_under_test" / "pyiqa_backend.py"
    source = adapter.read_text()
    assert source.count("scores[i] = float(s)") == 1
    adapter.write_text(source.replace("scores[i] = float(s)", "scores[i] = 100.0 - float(s)"))
    suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))

    def run(junit: str, *path: Path) -> list[tuple[float, str]]:
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(map(str, path)))
        args = ("--dataset=data", "--steps=5", "--metric=piqe", f"--junitxml={junit}", "--cache-dir=scores")
        result = pytester.runpytest_subprocess(*args)
        assert result.ret in (0, 1), result.stdout.str()[-2000:]
        return deltas(pytester.path / junit)

    [(delta, first)] = run("first.xml")
    assert (first, run("again.xml")) == ("false", [(delta, "true")])
    assert run("edited.xml", tree) == [(pytest.approx(-delta), "false")]
    assert run("edited_again.xml", tree) == [(pytest.approx(-delta), "true")]


FAST_PATH_LIBRARY = """\
try:
    from fast_path_56 import FACTOR
except ImportError:
    FACTOR = 1.0


def score(pixels):
    return float(pixels.std()) * FACTOR
"""


@pytest.mark.slow
def test_a_module_a_library_could_not_import_then_installed_rescores(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`slow_lib_56` does `try: from fast_path_56 import FACTOR`, which negates the scores. Once
    fast_path_56 is installed the metric is looked at again and scored again; on f6361d6 its
    cached scores were served (9 misses cached, 15 uncached in the issue). A plain module with no
    distribution is keyed by the missing modules (test_what_a_metric_failed_to_import_is_in_its_score_key)."""
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    pip_install(site, wheel(wheels, "slow_lib_56", "1.0", FAST_PATH_LIBRARY))
    suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))
    (pytester.path / "contrast.py").write_text(METRIC.replace("tdep_a", "slow_lib_56"))
    monkeypatch.setenv("PYTHONPATH", str(site))

    def run(junit: str) -> list[tuple[float, str]]:
        args = ("--dataset=data", "--steps=5", "--metric=contrast:Contrast", f"--junitxml={junit}")
        result = pytester.runpytest_subprocess(*args, "--cache-dir=scores")
        assert result.ret in (0, 1), result.stdout.str()[-2000:]
        return deltas(pytester.path / junit)

    [(delta, first)] = run("first.xml")
    assert (first, run("again.xml")) == ("false", [(delta, "true")])
    pip_install(site, wheel(wheels, "fast_path_56", "1.0", "FACTOR = -1.0\n"))
    assert run("installed.xml") == [(pytest.approx(-delta), "false")]
    assert run("installed_again.xml") == [(pytest.approx(-delta), "true")]
    memo = json.loads((pytester.path / "scores" / MEMO).read_text())
    assert [("fast_path_56" in a["missing"]) for a in memo["contrast"]] == [False, True]  # newest first


AT_EXIT = """\
import atexit
import os
import sys

import numpy as np

if getattr(sys.modules["__main__"].__spec__, "name", "") == "banana_tests.scoring.score_identity":
    with open(os.environ["LOOKS"], "a") as looks:  # the look at what the metric loads
        looks.write("looked\\n")
    if os.environ.get("END_THE_LOOK"):
        os._exit(0)  # ends its process before any answer, exit status 0
atexit.register(print, "goodbye from the metric")


class Contrast:
    name, lower_better, score_range, cost = "contrast", True, (0.0, 100.0), "fast"

    def __call__(self, images):
        return [float(np.asarray(img, dtype=np.float64).std()) for img in images]
"""


@pytest.mark.slow
def test_a_metric_that_prints_at_exit_keeps_its_loaded_libraries(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look's answer was the child's last stdout line: a metric that prints at exit left no
    memo and no `loaded` key, and was looked at again every run (f6361d6). The answer is a file."""
    import sqlite3

    suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))
    (pytester.path / "contrast.py").write_text(AT_EXIT)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.setenv("LOOKS", str(pytester.path / "looks.log"))
    for junit in ("first.xml", "again.xml"):
        args = ("--dataset=data", "--steps=5", "--metric=contrast:Contrast", f"--junitxml={junit}")
        result = pytester.runpytest_subprocess(*args, "--cache-dir=scores")
        result.assert_outcomes(passed=1)
        assert "which libraries it loads is unknown" not in result.stdout.str() + result.stderr.str()
    assert (pytester.path / "looks.log").read_text().splitlines() == ["looked"]  # once, then remembered
    assert [cached for _, cached in deltas(pytester.path / "again.xml")] == ["true"]
    memo = json.loads((pytester.path / "scores" / MEMO).read_text())
    assert memo["contrast"][0]["distributions"]["numpy"]
    with sqlite3.connect(pytester.path / "scores" / "scores.sqlite") as db:
        descriptions = [json.loads(d) for (d,) in db.execute("SELECT description FROM identities")]
    [identity] = [d for d in descriptions if d.get("name") == "contrast"]
    assert "numpy" in identity["loaded"] and isinstance(identity["missing"], list)


@pytest.mark.slow
def test_a_look_that_ends_without_an_answer_is_one_warning(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that exits 0 before it writes an answer (the metric ended it) was silence: no
    memo, no `loaded` key, a look every run. It is one warning line naming the metric; the run
    scores on."""
    suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))
    (pytester.path / "contrast.py").write_text(AT_EXIT)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.setenv("LOOKS", str(pytester.path / "looks.log"))
    monkeypatch.setenv("END_THE_LOOK", "1")
    args = ("--dataset=data", "--steps=5", "--metric=contrast:Contrast", "--cache-dir=scores")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1, warnings=1)
    said = [
        line
        for line in (result.stdout.str() + result.stderr.str()).splitlines()
        if "which libraries it loads is unknown" in line
    ]
    assert len(said) == 1, said
    assert "contrast: " in said[0] and "exited 0 before it wrote an answer" in said[0]
    assert not (pytester.path / "scores" / MEMO).exists()
