"""Keep every score snapshot on disk, whatever subset of metrics or tests a run selects.

The snapshot test is parametrized over every metric that has a snapshot, and the ones not
asked for with `--metric` are deselected here, after syrupy has seen them collected, so they
are not reported unused. syrupy's own clean-up is switched off in every run that is the suite's,
in the xdist controller too (it deletes for its workers): with `--snapshot-update` it deletes the
snapshots it did not see used, the user's own among them, also under `-k` and in site-packages,
and a gate must never delete a user's files. syrupy's closing advice to re-run with
`--snapshot-update` "to delete unused snapshots" is replaced there by what is true (`KEPT`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pytest

PARAM = "snapshot_metric"
SYRUPY_DELETE_HINT = "Re-run pytest with --snapshot-update to delete unused snapshots."
KEPT = (
    "Unused snapshots are kept: banana-tests runs syrupy with --snapshot-no-cleanup, so --snapshot-update "
    "deletes none; delete the files you no longer need by hand (--snapshot-details lists them)."
)
NOT_RECORDED = "no score snapshot of this metric on this data set yet, nothing to compare: record one with"
"""A first run on a new data set (or of a new metric) skips its snapshot case with this line:
red must mean a metric failed or a gate broke, not that nothing was recorded."""


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

    def __init__(self, selected: Collection[str], config: pytest.Config) -> None:
        self.selected = set(selected)
        if hasattr(config.option, "update_snapshots"):  # syrupy is loaded
            config.option.no_cleanup = True  # never delete a snapshot

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, config: pytest.Config) -> None:
        """Before syrupy prints its report: its advice to delete is replaced (see KEPT)."""
        session = getattr(config, "_syrupy", None)
        report = getattr(session, "report", None)
        if report is not None and not isinstance(report, KeptReport):
            session.report = KeptReport(report)  # type: ignore[union-attr]

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
            config.option.warn_unused_snapshots = True  # a subset run uses only some


class KeptReport:
    """syrupy's report as the suite's runs print it: its lines, with SYRUPY_DELETE_HINT as KEPT."""

    def __init__(self, report: Any) -> None:
        self.report = report

    def __getattr__(self, name: str) -> Any:
        return getattr(self.report, name)

    @property
    def lines(self) -> Iterator[str]:
        for line in self.report.lines:
            yield line.replace(SYRUPY_DELETE_HINT, KEPT)
