"""Trend cases: Spearman ρ of score against step, the first detection step, and `--trend` end to end."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from banana_tests.cases import CaseKey
from banana_tests.families.trend import Trend, TrendKey, plan_trends
from banana_tests.trajectories.case_plans import CasePlan
from tests.conftest import SUITE_MODULE, suite_folder

KEY = TrendKey("piqe", "alpha")


def trend(*points: tuple[int, float]) -> Trend:
    return Trend(KEY, 1, points)


def test_a_falling_score_is_detected_from_the_step_it_stays_below() -> None:
    t = trend((1, 50.0), (5, 52.0), (10, 49.0), (20, 45.0), (40, 30.0))
    assert t.spearman == pytest.approx(1 - 6 * (3**2 + 3**2 + 0 + 2**2 + 4**2) / (5 * (5**2 - 1)))
    assert t.detected
    assert t.first_detection_step == 10


def test_a_score_that_recovers_at_the_end_is_never_detected_for_good() -> None:
    t = trend((1, 50.0), (5, 40.0), (10, 30.0), (20, 55.0))
    assert t.first_detection_step is None
    assert t.properties()["first_detection_step"] == "none"


def test_ties_share_ranks_and_a_flat_score_is_not_detected() -> None:
    stats = pytest.importorskip("scipy.stats")
    points = ((1, 5.0), (5, 5.0), (10, 4.0), (20, 4.0), (40, 6.0))
    assert trend(*points).spearman == pytest.approx(stats.spearmanr(*zip(*points, strict=True)).statistic)
    flat = trend((1, 5.0), (5, 5.0), (10, 5.0))
    assert math.isnan(flat.spearman) and not flat.detected


def test_a_trend_with_a_bad_step_carries_its_error() -> None:
    plans = [
        CasePlan(CaseKey("piqe", "alpha", 5), 1, error="alpha run 0 has no step 1"),
        CasePlan(CaseKey("piqe", "alpha", 10), 1, error="alpha run 0 has no step 1"),
        CasePlan(CaseKey("piqe", "beta", 5), 1),
    ]
    by_key = {t.key: t for t in plan_trends(plans)}
    assert by_key[KEY].error == "alpha run 0 has no step 1"
    assert "a trend needs 2 or more steps" in str(by_key[TrendKey("piqe", "beta")].error)


@pytest.mark.slow
def test_trend_cases_record_their_properties_beside_the_matrix(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    trend_module = (
        "from banana_tests.families.trend.test_trend import (  # noqa: F401\n"
        "    banana_trend, test_trend_detects_degradation,\n)\n"
    )
    suite_folder(
        pytester,
        monkeypatch,
        SUITE_MODULE + trend_module,
        seeds=("alpha", "beta"),
        runs=(0, 1),
        steps=(1, 5, 10, 20),
    )
    args = ("--dataset=data", "--metric=piqe", "--steps=all", "--trend", "--no-cache", "--junitxml=j.xml")
    result = pytester.runpytest_subprocess(*args)
    props = {
        tc.get("name"): {p.get("name"): p.get("value") for p in tc.iter("property")}
        for tc in ET.parse(pytester.path / "j.xml").iter("testcase")
    }
    trends = {n: p for n, p in props.items() if n.startswith("test_trend_detects_degradation")}
    assert sorted(trends) == [f"test_trend_detects_degradation[piqe-{s}]" for s in ("alpha", "beta")]
    for p in trends.values():
        assert p["banana_record"] == "trend/2" and p["metric"] == "piqe" and p["trend_steps"] == "1,5,10,20"
        assert -1.0 <= float(p["spearman"]) <= 1.0
        assert p["first_detection_step"] in ("none", "5", "10", "20")
    assert len(props) == 2 + 2 * 3
    result.stdout.fnmatch_lines(["*banana-tests failure matrix*", "total *"])
