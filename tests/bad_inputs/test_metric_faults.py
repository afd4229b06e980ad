"""A fault of the metric's environment is no verdict (issue 56, items 10 and 11): one row per fault.

`router` scores its load-time probe with its first model, then routes every later image to a
second one whose files are missing here: it raises what its environment would (huggingface_hub's
real LocalEntryNotFoundError and OfflineModeIsEnabled, urllib's URLError, a ModuleNotFoundError, a
MemoryError, a RuntimeError raised from a FileNotFoundError). Each case of every family errors,
in one line naming the metric, the input and the exception, with no `min_side` hint, and
`banana-tests report --write-baseline` lists none of them; under a baseline that lists them they
still error (they were xfail). A metric that rejects its input (a ValueError) keeps its failing
verdicts, the hint only where the size is what it rejected. Before, the control and invariance
cases were `missed` with the hint, the baseline listed them, and a control case printed a
hypothesis exception group.
"""

from __future__ import annotations

import json
import urllib.error
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from banana_tests.cli import main
from banana_tests.scoring.returned_scores import environment_fault
from tests.conftest import suite_folder

ROUTER = """
import os

from metrics_under_test.examples import laplacian_variance
from metrics_under_test.custom import PROBE
from metrics_under_test.protocol import metric

CALLS = [0]


def fault():
    kind = os.environ["ROUTER_FAULT"]
    if kind == "hub":
        from huggingface_hub.errors import LocalEntryNotFoundError

        return LocalEntryNotFoundError("Cannot find the requested files in the disk cache and outgoing "
                                       "traffic has been disabled.")
    if kind == "offline":
        from huggingface_hub.errors import OfflineModeIsEnabled

        return OfflineModeIsEnabled("Cannot reach https://huggingface.co/owner/second: offline mode is on.")
    if kind == "url":
        from urllib.error import URLError

        return URLError("[Errno -2] Name or service not known")
    if kind == "import":
        return ModuleNotFoundError("No module named 'second_model'")
    if kind == "memory":
        return MemoryError("no room for the second model")
    if kind == "wrapped":
        try:
            open("/nonexistent/second_model.pth", "rb")
        except FileNotFoundError as exc:
            error = RuntimeError("the second model could not load")
            error.__cause__ = exc
            return error
    return ValueError("router cannot score this colour distribution")


@metric("router", lower_better=False, score_range=(0.0, 2000.0))
def router(images):
    CALLS[0] += 1
    height, width = images[0].shape[:2]
    if os.environ["ROUTER_FAULT"] == "size":  # no second model: it refuses small images
        if min(height, width) < 180:
            raise ValueError(f"router needs 180 px, got {width}x{height}")
    elif CALLS[0] > len(PROBE):  # past the probe, the second model is asked for
        raise fault()
    return laplacian_variance(images)
"""
FAULTS = {  # ROUTER_FAULT -> the exception's type, as the case's line names it
    "hub": "LocalEntryNotFoundError",
    "offline": "OfflineModeIsEnabled",
    "url": "URLError",
    "import": "ModuleNotFoundError",
    "memory": "MemoryError",
    "wrapped": "RuntimeError",
}
FAMILIES = ("--trend", "--search=3")  # with the Δ, control, invariance and snapshot cases
Cases = dict[str, tuple[str, str]]  # test name -> (outcome, the element's text)


def test_the_environments_faults_are_classified_in_one_place() -> None:
    """The hub's real exceptions, urllib's, an ImportError, memory, and one raised from one."""
    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    wrapped = RuntimeError("load failed")
    wrapped.__cause__ = FileNotFoundError("weights.pth")
    for exc in (
        LocalEntryNotFoundError("not in the cache"),
        OfflineModeIsEnabled("offline"),
        urllib.error.URLError("no network"),
        ConnectionError("reset"),
        ModuleNotFoundError("No module named 'x'"),
        MemoryError(),
        wrapped,
    ):
        assert environment_fault(exc), exc
    context = ValueError("bad input")
    context.__context__ = OSError("seen while handling")  # not raised from it
    for exc in (ValueError("1x1 image"), RuntimeError("size mismatch"), IndexError("out of bounds"), context):
        assert not environment_fault(exc), exc


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    folder = suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0, 1))
    (folder.path / "test_suite.py").unlink()  # the shipped suite, every family
    (folder.path / "router.py").write_text(ROUTER)
    return folder


def run(suite: pytest.Pytester, *args: str) -> pytest.RunResult:
    return suite.runpytest_inprocess(
        "--pyargs", "banana_tests", "--dataset=data", "--metric=router:router", "--no-cache",
        "-p", "no:randomly", "-p", "no:cacheprovider", "--junitxml=j.xml", *args,
    )  # fmt: skip


def cases(xml: Path) -> Cases:
    out = {}
    for case in ET.parse(xml).iter("testcase"):
        kid = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        out[str(case.get("name"))] = ("passed", "") if kid is None else (kid.tag, kid.text or "")
    return out


