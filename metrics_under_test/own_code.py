"""The code, files and installed libraries a custom metric's scores depend on, for the score
cache key: a change anywhere there must rescore.

User-owned means a source file outside the standard library and every site-packages folder,
that no installer recorded as its own (`pip install --target`): it is hashed. An installed
package the user's code imports is keyed by its distribution's name and version instead
(`importlib.metadata.packages_distributions()`; hashing it would cost seconds), and so is every
distribution that one requires, however deep (`required`): upgrading or downgrading any of them
rescores. A module with no real source file (torch.classes' `__file__` is the bare name
"_classes.py"; namespace, frozen, built-in and zip-imported modules) is never hashed.

The modules are found two ways, so that neither a module imported before the suite (by the
user's conftest) nor a lazy import inside the metric's build is missed:
- those that appeared in `sys.modules` while the suite imported the target;
- the import statements of the target's module, followed through every user-owned module they
  reach, at module level and inside functions, plus `importlib.import_module("literal")` calls.

The closure is read from source, without building the metric, so a fully cached run builds
nothing. A module imported by a computed name, or data the code reads (a checkpoint, a table),
is declared in the metric's `files` attribute.

A file's identity, here and for the parameter files and images the score cache keys, is its
sha256 (`file_sha256`): content, never size and mtime (`cp -p` keeps those).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.machinery
import re
import site
import sys
import sysconfig
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

# Modules each target's first import brought in, by target module name.
_LOADED_BY_IMPORT: dict[str, frozenset[str]] = {}


def import_module(name: str) -> ModuleType:
    """`importlib.import_module`, remembering the modules this import loaded."""
    before = set(sys.modules)
    module = importlib.import_module(name)
    if name not in _LOADED_BY_IMPORT:
        _LOADED_BY_IMPORT[name] = frozenset(sys.modules.keys() - before)
    return module


@cache
def _foreign_roots() -> tuple[Path, ...]:
    """The standard library's and every site-packages folder: code the user does not own."""
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else ())
    roots.add(site.getusersitepackages())
    return tuple(Path(r).resolve() for r in roots if r)


def owned(path: Path) -> bool:
    """`path` is the user's: outside the standard library and site-packages, and not installed
    elsewhere by an installer (see `_installed_elsewhere`)."""
    real = path.resolve()
    return not _under_foreign_root(real) and real not in _installed_elsewhere()


def _under_foreign_root(real: Path) -> bool:
    return any(real.is_relative_to(root) for root in _foreign_roots())


@cache
def _installed_elsewhere() -> frozenset[Path]:
    """The files installers recorded (a `RECORD` file) for distributions outside site-packages:
    `pip install --target DIR`, a folder of installed packages on PYTHONPATH. Such a package is
    keyed by its version like any installed one. An editable install's files are not in its
    RECORD, and an `.egg-info` has none: a checkout's own code stays the user's."""
    files: set[Path] = set()
    for dist in metadata.distributions():
        base = Path(str(dist.locate_file(""))).resolve()
        if _under_foreign_root(base) or dist.read_text("RECORD") is None:
            continue
        files.update(Path(str(dist.locate_file(f))).resolve() for f in dist.files or ())
    return frozenset(files)


@dataclass(frozen=True)
class Closure:
    """What a metric's module runs: the user-owned modules' files, and the top-level names of
    the installed packages the user's code (or the metric's module itself) imports by name."""

    sources: Mapping[str, Path]
    installed: frozenset[str]


def closure(module_name: str) -> Closure:
    """The modules `module_name` runs (see the module docstring). An installed package is
    recorded only when an import statement names it, never because it happened to load during
    the target's import: what loaded then depends on what the process had imported before, and
    the key must be the same in every process."""
    todo = [module_name, *sorted(_LOADED_BY_IMPORT.get(module_name, ()))]
    named = {module_name}
    found: dict[str, Path] = {}
    installed: set[str] = set()
    while todo:
        name = todo.pop()
        if name in found:
            continue
        path = _module_file(name)
        if path is not None and (name == module_name or owned(path)):
            found[name] = path
            if path.suffix == ".py":
                imported = list(imported_names(path, name))
                named.update(imported)
                todo.extend(imported)
        if name in named and (path is None or not owned(path)) and not _user_package(name):
            installed.add(name.partition(".")[0])
    return Closure(dict(sorted(found.items())), frozenset(installed))


def source_hashes(module_name: str) -> dict[str, str]:
    """{module name: sha256 of its file} for every user-owned module `module_name` runs."""
    return {name: file_sha256(path) for name, path in closure(module_name).sources.items()}


