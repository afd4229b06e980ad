"""What is public (CONTRIBUTING.md "What is public"): the plugin module exports its hooks only,
and the version is the installed package's, whose one source is pyproject.toml."""

from __future__ import annotations

import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement

import banana_tests
from banana_tests import plugin

ROOT = Path(__file__).resolve().parents[1]


def test_the_plugin_exports_its_hooks_and_nothing_else() -> None:
    hooks = {
        name
        for name, value in vars(plugin).items()
        if name.startswith("pytest_") and inspect.isfunction(value) and value.__module__ == plugin.__name__
    }
    assert hooks >= {"pytest_addoption", "pytest_configure", "pytest_generate_tests"}
    assert sorted(plugin.__all__) == sorted(hooks)


def test_the_version_is_read_from_the_package_metadata() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert banana_tests.__version__ == version("banana-tests") == project["version"]
    assert "__version__" not in vars(banana_tests)  # read when asked for, not written down


def test_the_wheel_lists_every_package_of_the_tree() -> None:
    """setuptools' package list is written out (fixtures/ ships as banana_tests.data): a package
    left out of it is missing from every wheel, and the plugin fails to load there."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(tool["packages"]) - set(tool["package-dir"])
    tree = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("banana_tests", "metrics_under_test")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert listed == tree


def test_the_timeout_the_user_docs_tell_users_to_add_comes_with_the_wheel() -> None:
    """docs/wrap.md says to add `--timeout=600`: without pytest-timeout installed with the wheel
    that run stops at once with `unrecognized arguments` (exit 4)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    required = {Requirement(dep).name for dep in project["dependencies"]}
    assert "--timeout=" in (ROOT / "docs" / "wrap.md").read_text(encoding="utf-8")
    assert "pytest-timeout" in required