def test_an_environment_fault_errors_every_case_of_every_family_in_one_line(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROUTER_FAULT", "hub")

    result = run(suite, *FAMILIES)

    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output[-3000:]
    found = cases(suite.path / "j.xml")
    families = {name.partition("[")[0] for name in found}
    assert families == {
        "test_detects_degradation", "test_detects_control_degradation", "test_score_is_invariant",
        "test_scores_match_snapshot", "test_trend_detects_degradation", "test_no_worst_escape",
    }  # fmt: skip
    assert {name: outcome for name, (outcome, _) in found.items() if outcome != "error"} == {}
    assert "min_side" not in output and "MISSED" not in output and "failing verdict" not in output
    for banned in ("Traceback", "During handling", "ExceptionGroup", "Falsifying", "SuiteState", "Record("):
        assert banned not in output, output[-3000:]
    for name, (_, text) in found.items():
        [line] = text.splitlines()
        assert "router" in line and "raised LocalEntryNotFoundError: Cannot find the requested" in line, name
    # each case: its header and its line, its line in the short summary, and the run's fixed lines
    assert len(output.splitlines()) <= 3 * len(found) + 30, len(output.splitlines())
    assert written_baseline(suite.path) == []


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_is_an_error_on_the_suites_own_crops(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """The control and invariance cases, which judged what the metric raised on their crops."""
    monkeypatch.setenv("ROUTER_FAULT", fault)

    result = run(suite, "-k", "control or invariance")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    found = cases(suite.path / "j.xml")
    assert len(found) == 8 and {outcome for outcome, _ in found.values()} == {"error"}, found
    for name, (_, text) in found.items():
        [line] = text.splitlines()
        assert FAULTS[fault] in line and "min_side" not in line, line
        if line.startswith("metric 'router' failed the load-time probe"):
            continue  # out of memory, its model was dropped: built again, its probe met the fault
        assert line.endswith("a fault of its environment, not a verdict"), line
        if "control" in name:  # the metric, the crop and the exception
            assert line.startswith("router cannot be checked for ") and " on the crop " in line
    assert written_baseline(suite.path) == []


def written_baseline(folder: Path) -> list[object]:
    """What `banana-tests report --write-baseline` lists from the run's JUnit file."""
    baseline = folder / "b.json"
    done = main(["report", str(folder / "j.xml"), f"--out={folder / 'r'}", f"--write-baseline={baseline}"])
    assert done in (0, 3)  # 3: a run narrowed by -k is incomplete
    failures: list[object] = json.loads(baseline.read_text())["failures"]
    return failures


def test_a_baseline_that_lists_a_faulty_case_does_not_hide_it(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A baseline written when the metric refused the crops lists the control cases; the
    metric's environment breaking must not pass the gate as their expected failure."""
    listed = [{"kind": "control", "metric": "router", "distortion": d} for d in ("gaussian_blur", "jpeg")]
    listed.append({"kind": "invariance", "metric": "router", "check": "batch"})
    baseline = suite.path / "known.json"
    baseline.write_text(json.dumps({"format": "banana-tests-baseline/2", "failures": listed}))
    monkeypatch.setenv("ROUTER_FAULT", "hub")

    result = run(suite, f"--baseline={baseline}", "-k", "control or invariance")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    found = cases(suite.path / "j.xml")
    assert found and {outcome for outcome, _ in found.values()} == {"error"}, found
    assert "xfail" not in result.stdout.str()


def test_a_metric_that_rejects_its_input_keeps_its_verdicts_and_the_hint_only_for_a_size(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ValueError about colour: the control cases (their first crop, 195x259, is larger than
    the probe's) are misses without the hint; the invariance cases, on 96 px crops smaller than
    every image the metric scored, keep it. Both are verdicts a baseline lists."""
    monkeypatch.setenv("ROUTER_FAULT", "value")

    result = run(suite, "-k", "control or invariance")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    found = cases(suite.path / "j.xml")
    assert {outcome for outcome, _ in found.values()} == {"failure"}, found
    lines = {name: text.splitlines()[-1] for name, (_, text) in found.items()}
    for name, line in lines.items():
        assert "raised ValueError: router cannot score this colour distribution" in line
        assert ("min_side" in line) == ("invariant" in name), line
    assert len(written_baseline(suite.path)) == len(found) == 8


def test_a_metric_that_raises_in_a_control_check_shows_one_line_per_case(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It refuses crops under 180 px: on gaussian_noise the first crop (195x259) ranks wrong, a
    later one (174x199) raises; hypothesis printed both in an exception group of ~100 lines. Now
    the first failing example is the case's verdict, one line each; the refusal speaks of a size,
    so it carries the min_side hint."""
    monkeypatch.setenv("ROUTER_FAULT", "size")

    result = run(suite, "-k", "control")

    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    found = cases(suite.path / "j.xml")
    assert len(found) == 3 and {outcome for outcome, _ in found.values()} == {"failure"}, found
    for banned in ("ExceptionGroup", "distinct failures", "Falsifying", "Traceback", "+---"):
        assert banned not in output, output
    lines = [line for line in output.splitlines() if line.startswith("router ")]
    assert len(lines) == 3, output
    assert "did not rank gaussian_noise" in lines[0]
    for line in lines[1:]:
        assert "it raised ValueError: router needs 180 px, got 174x199" in line and "min_side" in line
    assert len(output.splitlines()) <= 25, output
