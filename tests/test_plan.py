from __future__ import annotations

import json

import pytest

from banana_tests.cases import CaseKey
from banana_tests.trajectories.case_plans import parse_steps, plan_cases
from banana_tests.trajectories.imagefolder import read_imagefolder
from tests.conftest import MakeSet


def test_one_case_per_metric_seed_and_step(make_set: MakeSet) -> None:
    records = read_imagefolder(make_set(seeds=("a", "b"), runs=(0, 1, 2))).records
    plans = plan_cases(records, ["brisque", "niqe"], [5, 10, 20], reference_step=1)
    assert len(plans) == 2 * 2 * 3
    plan = next(p for p in plans if p.key == CaseKey("niqe", "b", 10))
    assert [(a.step, b.step, a.run) for a, b in plan.pairs] == [(1, 10, 0), (1, 10, 1), (1, 10, 2)]
    assert plan.error is None


def test_per_run_gives_one_case_per_run(make_set: MakeSet) -> None:
    records = read_imagefolder(make_set(seeds=("a",), runs=(0, 1, 2))).records
    plans = plan_cases(records, ["piqe"], [5], reference_step=1, per_run=True)
    assert [p.key for p in plans] == [CaseKey("piqe", "a", 5, run=r) for r in (0, 1, 2)]
    assert all(len(p.pairs) == 1 for p in plans)


def test_all_steps_means_every_step_present_but_the_reference(make_set: MakeSet) -> None:
    records = read_imagefolder(make_set(seeds=("a",), steps=(1, 2, 3, 7))).records
    assert {p.key.step for p in plan_cases(records, ["piqe"], None, 1)} == {2, 3, 7}


def test_a_missing_reference_step_errors_only_its_cases(make_set: MakeSet) -> None:
    root = make_set(seeds=("a", "b"))
    meta = root / "metadata.jsonl"
    rows = [json.loads(line) for line in meta.read_text().splitlines()]
    meta.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in rows
            if not (r["seed_image"] == "b" and r["run"] == 1 and r["step"] == 1)
        )
    )
    plans = plan_cases(read_imagefolder(root).records, ["piqe"], [5], 1)
    errors = {p.key.seed_image: p.error for p in plans}
    assert errors["a"] is None
    assert "b run 1 has no step 1" in str(errors["b"])


def test_duplicate_records_are_named(make_set: MakeSet) -> None:
    root = make_set(seeds=("a", "b"))
    meta = root / "metadata.jsonl"
    first = meta.read_text().splitlines()[0]
    meta.write_text(meta.read_text() + first + "\n")
    plans = plan_cases(read_imagefolder(root).records, ["piqe"], [5], 1)
    errors = {p.key.seed_image: p.error for p in plans}
    assert errors["b"] is None
    assert "duplicate records for a run 0 step 1" in str(errors["a"])
    assert "metadata.jsonl:1" in str(errors["a"]) and "metadata.jsonl:17" in str(errors["a"])


@pytest.mark.parametrize("text, steps", [("5,10,20", [5, 10, 20]), ("20, 5", [5, 20]), ("all", None)])
def test_parse_steps(text: str, steps: list[int] | None) -> None:
    assert parse_steps(text) == steps


@pytest.mark.parametrize("text", ["", "five", "-1", "\uff15", "1_0", "+5"])
def test_parse_steps_refuses_nonsense(text: str) -> None:
    with pytest.raises(ValueError, match="--steps"):
        parse_steps(text)
