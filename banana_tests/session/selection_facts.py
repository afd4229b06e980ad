"""The run's selection and verdict rules as testsuite properties, for `banana-tests report` to
refuse merging runs that differ in them (banana_tests.reports.run_agreement)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from banana_tests.reports.run_agreement import RECORDS, SEED_RECORDS, SHARD
from banana_tests.session.suite import SuiteState
from banana_tests.trajectories.records import Record


def selection_facts(state: SuiteState) -> list[tuple[str, str]]:
    """What decides the run's cases and verdicts, besides `--shard`, `-k` and the machine."""
    settings, selection = state.settings, state.settings.selection
    steps = selection.steps
    records = state.planning.records
    by_seed: dict[str, list[Record]] = {}
    for record in records:
        by_seed.setdefault(record.seed_image, []).append(record)
    return [
        (SHARD, "" if settings.shard is None else str(settings.shard)),
        (RECORDS, records_digest(records)),
        (
            SEED_RECORDS,
            json.dumps({seed: records_digest(found)[:16] for seed, found in sorted(by_seed.items())}),
        ),
        ("metric_set", ",".join(sorted(state.metrics))),
        ("selected_steps", "all" if steps is None else ",".join(map(str, steps))),
        ("reference_step", str(selection.reference_step)),
        ("runs", "all" if selection.runs is None else str(selection.runs)),
        ("seed_selection", ",".join(sorted(selection.seed_images)) or "all"),
        ("where", ",".join(f"{k}={v}" for k, v in sorted(selection.where.items()))),
        ("aggregate", settings.aggregate.value),
        ("strict_runs", str(settings.strict_runs).lower()),
        ("trend", str(settings.trend).lower()),
        ("max_pixels", str(settings.max_pixels)),
        ("snapshot_rtol", repr(settings.snapshot_rtol)),
    ]


def records_digest(records: Iterable[Record]) -> str:
    """The records' identities, file names and sizes (sha256 where known): the data the run read,
    found from the files' metadata alone (hashing every image of a large set would take minutes)."""
    lines = sorted(
        f"{r.seed_image}\t{r.variant}\t{r.run}\t{r.step}\t{r.path.name}\t{r.sha256 or _size(r)}"
        for r in records
    )
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    return f"{digest} ({len(lines)} records)"


def _size(record: Record) -> str:
    try:
        return str(record.path.stat().st_size)
    except OSError:
        return "unreadable"
