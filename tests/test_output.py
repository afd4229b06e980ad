"""What a run prints and writes per case: one line per failing verdict, no traceback or pixels
unless asked, a matrix legend that says what a cell counts, and small JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from syrupy.assertion import SnapshotAssertion

from banana_tests.cases import CaseKey
from banana_tests.families.trend import TrendTally
from banana_tests.reports.junit import read_junit
from banana_tests.reports.merge_checks import AGREED
from banana_tests.verdicts.matrix import Cell, Matrix, Outcome
from metrics_under_test.custom import PROBE
from tests.conftest import assert_outcomes, parse_matrix, suite_folder
from tests.known_metrics import install_known_metrics

REVERSED = "known_metrics:noise_level_reversed"  # misses every step (tests/known_metrics.py)
FAILING_LINE = "noise_level_reversed did not detect the degradation of {seed} at step {step}: Δ{step} = +"


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    folder = suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0, 1), steps=(1, 5, 10, 20))
    install_known_metrics(folder.path)
    return folder


@pytest.mark.slow
def test_a_failing_verdict_is_one_line_without_a_traceback(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(
        "--dataset=data", f"--metric={REVERSED}", "--junitxml=j.xml", "-o", "junit_family=xunit1"
    )
    assert_outcomes(result, missed=6)
    assert result.ret == 1
    out = result.stdout.str()
    lines = out.splitlines()
    verdicts = [line for line in lines if line.startswith("noise_level_reversed did not detect")]
    assert len(verdicts) == 6
    for line in verdicts:  # Δ, both raw and both normalised scores on the one line
        assert line.count("raw ") == 2 and line.count("→ normalised") == 2 and "≥ 0" in line
    assert "banana-tests: 6 failing verdicts" in out
    assert "= FAILURES =" not in out and "def test_detects_degradation" not in out and "Verdict(" not in out
    assert len(lines) < 40  # header, dots, 6 verdicts, matrix, counts
    assert parse_matrix(out)[("total", "noise_level_reversed")] == "6/6"

    xml = suite.path / "j.xml"
    failures = list(ET.parse(xml).iter("failure"))
    assert len(failures) == 6
    for failure in failures:  # the figure and the whole line, in the message and the text
        summary, line = failure.get("message", "").split("\n")
        assert failure.text == f"{summary.removeprefix('Failed: ')}\n{line}" and summary.startswith(
            "Failed: Δ"
        )
        assert line.startswith("noise_level_reversed did not detect")
    # one small testcase each, with the run's header (its verdict line twice: in the failure's
    # message, which pytest cuts past 500 characters, and whole in its text); its plan lists every
    # case's id once more, and the facts report compares between files (merge_checks.AGREED) are
    # once per file
    properties = list(ET.parse(xml).iter("property"))
    plan = sum(len(p.get("value", "")) for p in properties if p.get("name") == "planned")
    agreed = sum(len(ET.tostring(p)) for p in properties if p.get("name") in AGREED)
    assert 0 < plan / 6 < 120 and agreed < 1500 and (xml.stat().st_size - plan - agreed) / 6 < 1800
    reading = read_junit([xml])
    assert {c.outcome for c in reading.matrix.cells.values()} == {"failed"}  # verdicts, not errors


@pytest.mark.slow
def test_on_ci_the_short_summary_carries_each_miss_whole(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On CI pytest prints each failure's whole message in its short summary: a miss's is its
    figure and its verdict line, so the verdict reads once in the suite's section and once there."""
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest_subprocess("--dataset=data", f"--metric={REVERSED}", "--steps=5")
    assert_outcomes(result, missed=2)
    out = result.stdout.str()
    section, summary = out.split("short test summary info")
    assert section.count("noise_level_reversed did not detect") == 2 and "= FAILURES =" not in section
    lines = summary.splitlines()
    for seed in ("alpha", "beta"):
        at = next(i for i, line in enumerate(lines) if line.startswith("MISSED ") and f"-{seed}-" in line)
        assert " - Failed: Δ5 = +" in lines[at]
        assert lines[at + 1].startswith(FAILING_LINE.format(seed=seed, step=5))


