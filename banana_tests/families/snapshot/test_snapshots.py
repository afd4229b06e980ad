"""Score snapshots: a metric's raw scores must not drift from the recorded ones.

Record or refresh them with `pytest --snapshot-update --metric=NAMES` on a run over the whole
data set; the other metrics' snapshots are kept, and nothing is ever deleted. A metric with no
snapshot on the data set skips, saying how to record one: red means a score moved. Written on the
public fixtures: the scores are `banana_metrics[name].scores(...)` of `banana_trajectories`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from banana_tests.families.snapshot import PARAM, SnapshotSettings
from banana_tests.families.snapshot.snapshot_selection import NOT_RECORDED, recorded_metrics
from banana_tests.families.snapshot.snapshots import (
    SHOWN,
    Rerecord,
    ScoreSnapshotExtension,
    dataset_label,
    installed,
    run_options,
    score_id,
    snapshot_folder,
    tolerance,
)
from banana_tests.session.ownership import STATE
from banana_tests.session.scorer import Scorer, data_errors_in_one_line
from banana_tests.trajectories.selection import Trajectories
from metrics_under_test.registry import selector


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Selected metrics plus every metric with a snapshot; the plugin deselects the extra ones."""
    if PARAM in metafunc.fixturenames:
        state = metafunc.config.stash[STATE]
        selected = list(state.metrics)
        recorded = recorded_metrics(
            SnapshotSettings.of(state.settings).folder,
            Path(metafunc.definition.path),
            metafunc.function.__name__,
        )
        metrics = selected + [m for m in recorded if m not in selected]
        metafunc.parametrize(PARAM, metrics, ids=metrics)


def test_scores_match_snapshot(  # type: ignore[no-untyped-def]
    request: pytest.FixtureRequest,
    snapshot_metric: str,
    banana_metrics: Mapping[str, Scorer],
    banana_trajectories: Trajectories,
    snapshot,
) -> None:
    """Selected metrics only run (the others are deselected): `banana_metrics` holds each."""
    config = request.config
    state = config.stash[STATE]
    updating = bool(config.getoption("update_snapshots"))
    if updating and state.settings.narrowed:
        pytest.fail(
            "--snapshot-update needs a run over the whole data set: drop "
            + ", ".join(state.settings.narrowed)
            + " (a narrowed run would record only part of the scores)",
            pytrace=False,
        )
    scorer = banana_metrics[snapshot_metric]
    name = f"{request.node.originalname}[{snapshot_metric}].json"
    label = dataset_label(state.planning.source.source, bool(state.settings.artifacts), config.rootpath)
    chosen = SnapshotSettings.of(state.settings)
    folder = snapshot_folder(chosen.folder, request.node.path, label, name, updating)
    module = request.node.path
    tests = ("--pyargs", "banana_tests") if installed(module) else (_relative(module, config),)
    rerecord = Rerecord(tests, run_options(config.invocation_params.args), selector(scorer.spec))
    verbose = config.get_verbosity(pytest.Config.VERBOSITY_ASSERTIONS) >= 2
    extension = ScoreSnapshotExtension.configured(
        chosen.rtol,
        tolerance(scorer.spec),
        bool(state.settings.narrowed),
        folder,
        rerecord,
        listed=None if verbose else SHOWN,
    )
    records = list(banana_trajectories)  # sorted by (seed image, run, step)
    with data_errors_in_one_line():  # an image that cannot be scored: no drift, an error
        scores = dict(zip(map(score_id, records), scorer.scores(records), strict=True))  # a fault still errs
    if not updating and not (folder / name).is_file():  # nothing recorded: nothing to compare
        pytest.skip(f"{NOT_RECORDED} {rerecord.command}")
    assert scores == snapshot.use_extension(extension)


def _relative(path: Path, config: pytest.Config) -> str:
    """`path` as the user can type it from where the run started."""
    try:
        return os.path.relpath(path, config.invocation_params.dir)
    except ValueError:  # another drive (Windows)
        return str(path)
