"""The tree tells the data flow: imports run one way between stages, and no module imports itself back.

Stages, lowest first: trajectories → scoring → verdicts → reports → the pytest-free core → the
pytest session. Editors
feed trajectories; metrics_under_test is scored by scoring. A module may import its own stage or a
lower one, never a higher one. Lazy imports inside functions count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("banana_tests", "metrics_under_test")
# Rank of each stage; a module may import only ranks <= its own. Shared vocabulary sits at 0.
STAGES = {
    "banana_tests.cases": 0,
    "banana_tests.atomic": 0,
    "banana_tests.counts": 0,  # whole numbers as options take them, for the session and the trajectories
    "banana_tests.markdown": 0,  # the one Markdown table writer, for reports, judging and commands
    "banana_tests.csv_cells": 0,  # the one CSV writer: no cell a spreadsheet runs as a formula
    "banana_tests.regular_files": 0,  # the one reader of files that untrusted data names
    "banana_tests.data": 0,
    "metrics_under_test": 1,
    "banana_tests.trajectories": 1,
    "banana_tests.editors": 2,
    "banana_tests.judging": 2,  # reads trajectories, guards requests as the editors do
    "banana_tests.scoring": 2,
    "banana_tests.verdicts": 3,
    "banana_tests.reports": 4,
    "banana_tests.core": 5,  # a suite run without pytest: settings, planning, scoring a selection
    "banana_tests.scheduler": 5,
    "banana_tests.session": 6,  # the pytest glue over the core
    "banana_tests.api": 6,  # the public scoring step, over the core's planning and scoring
    "banana_tests.commands": 7,
}
TOP = 8  # the plugin, the CLI and the shipped test modules sit above every stage


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[module_name(path)] = path
    fixtures = ROOT / "fixtures" / "__init__.py"
    found["banana_tests.data"] = fixtures
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """Project modules that `path` imports anywhere in its body (module level or lazily)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in known)
    return found


def stage(module: str) -> int:
    owners = [prefix for prefix in STAGES if module == prefix or module.startswith(prefix + ".")]
    return STAGES[max(owners, key=len)] if owners else TOP


GRAPH = {name: imports(path, modules()) - {name} for name, path in modules().items()}


def test_every_module_has_a_stage_or_sits_at_the_top() -> None:
    top = sorted(name for name in GRAPH if stage(name) == TOP and name.count(".") > 1)
    assert top == [], f"modules in an unnamed folder: {top}"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_run_down_the_stages(module: str) -> None:
    upward = sorted(
        dep for dep in GRAPH[module] if stage(dep) > stage(module) and not module.startswith(dep + ".")
    )
    assert upward == [], f"{module} (stage {stage(module)}) imports a higher stage: {upward}"


def test_no_import_cycle() -> None:
    edges = {name: {dep for dep in deps if not name.startswith(dep + ".")} for name, deps in GRAPH.items()}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(edges[node]):
            if state.get(dep) == 1:
                cycle = [*path[path.index(dep) :], dep]
                pytest.fail("import cycle: " + " → ".join(cycle))
            if dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


# The book's ideas sit below it: checking returned scores, the batching policy, loading a
# metric and in-memory images each stand alone, so none may import the book.
BELOW_THE_BOOK = (
    "banana_tests.scoring.returned_scores",
    "banana_tests.scoring.batching",
    "banana_tests.scoring.loading",
    "banana_tests.scoring.pixels",
    "banana_tests.scoring.held_model",
)


@pytest.mark.parametrize("module", BELOW_THE_BOOK)
def test_the_score_books_parts_do_not_import_the_book(module: str) -> None:
    assert module in GRAPH, f"{module} is gone: update BELOW_THE_BOOK"
    assert "banana_tests.scoring.score_book" not in GRAPH[module]


# Split modules sit below the entry that gathers them: `load` dispatches to the readers (the
# problems' planning stands beside it), generate's loop uses its settings file, resume, seed
# images and twin-run check. None of them may reach its entry, even through another module.
BELOW_THEIR_ENTRY = {
    "banana_tests.trajectories.sources": (
        "hub_rows",
        "imagefolder",
        "loaded",
        "problem_cases",
        "row_records",
    ),
    "banana_tests.editors.generate": ("generate_settings", "resume", "seed_images", "twin_runs"),
}


def reached_from(module: str) -> set[str]:
    seen: set[str] = set()
    todo = [module]
    while todo:
        for dep in GRAPH[todo.pop()] - seen:
            seen.add(dep)
            todo.append(dep)
    return seen


SPLIT_PARTS = [
    (entry, f"{entry.rsplit('.', 1)[0]}.{part}")
    for entry, parts in BELOW_THEIR_ENTRY.items()
    for part in parts
]


@pytest.mark.parametrize(("entry", "part"), SPLIT_PARTS)
def test_split_parts_never_reach_their_entry(entry: str, part: str) -> None:
    assert part in GRAPH, f"{part} is gone: update BELOW_THEIR_ENTRY"
    assert entry not in reached_from(part)


def test_the_api_imports_the_session_only_inside_functions() -> None:
    """The session's modules import pytest; `import banana_tests.api` must not (tests/test_api.py)."""
    tree = ast.parse((ROOT / "banana_tests" / "api.py").read_text(encoding="utf-8"))
    top = {node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    pytest_importers = {
        "banana_tests.core.settings",
        "banana_tests.core.suite",
        "banana_tests.core.planning",
        "banana_tests.core.process_scoring",
        "banana_tests.core.selection_scoring",
        "pytest",
    }
    assert top & pytest_importers == set()
