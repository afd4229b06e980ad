"""The public fixtures (README "Write your own trial"), from a user's own project folder.

Each test writes a user's test module into a pytester folder beside a small trajectory set and
runs it in a subprocess, as an installed banana-tests runs anywhere. The known-verdict metrics
(tests/known_metrics.py, numpy only) keep them fast; one test runs the real BRISQUE, NIQE and
PIQE against the shipped cases' JUnit.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import junit_cases, unavailable, weights_mirror

NOISE, REVERSED = "known_metrics:noise_level", "known_metrics:noise_level_reversed"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "own-trial"

# A user's trial: every selected step scored as records, as files and as arrays, and Δ by the
# public engine, written to out/<metric>.json for the test to compare with the shipped cases.
SCORES_MODULE = """
import json, math
from pathlib import Path


def test_scores(banana_metric, banana_trajectories):
    out = {}
    for seed in banana_trajectories.seed_images:
        for step in banana_trajectories.steps(seed):
            if step == banana_trajectories.reference_step:
                continue
            pairs = banana_trajectories.pairs(seed, step)
            steps = [b for _, b in pairs]
            gap = banana_metric.delta(pairs)
            out[f"{seed}-step{step}"] = {
                "delta": repr(gap.delta),
                "score_step": repr(gap.score_step),
                "records": banana_metric.scores(steps),
                "paths": banana_metric.scores([str(r.path) for r in steps]),
                "arrays": banana_metric.scores([banana_trajectories.image(r) for r in steps]),
                "cached": banana_metric.cached(steps),
            }
    Path("out").mkdir(exist_ok=True)
    Path("out", banana_metric.name + ".json").write_text(json.dumps(out))
"""


def scored(folder: pytest.Pytester, metric: str) -> dict[str, dict[str, object]]:
    data: dict[str, dict[str, object]] = json.loads((folder.path / "out" / f"{metric}.json").read_text())
    return data


def run_mean(values: object) -> float:
    assert isinstance(values, list)
    return math.fsum(values) / len(values)


@pytest.mark.slow
def test_the_fixtures_are_found_with_their_scope_and_docstrings(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_own="def test_nothing(banana_metric):\n    pass\n")
    result = suite.runpytest_subprocess("--fixtures", "test_own.py", "--dataset=data", f"--metric={NOISE}")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "banana_metric [[]session scope[]] -- *public_fixtures.py:*",
            "    Yields a `Scorer` for one metric of the `--metric` selection; session scope, one instance",
        ],
        consecutive=True,
    )
    result.stdout.fnmatch_lines(["banana_metrics [[]session scope[]] -- *", "    Yields every metric*"])
    result.stdout.fnmatch_lines(
        ["banana_trajectories [[]session scope[]] -- *", "    Yields the trajectory*"]
    )


@pytest.mark.slow
def test_a_users_test_runs_once_per_selected_metric_with_its_name_as_id(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        test_own="""
        import pytest

        def test_plain(banana_metric):
            assert banana_metric.name in ("noise_level", "noise_level_reversed")

        @pytest.mark.parametrize("shift", [1, 2])
        def test_with_its_own_parameter(banana_metric, shift):
            pass

        @pytest.mark.parametrize("banana_metric", ["noise_level"], indirect=True)
        def test_choosing_its_metric(banana_metric):
            assert banana_metric.name == "noise_level"

        def test_all_of_them(banana_metrics):
            assert list(banana_metrics) == ["noise_level", "noise_level_reversed"]
        """
    )
    result = suite.runpytest_subprocess("test_own.py", "--dataset=data", f"--metric={NOISE},{REVERSED}", "-v")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    ran = sorted(line.split(" ", 1)[0] for line in result.outlines if " PASSED" in line)
    assert ran == sorted(
        [
            "test_own.py::test_all_of_them",
            "test_own.py::test_choosing_its_metric[noise_level]",
            *(f"test_own.py::test_plain[{m}]" for m in ("noise_level", "noise_level_reversed")),
            *(
                f"test_own.py::test_with_its_own_parameter[{m}-{s}]"
                for m in ("noise_level", "noise_level_reversed")
                for s in (1, 2)
            ),
        ]
    )


@pytest.mark.slow
def test_a_test_on_a_case_and_banana_metric_gets_the_cases_metric(suite: pytest.Pytester) -> None:
    """The shipped cases set up no `banana_metric`; a test of yours on both gets the case's."""
    suite.makepyfile(
        test_own="""
        def test_mine(banana_metric, banana_case):
            assert banana_metric.name == banana_case.key.metric
        """
    )
    result = suite.runpytest_subprocess("test_own.py", "--dataset=data", f"--metric={NOISE},{REVERSED}", "-v")
    ran = [line.split(" ", 2)[:2] for line in result.outlines if line.startswith("test_own.py::")]

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert {status for _, status in ran} == {"PASSED"}
    assert (
        sorted(test.split("[")[1].split("-")[0] for test, _ in ran)
        == ["noise_level"] * 6 + ["noise_level_reversed"] * 6
    )