@pytest.mark.slow
def test_the_suite_adds_its_own_sections_and_leaves_pytests_stats_alone(suite: pytest.Pytester) -> None:
    """Failing verdicts are filed by pytest itself under their own category (the public
    pytest_report_teststatus hook), so no plugin's stats are taken apart and put back."""
    suite.makeconftest(
        """
import pytest


class Watched(dict):
    def __setitem__(self, key, value):
        print(f"stats[{key!r}] assigned")
        super().__setitem__(key, value)


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    terminal.stats = Watched(terminal.stats)


@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    print("categories:", sorted((k, len(v)) for k, v in stats.items() if k in ("failed", "missed")))
"""
    )
    result = suite.runpytest_subprocess(
        "--dataset=data", f"--metric={REVERSED}", "--steps=20", "-p", "no:randomly"
    )
    out = result.stdout.str()
    assert "assigned" not in out
    assert "categories: [('missed', 2)]" in out
    assert_outcomes(result, missed=2)


@pytest.mark.slow
@pytest.mark.parametrize("tb", ["auto", "long", "short", "line", "native", "no"])
def test_a_miss_is_missed_under_every_tb(suite: pytest.Pytester, tb: str) -> None:
    """The word for a miss was "failed" under --tb=long, "missed" under the others."""
    result = suite.runpytest_subprocess("--dataset=data", f"--metric={REVERSED}", "--steps=20", f"--tb={tb}")
    assert_outcomes(result, missed=2)
    assert "= FAILURES =" not in result.stdout.str()


@pytest.mark.slow
def test_tb_long_keeps_the_traceback(suite: pytest.Pytester) -> None:
    """In the suite's own section, in place of the one line: pytest's FAILURES leaves misses out."""
    result = suite.runpytest_subprocess("--dataset=data", f"--metric={REVERSED}", "--steps=20", "--tb=long")
    assert_outcomes(result, missed=2)
    result.stdout.fnmatch_lines(
        [
            "*banana-tests: 2 failing verdicts*",
            "*_ test_detects_degradation*",
            "*def test_detects_degradation*",
            "*Failed: *did not detect*",
        ]
    )


