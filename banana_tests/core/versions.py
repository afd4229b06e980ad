"""The installed versions of the packages behind a run, for the JUnit properties and the report:
the suite's own, the backends its metrics ran on (pyiqa and torch only when a pyiqa metric was
selected) and the libraries its custom metrics import.

Read from package metadata, so nothing heavy (torch, pyiqa) is imported to learn them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib.metadata import PackageNotFoundError, version

from metrics_under_test.protocol import MetricError
from metrics_under_test.spec import Backend, MetricSpec

SUITE = "banana-tests"
BACKEND_PACKAGES: dict[Backend, tuple[str, ...]] = {
    Backend.PYIQA: ("pyiqa", "torch"),
    Backend.VLM: ("pyiqa", "torch", "transformers"),
}
"""What each built-in backend runs on; a custom metric's libraries are `metric_libraries`."""


def run_versions(specs: Iterable[MetricSpec]) -> str:
    """`package_versions` of the suite and of the backends of the metrics `specs` only."""
    names = [SUITE, *(name for spec in specs for name in BACKEND_PACKAGES.get(spec.backend, ()))]
    return package_versions(tuple(dict.fromkeys(names)))


@cache
def package_versions(names: tuple[str, ...] = (SUITE,)) -> str:
    """`name version` for each installed package, joined by "; "; missing packages are left out."""
    found = []
    for name in names:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    return "; ".join(found)


def metric_libraries(specs: Iterable[MetricSpec]) -> str:
    """`name version` of every installed distribution the custom metrics' code imports (the
    versions their score cache keys hold), joined by "; "; empty when no custom metric has one.
    A metric that cannot be imported errors its own cases: it adds nothing here."""
    from metrics_under_test import custom

    found: dict[str, str] = {}
    for spec in specs:
        if spec.backend is Backend.CUSTOM:
            try:
                found.update(custom.libraries(spec))
            except MetricError:
                continue
    return "; ".join(f"{name} {found[name]}" for name in sorted(found))