@pytest.mark.slow
def test_scores_and_delta_equal_the_shipped_cases(suite: pytest.Pytester) -> None:
    """Two processes, no cache between them: the user's scores are computed, not read back."""
    metrics = f"--metric={NOISE},{REVERSED}"
    shipped = suite.runpytest_subprocess(
        "test_suite.py", "--dataset=data", metrics, "--no-cache", "--junitxml=j.xml"
    )
    assert shipped.ret == pytest.ExitCode.TESTS_FAILED  # the reversed metric misses every step
    suite.makepyfile(test_own=SCORES_MODULE)
    own = suite.runpytest_subprocess("test_own.py", "--dataset=data", metrics, "--no-cache")
    assert own.ret == pytest.ExitCode.OK, own.stdout.str()
    cases = junit_cases(suite.path / "j.xml")
    assert len(cases) == 12
    for name, (_, props) in cases.items():
        mine = scored(suite, props["metric"])[f"{props['seed_image']}-step{props['step']}"]
        assert (mine["delta"], mine["score_step"]) == (props["delta"], props["score_step"]), name
        assert repr(run_mean(mine["records"])) == props["score_step"], name
        assert mine["records"] == mine["paths"] == mine["arrays"], name
        assert mine["cached"] == [False, False], name


@pytest.mark.slow
def test_real_metrics_have_their_names_as_ids_and_the_shipped_scores(suite: pytest.Pytester) -> None:
    """The issue's check: BRISQUE, NIQE and PIQE through `banana_metric` in a user's folder score
    the images as the shipped cases' JUnit `score_step` says, to the last digit."""
    mirror = weights_mirror()
    if mirror is None or not (mirror / "brisque_svm_weights.pth").is_file():
        unavailable("no pyiqa weights mirror beside the clone or in $BANANA_WEIGHTS_DIR (README, 'Install')")
    args = (
        "--dataset=data",
        "--metric=brisque,niqe,piqe",
        "--steps=5",
        f"--weights-dir={mirror}",
        "--no-cache",
    )
    shipped = suite.runpytest_subprocess("test_suite.py", *args, "--junitxml=j.xml")
    assert shipped.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), shipped.stdout.str()
    suite.makepyfile(test_own=SCORES_MODULE)
    own = suite.runpytest_subprocess("test_own.py", *args, "-v")
    own.assert_outcomes(passed=3)
    own.stdout.fnmatch_lines_random(  # in any order: pytest-randomly shuffles them
        [f"test_own.py::test_scores[[]{m}[]] PASSED*" for m in ("brisque", "niqe", "piqe")]
    )
    cases = junit_cases(suite.path / "j.xml")
    assert {p["metric"] for _, p in cases.values()} == {"brisque", "niqe", "piqe"}
    for name, (_, props) in cases.items():
        mine = scored(suite, props["metric"])[f"{props['seed_image']}-step{props['step']}"]
        assert (mine["score_step"], mine["delta"]) == (props["score_step"], props["delta"]), name
        assert repr(run_mean(mine["records"])) == props["score_step"], name


