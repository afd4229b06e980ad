"""What a run leaves and what it claims (issue 40, item 6): nothing outside the project's folder and
pyiqa's cache, no link into the weights mirror left in the user's home, and run facts that name
only the packages the run used."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import pytest

from tests.conftest import suite_folder, unavailable, weights_mirror

pytestmark = pytest.mark.slow  # each test runs pytest in a child process: the slow tier

MIRROR = weights_mirror()  # read before suite_folder clears $BANANA_WEIGHTS_DIR


def facts(junit: Path) -> dict[str, str]:
    return {
        str(p.get("name")): str(p.get("value"))
        for p in ET.parse(junit).iterfind("testsuite/properties/property")
    }


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))


def test_the_mirror_is_staged_into_the_home_cache_without_links(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A user's default TORCH_HOME (~/.cache/torch): on 3466396 the run left symbolic links to the
    mirror there, which dangle once the mirror moves. One such link, as that version left it, is
    replaced by the file."""
    if MIRROR is None:
        unavailable("no pyiqa weights mirror")
    home = tmp_path / "home"
    cache = home / ".cache" / "torch" / "hub" / "pyiqa"
    cache.mkdir(parents=True)
    (cache / "niqe_modelparameters.mat").symlink_to(MIRROR / "niqe_modelparameters.mat")
    monkeypatch.setenv("HOME", str(home))
    for name in ("TORCH_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)

    result = suite.runpytest_subprocess(
        "--dataset=data", "--steps=5", "--metric=brisque,niqe", f"--weights-dir={MIRROR}", "--junitxml=j.xml"
    )

    assert not {"errors", "error"} & result.parseoutcomes().keys(), result.stdout.str()[-2000:]
    left = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() or p.is_symlink())
    staged = sorted(p.name for p in MIRROR.iterdir() if p.suffix in (".pth", ".mat"))
    assert left == [f".cache/torch/hub/pyiqa/{f}" for f in staged]  # the whole mirror, for every run
    for name in ("brisque_svm_weights.pth", "niqe_modelparameters.mat"):
        staged = cache / name
        assert not staged.is_symlink() and staged.read_bytes() == (MIRROR / name).read_bytes()
    assert not [n for n in os.listdir(cache) if n.startswith(".")]  # no temporary file beside them
    versions = facts(suite.path / "j.xml")["versions"]
    assert versions == "; ".join(f"{n} {metadata.version(n)}" for n in ("banana-tests", "pyiqa", "torch"))


def test_the_run_facts_name_only_what_the_run_used(suite: pytest.Pytester) -> None:
    """A run of a numpy-only metric named pyiqa and torch as its versions on 3466396."""
    suite.makepyfile(own=OWN)
    suite.runpytest_subprocess("--dataset=data", "--steps=5", "--metric=own:spread", "--junitxml=j.xml")
    found = facts(suite.path / "j.xml")
    assert found["versions"] == f"banana-tests {metadata.version('banana-tests')}"
    assert found["libraries"] == f"numpy {metadata.version('numpy')}"


OWN = """
import numpy as np

from metrics_under_test.protocol import metric


@metric("spread", lower_better=True, score_range=(0.0, 100.0))
def spread(images):
    return [float(np.std(img)) for img in images]
"""
