"""The tree tells the data flow: imports run one way between stages, and no module imports itself back.

Stages, lowest first: trajectories → scoring → verdicts → reports → the scheduler → the pytest-free
core → the pytest session. Editors
feed trajectories; metrics_under_test is scored by scoring. A module may import its own stage or a
lower one, never a higher one. Lazy imports inside functions count too.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("banana_tests", "metrics_under_test")
# Rank of each stage; a module may import only ranks <= its own. Shared vocabulary sits at 0.
STAGES = {
    "banana_tests.cases": 0,
    "banana_tests.counts": 0,  # whole numbers as options take them, for the session and the trajectories
    "banana_tests.table_text": 0,  # the one Markdown and CSV writer (no cell a spreadsheet runs as a formula)
    "banana_tests.safe_files": 0,  # the one reader of files that untrusted data names, the loss-free writes
    "banana_tests.termination": 0,  # SIGTERM stops as Ctrl-C, for the session and the commands
    "banana_tests.http_retry": 0,  # the one retry policy of paid API calls, for the editors and the judges
    "banana_tests.data": 0,
    "metrics_under_test": 1,
    "banana_tests.distortions": 1,  # the classical distortions, for the control cases and the editors
    "banana_tests.trajectories": 1,
    "banana_tests.editors": 2,
    "banana_tests.judging": 2,  # reads trajectories, guards requests as the editors do
    "banana_tests.scoring": 2,
    "banana_tests.verdicts": 3,
    # a family's descriptor, key and verdict sit with the verdicts, which read its records through
    # the registry; its section with the reports; its test module above every stage (TOP)
    "banana_tests.families": 3,
    "banana_tests.families.degradation.matrix_sections": 4,
    "banana_tests.families.trend.trends": 4,
    "banana_tests.families.search.search_table": 4,
    "banana_tests.families.invariance.invariance_table": 4,
    "banana_tests.families.control.control_table": 4,
    "banana_tests.reports": 4,
    "banana_tests.scheduler": 5,  # how the work is dealt (shards, xdist groups): below the core that deals it
    "banana_tests.core": 6,  # a suite run without pytest: settings, planning, scoring a selection
    "banana_tests.session": 7,  # the pytest glue over the core
    "banana_tests.api": 7,  # the public scoring step, over the core's planning and scoring
    "banana_tests.commands": 8,
}
TOP = 9  # the plugin, the CLI and the shipped test modules sit above every stage


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


def family_test(module: str) -> bool:
    """A family's test module (banana_tests/families/<name>/test_*.py)."""
    return module.startswith("banana_tests.families.") and module.rpartition(".")[2].startswith("test_")


def stage(module: str) -> int:
    if family_test(module):
        return TOP  # like the suite's own test modules
    owners = [prefix for prefix in STAGES if module == prefix or module.startswith(prefix + ".")]
    return STAGES[max(owners, key=len)] if owners else TOP


GRAPH = {name: imports(path, modules()) - {name} for name, path in modules().items()}


def test_every_module_has_a_stage_or_sits_at_the_top() -> None:
    top = sorted(
        name for name in GRAPH if stage(name) == TOP and name.count(".") > 1 and not family_test(name)
    )
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


# The book's ideas sit below it: checking returned scores, the batching policy and loading a
# metric each stand alone, so none may import the book.
BELOW_THE_BOOK = (
    "banana_tests.scoring.returned_scores",
    "banana_tests.scoring.batching",
    "banana_tests.scoring.metric_calls",
)


@pytest.mark.parametrize("module", BELOW_THE_BOOK)
def test_the_score_books_parts_do_not_import_the_book(module: str) -> None:
    assert module in GRAPH, f"{module} is gone: update BELOW_THE_BOOK"
    assert "banana_tests.scoring.score_book" not in GRAPH[module]


