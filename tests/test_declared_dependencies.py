"""Every third-party package the installed code imports is declared in its metadata: at runtime,
or in the extra of the feature that imports it (issue 42). A package that only arrives as another
package's dependency can vanish with that package's next release."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("banana_tests", "metrics_under_test")
OWN = {*PACKAGES, "tests"}


def imported_top_level_modules() -> set[str]:
    found: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return found - OWN - set(sys.stdlib_module_names) - {"_pytest"}  # _pytest ships with pytest


def declared_distributions() -> set[str]:
    names = set()
    for requirement in md.requires("banana-tests") or ():
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
        names.add(re.sub(r"[-_.]+", "-", name).lower())
    return names


def test_every_imported_package_is_declared() -> None:
    providers = md.packages_distributions()
    declared = declared_distributions()
    missing = {}
    for module in sorted(imported_top_level_modules()):
        dists = {re.sub(r"[-_.]+", "-", d).lower() for d in providers.get(module, ())}
        assert dists, f"{module}: imported by banana-tests, but no installed distribution provides it"
        if not dists & declared:
            missing[module] = sorted(dists)
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_setuptools_is_pinned_only_for_the_clip_metrics() -> None:
    """Installing banana-tests leaves the user's setuptools alone; the `clip` extra pins it."""
    requirements = md.requires("banana-tests") or []
    setuptools = [r for r in requirements if r.startswith("setuptools")]
    assert setuptools and all("extra == " in r for r in setuptools), setuptools
    assert any('extra == "clip"' in r for r in setuptools), setuptools
