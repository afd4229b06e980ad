"""Bad data: an error on the affected cases only, named by record and file; the rest still runs.

(The full table of bad inputs, one row each, is tests/bad_inputs/test_data.py.)

One suite run over a set where each seed image carries one defect; each defect then has its
own test reading that run's JUnit report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from banana_tests.trajectories.case_plans import plan_cases, with_problems
from banana_tests.trajectories.records import DataWarning
from banana_tests.trajectories.selection import Selection
from banana_tests.trajectories.sources import SourceOptions, load
from tests.conftest import SUITE_MODULE as SUITE
from tests.conftest import noisy_image, write_set
from tests.known_metrics import install_known_metrics

MAX_PIXELS = 20_000  # the clean 96x128 images have 12,288


def _rgba(path: Path) -> None:
    Image.fromarray(np.full((96, 128, 4), 128, np.uint8)).save(path)


def _gray(path: Path) -> None:
    noisy_image("gray", 0, 5).convert("L").save(path)


def _sixteen_bit(path: Path) -> None:
    Image.fromarray(np.full((96, 128), 30000, np.uint16)).save(path)


def _huge(path: Path) -> None:
    noisy_image("huge", 0, 5, size=(200, 200)).save(path)


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:200])


def _not_an_image(path: Path) -> None:
    path.write_bytes(b"this is not a png")


# seed image -> (how its run 0 step 5 image is spoiled, what the error must say)
IMAGE_DEFECTS: dict[str, tuple[Callable[[Path], None], str]] = {
    "zero": (lambda p: p.write_bytes(b""), "image file is empty (0 bytes)"),
    "truncated": (_truncated, "unreadable or truncated image"),
    "garbage": (_not_an_image, "unreadable or truncated image"),
    "rgba": (_rgba, "mode RGBA, expected 8-bit RGB"),
    "gray": (_gray, "mode L, expected 8-bit RGB"),
    "sixteen": (_sixteen_bit, "mode I;16, expected 8-bit RGB"),
    "huge": (_huge, f"200x200 is over the {MAX_PIXELS:,}-pixel limit"),
}
RECORD_DEFECTS = {
    "nostep1": "nostep1 run 0 has no step 1",
    "dup": "duplicate records for dup run 0 step 5",
    "escape": "file_name '../outside.png' escapes the data set root",
    "badline": 'step must be a JSON integer, got "five"',
}
Report = dict[str, tuple[str, str]]  # seed image -> (outcome, message)
SEEDS = ("clean", *IMAGE_DEFECTS, *RECORD_DEFECTS)


def spoil(root: Path) -> None:
    meta = root / "metadata.jsonl"
    rows = [json.loads(line) for line in meta.read_text().splitlines()]
    out = []
    for row in rows:
        seed, first = row["seed_image"], row["run"] == 0 and row["step"] == 5
        if seed in IMAGE_DEFECTS and first:
            IMAGE_DEFECTS[seed][0](root / row["file_name"])
            row.pop("sha256")  # let the decoder, not the checksum, meet the defect
        if seed == "nostep1" and row["run"] == 0 and row["step"] == 1:
            continue
        if seed == "dup" and first:
            out.append(row)
        if seed == "escape" and first:
            row["file_name"] = "../outside.png"
        if seed == "badline" and first:
            row["step"] = "five"
        out.append(row)
    meta.write_text("".join(json.dumps(r) + "\n" for r in out))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """seed image -> (outcome, message) of its step-5 case, from one suite run."""
    here = tmp_path_factory.mktemp("bad")
    spoil(write_set(here / "data", seeds=SEEDS, runs=(0, 1), steps=(1, 5)))
    (here / "outside.png").write_bytes(b"")
    (here / "test_suite.py").write_text(SUITE)
    metric = install_known_metrics(here) + ":noise_level"  # detects every step of a clean image
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_HOME": str(here / "torch")}
    args = [
        "--dataset=data",
        f"--metric={metric}",
        "--steps=5",
        f"--max-pixels={MAX_PIXELS}",
        "--junitxml=j.xml",
    ]
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--no-cache", *args, "test_suite.py"]
    done = subprocess.run(cmd, cwd=here, env=env, capture_output=True, timeout=600)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout[-3000:]  # the errors
    out = {}
    for tc in ET.parse(here / "j.xml").iter("testcase"):
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        kid = next((c for c in tc if c.tag in ("failure", "error", "skipped")), None)
        outcome = "passed" if kid is None else kid.tag
        out[props["seed_image"]] = (
            outcome,
            "" if kid is None else (kid.get("message") or "") + (kid.text or ""),
        )
    return out


@pytest.mark.slow
def test_the_clean_seed_image_still_gets_a_verdict(report: Report) -> None:
    assert set(report) == set(SEEDS)
    assert report["clean"] == ("passed", "")
    assert [seed for seed, (outcome, _) in report.items() if outcome != "error"] == ["clean"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", IMAGE_DEFECTS)
def test_a_bad_image_is_an_error_naming_record_and_file(report: Report, seed: str) -> None:
    outcome, message = report[seed]
    assert outcome == "error"
    assert IMAGE_DEFECTS[seed][1] in message
    assert f"{seed}/run0/step005.png" in message and "metadata.jsonl:" in message


@pytest.mark.slow
@pytest.mark.parametrize("seed", RECORD_DEFECTS)
def test_a_bad_record_is_an_error_on_its_seed_image(report: Report, seed: str) -> None:
    outcome, message = report[seed]
    assert outcome == "error"
    assert RECORD_DEFECTS[seed] in message
    if seed != "nostep1":  # a missing record has no line to name
        assert "metadata.jsonl:" in message


def test_a_line_naming_no_record_errors_the_cases_lacking_one_or_else_warns(tmp_path: Path) -> None:
    root = write_set(tmp_path / "data", seeds=("a", "b"), runs=(0,), steps=(1, 5))
    meta = root / "metadata.jsonl"
    with meta.open("a") as lines:
        lines.write("not json\n")
    loaded = load(SourceOptions(str(root)), Selection())
    assert [(p.where.endswith("metadata.jsonl:5"), p.seed_image) for p in loaded.problems] == [(True, None)]
    plans = plan_cases(loaded.records, ["piqe"], [5], 1)
    with pytest.warns(DataWarning, match=r"metadata\.jsonl:5: not JSON: Expecting value"):
        assert with_problems(plans, loaded.problems, Selection(), ["piqe"]) == plans
    meta.write_text(
        "".join(
            line for line in meta.read_text().splitlines(True) if '"step": 5' not in line or '"a"' not in line
        )
    )
    loaded = load(SourceOptions(str(root)), Selection())
    plans = with_problems(
        plan_cases(loaded.records, ["piqe"], [5], 1), loaded.problems, Selection(), ["piqe"]
    )
    errors = {p.key.seed_image: p.error for p in plans}
    assert errors["b"] is None
    assert "a run 0 has no step 5" in str(errors["a"]) and "metadata.jsonl:4: not JSON" in str(errors["a"])
