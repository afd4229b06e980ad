"""The plugin end to end, through pytester: options, cases, properties, skips, xdist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CASE_PROPERTIES, SHARED_MIRROR, assert_outcomes, junit_cases, parse_matrix

# Known by construction (tests/known_metrics.py): NOISE detects every step, REVERSED none.
NOISE, REVERSED = "known_metrics:noise_level", "known_metrics:noise_level_reversed"


# The fast tier's one end-to-end run of the suite: in pytester's own process, with a numpy metric.
RUNNERS = [pytest.param("in-process"), pytest.param("child", marks=pytest.mark.slow)]


def run(suite: pytest.Pytester, where: str, *args: str) -> pytest.RunResult:
    """In-process without a score cache: its key finds a metric's libraries in a child process."""
    if where == "in-process":
        return suite.runpytest("--no-cache", *args)
    return suite.runpytest_subprocess(*args)


@pytest.mark.parametrize("where", RUNNERS)
def test_one_case_per_metric_seed_and_step(suite: pytest.Pytester, where: str) -> None:
    result = run(suite, where, "--dataset=data", f"--metric={NOISE}", "--junitxml=j.xml", "-v")
    got = junit_cases(suite.path / "j.xml")
    assert sorted(got) == sorted(
        f"test_detects_degradation[noise_level-{s}-step{i}]" for s in ("alpha", "beta") for i in (5, 10, 20)
    )
    assert {o for o, _ in got.values()} == {"passed"}
    result.assert_outcomes(passed=6)
    assert result.ret == pytest.ExitCode.OK
    assert parse_matrix(result.stdout.str()) == {
        ("alpha", "noise_level"): "0/3",
        ("beta", "noise_level"): "0/3",
        ("total", "noise_level"): "0/6",
    }


@pytest.mark.slow
def test_junit_properties_rebuild_the_case(suite: pytest.Pytester) -> None:
    suite.runpytest_subprocess(
        "--dataset=data", f"--metric={NOISE},{REVERSED}", "--steps=20", "--junitxml=j.xml"
    )
    got = junit_cases(suite.path / "j.xml")
    assert len(got) == 4
    for name, (outcome, props) in got.items():
        assert set(props) >= CASE_PROPERTIES, name
        assert props["step"] == "20" and props["reference_step"] == "1" and props["runs"] == "2"
        lo, hi = 0.0, 100.0  # both metrics' range
        ref, cur = float(props["score_reference"]), float(props["score_step"])
        assert cur > ref  # the noise grew
        if props["metric"] == "noise_level":  # lower is better: detected
            delta = 100 * (hi - cur) / (hi - lo) - 100 * (hi - ref) / (hi - lo)
            assert outcome == "passed" and delta < 0, name
        else:  # the same scores read as higher-is-better: missed
            delta = 100 * (cur - lo) / (hi - lo) - 100 * (ref - lo) / (hi - lo)
            assert outcome == "failure" and delta > 0, name
        assert float(props["delta"]) == pytest.approx(delta, abs=1e-9)


