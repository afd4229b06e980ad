"""The plugin end to end, through pytester: options, cases, properties, skips, xdist."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import CASE_PROPERTIES, suite_folder


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester folder with a tiny trajectory set and the suite's test module."""
    return suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0, 1), steps=(1, 5, 10, 20))


def cases(xml: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """JUnit test cases by name: (outcome, properties)."""
    out = {}
    for tc in ET.parse(xml).iter("testcase"):
        kids = {c.tag for c in tc}
        outcome = next((o for o in ("failure", "error", "skipped") if o in kids), "passed")
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        out[tc.get("name")] = (outcome, props)
    return out


def test_one_case_per_metric_seed_and_step(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--dataset=data", "--metric=piqe", "--junitxml=j.xml", "-v")
    names = sorted(cases(suite.path / "j.xml"))
    assert names == sorted(
        f"test_detects_degradation[piqe-{s}-step{i}]" for s in ("alpha", "beta") for i in (5, 10, 20)
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 6
    result.stdout.fnmatch_lines(["*banana-tests failure matrix*", "*piqe*", "alpha *", "beta *", "total *"])


def test_junit_properties_rebuild_the_case(suite: pytest.Pytester) -> None:
    suite.runpytest_subprocess("--dataset=data", "--metric=piqe", "--steps=20", "--junitxml=j.xml")
    for name, (outcome, props) in cases(suite.path / "j.xml").items():
        assert set(props) >= CASE_PROPERTIES, name
        assert props["step"] == "20" and props["reference_step"] == "1" and props["runs"] == "2"
        lo, hi = 0.0, 100.0  # PIQE, lower is better
        ref, cur = float(props["score_reference"]), float(props["score_step"])
        delta = 100 * (hi - cur) / (hi - lo) - 100 * (hi - ref) / (hi - lo)
        assert float(props["delta"]) == pytest.approx(delta, abs=1e-9)
        assert outcome == ("passed" if delta < 0 else "failure")


def test_failure_message_shows_both_scores(suite: pytest.Pytester) -> None:
    # The test images' noise grows with the step, and noise raises the Laplacian's variance, a
    # higher-is-better score: every case fails.
    result = suite.runpytest_subprocess("--dataset=data", "--metric=laplacian_variance", "--steps=20")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*laplacian_variance did not detect the degradation of alpha at step 20: Δ20 = +* ≥ 0 "
            "(the mean of 2 run*",
            "*step  20: raw *→ normalised*",
        ]
    )


def test_per_run_aggregate_gives_one_case_per_run(suite: pytest.Pytester) -> None:
    suite.runpytest_subprocess(
        "--dataset=data", "--metric=piqe", "--aggregate=per-run", "--steps=5", "--junitxml=j.xml"
    )
    got = cases(suite.path / "j.xml")
    assert sorted(got) == sorted(
        f"test_detects_degradation[piqe-{s}-run{r}-step5]" for s in ("alpha", "beta") for r in (0, 1)
    )
    assert {p["runs"] for _, p in got.values()} == {"1"}


def test_xdist_gives_the_same_verdicts_as_a_serial_run(suite: pytest.Pytester) -> None:
    args = ("--dataset=data", "--metric=piqe,entropy")
    suite.runpytest_subprocess(*args, "--junitxml=serial.xml")
    result = suite.runpytest_subprocess(*args, "-n", "2", "--junitxml=xdist.xml")
    serial, xdist = cases(suite.path / "serial.xml"), cases(suite.path / "xdist.xml")
    assert len(serial) == 12
    assert {k: (o, p["delta"]) for k, (o, p) in serial.items()} == {
        k: (o, p["delta"]) for k, (o, p) in xdist.items()
    }
    result.stdout.fnmatch_lines(["*banana-tests failure matrix*", "*entropy*piqe*"])


def test_xdist_keeps_each_metric_on_one_worker(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--dataset=data", "--metric=piqe,entropy", "-n", "2", "-v")
    workers: dict[str, set[str]] = {}
    for line in result.outlines:
        m = re.match(r"^\[(gw\d+)\].*test_detects_degradation\[(\w+)-", line)
        if m is not None:
            workers.setdefault(m[2], set()).add(m[1])
    assert set(workers) == {"piqe", "entropy"}
    assert all(len(w) == 1 for w in workers.values()), workers


def test_a_named_metric_without_weights_fails_the_run_naming_the_file(suite: pytest.Pytester) -> None:
    """A gate whose metric never ran must not pass: each case errors with the reason."""
    result = suite.runpytest_subprocess("--dataset=data", "--metric=cnniqa")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=6)
    result.stdout.fnmatch_lines(
        ["ERROR *cnniqa was named with --metric but cannot load: *CNNIQA_koniq10k-e6f14c91.pth*"]
    )


def test_weights_unknown_to_the_catalog_fail_naming_what_was_fetched(suite: pytest.Pytester) -> None:
    """hyperiqa fetches from the hub at build time; offline, that is the same failure, not a crash."""
    result = suite.runpytest_subprocess("--dataset=data", "--metric=hyperiqa", "--steps=5")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["ERROR *hyperiqa was named with --metric but cannot load: *cannot fetch *"])


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
    from banana_tests.suite import named_metrics
    from metrics_under_test.registry import resolve

    assert named_metrics(text, resolve(text)) == named


def test_weights_dir_is_staged_into_the_pyiqa_cache(suite: pytest.Pytester, tmp_path: Path) -> None:
    mirror = Path(__file__).resolve().parents[2] / "shared" / "pyiqa-weights"
    if not (mirror / "brisque_svm_weights.pth").is_file():
        pytest.skip(f"no weights mirror at {mirror}")
    result = suite.runpytest_subprocess(
        "--dataset=data", "--metric=brisque", "--steps=5", f"--weights-dir={mirror}"
    )
    assert result.parseoutcomes().get("skipped", 0) == 0
    assert (suite.path / "torch" / "hub" / "pyiqa" / "brisque_svm_weights.pth").exists()


def test_unknown_metric_is_a_usage_error_listing_valid_names(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--dataset=data", "--metric=brisk")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*unknown metric 'brisk'. Did you mean 'brisque'? Valid names: offline, all, *"]
    )


def test_a_missing_reference_step_errors_only_its_cases(suite: pytest.Pytester) -> None:
    meta = suite.path / "data" / "metadata.jsonl"
    meta.write_text(
        "".join(
            line + "\n"
            for line in meta.read_text().splitlines()
            if not ('"beta"' in line and '"step": 1,' in line and '"run": 0' in line)
        )
    )
    result = suite.runpytest_subprocess("--dataset=data", "--metric=piqe", "--junitxml=j.xml")
    got = cases(suite.path / "j.xml")
    assert {o for k, (o, _) in got.items() if "-beta-" in k} == {"error"}
    assert {o for k, (o, _) in got.items() if "-alpha-" in k} <= {"passed", "failure"}
    result.stdout.fnmatch_lines(["*beta run 0 has no step 1*"])


def test_plugin_import_stays_light() -> None:
    code = "import sys, banana_tests.plugin; print(sorted({'torch', 'pyiqa', 'datasets'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
