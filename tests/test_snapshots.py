"""Score snapshots through pytester: drift fails with a readable diff; subsets keep other snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import suite_folder

pytest.importorskip("syrupy")

MODULE = (
    "from banana_tests.test_snapshots import pytest_generate_tests, test_scores_match_snapshot"
    "  # noqa: F401\n"
)


@pytest.fixture
def snapped(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return suite_folder(pytester, monkeypatch, MODULE, seeds=("alpha", "beta"), runs=(0,), steps=(1, 5))


def snapshot_file(pytester: pytest.Pytester, metric: str) -> Path:
    return pytester.path / "__snapshots__" / "test_suite" / f"test_scores_match_snapshot[{metric}].json"


def test_a_drifted_score_fails_naming_the_image_step_and_amount(snapped: pytest.Pytester) -> None:
    snapped.runpytest_subprocess("--dataset=data", "--metric=piqe", "--snapshot-update").assert_outcomes(
        passed=1
    )
    path = snapshot_file(snapped, "piqe")
    scores = json.loads(path.read_text())
    assert sorted(scores) == ["alpha/run0/step1", "alpha/run0/step5", "beta/run0/step1", "beta/run0/step5"]
    scores["beta/run0/step5"] *= 1.01
    path.write_text(json.dumps(scores, indent=2) + "\n")

    drifted = snapped.runpytest_subprocess("--dataset=data", "--metric=piqe")
    drifted.assert_outcomes(failed=1)
    drifted.stdout.fnmatch_lines(
        [
            "*1 score(s) moved beyond rtol=0.001 and atol=0.01 (snapshot → now):*",
            "*beta/run0/step5: * → *, moved -* (-0.99%)*",
        ]
    )
    assert "alpha/run0/step5" not in drifted.stdout.str()
    tolerant = snapped.runpytest_subprocess("--dataset=data", "--metric=piqe", "--snapshot-rtol=0.02")
    tolerant.assert_outcomes(passed=1)


def test_scores_near_zero_match_within_a_hundredth_of_a_normalised_point() -> None:
    from banana_tests.snapshots import abs_tolerance, drift
    from metrics_under_test.registry import lookup

    spec = lookup("brisque")
    atol = abs_tolerance(spec)
    span = spec.scale.high - spec.scale.low

    assert atol == pytest.approx(span / 10_000)
    assert drift({"a": -2.8082}, {"a": -2.8082 + 0.9 * atol}, 1e-3, atol) == []
    moved = drift({"a": -2.8082}, {"a": -2.8082 + 1.1 * atol}, 1e-3, atol)
    assert len(moved) == 1 and moved[0].startswith("a: -2.8082 → ")


def test_a_subset_run_keeps_other_metrics_snapshots(snapped: pytest.Pytester) -> None:
    """Serial and -n 2, with and without --snapshot-update: nothing reported unused or deleted."""
    snapped.runpytest_subprocess(
        "--dataset=data", "--metric=piqe,entropy", "--snapshot-update"
    ).assert_outcomes(passed=2)
    before = {m: snapshot_file(snapped, m).read_text() for m in ("piqe", "entropy")}
    for extra in ([], ["--snapshot-update"], ["-n", "2"], ["-n", "2", "--snapshot-update"]):
        result = snapped.runpytest_subprocess("--dataset=data", "--metric=entropy", *extra)
        assert result.parseoutcomes().get("passed") == 1, extra
        assert result.ret == pytest.ExitCode.OK, extra
        assert "unused" not in result.stdout.str(), extra
        assert {m: snapshot_file(snapped, m).read_text() for m in ("piqe", "entropy")} == before, extra
