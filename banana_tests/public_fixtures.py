"""The fixtures any test can request once banana-tests is installed (README "Write your own trial").

- `banana_metric`: one selected metric as a `Scorer`; a test that requests it runs once per
  `--metric`, with the metric's name as its id.
- `banana_metrics`: every selected metric, by name, for a test that compares them.
- `banana_trajectories`: the selected trajectory set (`Trajectories`).

The Δ engine is `Scorer.delta`, the one the shipped cases use. The shipped suite is written on
these fixtures. Registered by the pytest11 plugin; nothing here imports torch, pyiqa or numpy.
A test that requests one makes its run a suite run (banana_tests.session.ownership).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import pytest

from banana_tests.session.run_state import adopt, scorer_of

if TYPE_CHECKING:
    from banana_tests.session.scorer import Scorer
    from banana_tests.trajectories.selection import Trajectories

__all__ = ["Scorer", "Trajectories", "banana_metric", "banana_metrics", "banana_trajectories"]

METRICS_FIXTURE = "banana_metrics"
TRAJECTORIES_FIXTURE = "banana_trajectories"


def __getattr__(name: str) -> object:
    """`Scorer` and `Trajectories`, for type hints in your tests, imported on first use: the
    plugin imports this module in every pytest run of the environment, suite or not."""
    if name == "Scorer":
        from banana_tests.session.scorer import Scorer

        return Scorer
    if name == "Trajectories":
        from banana_tests.trajectories.selection import Trajectories

        return Trajectories
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@pytest.fixture(scope="session")
def banana_metric(request: pytest.FixtureRequest) -> Scorer:
    """Yields a `Scorer` for one metric of the `--metric` selection; session scope, one instance
    per metric.

    The plugin parametrizes every test that requests it over the selection, ids = metric names
    (`test_x[brisque]`); `@pytest.mark.parametrize("banana_metric", [...], indirect=True)` picks
    the metrics instead. The model is built on the first score the cache lacks, once per worker:
    under xdist the suite's scheduler keeps a metric's tests on one worker. A metric that cannot
    load skips the test, or fails it when `--metric` named it, with the shipped cases' message."""
    state = adopt(request.config)
    name = getattr(request, "param", None)
    if name not in state.metrics:
        pytest.fail(
            f"banana_metric: {name!r} is not among the selected metrics ({', '.join(state.metrics)}); "
            "choose metrics with --metric",
            pytrace=False,
        )
    return scorer_of(request.config, state, name)


@pytest.fixture(scope="session")
def banana_metrics(pytestconfig: pytest.Config) -> Mapping[str, Scorer]:
    """Yields every metric of the `--metric` selection as a read-only {name: Scorer} mapping, in
    the order given; session scope, not parametrized. Loading follows `banana_metric`'s rules."""
    state = adopt(pytestconfig)
    return MappingProxyType({name: scorer_of(pytestconfig, state, name) for name in state.metrics})


@pytest.fixture(scope="session")
def banana_trajectories(pytestconfig: pytest.Config) -> Trajectories:
    """Yields the trajectory set that `--dataset`, `--variant`, `--seed-image`, `--where`,
    `--runs` and `--steps` select, as `Trajectories` (records by (seed image, run, step), images
    decoded on demand); session scope. A set that cannot be read is a usage error at collection."""
    return adopt(pytestconfig).trajectories()
