"""Keep every score snapshot on disk, whatever subset of metrics or tests a run selects.

The snapshot test is parametrized over every metric that has a snapshot, and the ones not
asked for with `--metric` are deselected here, after syrupy has seen them collected, so they
are not reported unused. syrupy's own clean-up is switched off for any run that collects the
snapshot test: with `--snapshot-update` it deletes the snapshots it did not see used, also
under `-k` and in site-packages, and a gate must never delete a user's files.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pytest

PARAM = "snapshot_metric"


def recorded_metrics(user_dir: Path, module_file: Path, test_name: str) -> list[str]:
    """Metrics that have a snapshot file for `test_name`, beside the module or, for an installed
    suite, in the user's snapshot folder `user_dir` too (any data set)."""
    from banana_tests.session.snapshots import installed  # syrupy: only once snapshots are collected

    folders = [module_file.parent / "__snapshots__"]
    if installed(module_file):
        folders.append(user_dir)
    prefix, suffix = f"{test_name}[", "].json"
    return sorted(
        {
            p.name[len(prefix) : -len(suffix)]
            for folder in folders
            for pattern in (module_file.stem, f"*/{module_file.stem}")
            for p in folder.glob(f"{pattern}/{test_name}[[]*].json")
            if p.name.startswith(prefix) and p.name.endswith(suffix)
        }
    )


class SnapshotSelection:
    """Deselects snapshot tests of metrics outside the selection, and keeps every snapshot."""

    def __init__(self, selected: Collection[str]) -> None:
        self.selected = set(selected)

    def select(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """From the plugin's late collection hook (banana_tests.plugin.pytest_collection_split)."""
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        snapshots = False
        for item in items:
            callspec = getattr(item, "callspec", None)
            metric = callspec.params.get(PARAM) if callspec is not None else None
            snapshots = snapshots or metric is not None
            (drop if metric is not None and metric not in self.selected else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        if snapshots and hasattr(config.option, "update_snapshots"):
            config.option.no_cleanup = True  # never delete a snapshot
            config.option.warn_unused_snapshots = True  # a subset run uses only some
