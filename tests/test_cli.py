"""The `banana-tests` command itself, and the packaging floors its metadata needs."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

from tests.conftest import PROJECT

SCRIPT = Path(sys.executable).with_name("banana-tests")


def test_version_prints_the_installed_distributions_version() -> None:
    run = subprocess.run([str(SCRIPT), "--version"], capture_output=True, text=True, check=False)
    assert (run.returncode, run.stdout, run.stderr) == (0, f"banana-tests {version('banana-tests')}\n", "")


def test_the_build_floor_reads_the_license_as_written() -> None:
    """`license = "MIT"` (a PEP 639 string) is an error before setuptools 77; the floor was 69."""
    meta = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))
    assert isinstance(meta["project"]["license"], str)
    assert meta["build-system"]["requires"] == ["setuptools>=77"]


def test_the_syrupy_floor_has_the_option_the_suite_sets() -> None:
    """ "Nothing is ever deleted" sets syrupy's `--snapshot-no-cleanup` (no_cleanup), added in 5.4."""
    meta = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "syrupy>=5.4" in meta["project"]["dependencies"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True, check=True
    )
    assert "--snapshot-no-cleanup" in run.stdout
