"""Whether JUnit files come from runs that may be merged: the same data, selection and verdict rules.

Shards and reruns of one run differ only in `--shard`, `-k`, `--lf`, `-n` and the machine. Each
run writes what decides its cases and their verdicts as testsuite properties (AGREED, written by
banana_tests.session.selection_facts); `banana-tests report` refuses files whose values differ
(exit 3, naming each value's files) rather than merge a `--runs=2` shard into a full one. A file
without a property (written before it was recorded) is not compared on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

RECORDS = "selected_records"
"""A digest of the selected records' identities, file names and sizes (and sha256 where the data
set records one), with their count: another `--dataset`, revision or selection changes it."""
AGREED = {
    RECORDS: "selected records",
    "variant": "--variant",
    "metric_set": "--metric",
    "selected_steps": "--steps",
    "reference_step": "--reference-step",
    "runs": "--runs",
    "seed_selection": "--seed-image",
    "where": "--where",
    "aggregate": "--aggregate",
    "strict_runs": "--strict-runs",
    "trend": "--trend",
    "max_pixels": "--max-pixels",
    "snapshot_rtol": "--snapshot-rtol",
}
"""Property → what it is, as the message names it."""
MIXED_EXIT = 3
"""`banana-tests report`'s exit code for files of runs that cannot be merged (nothing is written)."""


def disagreements(facts: Mapping[Path, Mapping[str, str]]) -> list[str]:
    """One line per property with more than one value among the files, naming each value's files;
    a differing record digest names the files' `--dataset` too."""
    lines = []
    for name, label in AGREED.items():
        values: dict[str, list[Path]] = {}
        for path, props in facts.items():
            if name in props:
                values.setdefault(props[name], []).append(path)
        if len(values) > 1:
            each = "; ".join(
                f"{_shown(name, value, paths, facts)} in {', '.join(map(str, paths))}"
                for value, paths in values.items()
            )
            lines.append(f"{label}: {each}")
    return lines


def _shown(name: str, value: str, paths: list[Path], facts: Mapping[Path, Mapping[str, str]]) -> str:
    if name != RECORDS:
        return value or "(none)"
    sources = dict.fromkeys(facts[p]["dataset"] for p in paths if "dataset" in facts[p])
    return f"{value} of --dataset={', '.join(sources)}" if sources else value
