"""Who chooses the metrics of a test on `banana_metric`: the plugin by default, the user's own way
of parametrizing when they use one (docs/trial.md "Choosing metrics").

The plugin parametrizes `banana_metric` over the `--metric` selection first, so every id starts
with the metric (the scheduler keeps a metric's tests together by it). A user may choose instead,
in any of pytest's ways: `@pytest.mark.parametrize("banana_metric", [...], indirect=True)`, a
fixture overriding `banana_metric` with `params=[...]`, or `metafunc.parametrize("banana_metric",
...)` in their own `pytest_generate_tests`. Each of those calls `Metafunc.parametrize` after the
plugin's hook, so the plugin's default stays in place only until one of them names
`banana_metric`: then it is withdrawn and the user's choice is the test's, as if the plugin had
never parametrized it. An override without params gets the selected metric as `request.param`;
one that returns another metric's `Scorer` fails the test (`wrong_metric`), never runs it on a
metric its id does not name.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from banana_tests.cases import METRIC_FIXTURE

SUPPORTED = (
    "choose a test's metrics with @pytest.mark.parametrize('banana_metric', [...], indirect=True), "
    "params=[...] on your banana_metric fixture, or metafunc.parametrize('banana_metric', [...], "
    "indirect=True) in pytest_generate_tests (docs/trial.md)"
)


def argnames_of(argnames: str | Sequence[str]) -> list[str]:
    """The names a `parametrize` call sets, as pytest reads them ("a, b" or a sequence)."""
    if isinstance(argnames, str):
        return [name.strip() for name in argnames.split(",") if name.strip()]
    return list(argnames)


@contextmanager
def default_metrics(metafunc: pytest.Metafunc, metrics: Sequence[str]) -> Generator[None, None, None]:
    """Parametrize `banana_metric` over `metrics` now, outermost, and withdraw it when a later
    `parametrize` call inside the block names `banana_metric`: the calls made since are replayed
    without it, then the user's call is made."""
    plain = metafunc.parametrize
    since: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    withdrawn = False

    def parametrize(argnames: str | Sequence[str], argvalues: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal withdrawn
        argvalues = list(argvalues)  # a generator would be spent before a replay
        if not withdrawn and METRIC_FIXTURE in argnames_of(argnames):
            withdrawn = True
            metafunc._calls = []  # the plugin's were the first calls: nothing else to keep
            for replayed_args, replayed_kwargs in since:
                plain(*replayed_args, **replayed_kwargs)
        elif not withdrawn:
            since.append(((argnames, argvalues, *args), kwargs))
        plain(argnames, argvalues, *args, **kwargs)

    plain(METRIC_FIXTURE, list(metrics), ids=list(metrics), indirect=True)
    setattr(metafunc, "parametrize", parametrize)  # noqa: B010 - an instance attribute shadows the method
    try:
        yield
    finally:
        delattr(metafunc, "parametrize")


def wrong_metric(item: pytest.Item, metrics: Sequence[str]) -> str | None:
    """Why `item` cannot run: its `banana_metric` is parametrized with one selected metric and the
    fixture (a user's override) returned another's `Scorer`; None when it can."""
    from banana_tests.session.scorer import Scorer

    callspec = getattr(item, "callspec", None)
    scorer = getattr(item, "funcargs", {}).get(METRIC_FIXTURE)
    if callspec is None or not isinstance(scorer, Scorer):
        return None
    wanted = callspec.params.get(METRIC_FIXTURE)
    if not isinstance(wanted, str) or wanted == scorer.name or wanted not in metrics:
        return None
    return (
        f"banana_metric: {item.nodeid} is parametrized with {wanted!r} but your banana_metric "
        f"fixture returned the Scorer for {scorer.name!r}. A fixture overriding banana_metric without "
        "params gets the metric as request.param, or from the plugin's banana_metric it requests; "
        + SUPPORTED
    )
