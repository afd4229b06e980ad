"""The run's selection and verdict rules as testsuite properties, for `banana-tests report` to
refuse merging runs that differ in them (banana_tests.reports.run_agreement)."""

from __future__ import annotations

import hashlib
import json

from banana_tests.core.suite import SuiteState
from banana_tests.reports.run_agreement import RECORDS, SEED_RECORDS, SHARD
from banana_tests.trajectories.records import Record
from metrics_under_test.metric_requests import metric_set


def selection_facts(state: SuiteState) -> list[tuple[str, str]]:
    """What decides the run's cases and verdicts, besides `--shard`, `-k` and the machine."""
    settings, selection = state.settings, state.settings.selection
    steps = selection.steps
    by_seed: dict[str, list[str]] = {}
    for record in state.planning.records:
        by_seed.setdefault(record.seed_image, []).append(_identity(record))
    every = [line for lines in by_seed.values() for line in lines]
    return [
        (SHARD, "" if settings.shard is None else str(settings.shard)),
        (RECORDS, f"{_digest(every)} ({len(every)} records)"),
        (SEED_RECORDS, json.dumps({seed: _digest(lines) for seed, lines in sorted(by_seed.items())})),
        ("metric_set", metric_set(state.metrics)),
        ("selected_steps", "all" if steps is None else ",".join(map(str, steps))),
        ("reference_step", str(selection.reference_step)),
        ("runs", "all" if selection.runs is None else str(selection.runs)),
        ("seed_selection", ",".join(sorted(selection.seed_images)) or "all"),
        ("where", ",".join(f"{k}={v}" for k, v in sorted(selection.where.items()))),
        ("aggregate", settings.aggregate.value),
        ("strict_runs", str(settings.strict_runs).lower()),
        *(fact for chosen in settings.families.values() for fact in chosen.facts()),
        ("max_pixels", str(settings.max_pixels)),
        ("snapshot_rtol", repr(settings.snapshot_rtol)),
    ]


def _identity(record: Record) -> str:
    """A record's identity, file name and sha256 (or size): read from the file's metadata alone,
    as hashing every image of a large set would take minutes."""
    return f"{record.seed_image}\t{record.variant}\t{record.run}\t{record.step}\t{record.path.name}\t" + (
        record.sha256 or _size(record)
    )


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16]


def _size(record: Record) -> str:
    try:
        return str(record.path.stat().st_size)
    except OSError:
        return "unreadable"
