"""The `banana-tests` command itself, and the packaging floors its metadata needs."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from importlib.metadata import requires, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.conftest import PROJECT

SCRIPT = Path(sys.executable).with_name("banana-tests")


@pytest.mark.slow
def test_version_prints_the_installed_distributions_version() -> None:
    run = subprocess.run([str(SCRIPT), "--version"], capture_output=True, text=True, check=False)
    assert (run.returncode, run.stdout, run.stderr) == (0, f"banana-tests {version('banana-tests')}\n", "")


def test_the_build_floor_reads_the_license_as_written() -> None:
    """`license = "MIT"` (a PEP 639 string) is an error before setuptools 77; the floor was 69."""
    meta = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))
    assert isinstance(meta["project"]["license"], str)
    assert meta["build-system"]["requires"] == ["setuptools>=77"]


@pytest.mark.slow
def test_the_syrupy_floor_has_the_option_the_suite_sets() -> None:
    """ "Nothing is ever deleted" sets syrupy's `--snapshot-no-cleanup` (no_cleanup), added in 5.4."""
    floor = [r for r in requires("banana-tests") or [] if Requirement(r).name == "syrupy"]
    assert len(floor) == 1 and Version("5.4") in Requirement(floor[0]).specifier
    assert Version("5.3.9") not in Requirement(floor[0]).specifier
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True, check=True
    )
    assert "--snapshot-no-cleanup" in run.stdout


# Third-party modules imported under a name other than their distribution's, or arriving with a
# declared dependency (pyiqa brings timm and huggingface_hub, datasets brings pyarrow).
_DISTRIBUTION = {
    "PIL": "pillow",
    "skimage": "scikit-image",
    "google": "google-genai",
    "xdist": "pytest-xdist",
}
_ARRIVES_WITH = {"_pytest": "pytest", "timm": "pyiqa", "huggingface_hub": "datasets", "pyarrow": "datasets"}


def test_every_third_party_import_is_a_declared_dependency() -> None:
    """Each module banana_tests/ and metrics_under_test/ import is the standard library, the project,
    or a distribution the installed metadata requires (always, or in an extra)."""
    declared = {Requirement(r).name.lower() for r in requires("banana-tests") or []}
    imported: set[str] = set()
    for folder in ("banana_tests", "metrics_under_test"):
        for path in (PROJECT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    imported |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"banana_tests", "metrics_under_test", "tests"}
    undeclared = {
        name
        for name in third_party
        if _DISTRIBUTION.get(name, name).lower() not in declared
        and _ARRIVES_WITH.get(name, "").lower() not in declared
    }
    assert undeclared == set()