COUNTED = """
import os
import sys

import numpy as np

LOG = "builds.log"
if getattr(sys.modules["__main__"].__spec__, "name", "") == "banana_tests.scoring.score_identity":
    LOG += ".looked"  # the look at what the metric loads (its cache identity) is counted apart


class Counted:
    lower_better, score_range = True, (0.0, 100.0)

    def __init__(self):
        with open(LOG, "a") as log:
            log.write(f"{os.getpid()} {self.name}\\n")

    def __call__(self, images):
        return [float(np.asarray(img, dtype=np.float64).std()) for img in images]


class One(Counted):
    name = "one"


class Two(Counted):
    name = "two"
"""

MANY_TESTS = """
import pytest

@pytest.mark.parametrize("step", [5, 10, 20])
def test_scores(banana_metric, banana_trajectories, step):
    banana_metric.delta(banana_trajectories.pairs("alpha", step))

def test_an_array(banana_metric, banana_trajectories):
    banana_metric.score(banana_trajectories.image(banana_trajectories["beta", 0, 5])[:32, :32])
"""


def builds(folder: pytest.Pytester) -> Counter[tuple[str, str]]:
    """(process id, metric) of each model built, from the metrics' own log."""
    log = folder.path / "builds.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return Counter((pid, name) for pid, name in (line.split(" ") for line in lines))


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "n2"])
def test_each_model_is_built_once_per_worker(suite: pytest.Pytester, workers: list[str]) -> None:
    """Eight tests per metric, interleaved in the module: the scheduler keeps a metric's tests on
    one worker, and serially pytest groups them by metric, so each model is built once."""
    (suite.path / "counted.py").write_text(COUNTED)
    suite.makepyfile(test_own=MANY_TESTS)
    result = suite.runpytest_subprocess(
        "test_own.py", "--dataset=data", "--metric=counted:One,counted:Two", *workers
    )
    result.assert_outcomes(passed=8)
    got = builds(suite)
    assert sorted(m for _, m in got) == ["one", "two"], got  # each metric on one worker only
    assert set(got.values()) == {1}, got


@pytest.mark.slow
def test_a_rerun_scores_from_the_cache_and_builds_no_model(suite: pytest.Pytester) -> None:
    (suite.path / "counted.py").write_text(COUNTED)
    suite.makepyfile(test_own=SCORES_MODULE)
    args = ("test_own.py", "--dataset=data", "--metric=counted:One")
    suite.runpytest_subprocess(*args).assert_outcomes(passed=1)
    assert [m for _, m in builds(suite)] == ["one"]
    out = suite.path / "out"
    (out / "one.json").rename(out / "cold.json")
    suite.runpytest_subprocess(*args).assert_outcomes(passed=1)
    assert sum(builds(suite).values()) == 1  # the rerun built no model: records, files and arrays cached
    cold, warm = (json.loads((out / f"{name}.json").read_text()) for name in ("cold", "one"))
    assert {k: {**v, "cached": None} for k, v in cold.items()} == {
        k: {**v, "cached": None} for k, v in warm.items()
    }
    assert {tuple(v["cached"]) for v in cold.values()} == {(False, False)}
    assert {tuple(v["cached"]) for v in warm.values()} == {(True, True)}


@pytest.mark.slow
def test_trajectories_by_key_selected_and_decoded_on_demand(suite: pytest.Pytester) -> None:
    """A broken image breaks only the test that asks for its pixels."""
    broken = suite.path / "data" / "beta" / "run1" / "step020.png"
    broken.write_bytes(b"not a png")
    suite.makepyfile(
        test_own="""
        import re
        import pytest
        from banana_tests.trajectories.records import DataError

        def test_keys(banana_trajectories):
            t = banana_trajectories
            assert (len(t), t.seed_images, t.runs("alpha")) == (16, ["alpha", "beta"], [0, 1])
            assert t.steps() == [1, 5, 10, 20]
            r = t["alpha", 1, 10]
            assert (r.seed_image, r.run, r.step, r.path.name) == ("alpha", 1, 10, "step010.png")
            assert t.image(r).shape == (96, 128, 3)
            assert [(a.step, b.step, b.run) for a, b in t.pairs("beta", 5)] == [(1, 5, 0), (1, 5, 1)]
            held = "alpha run 0 has no step 7 (the selection holds steps [1, 5, 10, 20]"
            with pytest.raises(DataError, match=re.escape(held)):
                t["alpha", 0, 7]

        def test_broken_pixels(banana_trajectories):
            banana_trajectories.image(banana_trajectories["beta", 1, 20])
        """
    )
    result = suite.runpytest_subprocess("test_own.py", "--dataset=data")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*DataError: data/metadata.jsonl:16 (*step020.png): sha256 does not match*"])
    suite.makepyfile(
        test_own="""
        def test_selected(banana_trajectories):
            assert (banana_trajectories.seed_images, banana_trajectories.steps()) == (["alpha"], [1, 5])
            assert banana_trajectories.runs("alpha") == [0]
        """
    )
    selected = suite.runpytest_subprocess(
        "test_own.py", "--dataset=data", "--seed-image=alpha", "--steps=5", "--runs=1"
    )
    selected.assert_outcomes(passed=1)


