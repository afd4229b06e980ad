"""The suite's test modules that only some options collect: each family's module under its option
(banana_tests.families.family_list: the trend module under --trend, the search module under
--search). The plugin's `pytest_ignore_collect` and the shard selection's count of unreached
modules read the same rule here."""

from __future__ import annotations

from pathlib import Path

import pytest

from banana_tests.families.family_list import FAMILIES

SUITE = Path(__file__).resolve().parents[1]
"""The installed suite's folder, which holds its test modules."""


def left_out(collection_path: Path, config: pytest.Config) -> bool | None:
    """True for a family's module its option did not ask for; None for any other path."""
    option = next((f.option for f in FAMILIES if f.module == collection_path), None)
    if option is None:
        return None
    return None if config.getoption(option, None) not in (None, False) else True


def suite_modules() -> list[Path]:
    """Every test module of the suite: its own at the top, and each registered family's."""
    return sorted([*SUITE.glob("test_*.py"), *(f.module for f in FAMILIES)])
