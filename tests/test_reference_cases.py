"""The reference comparison fails on a changed outcome, property, case or run fact, and lets a Δ
move by no more than its metric's measured drift (tests/reference_cases.py, on the recorded
0abd72f reference)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.reference_cases import csv_differences, differences, same_value

REFERENCE = Path(__file__).resolve().parent / "data" / "reference_0abd72f"
PIQE_CASE = "test_detects_degradation[piqe-rocket-step5]"


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return json.loads((REFERENCE / "cases.json").read_text(encoding="utf-8"))


def changed(reference: dict[str, Any], name: str, key: str, value: str) -> dict[str, Any]:
    run = copy.deepcopy(reference)
    case = run["cases"][name]
    if key == "outcome":
        case["outcome"] = value
    else:
        case["properties"][key] = value
    return run


def test_the_reference_agrees_with_itself(reference: dict[str, Any]) -> None:
    assert len(reference["cases"]) == 126 and differences(reference, copy.deepcopy(reference)) == []


@pytest.mark.parametrize(
    ("name", "key", "value"),
    [
        (PIQE_CASE, "outcome", "xfail"),
        ("test_scores_match_snapshot[niqe]", "outcome", "skipped"),
        (PIQE_CASE, "banana_record", "delta/3"),
        ("test_detects_control_degradation[niqe-jpeg]", "distortion", "jpeg2000"),
        ("test_trend_detects_degradation[brisque-coffee]", "first_detection_step", "20"),
        ("test_no_worst_escape[piqe]", "examples", "40"),
        ("test_score_is_invariant[niqe-shift]", "tolerance", "0.31"),
    ],
)
def test_a_changed_outcome_or_exact_property_fails(
    reference: dict[str, Any], name: str, key: str, value: str
) -> None:
    assert reference["cases"][name]["properties"].get(key, reference["cases"][name]["outcome"]) != value
    (line,) = differences(reference, changed(reference, name, key, value))
    assert name in line and value in line


def test_a_delta_moves_within_its_metrics_drift_only(reference: dict[str, Any]) -> None:
    delta = float(reference["cases"][PIQE_CASE]["properties"]["delta"])
    assert differences(reference, changed(reference, PIQE_CASE, "delta", repr(delta + 0.5))) == []
    assert differences(reference, changed(reference, PIQE_CASE, "delta", repr(delta + 0.7)))
    niqe = "test_detects_degradation[niqe-brick-step5]"
    niqe_delta = float(reference["cases"][niqe]["properties"]["delta"])
    assert differences(reference, changed(reference, niqe, "delta", repr(niqe_delta + 0.15)))


def test_a_lost_case_a_new_property_and_a_run_fact_fail(reference: dict[str, Any]) -> None:
    run = copy.deepcopy(reference)
    del run["cases"][PIQE_CASE]
    run["cases"]["test_scores_match_snapshot[niqe]"]["properties"]["extra"] = "1"
    run["suite"]["selected_steps"] = "5,10"
    assert differences(reference, run) == [
        "run fact selected_steps: '5,10,20' → '5,10'",
        f"missing case {PIQE_CASE}",
        "test_scores_match_snapshot[niqe]: property extra new",
    ]


def test_numbers_in_text_compare_within_tolerance_and_the_text_exactly() -> None:
    assert same_value("[[1, 20.5, 19.0, 22.1]]", "[[1, 20.6, 19.0, 22.0]]", 0.2, 0)
    assert not same_value("[[1, 20.5]]", "[[1, 21.5]]", 0.2, 0)
    assert not same_value("pass 0.17 ≤ 0.3", "FAIL 0.17 ≤ 0.3", 0.2, 0)
    assert same_value("inf 31.5", "inf 31.5", 0, 1e-9) and not same_value("inf", "48.1", 0, 1e-9)


def test_a_matrix_row_with_another_outcome_fails() -> None:
    text = (REFERENCE / "report_gate" / "matrix.csv").read_text(encoding="utf-8")
    keys = ("metric", "seed_image", "step", "run")
    assert csv_differences(text, text, keys) == []
    first = text.splitlines()[1]
    flipped = text.replace(first, first.replace(",failed,", ",passed,").replace(",xfail,", ",passed,"), 1)
    assert flipped != text and len(csv_differences(text, flipped, keys)) == 1
