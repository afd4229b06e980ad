"""A suite run's outputs in a form two versions can be compared by: each case by its id, its outcome
and its JUnit properties, less what depends on the machine, the clock or the run's paths.

tests/test_reference_outputs.py compares a run of the current tree with the one recorded from
0abd72f in tests/data/reference_0abd72f/. Record it again (from a checkout of the reference
commit, after the run the test's docstring names) with
`python -m tests.reference_cases JUNIT_XML OUT_JSON`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

COMMAND = ("-n", "2", "--metric=brisque,niqe,piqe", "--trend", "--search=20", "--strict-baseline")
"""The reference run's options, beside --cache-dir, --junitxml, --weights-dir and --baseline."""

DROPPED = {
    "score_cached": "whether the run's score cache held the score: the cache's state, not an output",
    "search_seconds": "the search's wall time",
    "clean_png": "a path under the run's cache folder",
    "degraded_png": "a path under the run's cache folder",
}
"""Case properties left out, and why."""

SUITE_DROPPED = {
    "dataset": "the checkout's path",
    "versions": "the installed versions (banana-tests, pyiqa, torch)",
    "libraries": "the installed libraries a custom metric loads",
    "device": "the machine's device",
    "command": "the invocation, with its paths",
}
"""Run facts (<testsuite> properties) left out, and why; `planned` is kept as case ids."""

METRIC_POINTS = {"brisque": 0.2, "niqe": 0.1, "piqe": 0.6}
"""Each metric's measured machine drift bound in normalised points (docs/research/tolerances.md):
PIQE moved one score by 0.164 between two machines of this project's kind."""
METRIC_RAW = {"brisque": 0.3, "niqe": 0.1, "piqe": 0.6}
"""The same in raw units (docs/snapshots.md): BRISQUE's range is 150, NIQE's and PIQE's 100."""
NORMALISED = frozenset(
    {
        "delta",
        "norm_reference",
        "norm_step",
        "run_norm_references",
        "run_norm_steps",
        "trend_series",
        "change",
    }
)
RAW = frozenset({"score_reference", "score_step"})
PIXELS = frozenset({"psnr", "ssim"})  # by pixels alone, no metric: float rounding only
PIXEL_RTOL = 1e-9

NUMBER = re.compile(r"[-+]?(?:inf|nan|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")

Case = dict[str, Any]


def outcome(testcase: ET.Element) -> str:
    """passed, failed, error, skipped, or xfail (a failure its baseline expected)."""
    kids = {child.tag: child for child in testcase}
    for tag, name in (("error", "error"), ("failure", "failed"), ("skipped", "skipped")):
        if tag in kids:
            return "xfail" if tag == "skipped" and kids[tag].get("type") == "pytest.xfail" else name
    return "passed"


def case_id(node_id: str) -> str:
    """A case's test name with its parameters, without its module: the modules may move."""
    return node_id.rsplit("::", 1)[-1]


def read_run(junit: Path) -> dict[str, Any]:
    """{"suite": kept run facts, "cases": {id: {"outcome", "properties"}}} of a JUnit file."""
    root = ET.parse(junit).getroot()
    suite: dict[str, Any] = {}
    cases: dict[str, Case] = {}
    for testsuite in root.iter("testsuite"):
        for prop in testsuite.findall("properties/property"):
            name, value = prop.get("name", ""), prop.get("value", "")
            if name == "planned":
                suite[name] = sorted(case_id(line) for line in value.splitlines() if line)
            elif name not in SUITE_DROPPED:
                suite[name] = value
    for testcase in root.iter("testcase"):
        name = testcase.get("name", "")
        assert name not in cases, f"two cases named {name}"
        properties = {
            p.get("name", ""): p.get("value", "")
            for p in testcase.iter("property")
            if p.get("name") not in DROPPED
        }
        cases[name] = {"outcome": outcome(testcase), "properties": properties}
    return {"suite": suite, "cases": dict(sorted(cases.items()))}


def tolerance(prop: str, metric: str | None) -> tuple[float, float]:
    """(absolute, relative) tolerance of the numbers in property `prop` of a `metric` case."""
    if prop in NORMALISED and metric in METRIC_POINTS:
        return METRIC_POINTS[metric], 0.0
    if prop in RAW and metric in METRIC_RAW:
        return METRIC_RAW[metric], 0.0
    if prop in PIXELS:
        return 0.0, PIXEL_RTOL
    return 0.0, 0.0


def same_value(expected: str, found: str, atol: float, rtol: float) -> bool:
    """Equal text between the numbers, and each number within the tolerance (exact when none)."""
    if atol == 0.0 and rtol == 0.0:
        return expected == found
    if NUMBER.split(expected) != NUMBER.split(found):
        return False
    pairs = zip(NUMBER.findall(expected), NUMBER.findall(found), strict=True)
    return all(_close(float(a), float(b), atol, rtol) for a, b in pairs)


def _close(a: float, b: float, atol: float, rtol: float) -> bool:
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return a == b or (math.isnan(a) and math.isnan(b))
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def differences(reference: Mapping[str, Any], run: Mapping[str, Any]) -> list[str]:
    """Every way `run` departs from `reference`, one line each; empty when they agree."""
    out = []
    for key in sorted(set(reference["suite"]) | set(run["suite"])):
        if reference["suite"].get(key) != run["suite"].get(key):
            out.append(f"run fact {key}: {reference['suite'].get(key)!r} → {run['suite'].get(key)!r}")
    expected, found = reference["cases"], run["cases"]
    out += [f"missing case {name}" for name in sorted(set(expected) - set(found))]
    out += [f"new case {name}" for name in sorted(set(found) - set(expected))]
    for name in sorted(set(expected) & set(found)):
        was, now = expected[name], found[name]
        if was["outcome"] != now["outcome"]:
            out.append(f"{name}: outcome {was['outcome']} → {now['outcome']}")
        metric = was["properties"].get("metric")
        for prop in sorted(set(was["properties"]) | set(now["properties"])):
            a, b = was["properties"].get(prop), now["properties"].get(prop)
            if a is None or b is None:
                out.append(f"{name}: property {prop} {'gone' if b is None else 'new'}")
            elif not same_value(a, b, *tolerance(prop, metric)):
                out.append(f"{name}: {prop} {a!r} → {b!r}")
    return out


def csv_differences(reference: str, found: str, keys: Iterable[str]) -> list[str]:
    """Rows of two matrix.csv texts by `keys`: the same rows, outcomes, and numbers within the
    row metric's tolerance (Δ and normalised figures in points, raw scores in raw units)."""
    keys = tuple(keys)

    def rows(text: str) -> dict[tuple[str, ...], dict[str, str]]:
        return {tuple(r[k] for k in keys): r for r in csv.DictReader(io.StringIO(text))}

    was, now = rows(reference), rows(found)
    out = [f"matrix row {k} missing" for k in sorted(set(was) - set(now))]
    out += [f"matrix row {k} new" for k in sorted(set(now) - set(was))]
    for key in sorted(set(was) & set(now)):
        for column in sorted(set(was[key]) | set(now[key])):
            a, b = was[key].get(column, ""), now[key].get(column, "")
            if not same_value(a, b, *tolerance(column, was[key].get("metric"))):
                out.append(f"matrix row {key}: {column} {a!r} → {b!r}")
    return out


def main(argv: list[str]) -> int:
    junit, out = map(Path, argv)
    recorded = {
        "command": list(COMMAND),
        "dropped": DROPPED,
        "suite_dropped": SUITE_DROPPED,
        **read_run(junit),
    }
    out.write_text(
        json.dumps(recorded, indent=1, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
