"""How the run's facts reach the JUnit file: pytest's writer of testsuite properties, and the
keys under which each xdist worker hands the controller its own device, plan and selection
through `workeroutput` (the controller writes the file)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

WORKER_DEVICE = "banana_device"
"""The device an xdist worker scored on, in its `workeroutput` for the controller's run facts."""
WORKER_PLAN = "banana_plan"
"""An xdist worker's plan (planned, split off): every worker collects the same tests."""
WORKER_SELECTION = "banana_selection"
"""An xdist worker's selection facts (banana_tests.core.selection_facts): the data it read."""


def junit_suite_property(config: pytest.Config) -> Callable[[str, object], None] | None:
    """pytest's writer of `<testsuite>` properties in this process, if it writes a JUnit file:
    the method its public `record_testsuite_property` fixture hands a test. Only the process
    that writes the file has one (the xdist controller, not its workers)."""
    for plugin in config.pluginmanager.get_plugins():
        add = getattr(plugin, "add_global_property", None)
        if callable(add):
            return add  # type: ignore[no-any-return]
    return None
