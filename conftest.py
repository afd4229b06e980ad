"""Root conftest: shared by the suite (banana_tests/) and the project's own tests (tests/).

The project's tests need `pytester`, the suite does not: loaded for every session (as
`pytest_plugins` would), its `--lsof`/`--runpytest` options showed up in every suite run's
`--help`. So it is loaded only when the session collects something under tests/. pytest only
reads `pytest_plugins` from the rootdir's conftest, hence this hook rather than one in tests/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent / "tests"


def _collects_tests(config: pytest.Config) -> bool:
    """Whether any path the session collects lies inside tests/ or contains it."""
    here = config.invocation_params.dir
    for arg in config.args:
        path = (here / arg.split("::")[0]).resolve()
        if path.is_relative_to(TESTS) or TESTS.is_relative_to(path):
            return True
    return False


def pytest_configure(config: pytest.Config) -> None:
    # pytest_addoption and pytest_configure are historic hooks, so a plugin registered here
    # still adds its options (with their defaults) and configures itself.
    if _collects_tests(config) and not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")
