"""The scheduler's groups: a metric's Δ cases and trends a seed image at a time, its other tests
together, tests on no metric alone (banana_tests.scheduler.metric_groups)."""

from __future__ import annotations

import pytest

from banana_tests.scheduler.metric_groups import Group, group_of

METRICS = ("brisque", "clip-iqa", "clip")
SUITE = "banana_tests/test_degradation.py::test_detects_degradation"


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        (f"{SUITE}[brisque-astronaut-step5]", Group("brisque", "astronaut")),
        (f"{SUITE}[brisque-astronaut-run1-step5]", Group("brisque", "astronaut")),  # --aggregate=per-run
        (f"{SUITE}[clip-iqa-brick-step10]", Group("clip-iqa", "brick")),  # the longest metric name wins
        (f"{SUITE}[clip-brick-step10]", Group("clip", "brick")),
        (
            "banana_tests/test_trend.py::test_trend_detects_degradation[brisque-astronaut]",
            Group("brisque", "astronaut"),
        ),
        ("banana_tests/test_control.py::test_detects_control_degradation[brisque-jpeg]", Group("brisque")),
        ("banana_tests/test_snapshots.py::test_scores_match_snapshot[brisque]", Group("brisque")),
        ("test_own.py::test_scores[brisque-5]", Group("brisque")),  # a test on banana_metric
        ("test_own.py::test_scores[brisque-step5]", Group("brisque")),  # no seed image in it
        ("test_own.py::test_other[niqe-astronaut-step5]", None),  # a metric not selected
        ("test_own.py::test_plain", None),
    ],
)
def test_group_of_a_test(nodeid: str, expected: Group | None) -> None:
    assert group_of(nodeid, METRICS) == expected


def test_a_seed_images_group_is_its_own_scope() -> None:
    assert Group("brisque", "astronaut").scope != Group("brisque").scope != Group("niqe").scope
