"""The snapshot family's plugin in a suite run: keep every score snapshot on disk, whatever subset
of metrics or tests a run selects, and say what it skipped and deselected.

The snapshot test is parametrized over every metric that has a snapshot, and the ones not
asked for with `--metric` are deselected here, after syrupy has seen them collected, so they
are not reported unused. syrupy's own clean-up is switched off in every run that is the suite's,
in the xdist controller too (it deletes for its workers): with `--snapshot-update` it deletes the
snapshots it did not see used, the user's own among them, also under `-k` and in site-packages,
and a gate must never delete a user's files. syrupy's closing advice to re-run with
`--snapshot-update` "to delete unused snapshots" is replaced there by what is true (`KEPT`).
Snapshot cases skipped for want of a snapshot, and those deselected, are said once at the end
(pytest lists skips only under -rs).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pytest

from banana_tests.families.snapshot import PARAM

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
    from banana_tests.families.snapshot.snapshots import (
        installed,  # syrupy: only once snapshots are collected
    )

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


def plugin(selected: Collection[str], config: pytest.Config) -> SnapshotSelection:
    """The family's plugin (banana_tests.families.family.SessionPlugin) for a run of `selected` metrics."""
    return SnapshotSelection(selected, config)


class SnapshotSelection:
    """Deselects snapshot tests of metrics outside the selection, keeps every snapshot, and counts
    the cases it deselected and those skipped for want of a snapshot."""

    def __init__(self, selected: Collection[str], config: pytest.Config) -> None:
        self.selected = set(selected)
        self.deselected = 0  # snapshot cases of metrics not selected, deselected at collection
        self.unrecorded: list[str] = []  # snapshot cases skipped for want of a snapshot, with the command
        self.counts = not hasattr(config, "workerinput")  # an xdist worker's reports reach its controller
        if hasattr(config.option, "update_snapshots"):  # syrupy is loaded
            config.option.no_cleanup = True  # never delete a snapshot

    def metric_of(self, item: Any) -> str | None:
        callspec = getattr(item, "callspec", None)
        metric = callspec.params.get(PARAM) if callspec is not None else None
        return metric if isinstance(metric, str) else None

    def extra(self, item: Any) -> bool:
        """A snapshot case of a metric outside the selection."""
        metric = self.metric_of(item)
        return metric is not None and metric not in self.selected

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += sum(self.extra(item) for item in items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and self.counts and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            if reason.startswith(NOT_RECORDED):
                self.unrecorded.append(f"{report.nodeid.rpartition('::')[2]}: {reason}")

    def summary(self) -> list[tuple[str, bool]]:
        lines: list[tuple[str, bool]] = []
        if self.unrecorded:
            lines.append(
                (f"banana-tests: {len(self.unrecorded)} score snapshot(s) not recorded yet, skipped:", True)
            )
            lines += [(f"  {line}", False) for line in self.unrecorded]
        if self.deselected:
            lines.append(
                (
                    f"banana-tests: {self.deselected} deselected = score-snapshot cases of metrics not "
                    "in --metric (their snapshots are kept, not run)",
                    False,
                )
            )
        return lines

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
            snapshots = snapshots or (callspec is not None and PARAM in callspec.params)
            (drop if self.extra(item) else keep).append(item)
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
