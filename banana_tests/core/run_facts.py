"""The run's facts, written once as JUnit testsuite properties by the process that writes the file:
what the report's Run table shows, and what decides the run's cases and verdicts.

The Run table's facts are the variant, data set, versions, device and command; the selection's
(records, steps, seed images, verdict rules) let `banana-tests report` refuse to merge runs that
differ in them (banana_tests.reports.merge_checks). The pytest glue's
banana_tests.session.reporter gets them into the file, under xdist through the controller.
"""

from __future__ import annotations

import hashlib
import json

from banana_tests.core.suite import SuiteState
from banana_tests.reports.merge_checks import RECORDS, SEED_RECORDS, SHARD
from banana_tests.trajectories.records import Record
from metrics_under_test.registry import metric_set


def device_of(state: SuiteState) -> str:
    """The device this process scores on (its worker's GPU under xdist); as asked when that is
    cuda where there is none: the cases error and say so."""
    from banana_tests.core.machine import resolve_device

    try:
        return resolve_device(state.settings.device)
    except RuntimeError:
        return str(state.settings.device)


def devices_fact(by_worker: dict[str, str]) -> str:
    """The Run table's device: the one device every worker used, else each worker's
    (`gw0 cuda:0, gw1 cuda:1`), in worker order."""
    if len(set(by_worker.values())) == 1:
        return next(iter(by_worker.values()))
    order = sorted(by_worker, key=lambda w: (len(w), w))
    return ", ".join(f"{worker} {by_worker[worker]}" for worker in order)


def run_facts(
    state: SuiteState,
    worker_devices: dict[str, str] | None = None,
    selection: list[tuple[str, str]] | None = None,
    libraries: str | None = None,
) -> list[tuple[str, str]]:
    """What the report's Run table says about the run, written once by the process that writes
    the JUnit file, as testsuite properties. `worker_devices`: each xdist worker's device, as
    it reported it; without them, this process's. `selection`: an xdist worker's selection facts
    (the controller reads no data); without them, this process's. `libraries`: the metric
    libraries found before (`metric_libraries`); without them, found now."""
    from banana_tests.core.machine import metric_libraries, run_versions

    return [
        ("variant", state.settings.selection.variant),
        ("dataset", str(state.planning.source.source)),
        *(selection_facts(state) if selection is None else selection),
        ("versions", run_versions(state.metrics.values())),
        ("libraries", metric_libraries(state.metrics.values()) if libraries is None else libraries),
        ("device", devices_fact(worker_devices) if worker_devices else device_of(state)),
        ("command", state.settings.command),
    ]


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
        *(fact for chosen in settings.families.values() for fact in chosen.facts()),
        ("max_pixels", str(settings.max_pixels)),
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