@pytest.mark.parametrize("where", RUNNERS)
def test_failure_message_shows_both_scores(suite: pytest.Pytester, where: str) -> None:
    # The test images' noise grows with the step, and noise raises the Laplacian's variance, a
    # higher-is-better score: every case fails.
    result = run(suite, where, "--dataset=data", "--metric=laplacian_variance", "--steps=20")
    assert_outcomes(result, missed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for seed in ("alpha", "beta"):  # one line each: Δ, both raw and both normalised scores
        result.stdout.re_match_lines(
            [
                rf"^laplacian_variance did not detect the degradation of {seed} at step 20: "
                r"Δ20 = \+\d+\.\d{3} ≥ 0 \(the mean of 2 run\(s\)\); "
                r"step   1: raw \d+\.\d{4} → normalised \d+\.\d\d, "
                r"step  20: raw \d+\.\d{4} → normalised \d+\.\d\d$"
            ]
        )
    assert parse_matrix(result.stdout.str())[("total", "laplacian_variance")] == "2/2"


@pytest.mark.slow
def test_per_run_aggregate_gives_one_case_per_run(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(
        "--dataset=data", f"--metric={REVERSED}", "--aggregate=per-run", "--steps=5", "--junitxml=j.xml"
    )
    got = junit_cases(suite.path / "j.xml")
    assert sorted(got) == sorted(
        f"test_detects_degradation[noise_level_reversed-{s}-run{r}-step5]"
        for s in ("alpha", "beta")
        for r in (0, 1)
    )
    assert {(o, p["runs"]) for o, p in got.values()} == {("failure", "1")}
    assert_outcomes(result, missed=4)
    assert parse_matrix(result.stdout.str())[("total", "noise_level_reversed")] == "4/4"


@pytest.mark.slow
def test_xdist_gives_the_same_verdicts_as_a_serial_run(suite: pytest.Pytester) -> None:
    """Each run has its own score cache: the second must score, not read the first's scores."""
    args = ("--dataset=data", f"--metric={NOISE},{REVERSED}")
    serial_run = suite.runpytest_subprocess(*args, "--cache-dir=cache-serial", "--junitxml=serial.xml")
    result = suite.runpytest_subprocess(*args, "--cache-dir=cache-xdist", "-n", "2", "--junitxml=xdist.xml")
    serial, xdist = junit_cases(suite.path / "serial.xml"), junit_cases(suite.path / "xdist.xml")
    assert len(serial) == 12
    assert {p["score_cached"] for _, p in [*serial.values(), *xdist.values()]} == {"false"}
    assert {k: (o, p["delta"]) for k, (o, p) in serial.items()} == {
        k: (o, p["delta"]) for k, (o, p) in xdist.items()
    }
    assert {o for k, (o, _) in serial.items() if "noise_level_reversed" in k} == {"failure"}
    assert {o for k, (o, _) in serial.items() if "noise_level-" in k} == {"passed"}
    assert parse_matrix(result.stdout.str()) == parse_matrix(serial_run.stdout.str())
    assert parse_matrix(result.stdout.str())[("total", "noise_level_reversed")] == "6/6"
    assert (result.ret, serial_run.ret) == (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.TESTS_FAILED)


@pytest.mark.slow
def test_xdist_keeps_each_seed_image_of_a_metric_on_one_worker(suite: pytest.Pytester) -> None:
    """The scheduler's group is (metric, seed image): its steps share one reference image's score."""
    result = suite.runpytest_subprocess("--dataset=data", f"--metric={NOISE},{REVERSED}", "-n", "2", "-v")
    workers: dict[tuple[str, str], set[str]] = {}
    for line in result.outlines:
        m = re.match(r"^\[(gw\d+)\].*test_detects_degradation\[(\w+)-(\w+)-step", line)
        if m is not None:
            workers.setdefault((m[2], m[3]), set()).add(m[1])
    assert {metric for metric, _ in workers} == {"noise_level", "noise_level_reversed"}
    assert all(len(w) == 1 for w in workers.values()), workers


@pytest.mark.slow
def test_a_named_metric_without_weights_fails_the_run_naming_the_file(suite: pytest.Pytester) -> None:
    """A gate whose metric never ran must not pass: each case errors with the reason."""
    result = suite.runpytest_subprocess("--dataset=data", "--metric=cnniqa")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=6)
    result.stdout.fnmatch_lines(
        ["cnniqa is on trial but cannot load: *CNNIQA_koniq10k-e6f14c91.pth*; --metric=offline *"]
    )


@pytest.mark.slow
def test_weights_unknown_to_the_catalog_fail_naming_what_was_fetched(suite: pytest.Pytester) -> None:
    """hyperiqa fetches from the hub at build time; offline, that is the same failure, not a crash."""
    result = suite.runpytest_subprocess("--dataset=data", "--metric=hyperiqa", "--steps=5")
    result.assert_outcomes(errors=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["hyperiqa is on trial but cannot load: *cannot fetch *"])


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("brisque,cnniqa", {"brisque", "cnniqa"}),
        ("offline", set()),
        ("all,cnniqa", {"cnniqa"}),
        ("OFFLINE,Brisque", {"brisque"}),
    ],
)
def test_only_metrics_that_offline_or_all_chose_may_skip(text: str, named: set[str]) -> None:
    from banana_tests.core.suite import named_metrics
    from metrics_under_test.registry import metric_requests, resolve

    requests = metric_requests(text)
    assert named_metrics(requests, resolve(requests)) == named


@pytest.mark.slow
def test_weights_dir_is_staged_into_the_pyiqa_cache(suite: pytest.Pytester, tmp_path: Path) -> None:
    mirror = SHARED_MIRROR
    if not (mirror / "brisque_svm_weights.pth").is_file():
        pytest.skip(f"no weights mirror at {mirror}")
    result = suite.runpytest_subprocess(
        "--dataset=data", "--metric=brisque", "--steps=5", f"--weights-dir={mirror}"
    )
    assert result.parseoutcomes().get("skipped", 0) == 0
    assert (suite.path / "torch" / "hub" / "pyiqa" / "brisque_svm_weights.pth").exists()


@pytest.mark.slow
def test_unknown_metric_is_a_usage_error_listing_valid_names(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--dataset=data", "--metric=brisk")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*unknown metric 'brisk'. Did you mean 'brisque'? Valid names: offline, all, *"]
    )


@pytest.mark.slow
def test_a_missing_reference_step_errors_only_its_cases(suite: pytest.Pytester) -> None:
    meta = suite.path / "data" / "metadata.jsonl"
    meta.write_text(
        "".join(
            line + "\n"
            for line in meta.read_text().splitlines()
            if not ('"beta"' in line and '"step": 1,' in line and '"run": 0' in line)
        )
    )
    result = suite.runpytest_subprocess("--dataset=data", f"--metric={REVERSED}", "--junitxml=j.xml")
    got = junit_cases(suite.path / "j.xml")
    assert {o for k, (o, _) in got.items() if "-beta-" in k} == {"error"}
    assert {o for k, (o, _) in got.items() if "-alpha-" in k} == {"failure"}
    assert_outcomes(result, missed=3, errors=3)
    assert parse_matrix(result.stdout.str()) == {
        ("alpha", "noise_level_reversed"): "3/3",
        ("beta", "noise_level_reversed"): "E3",
        ("total", "noise_level_reversed"): "3/3 E3",
    }
    result.stdout.fnmatch_lines(["*beta run 0 has no step 1*"])


@pytest.mark.slow
def test_plugin_import_stays_light() -> None:
    code = "import sys, banana_tests.plugin; print(sorted({'torch', 'pyiqa', 'datasets'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