@pytest.mark.slow
def test_a_run_of_misses_alone_ends_red_and_rf_lists_them(suite: pytest.Pytester) -> None:
    """It ended yellow while exiting 1, its misses absent from `-rf`; pytest's default `-r fE`."""
    result = suite.runpytest_subprocess(
        "--dataset=data", f"--metric={REVERSED}", "--steps=20", "--color=yes", "-p", "no:randomly"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    red, yellow, bold = "\x1b[31m", "\x1b[33m", "\x1b[1m"
    final = result.outlines[-1]
    assert final.startswith(red + "=") and f"{red}{bold}2 missed" in final and yellow not in final, repr(
        final
    )
    summary = result.outlines[
        next(i for i, line in enumerate(result.outlines) if "short test summary" in line) :
    ]
    missed = [line for line in summary if "MISSED" in line]
    assert len(missed) == 2 and all(line.startswith(red + "MISSED") for line in missed), summary


@pytest.mark.slow
def test_rf_lists_misses_after_failures_and_leaves_pytests_stats_as_they_were(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_mine="def test_fails():\n    assert False\n")
    suite.makeconftest(
        """
def pytest_unconfigure(config):
    stats = config.pluginmanager.get_plugin("terminalreporter").stats
    print("after:", sorted((k, len(v)) for k, v in stats.items() if k in ("failed", "missed")))
"""
    )
    result = suite.runpytest_subprocess(
        "test_suite.py",
        "test_mine.py",
        "--dataset=data",
        f"--metric={REVERSED}",
        "--steps=20",
        "-rf",
        "-vv",  # the message in full, not trimmed to the terminal's width
        "-p",
        "no:randomly",
    )
    result.stdout.fnmatch_lines(
        [
            "*short test summary info*",
            "FAILED test_mine.py::test_fails - assert False",
            "MISSED *::test_detects_degradation[[]noise_level_reversed-alpha-step20[]] - Failed: Δ20 = +*",
            "MISSED *::test_detects_degradation[[]noise_level_reversed-beta-step20[]] - Failed: Δ20 = +*",
            "*= 1 failed, 2 missed in *",
            "after: [('failed', 1), ('missed', 2)]",
        ],
        consecutive=False,
    )


@pytest.mark.slow
def test_a_metric_that_raises_keeps_its_traceback(suite: pytest.Pytester) -> None:
    """A metric's exception is each image's error in one line (tests/bad_inputs/test_metric_raises.py),
    and the line says where the metric raised it."""
    (suite.path / "broken_metric.py").write_text(
        "from metrics_under_test.protocol import metric\n\n\n"
        '@metric("broken", lower_better=False, score_range=(0.0, 1.0))\n'
        "def broken(images):\n"
        "    CALLS.append(len(images))\n"
        f"    if len(CALLS) > {len(PROBE)}:  # the load-time probe passes\n"
        '        raise ZeroDivisionError("scoring blew up")\n'
        "    return [0.5 for _ in images]\n\n\n"
        "CALLS = []\n"
    )
    result = suite.runpytest_subprocess("--dataset=data", "--metric=broken_metric:broken", "--steps=20")
    result.assert_outcomes(errors=2)
    where = f"{suite.path / 'broken_metric.py'}:8 in broken"
    result.stdout.fnmatch_lines(
        ["*ERRORS*", f"*broken raised ZeroDivisionError: scoring blew up (at {where})"]
    )


@pytest.mark.slow
def test_help_names_the_group_banana_tests(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["banana-tests:", "*--metric*"])
    assert "NR-IQA metrics on trial" not in result.stdout.str()


def cells(metrics: list[str], seeds: list[str], runs: list[int | None], steps: list[int]) -> Matrix:
    """Every case failing when its step is 20, passing otherwise."""
    return Matrix.of(
        Cell(CaseKey(m, s, step, run), Outcome.FAILED if step == 20 else Outcome.PASSED, delta=1.0)
        for m in metrics
        for s in seeds
        for run in runs
        for step in steps
    )


def test_the_legend_says_what_a_cell_counts() -> None:
    per_run = cells(["m"], ["a"], [0, 1, 2, 3, 4], list(range(2, 101)))
    legend = "\n".join(per_run.legend())
    assert "over 5 run(s) × 99 step(s) of one seed image" in legend
    assert "higher-is-better" in legend and "E<n> = cases with errors, shown beside the failures" in legend
    assert "over 3 step(s) of one seed image" in cells(["m"], ["a"], [None], [5, 10, 20]).legend()[0]


def test_wide_runs_fold_columns_and_long_runs_cap_rows() -> None:
    metrics = [f"metric{i:02d}" for i in range(12)]
    matrix = cells(metrics, [f"seed{i:03d}" for i in range(60)], [None], [5, 20])
    lines = matrix.render(width=60, max_rows=10)
    assert max(len(line) for line in lines[:-1]) <= 60
    headers = [line for line in lines if line.startswith(" ")]
    assert len(headers) == 3  # 12 columns of 10 characters in 60: three blocks of 5, 5 and 2
    assert sorted(m for h in headers for m in h.split()) == metrics
    assert sum(line.startswith("total") for line in lines) == 3
    assert sum(line.startswith("seed") for line in lines) == 3 * 9
    assert lines[-1].startswith("… 51 more seed images (51 with failures)")
    parsed = parse_matrix("== banana-tests failure matrix ==\n" + "\n".join(lines[:-1]))
    assert {parsed[("total", m)] for m in metrics} == {"60/120"}


def test_the_trend_summary_gives_one_line_per_metric(snapshot: SnapshotAssertion) -> None:
    tally = TrendTally()
    for outcome, rho, first in [
        (Outcome.PASSED, -0.9, 5),
        (Outcome.PASSED, -0.5, 20),
        (Outcome.FAILED, 0.3, None),
    ]:
        tally.add("piqe", outcome, rho, first)
    tally.add("brisque", Outcome.SKIPPED, None, None)
    lines = tally.lines()
    assert [line.split()[0] for line in lines] == ["brisque", "piqe"]
    assert "on 2/3 seed images" in lines[1] and "median 12.5, none on 1" in lines[1]  # 5 and 20; one never
    assert lines == snapshot