# Split modules sit below the entry that gathers them: `load` dispatches to the readers (the
# problems' planning stands beside it), generation's writer records what the chains (in this
# process or in workers) make. None of them may reach its entry, even through another module.
BELOW_THEIR_ENTRY = {
    "banana_tests.trajectories.sources": (
        "case_plans",
        "imagefolder",
        "row_records",
        "selection",
        "table_rows",
    ),
    "banana_tests.editors.generation": ("chains", "workers"),
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


LAB = (
    "banana_tests.editors",  # editing models, `generate`'s engine, the trial sets' builder
    "banana_tests.commands.generate",
    "banana_tests.judging",  # the LLM judge of the generator's reasoning
    "banana_tests.commands.judge",
    "banana_tests.reports.page",  # the HTML page and its figures
    "metrics_under_test.vlm",  # the VLM metrics' adapters (torch, transformers)
    "ray_score",  # the cluster example (examples/ray)
)
"""The lab: what makes or inspects data sets beside the suite. A plain run
(`pytest --metric=piqe`) imports none of it (tests/test_plain_run.py runs one); the suite may
import a lab module only inside a function that a lab option (`--artifact`) calls."""
RUN_CORE = ("banana_tests.core", "banana_tests.api", "banana_tests.scheduler", "banana_tests.verdicts")


def in_lab(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in LAB)


def eager_imports(path: Path, known: dict[str, Path]) -> set[str]:
    """Project modules that `path` imports when it is imported: at its top, outside functions
    and `if TYPE_CHECKING:`."""
    found: set[str] = set()
    todo = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(name for name in names if name in known)
        todo.extend(ast.iter_child_nodes(node))
    return found


def eagerly_reached(module: str) -> set[str]:
    """Every project module importing `module` imports, with the packages above each."""
    known = modules()
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        for dep in (eager_imports(known[name], known) | parents) - seen:
            if dep in known:
                seen.add(dep)
                todo.append(dep)
    return seen


@pytest.mark.parametrize("module", sorted(name for name in GRAPH if name.startswith(RUN_CORE)))
def test_the_core_imports_no_lab_module(module: str) -> None:
    """Importing the core, the api, the scheduler or the verdicts imports no lab module, directly
    or through another (the runtime check of a whole run is tests/test_plain_run.py)."""
    assert sorted(filter(in_lab, eagerly_reached(module))) == []


PYTEST = ("pytest", "_pytest", "xdist", "pluggy")


def imports_pytest(path: Path) -> bool:
    """Whether the module imports pytest, its internals, xdist or pluggy, anywhere in its body."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        if any(name.split(".")[0] in PYTEST for name in names):
            return True
    return False


PYTEST_FREE = ("banana_tests.core", "banana_tests.api")
CORE = sorted(name for name in GRAPH if name.startswith(PYTEST_FREE))


@pytest.mark.parametrize("module", CORE)
def test_the_core_and_the_api_reach_no_pytest(module: str) -> None:
    """Neither the module nor any project module it imports, at its top or inside a function,
    imports pytest: a cluster worker that only scores never loads it."""
    paths = modules()
    reached = sorted(dep for dep in {module} | reached_from(module) if imports_pytest(paths[dep]))
    assert reached == [], f"{module} reaches modules that import pytest: {reached}"


def test_the_core_is_not_empty_and_the_api_uses_no_glue() -> None:
    assert len(CORE) > 5
    assert not [dep for dep in GRAPH["banana_tests.api"] if dep.startswith("banana_tests.session")]


SCORING_WITHOUT_PYTEST = r"""
import sys, tempfile
from pathlib import Path
import banana_tests.api as api
import banana_tests.core.{core}
settings = api.scoring_settings(api.ScoreRequest(metrics=("piqe",)))
assert [r.text for r in settings.metrics] == ["piqe"], settings.metrics
cache = Path(tempfile.mkdtemp())
summary = api.score(api.ScoreRequest(
    metrics=("piqe",), seed_images=("{seed}",), steps=(5,), runs=1, shard=api.Shard(1, 1),
    cache_dir=cache, device=api.Device.CPU,
))
assert summary.complete, summary.lines()
print(*summary.lines(), sep="\n")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {pytest})
assert loaded == [], loaded
"""


@pytest.mark.slow
def test_scoring_through_the_api_in_a_fresh_interpreter_loads_no_pytest(tmp_path: Path) -> None:
    """The core and the api imported, settings built and one seed image scored with piqe (its
    shard dealt too): no pytest, _pytest, xdist or pluggy in sys.modules."""
    core = ", banana_tests.core.".join(name.rsplit(".", 1)[1] for name in CORE if name.count(".") == 2)
    seed = sorted(p.stem for p in (ROOT / "fixtures" / "seeds").iterdir())[0]
    script = SCORING_WITHOUT_PYTEST.format(core=core, seed=seed, pytest=set(PYTEST))
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.match(r"piqe: \d+ images, 0 from the cache, [1-9]\d* scored", done.stdout), done.stdout


# Every place the code cuts a value at commas or glues one with them, and what that value is. The
# metric option is parsed once, in metrics_under_test.registry (the option validator,
# banana_tests.core.settings, and the api call it); a new comma split or join anywhere fails
# `test_the_metric_option_is_split_and_joined_only_by_its_validator` until it is listed here, so
# one that re-reads `--metric` cannot slip in under another name. Joins with ", " are prose.
METRIC_VALIDATOR = "metrics_under_test.registry"
COMMA_SITES = {
    ("banana_tests.commands.generate", "_resolutions"): "--resolutions",
    ("banana_tests.commands.maintenance", "_option"): "an option's choices, in its help",
    ("banana_tests.commands.report", "_steps"): "--figure-steps",
    ("banana_tests.core.suite", "CasePlanning.source"): "--artifact, in its error",
    ("banana_tests.core.run_facts", "selection_facts"): "the selected steps, seed images, where",
    ("banana_tests.core.settings", "steps_text"): "--steps",
    ("banana_tests.trajectories.records", "parse_artifacts"): "--artifact",
    ("banana_tests.reports.merge_checks", "Ledger.narrowing_of"): "the narrowing options' names",
    ("banana_tests.reports.page.html", "_steps"): "the selected_steps property",
    ("banana_tests.scoring.score_cache", "ScoreCache.get"): "SQL placeholders",
    ("banana_tests.session.case_fixtures", "argnames_of"): "pytest's parametrize argnames",
    ("banana_tests.trajectories.row_records", "parse_map"): "--dataset-map",
    ("banana_tests.trajectories.case_plans", "parse_steps"): "--steps",
    ("banana_tests.families.trend", "Trend.properties"): "a trend's steps",
    ("metrics_under_test.pyiqa_catalog", "parse_range"): "a score range in pyiqa's docs",
    ("metrics_under_test.vlm", "load_trusted_pickle"): "the trusted-pickle environment variable",
    (METRIC_VALIDATOR, "metric_requests"): "--metric",
    (METRIC_VALIDATOR, "option_text"): "--metric",
    (METRIC_VALIDATOR, "metric_set"): "the selected metrics' names (metric_set)",
}


def _has_comma(node: ast.AST, exact: bool) -> bool:
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
        return False
    return node.value == "," if exact else "," in node.value


def comma_sites(source: str) -> list[tuple[str, str]]:
    """(enclosing function, code) of each `x.split(<comma>)`, `.rsplit`, `.partition` and
    `",".join(...)` in `source`."""
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            scope = (*scope, node.name)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            cut = node.func.attr in ("split", "rsplit", "partition", "rpartition") and any(
                _has_comma(a, exact=False) for a in node.args
            )
            glued = node.func.attr == "join" and _has_comma(node.func.value, exact=True)
            if cut or glued:
                found.append((".".join(scope), ast.unparse(node)))
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(ast.parse(source), ())
    return found


SITES = {
    (module, scope): code
    for module, path in modules().items()
    for scope, code in comma_sites(path.read_text(encoding="utf-8"))
}


def test_the_metric_option_is_split_and_joined_only_by_its_validator() -> None:
    unlisted = {site: code for site, code in SITES.items() if site not in COMMA_SITES}
    assert unlisted == {}, "a comma split or join that COMMA_SITES does not know (is it --metric's?)"
    assert set(COMMA_SITES) <= set(SITES), f"gone: {sorted(set(COMMA_SITES) - set(SITES))}"
    named = {site: code for site, code in SITES.items() if site[0] != METRIC_VALIDATOR and "metric" in code}
    assert named == {}, "code outside the validator cuts or glues a metric value"


@pytest.mark.parametrize(
    "before",
    [  # the three places that re-read `--metric` before it was parsed once
        "def resolve(text):\n    for part in (p.strip() for p in text.split(',')):\n        pass",
        "def named_metrics(text):\n    return {p.strip().lower() for p in text.split(',') if p.strip()}",
        "def scoring_settings(metrics):\n    return ','.join(metrics)",
    ],
)
def test_the_comma_scan_finds_each_place_that_re_read_the_metric_option(before: str) -> None:
    assert comma_sites(before) != []
