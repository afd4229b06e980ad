"""`--metric` resolved within the load limit: a metric module whose import hangs, or a factory
that hangs while its attributes are read, is stopped there instead of holding pytest_configure
forever. Such a metric stays selected under the text it was given as, hung for the run
(banana_tests.scoring.metric_calls): its cases error at once, naming it and the import. One whose import
or factory raises, whatever the exception, is a MetricError naming the part given and the
exception: the session's one-line usage error, in xdist's controller before any worker starts.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from banana_tests.core.settings import Settings
from banana_tests.scoring.metric_calls import Abandoned, BatchWatch, Hung, MetricHangs, Phase
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import UnknownMetric, resolve, stage_mirror
from metrics_under_test.spec import Backend, Cost, MetricSpec

HUNG_IMPORTS = "banana_hung_imports"
"""The workerinput key of the imports that hung in xdist's controller: its workers do not wait again."""


def resolve_within(
    settings: Settings, watch: BatchWatch, known: Mapping[str, str] | None = None
) -> tuple[list[MetricSpec], dict[str, Hung]]:
    """The specs of `settings.metrics`, in order and without duplicates, each request resolved
    in the watch's scoring thread within its load limit; and the requests that hung, by their
    text. `known`: requests already known to hang (from xdist's controller) and why, not
    imported again."""
    specs: dict[str, MetricSpec] = {}
    hung: dict[str, Hung] = {}
    stage_mirror(settings.weights_dir)  # a metric's module or factory may build a pyiqa metric
    for request in settings.metrics:
        part = request.text
        if known and part in known:
            hung[part] = Hung(part, Phase.IMPORT, known[part])
            specs[part] = stand_in(part)
            continue

        def abandon(abandoned: Abandoned, part: str = part) -> None:
            hung[part] = Hung(part, Phase.IMPORT, abandoned.reason)

        with importable_from(*settings.import_dirs):
            try:
                load = partial(resolve, (request,), settings.weights_dir)
                chosen = watch.load(part, Phase.IMPORT, load, abandon)
            except MetricHangs:
                chosen = [stand_in(part)]
            except (UnknownMetric, MetricError):
                raise
            except Exception as exc:  # a factory that raises while its attributes are read
                raise MetricError(f"--metric={part}: {type(exc).__name__}: {exc}") from exc
        specs.update((s.name, s) for s in chosen)
    return list(specs.values()), hung


def stand_in(text: str) -> MetricSpec:
    """The spec of a metric that hung before its attributes could be read: named as it was given,
    with no target, so nothing imports its module again (that import would wait on the hung one's lock)."""
    return MetricSpec(
        name=text, backend=Backend.CUSTOM, low=0.0, high=1.0, lower_better=False, cost=Cost.FAST
    )


@contextmanager
def importable_from(*folders: Path) -> Iterator[None]:
    """`module:callable` metrics import as under `python -m`: a module beside you just works."""
    added = [str(f) for f in dict.fromkeys(folders) if str(f) not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for folder in added:
            sys.path.remove(folder)
