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

from banana_tests.scoring.loaded_libraries import MEMO, distributions_of
from tests.conftest import suite_folder

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
    "from banana_tests.scoring.cache import identity, identity_key\n"
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
    from importlib import metadata

    found = distributions_of(["torch.classes", "sys", "json.decoder", "yaml", "banana_tests.cli"])
    assert found == {"torch": metadata.version("torch"), "PyYAML": metadata.version("PyYAML")}
