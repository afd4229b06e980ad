"""The suite from any project: the wheel carries its data, an unrelated pytest run sees nothing of
it, and a metric module beside the user imports without PYTHONPATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.conftest import assert_outcomes, suite_folder

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("banana_tests", "metrics_under_test")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert listed == found | {"banana_tests.data"}


@pytest.mark.slow
def test_the_wheel_carries_the_data_the_suite_reads(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("banana_tests-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "banana_tests/data/"
    rows = [json.loads(line) for line in (ROOT / "fixtures/emulated/metadata.jsonl").read_text().splitlines()]
    assert {f"{data}emulated/{r['file_name']}" for r in rows} <= names
    assert {f"{data}seeds/{p.name}" for p in (ROOT / "fixtures/seeds").glob("*.png")} <= names
    assert {
        f"{data}paper/paper_fig5_gaps.csv",
        f"{data}baselines/emulated.json",
        f"{data}baselines/paper.json",
        f"{data}emulated/trials.json",  # the per-artifact trial sets' sha256s, built on first use
        "metrics_under_test/pyiqa_catalog.json",
        "metrics_under_test/measured_costs.json",  # `metrics`, `plan` and `-n auto` read it
    } <= names
    shipped = ROOT / "banana_tests/families/snapshot/__snapshots__/test_snapshots"
    assert {
        f"banana_tests/families/snapshot/__snapshots__/test_snapshots/{p.name}"
        for p in shipped.glob("*.json")
    } <= names
    embedded = sum(p.stat().st_size for p in (ROOT / "fixtures/emulated").rglob("*") if p.is_file())
    assert embedded <= 25e6  # the embedded set's budget (issue 18)
    weights = sum(p.stat().st_size for p in (ROOT / "banana_tests/editors/taef2").glob("*.pth"))
    assert weights < 5.5e6  # TAEF2's two files (issue 49)
    assert wheel.stat().st_size < 30e6 + weights  # that set, the seed images (1.4 MB), code, tables, TAEF2
    taef2 = ("taef2_encoder.pth", "taef2_decoder.pth", "LICENSE")
    assert {f"banana_tests/editors/taef2/{n}" for n in taef2} <= names
    assert {"banana_tests/py.typed", "metrics_under_test/py.typed"} <= names  # PEP 561: typed packages


@pytest.mark.slow
def test_an_unrelated_project_runs_as_if_the_plugin_were_absent(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_mine="def test_mine():\n    assert True\n")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = pytester.runpytest_subprocess("-n", "auto")
    result.assert_outcomes(passed=1)
    assert "banana-tests failure matrix" not in result.stdout.str() and "2 workers" in result.stdout.str()
    assert not (pytester.path / ".banana_cache").exists()


@pytest.mark.slow
def test_a_metric_module_beside_you_imports_as_under_python_m(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))
    suite.makepyfile(
        gradmag="""
        import numpy as np

        def mean_gradient(images):
            return [float(np.abs(np.diff(i.astype(float), axis=1)).mean()) for i in images]

        mean_gradient.name, mean_gradient.lower_better, mean_gradient.score_range = "gradmag", False, (0, 50)
        """
    )
    monkeypatch.delenv("PYTHONPATH", raising=False)
    result = suite.runpytest_subprocess("--dataset=data", "--metric=gradmag:mean_gradient", "--steps=5")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stderr.str()
    assert_outcomes(result, missed=1)  # noise raises the mean gradient: a higher-is-better score misses it


@pytest.mark.slow
def test_the_readmes_install_commands_run_as_printed(tmp_path: Path) -> None:
    """banana-tests is not on the index yet: the README's `pip install banana-tests` named nothing
    (3466396). Its install block runs beside a checkout (`banana-tests/`); pip is told, by its own
    environment variables, to change nothing here and fetch nothing."""
    from tests.doc_blocks import README, Role, marked_blocks

    [block] = [b for b in marked_blocks(README) if b.role is Role.INSTALL]
    (tmp_path / "banana-tests").symlink_to(ROOT)
    quiet = {"PIP_DRY_RUN": "1", "PIP_NO_DEPS": "1", "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0"}
    env = {**os.environ, **quiet, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    done = subprocess.run(
        ["bash", "-ec", block.text], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("Would install banana-tests-") == 2, done.stdout[-2000:]
    assert [p.name for p in (tmp_path / "dist").glob("banana_tests-*.whl")]