@pytest.mark.slow
def test_an_unreadable_set_is_one_usage_error(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_own="def test_x(banana_trajectories):\n    pass\n")
    result = suite.runpytest_subprocess("test_own.py", "--dataset=data", "--variant=rotate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no records of variant 'rotate'" in result.stderr.str()


@pytest.mark.slow
def test_a_named_metric_that_cannot_load_fails_as_the_shipped_cases_do(suite: pytest.Pytester) -> None:
    """The user's test fails (scoring runs in its body), the shipped cases error (in their fixture):
    with the same message, naming the missing file."""
    suite.makepyfile(
        test_own="def test_score(banana_metric, banana_trajectories):\n"
        "    banana_metric.score(banana_trajectories['alpha', 0, 5])\n"
    )
    result = suite.runpytest_subprocess("--dataset=data", "--metric=cnniqa", "--steps=5", "--junitxml=j.xml")
    result.assert_outcomes(errors=2, failed=1)
    messages = {  # the element's text: the message attribute is cut short
        tc.get("name"): {child.text for child in tc if child.tag in ("failure", "error")}
        for tc in ET.parse(suite.path / "j.xml").iter("testcase")
    }
    assert set(messages) == {
        "test_score[cnniqa]",
        "test_detects_degradation[cnniqa-alpha-step5]",
        "test_detects_degradation[cnniqa-beta-step5]",
    }
    named = "cnniqa is on trial but cannot load: "
    # a setup error quotes the message: failed on setup with "Failed: ..."
    lines = [line for ms in messages.values() for m in ms if m for line in m.splitlines() if named in line]
    reasons = {line[line.index(named) :].rstrip('"') for line in lines}
    assert len(lines) >= 3 and len(reasons) == 1 and "CNNIQA_koniq10k-e6f14c91.pth" in reasons.pop(), messages


def test_a_metric_that_offline_or_all_chose_skips_with_the_loading_message() -> None:
    from banana_tests.session.scorer import load_or_skip
    from metrics_under_test.weights import MissingWeights

    def load() -> None:
        raise MissingWeights("brisque: no brisque_svm_weights.pth")

    with pytest.raises(pytest.skip.Exception, match=r"^brisque: no brisque_svm_weights.pth$"):
        load_or_skip("brisque", False, load)
    with pytest.raises(pytest.fail.Exception, match=r"^brisque is on trial but cannot load: brisque"):
        load_or_skip("brisque", True, load)


@pytest.mark.slow
def test_the_examples_run_on_any_metric(suite: pytest.Pytester) -> None:
    for example in EXAMPLES.glob("test_*.py"):
        shutil.copyfile(example, suite.path / example.name)
    result = suite.runpytest_subprocess(
        "test_shift_stability.py",
        "test_delta_at_steps.py",
        "--dataset=data",
        f"--metric={NOISE},{REVERSED}",
        "-v",
    )
    result.assert_outcomes(passed=4, failed=2)  # the reversed metric misses both steps; no shift moves much
    result.stdout.fnmatch_lines(
        ["*noise_level_reversed missed the degradation at step 5: {'alpha': 'Δ5 = +*"]
    )


@pytest.mark.slow
def test_the_fixture_modules_import_no_heavy_stack() -> None:
    modules = (
        "banana_tests.plugin, banana_tests.public_fixtures, banana_tests.session.scorer, "
        "banana_tests.trajectories.selection"
    )
    heavy = "{'torch', 'pyiqa', 'numpy', 'datasets', 'PIL'}"
    code = f"import sys, {modules}; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
