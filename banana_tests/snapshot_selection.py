"""Keep other metrics' score snapshots alive when only some metrics run.

The snapshot test is parametrized over every metric that has a snapshot, and the ones not
asked for with `--metric` are deselected here, after syrupy has seen them collected. syrupy then
knows those snapshots belong to tests that did not run, so it neither reports nor deletes them.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pytest

PARAM = "snapshot_metric"


def recorded_metrics(config: pytest.Config, module_file: Path, test_name: str) -> list[str]:
    """Metrics that have a snapshot file for `test_name`, where syrupy's JSON extension puts it."""
    dirname = getattr(config.option, "snapshot_dirname", None) or "__snapshots__"
    folder = module_file.parent / dirname / module_file.stem
    prefix, suffix = f"{test_name}[", "].json"
    return sorted(
        p.name[len(prefix) : -len(suffix)]
        for p in folder.glob(f"{test_name}[[]*].json")
        if p.name.startswith(prefix) and p.name.endswith(suffix)
    )


class SnapshotSelection:
    """Deselects snapshot tests of metrics outside the selection, and keeps their snapshots."""

    def __init__(self, selected: Collection[str]) -> None:
        self.selected = set(selected)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            callspec = getattr(item, "callspec", None)
            metric = callspec.params.get(PARAM) if callspec is not None else None
            (drop if metric is not None and metric not in self.selected else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        # A subset or a collect-only run uses only some snapshots: the rest are not stale.
        if (drop or config.option.collectonly) and hasattr(config.option, "warn_unused_snapshots"):
            config.option.warn_unused_snapshots = True
