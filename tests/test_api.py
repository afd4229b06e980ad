"""banana_tests.api as the one public facade for scoring outside pytest: importable without pytest,
typed (`mypy --strict`), every public name in `__all__`, typed settings equal to the command line's,
and the Ray example importing nothing else of the project. Scoring itself: tests/test_scoring_step.py."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from banana_tests import api
from banana_tests.api import (
    Device,
    DeviceChoice,
    ScoreRequest,
    ScoreSetupError,
    Shard,
    scoring_settings,
    settings_from_options,
)
from banana_tests.core.suite import CasePlanning
from banana_tests.scoring.batching import case_records, group_records

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_importing_the_api_imports_no_pytest() -> None:
    check = "import sys, banana_tests.api; assert 'pytest' not in sys.modules, sorted(sys.modules)"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("typed", ["banana_tests/api.py", "banana_tests/core/", "banana_tests/verdicts/"])
def test_the_facade_the_core_and_the_verdicts_pass_mypy_strict(typed: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", typed],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_public_name_of_the_api_is_exported() -> None:
    """Helpers are private: what the module defines without an underscore is the facade, and in
    `__all__`; so is every name it exports."""
    tree = ast.parse(Path(api.__file__).read_text(encoding="utf-8"))
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    defined |= {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    public = {name for name in defined if not name.startswith("_")}
    assert public - set(api.__all__) == set()
    assert all(hasattr(api, name) for name in api.__all__)


def test_the_api_exports_every_type_it_returns() -> None:
    """A caller can name what a function gave back: each project class in a return annotation
    (inside `list[...]`, `dict[...]`, unions too) is the api's own name, and `Settings` is
    reached without importing pytest until it is asked for."""
    names = {**vars(api), **{name: getattr(api, name) for name in api.__all__}}
    returned: set[type] = set()
    for name in api.__all__:
        function = getattr(api, name)
        if inspect.isfunction(function):
            returned |= classes_in(typing.get_type_hints(function, globalns=names)["return"])
    ours = {cls for cls in returned if cls.__module__.split(".")[0] in ("banana_tests", "metrics_under_test")}
    assert {cls.__name__ for cls in ours} >= {"Settings", "ScoreSummary", "Record", "MetricSpec", "Merged"}
    assert {cls for cls in ours if getattr(api, cls.__name__, None) is not cls} == set()
    assert {cls.__name__ for cls in ours} <= set(api.__all__)


def classes_in(annotation: object) -> set[type]:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return {annotation}
    return {cls for arg in typing.get_args(annotation) for cls in classes_in(arg)}


def test_the_ray_example_imports_only_the_api_of_the_project() -> None:
    tree = ast.parse((ROOT / "examples" / "ray" / "ray_score.py").read_text(encoding="utf-8"))
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    ours = {m for m in modules if m.split(".")[0] in ("banana_tests", "metrics_under_test", "tests")}
    assert ours == {"banana_tests.api"}
    assert "ray" in modules


def test_typed_settings_equal_the_command_lines(tmp_path: Path) -> None:
    request = ScoreRequest(
        Path("runs"),
        ["brisque", "niqe"],
        variant="replicate",
        seed_images=["alpha", "beta"],
        steps=[10, 5],
        runs=2,
        where=["temperature=0.4"],
        shard=Shard(1, 3),
        cache_dir=Path("c"),
        device=DeviceChoice(Device.CUDA, 1),
        weights_dir=tmp_path / "w",
        root=tmp_path,
    )
    typed = scoring_settings(request)
    given = {
        "dataset": "runs",
        "metric": "brisque,niqe",
        "seed-image": ["alpha", "beta"],
        "steps": "5,10",
        "runs": 2,
        "where": ["temperature=0.4"],
        "shard": "1/3",
        "cache-dir": "c",
        "device": "cuda:1",
        "weights-dir": str(tmp_path / "w"),
    }
    assert typed == settings_from_options(given, tmp_path)
    assert scoring_settings(ScoreRequest(root=tmp_path)) == settings_from_options({}, tmp_path)
    every_step = scoring_settings(ScoreRequest(steps=None, device=Device.CPU, root=tmp_path))
    assert every_step == settings_from_options({"steps": "all", "device": "cpu"}, tmp_path)


def test_score_and_its_settings_take_one_frozen_request() -> None:
    """The selection is said once, in a `ScoreRequest`: neither function repeats its fields."""
    hints = {
        name: typing.get_type_hints(getattr(api, name), globalns=vars(api))
        for name in ("score", "scoring_settings")
    }
    assert {name: list(h) for name, h in hints.items()} == {
        "score": ["request", "progress", "return"],
        "scoring_settings": ["request", "return"],
    }
    assert all(h["request"] is ScoreRequest for h in hints.values())
    with pytest.raises(AttributeError):
        ScoreRequest().runs = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"steps": [1, 5]}, "reference step 1"),
        ({"steps": [-1]}, "--steps takes a step number of 0 or more"),
        ({"runs": 0}, "--runs takes a whole number of 1 or more"),
        ({"dataset": "https://example.org/runs"}, "--dataset=https://example.org/runs: a URL"),
        ({"where": ["temperature"]}, "temperature"),
        ({"device": "tpu"}, "--device takes auto, cpu, cuda or cuda:N"),
        ({"metrics": []}, "--metric \\[\\] names no metric"),
    ],
)
def test_settings_no_run_can_use_are_a_setup_error(
    tmp_path: Path, arguments: dict[str, object], named: str
) -> None:
    with pytest.raises(ScoreSetupError, match=named) as raised:
        scoring_settings(ScoreRequest(root=tmp_path, **arguments))  # type: ignore[arg-type]
    assert isinstance(raised.value, ValueError)


def test_a_group_is_passed_whole_once_and_a_case_scores_references_first() -> None:
    """The one batching order the suite (SuiteState.gap) and the api follow."""
    assert case_records([("r0", "s0"), ("r1", "s1")]) == ["r0", "r1", "s0", "s1"]
    needs = {("m", "alpha"): ["a", "b"]}
    passed: set[tuple[str, str]] = set()
    assert group_records(("m", "alpha"), passed, needs) == ["a", "b"]
    assert group_records(("m", "alpha"), passed, needs) == ()
    assert group_records(("m", "beta"), passed, needs) == ()
    assert passed == {("m", "alpha"), ("m", "beta")}


def test_seed_images_are_the_planned_ones_under_an_artifact(tmp_path: Path) -> None:
    """Under `--artifact` the planning reads the trial sets, whose seed images are
    `<seed image>.<artifact>`: a cluster's units of work must be those, not the embedded set's."""
    settings = settings_from_options({"artifact": "tint", "dataset-cache": str(tmp_path)}, tmp_path)
    planning = CasePlanning(settings, ("piqe",))
    planning.collect()
    found = api.seed_images(settings)
    assert found == sorted({r.seed_image for r in planning.records})
    assert found and all(name.endswith(".tint") for name in found), found
