"""Score snapshots: a metric's raw scores must not drift from the recorded ones.

Record or refresh them with `pytest --snapshot-update --metric=NAMES`; the other metrics'
snapshots are kept. Needs syrupy (the `dev` extra); skipped without it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("syrupy")

from banana_tests.plugin import STATE
from banana_tests.snapshot_selection import PARAM, recorded_metrics
from banana_tests.snapshots import ScoreSnapshotExtension, abs_tolerance, score_snapshot


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Selected metrics plus every metric with a snapshot; the plugin deselects the extra ones."""
    if PARAM in metafunc.fixturenames:
        selected = list(metafunc.config.stash[STATE].metrics)
        recorded = recorded_metrics(
            metafunc.config, Path(metafunc.definition.path), metafunc.function.__name__
        )
        metrics = selected + [m for m in recorded if m not in selected]
        metafunc.parametrize(PARAM, metrics, ids=metrics)


def test_scores_match_snapshot(request: pytest.FixtureRequest, snapshot_metric: str, snapshot) -> None:  # type: ignore[no-untyped-def]
    from metrics_under_test.pyiqa_backend import MissingWeights

    state = request.config.stash[STATE]
    spec = state.metrics[snapshot_metric]
    rtol = request.config.getoption("snapshot_rtol")
    extension = ScoreSnapshotExtension.with_tolerance(rtol, abs_tolerance(spec))
    try:
        scores = score_snapshot(state, spec)
    except MissingWeights as exc:
        pytest.skip(str(exc))
    assert scores == snapshot.use_extension(extension)
