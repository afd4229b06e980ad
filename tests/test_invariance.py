"""The invariance family (banana_tests/test_invariance.py) on a user's own metrics, end to end:
a metric whose score depends on the batch fails exactly its batch case; a deterministic
per-image metric passes every case on the same crops."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.conftest import assert_outcomes, suite_folder

METRICS = """
import numpy as np


class BatchMean:
    '''Scores each image against the batch's mean brightness: alone, every image scores 0.'''

    name = "batch_mean"
    lower_better = False
    score_range = (-50.0, 50.0)
    cost = "fast"

    def __call__(self, images):
        means = [float(np.mean(img)) for img in images]
        centre = sum(means) / len(means)
        return [m - centre for m in means]


class Brightness:
    '''Each image on its own: mean grey level, one image at a time, in float64.'''

    name = "brightness"
    lower_better = False
    score_range = (0.0, 255.0)
    cost = "fast"

    def __call__(self, images):
        return [float(np.mean(img, dtype=np.float64)) for img in images]
"""

INVARIANCE_MODULE = "from banana_tests.test_invariance import test_score_is_invariant  # noqa: F401\n"


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, metric: str) -> pytest.RunResult:
    suite_folder(pytester, monkeypatch, module=INVARIANCE_MODULE, seeds=("alpha",), runs=(0,), steps=(1, 5))
    pytester.makepyfile(usermetrics=METRICS)
    return pytester.runpytest_subprocess(
        f"--metric=usermetrics:{metric}", "--junitxml=j.xml", "-o", "junit_family=xunit1", "-p", "no:randomly"
    )


def cases(pytester: pytest.Pytester) -> dict[str, tuple[bool, dict[str, str]]]:
    out = {}
    for case in ET.parse(pytester.path / "j.xml").iter("testcase"):
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        out[case.get("name", "")] = (case.find("failure") is not None, props)
    return out


def test_a_batch_dependent_metric_fails_the_batch_case_only(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, "BatchMean")

    assert_outcomes(result, passed=4, failed=1)
    found = cases(pytester)
    failed = sorted(name for name, (fails, _) in found.items() if fails)
    assert failed == ["test_score_is_invariant[batch_mean-batch]"]
    _, props = found["test_score_is_invariant[batch_mean-batch]"]
    assert (props["metric"], props["invariance"]) == ("batch_mean", "batch")
    assert float(props["change"]) > float(props["tolerance"])
    result.stdout.fnmatch_lines(["*batch_mean is not batch-invariant: the largest change*"])


def test_a_per_image_metric_passes_every_invariance_case(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, "Brightness")

    assert_outcomes(result, passed=5)
    found = cases(pytester)
    assert sorted(found) == [
        f"test_score_is_invariant[brightness-{kind}]"
        for kind in ("batch", "png", "repeat", "resize", "shift")
    ]
    for _, props in found.values():
        assert float(props["change"]) <= float(props["tolerance"])
