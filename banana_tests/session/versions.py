"""The installed versions of the packages behind a run, for the JUnit properties and the report.

Read from package metadata, so nothing heavy (torch, pyiqa) is imported to learn them.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version

RUN_PACKAGES = ("banana-tests", "pyiqa", "torch")


@cache
def package_versions(names: tuple[str, ...] = RUN_PACKAGES) -> str:
    """`name version` for each installed package, joined by "; "; missing packages are left out."""
    found = []
    for name in names:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    return "; ".join(found)