def library_versions(module_name: str) -> dict[str, str]:
    """{distribution: version} of every installed distribution `module_name`'s code runs: those
    whose packages it imports (the metric's own distribution too, when it is installed), and
    every distribution they require, however deep (`required`)."""
    return distribution_versions(closure(module_name).installed)


def distribution_versions(top_level_names: Iterable[str]) -> dict[str, str]:
    """{distribution: version} of the distributions that install these top-level packages and of
    every installed distribution they require (`required`)."""
    providers = _distributions_by_package()
    direct = {dist for top in top_level_names for dist in providers.get(top, ())}
    versions = {}
    for dist in required(frozenset(direct)):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:  # metadata without a version: nothing to key
            continue
    return dict(sorted(versions.items()))


@cache
def required(distributions: frozenset[str]) -> frozenset[str]:
    """`distributions` and every installed distribution their metadata requires, transitively,
    with markers read for this interpreter and an extra followed only where a requirement asks
    for it. The declared tree, not what happens to be loaded: the modules a process imported
    before the metric depend on what ran before, and the key must be the same in every process.
    CPBD's adapter imports `cpbd`, which requires scikit-image, whose `canny` it calls: a
    scikit-image downgrade rescores."""
    from packaging.requirements import InvalidRequirement, Requirement

    found: dict[str, str] = {}
    todo: list[tuple[str, frozenset[str]]] = [(d, frozenset()) for d in distributions]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        key = (_canonical(name), extras)
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:  # an optional dependency that is not installed
            continue
        found.setdefault(key[0], dist.metadata["Name"] or name)
        for line in dist.requires or ():
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": e}) for e in extras or {""}):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return frozenset(found.values())


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _distributions_by_package() -> Mapping[str, list[str]]:
    """`packages_distributions()`, read once a process (~0.2 s with 180 distributions)."""
    return metadata.packages_distributions()


def _user_package(name: str) -> bool:
    """`name`'s top-level package is the user's own (a function imported from it, say): its
    code is hashed, not its distribution's version."""
    top = _module_file(name.partition(".")[0])
    return top is not None and owned(top)


def declared_files(declared: Iterable[Path], file_hash: Callable[[Path], str]) -> dict[str, str]:
    """{path: sha256} of each declared file, and of each file under a declared folder; a missing
    one is keyed as missing, so that its arrival rescores too."""
    hashes: dict[str, str] = {}
    for root in declared:
        for path in _files_under(root):
            hashes[str(path)] = file_hash(path) if path.is_file() else "missing"
    return hashes


def _files_under(root: Path) -> Iterator[Path]:
    if root.is_dir():
        yield from sorted(p for p in root.rglob("*") if p.is_file())
    else:
        yield root


def _module_file(name: str) -> Path | None:
    """The file of module `name`, loaded or not, without importing it or its parents."""
    module = sys.modules.get(name)
    if module is not None:
        # A real source file only: torch.classes says `__file__ = "_classes.py"`, a relative name
        # of no file; frozen, built-in and namespace modules have none.
        file = getattr(module, "__file__", None)
        path = Path(file) if isinstance(file, str) and file else None
        return path if path is not None and path.is_absolute() and path.is_file() else None
    parent, _, child = name.rpartition(".")
    search: list[str] | None = None
    if parent:
        search = _search_path(parent)
        if search is None:
            return None
    try:
        spec = importlib.machinery.PathFinder.find_spec(child if parent else name, search)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.has_location:
        return None
    origin = Path(spec.origin)
    return origin if origin.is_file() else None  # a zip-imported module's origin is inside the zip


def _search_path(package: str) -> list[str] | None:
    module = sys.modules.get(package)
    if module is not None:
        found: Any = getattr(module, "__path__", None)
        return list(found) if found is not None else None
    path = _module_file(package)
    return [str(path.parent)] if path is not None and path.name == "__init__.py" else None


def imported_names(path: Path, module_name: str) -> Iterator[str]:
    """Every module name `path`'s import statements and literal import calls may load."""
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return
    package = module_name if path.name == "__init__.py" else module_name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _with_parents(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, package)
            if base is None:
                continue
            yield from _with_parents(base)
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call) and _is_import_call(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield from _with_parents(first.value)


def _is_import_call(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("import_module", "__import__")


def _absolute(module: str, level: int, package: str) -> str | None:
    if level == 0:
        return module or None
    parts = package.split(".") if package else []
    if level - 1 > len(parts) or not package:
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


def _with_parents(name: str) -> Iterator[str]:
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        yield ".".join(parts[:i])


def file_sha256(path: Path) -> str:
    """The file's sha256, read in blocks (a weight file may be large)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
