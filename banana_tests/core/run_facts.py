"""The run's facts for the report's Run table (variant, data set, versions, device, command),
written once as JUnit testsuite properties by the process that writes the file (the pytest
glue's banana_tests.session.junit_handoff gets them there)."""

from __future__ import annotations

from banana_tests.core.suite import SuiteState


def device_of(state: SuiteState) -> str:
    """The device this process scores on (its worker's GPU under xdist); as asked when that is
    cuda where there is none: the cases error and say so."""
    from banana_tests.core.devices import resolve_device

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
    from banana_tests.core.selection_facts import selection_facts
    from banana_tests.core.versions import metric_libraries, run_versions

    return [
        ("variant", state.settings.selection.variant),
        ("dataset", str(state.planning.source.source)),
        *(selection_facts(state) if selection is None else selection),
        ("versions", run_versions(state.metrics.values())),
        ("libraries", metric_libraries(state.metrics.values()) if libraries is None else libraries),
        ("device", devices_fact(worker_devices) if worker_devices else device_of(state)),
        ("command", state.settings.command),
    ]
