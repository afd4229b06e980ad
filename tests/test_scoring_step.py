"""Scoring as a public step (docs/cluster.md): `banana_tests.api.score` and `banana-tests score`
fill a score cache without pytest, `banana-tests cache merge` joins caches, and a verdict pass on
the result builds no model, scores nothing and gives the Δs of a run that scored everything."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import assert_outcomes, suite_folder
from tests.known_metrics import install_known_metrics
from tests.test_throughput import COUNTING

METRIC = "--metric=countmetric:First,countmetric:Second"
JUNIT = ("-o", "junit_family=xunit1")


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    suite_folder(pytester, monkeypatch, seeds=("alpha", "beta", "gamma"), runs=(0, 1), steps=(1, 5, 10, 20))
    install_known_metrics(pytester.path)
    pytester.makepyfile(countmetric=COUNTING)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.setenv("BUILD_LOG", str(pytester.path / "builds.log"))
    return pytester


def builds(folder: pytest.Pytester) -> list[str]:
    log = folder.path / "builds.log"
    return log.read_text().splitlines() if log.exists() else []


def deltas(xml: Path) -> dict[str, tuple[str, str]]:
    """Each case's Δ and whether its scores came from the cache, by test name."""
    out = {}
    for case in ET.parse(xml).iter("testcase"):
        props = {p.get("name"): p.get("value", "") for p in case.iter("property")}
        out[case.get("name", "")] = (props["delta"], props["score_cached"])
    return out


def verdict_pass(folder: pytest.Pytester, cache: str, xml: str) -> dict[str, tuple[str, str]]:
    """A suite run on a filled cache: it must build no model."""
    before = builds(folder)
    result = folder.runpytest_subprocess(
        "--dataset=data", METRIC, f"--cache-dir={cache}", f"--junitxml={xml}", *JUNIT
    )
    assert_outcomes(result, passed=9, missed=9)
    assert builds(folder) == before, "the verdict pass built a model"
    return deltas(folder.path / xml)


def unsharded(folder: pytest.Pytester) -> dict[str, str]:
    """The Δs of a run that scores everything itself."""
    folder.runpytest_subprocess("--dataset=data", METRIC, "--no-cache", "--junitxml=cold.xml", *JUNIT)
    return {name: delta for name, (delta, _) in deltas(folder.path / "cold.xml").items()}


def test_the_api_fills_a_cache_the_verdict_pass_only_reads(suite: pytest.Pytester) -> None:
    script = (
        "from banana_tests.api import score\n"
        "s = score('data', 'countmetric:First,countmetric:Second', cache_dir='c', device='cpu')\n"
        "print(s.complete, *s.lines(), sep='\\n')\n"
    )
    result = suite.run(sys.executable, "-c", script)
    assert result.ret == 0, result.stderr.str()
    assert result.outlines[:3] == [
        "True",
        "first: 24 images, 0 from the cache, 24 scored",  # 3 seed images × 2 runs × steps 1, 5, 10, 20
        "second: 24 images, 0 from the cache, 24 scored",
    ]
    assert sorted(line.split()[0] for line in builds(suite)) == ["first", "second"]  # once each

    found = verdict_pass(suite, "c", "verdicts.xml")
    assert {cached for _, cached in found.values()} == {"true"}
    assert {name: delta for name, (delta, _) in found.items()} == unsharded(suite)
