"""`banana-tests report` on JUnit XML the suite really wrote: serial, under xdist and in shards."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from syrupy.assertion import SnapshotAssertion

from banana_tests.cases import CaseKey
from banana_tests.cli import main
from banana_tests.core.machine import package_versions
from banana_tests.reports.junit_testcase import RUN_PROPERTIES
from banana_tests.reports.merge_checks import AGREED, NARROWED_BY, PLANNED, UNCOLLECTED
from banana_tests.reports.paper import PAPER_CSV, compare, comparison_markdown, paper_cells
from banana_tests.verdicts.baseline import load_baseline
from banana_tests.verdicts.matrix import Cell, Matrix, Outcome
from tests.conftest import junit_cases, unavailable, weights_mirror, write_set

PROJECT = Path(__file__).resolve().parent.parent
# The paper's Figure 6, as listed in ../shared/paper/README.md (failures out of 36 per metric).
PAPER_FAILURES = {
    "arniqa": 21, "brisque": 20, "clipiqa": 8, "cnniqa": 32, "dbcnn": 24, "hyperiqa": 21, "ilniqe": 14,
    "liqe": 5, "maniqa": 13, "musiq": 8, "nima": 3, "niqe": 6, "nrqm": 21, "paq2piq": 18, "pi": 11,
    "piqe": 22, "qalign": 4, "qualiclip": 1, "topiq_nr": 8, "tres": 21, "wadiqam_nr": 28,
}  # fmt: skip


# Known verdicts on the test sets (tests/known_metrics.py): NOISE detects every step, REVERSED none.
NOISE, REVERSED = "tests.known_metrics:noise_level", "tests.known_metrics:noise_level_reversed"


def suite(dataset: Path, xml: Path, metric: str, *extra: str) -> Path:
    """Run the suite in a fresh process, as CI does, and return its JUnit XML. No score cache:
    each run scores for itself (and writes nothing into the working tree it starts in)."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "banana_tests/families/degradation/test_degradation.py",
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    cmd += [f"--dataset={dataset}", f"--metric={metric}", f"--junitxml={xml}", "--no-cache", *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == (1 if REVERSED in metric.split(",") else 0), done.stdout + done.stderr
    return xml


def report(out: Path, *args: str | Path) -> Path:
    """The report of runs of one suite module or two: partial (tests/bad_inputs/test_partial_runs.py)."""
    assert main(["report", *map(str, args), "--out", str(out), "--allow-incomplete"]) == 0
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny set: seed images alpha and beta, runs 0 and 1, steps 1, 5, 10, 20."""
    return write_set(tmp_path_factory.mktemp("set") / "set")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, data: Path) -> dict[str, list[Path]]:
    """Two known metrics on a tiny set: serially, with -n 2, and as two shards (one in xunit2)."""
    root = tmp_path_factory.mktemp("runs")
    return {
        "serial": [suite(data, root / "serial.xml", f"{NOISE},{REVERSED}")],
        "xdist": [suite(data, root / "xdist.xml", f"{NOISE},{REVERSED}", "-n", "2")],
        "shards": [
            suite(data, root / "shard-noise.xml", NOISE),
            suite(data, root / "shard-reversed.xml", REVERSED, "-o", "junit_family=xunit2"),
        ],
    }


@pytest.fixture(scope="module")
def reports(runs: dict[str, list[Path]], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reports")
    return {name: report(root / name, *files) for name, files in runs.items()}


@pytest.fixture(scope="module")
def paper_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return report(tmp_path_factory.mktemp("paper"), "--paper-only")


def rows(out: Path) -> list[dict[str, str]]:
    with (out / "matrix.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_serial_xdist_and_merged_shards_give_the_same_matrix_csv(reports: dict[str, Path]) -> None:
    serial = (reports["serial"] / "matrix.csv").read_bytes()
    assert (reports["xdist"] / "matrix.csv").read_bytes() == serial
    assert (reports["shards"] / "matrix.csv").read_bytes() == serial
    table = rows(reports["serial"])
    assert Counter((r["metric"], r["outcome"]) for r in table) == {
        ("noise_level", "passed"): 6,
        ("noise_level_reversed", "failed"): 6,
    }
    assert list(table[0])[:7] == [
        "metric",
        "seed_image",
        "step",
        "delta",
        "outcome",
        "score_reference",
        "score_step",
    ]
    for r in table:
        assert r["outcome"] == ("failed" if float(r["delta"]) >= 0 else "passed")
        assert (r["reference_step"], r["runs"], r["run"]) == ("1", "2", "")


@pytest.mark.slow
def test_every_file_is_written(reports: dict[str, Path]) -> None:
    names = {p.name for p in reports["serial"].iterdir()}
    steps = {f"gaps_step{s}.{ext}" for s in (5, 10, 20) for ext in ("png", "svg")}
    figures = {f"{stem}.{ext}" for stem in ("failure_counts", "separability") for ext in ("png", "svg")}
    assert names == {"matrix.csv", "summary.md", "report.html"} | figures | steps
    html = (reports["serial"] / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5
    assert "http://" not in html and "https://" not in html and 'src="/' not in html
    assert "replicate" in html  # run metadata from the cases' properties


@pytest.mark.slow
def test_the_run_facts_are_recorded_once_per_file_and_reach_every_report(
    runs: dict[str, list[Path]], reports: dict[str, Path]
) -> None:
    """Repeated on every case, the run's facts were a sixth of its JUnit; on the first case of
    each process, they depended on the order the cases ran in. The process that writes the file
    (the xdist controller under -n 2) writes them once, as testsuite properties, serial, under
    -n 2 and in each shard alike."""
    for name, files in runs.items():
        cases = [props for f in files for _, props in junit_cases(f).values()]
        assert len(cases) == 12 and not [p for p in cases if RUN_PROPERTIES & p.keys()], name
        for f in files:
            suite = ET.parse(f).iterfind("testsuite/properties/property")
            # a run of test_degradation.py alone is narrowed by its test path: the other modules uncollected
            narrowed = {PLANNED, NARROWED_BY, UNCOLLECTED}
            assert {p.get("name") for p in suite} == RUN_PROPERTIES | AGREED.keys() | narrowed, (name, f)
        html = (reports[name] / "report.html").read_text()
        run_table = html.split("<h2>Run</h2>")[1].split("<h2>")[0]
        for fact in ("replicate", package_versions(), "cpu"):
            assert f"<td>{fact}</td>" in run_table, (name, fact)
        # the known metrics' module imports numpy: its version is keyed and shown
        assert f"<td>metric libraries</td><td>numpy {metadata.version('numpy')}</td>" in run_table, name


@pytest.mark.slow
def test_summary_counts_each_metric(reports: dict[str, Path], snapshot: SnapshotAssertion) -> None:
    table = rows(reports["serial"])
    summary = (reports["serial"] / "summary.md").read_text()
    for metric, failed in (("noise_level", 0), ("noise_level_reversed", 6)):
        mine = [r for r in table if r["metric"] == metric]
        worst = max(float(r["delta"]) for r in mine)
        assert (worst < 0) == (failed == 0)
        assert f"| {metric} | 6 | {failed} | 0 | 0 | 0 | 0 | {worst:+.3f} |" in summary
    section = summary[summary.index("### banana-tests failure matrix") :]
    assert section[: section.index("\n\n", section.index("| metric"))] == snapshot


@pytest.mark.slow
def test_a_rerun_replaces_older_results_and_says_so(
    runs: dict[str, list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report(tmp_path, runs["shards"][0], runs["serial"][0])
    err = capsys.readouterr().err
    assert "6 case(s) seen twice; the newest result is kept" in err
    assert "noise_level-alpha-step5: kept passed from" in err and "serial.xml" in err


def test_not_junit_is_an_error_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not xml")
    assert main(["report", str(bad), "--out", str(tmp_path / "out")]) == 2
    assert f"banana-tests report: {bad}: not a readable JUnit XML file" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("metric", sorted(PAPER_FAILURES))
def test_paper_only_reproduces_the_papers_failure_counts(paper_report: Path, metric: str) -> None:
    mine = [r for r in rows(paper_report) if r["metric"] == metric]
    assert len(mine) == 36
    assert sum(r["outcome"] == "failed" for r in mine) == PAPER_FAILURES[metric]


def test_paper_text_is_kept(paper_report: Path) -> None:
    """ "-0.0" survives into matrix.csv, and counts as Δ ≥ 0 as in the paper's counts."""
    [row] = [
        r for r in rows(paper_report) if (r["metric"], r["seed_image"], r["step"]) == ("piqe", "Sand", "5")
    ]
    assert (row["delta"], row["outcome"]) == ("-0.0", "failed")
    assert PAPER_CSV.read_bytes() == (PROJECT.parent / "shared/paper/paper_fig5_gaps.csv").read_bytes()


def test_compare_paper_matches_cells_and_lists_differences() -> None:
    paper = Matrix.of(paper_cells())
    run = Matrix.of(c for c in paper_cells() if c.key.metric == "brisque")
    key = CaseKey("brisque", "Dongpo", 5)
    flipped = run.cells[key]
    run.add(type(flipped)(key, Outcome.PASSED, -1.0))
    [brisque] = compare(run, paper)
    assert (brisque.matched, brisque.agree) == (36, 35)
    assert [d.key for d in brisque.differences] == [key]
    assert "- brisque-Dongpo-step5: run passed (Δ -1.0), paper failed (Δ +5.2)" in comparison_markdown(
        [brisque]
    )


def test_compare_paper_on_other_seed_images_compares_rates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.test_junit import case, junit

    failed = "<failure message='AssertionError' />"
    xml = junit(
        tmp_path / "j.xml",
        *(case("piqe", "alpha", step, failed, delta="1.0") for step in (5, 10, 20)),
        *(case("piqe", "beta", step, delta="-1.0") for step in (5, 10, 20)),
    )
    report(tmp_path, xml, "--compare-paper")
    out = capsys.readouterr().out
    assert "| piqe | 0 | – (no shared seed image) | 3/6" in out
    assert "| piqe |" in (tmp_path / "summary.md").read_text().split("Compared with the paper")[1]


@pytest.mark.slow
def test_write_baseline_keeps_the_failing_cases(runs: dict[str, list[Path]], tmp_path: Path) -> None:
    report(tmp_path / "out", runs["serial"][0], "--write-baseline", tmp_path / "baseline.json")
    failing = {
        CaseKey(r["metric"], r["seed_image"], int(r["step"]))
        for r in rows(tmp_path / "out")
        if r["outcome"] == "failed"
    }
    assert load_baseline(tmp_path / "baseline.json") == failing
    assert {k.metric for k in failing} == {"noise_level_reversed"} and len(failing) == 6


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH")
def test_report_html_renders_in_headless_chromium(reports: dict[str, Path], tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    page = (reports["serial"] / "report.html").resolve()
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    cmd += [
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    cmd += [f"--screenshot={shot}", "--window-size=1200,3000", page.as_uri()]
    subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)
    colours = np.unique(pixels, axis=0)
    assert len(colours) > 200  # text alone gives few; the embedded heatmaps give many
    blue_red = (np.abs(pixels[:, 0].astype(int) - pixels[:, 2].astype(int)) > 60).mean()
    assert blue_red > 0.01  # the diverging heatmap colours are on screen


def test_errors_show_beside_failures_in_every_matrix_label() -> None:
    outcomes = {
        "alpha": [Outcome.FAILED] * 5 + [Outcome.PASSED, Outcome.ERROR],
        "beta": [Outcome.ERROR, Outcome.SKIPPED],
        "gamma": [Outcome.ERROR],
    }
    cells = [
        Cell(CaseKey("piqe", seed, step), outcome, 1.0 if outcome is Outcome.FAILED else -1.0)
        for seed, group in outcomes.items()
        for step, outcome in enumerate(group, start=1)
    ]
    lines = Matrix.of(cells).render()
    assert [line.split() for line in lines[1:]] == [
        ["alpha", "5/6", "E1"],
        ["beta", "s", "E1"],
        ["gamma", "E1"],
        ["total", "5/6", "E3"],
    ]


def test_a_nan_delta_stays_a_failure_in_every_file(tmp_path: Path) -> None:
    from tests.test_junit import case, junit

    xml = junit(
        tmp_path / "j.xml",
        case("piqe", "alpha", 5, "<failure message='AssertionError: nan' />", delta="nan"),
        case("piqe", "beta", 5, delta="-2.0"),
    )
    out = report(tmp_path / "out", xml)
    assert [(r["seed_image"], r["delta"], r["outcome"]) for r in rows(out)] == [
        ("alpha", "nan", "failed"),
        ("beta", "-2.0", "passed"),
    ]
    assert "| piqe | 2 | 1 | 0 | 0 | 0 | 0 | -2.000 |" in (out / "summary.md").read_text()


def markdown_cells(line: str) -> list[str]:
    """A Markdown table row's cells as GitHub reads them: split at each `|` not escaped as `\\|`."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def test_a_pipe_in_a_name_stays_inside_its_summary_cell(tmp_path: Path) -> None:
    """A metric named `a|b` would add a column to summary.md's table if its `|` were written bare;
    escaped, the row keeps the header's eight cells."""
    from tests.test_junit import case, junit

    xml = junit(tmp_path / "j.xml", case("a|b", "x|y", 5, delta="-2.0"), case("a|b", "beta", 5, delta="-1.0"))
    summary = (report(tmp_path / "out", xml) / "summary.md").read_text(encoding="utf-8")
    header, row = (line for line in summary.splitlines() if line.startswith(("| metric", "| a\\|b")))
    assert markdown_cells(row) == ["a|b", "2", "0", "0", "0", "0", "0", "-1.000"]
    assert len(markdown_cells(header)) == 8


def table_rows(html: str, heading: str) -> list[list[str]]:
    """The body rows of the first table under `<h2>heading</h2>`, each cell's text."""
    part = html[html.index(f"<h2>{heading}</h2>") :]
    body = part[part.index("<tbody>") : part.index("</tbody>")]
    return [
        [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body)
    ]


@pytest.mark.slow
def test_separability_is_in_the_page_and_summary_with_its_figure(reports: dict[str, Path]) -> None:
    """noise_level puts every clean image above every degraded one at every step (AUC 1), its
    reversed twin every one below (AUC 0); 2 seed images × 2 runs of clean images."""
    html = (reports["serial"] / "report.html").read_text()
    rows = {row[0]: row[1:5] for row in table_rows(html, "Separability")}
    assert rows == {
        "noise_level": ["1.000", "1.000", "1.000", "4"],
        "noise_level_reversed": ["0.000", "0.000", "0.000", "4"],
    }
    assert "separability.png" in html.split("<h2>Separability</h2>")[1].split("<h2>")[0]
    summary = (reports["serial"] / "summary.md").read_text()
    assert "| noise_level | 1.000 | 1.000 | 1.000 | 4 |" in summary
    assert "| noise_level_reversed | 0.000 | 0.000 | 0.000 | 4 |" in summary


@pytest.mark.slow
def test_the_oracle_is_a_reference_row_with_the_images_own_psnr(reports: dict[str, Path], data: Path) -> None:
    """Its PSNR range per step is the one the images give (scoring.oracle on the files), and it
    detects every step of the set: the positive control beside a metric that fails them all."""
    from banana_tests.scoring.oracle import change

    def pixels(seed: str, run: int, step: int) -> np.ndarray:
        return np.asarray(Image.open(data / f"{seed}/run{run}/step{step:03d}.png").convert("RGB"))

    expected = []
    for step in (5, 10, 20):
        found = [change(pixels(s, r, 1), pixels(s, r, step)) for s in ("alpha", "beta") for r in (0, 1)]
        psnr = [c.psnr for c in found]
        expected.append([str(step), "2/2", f"{min(psnr):.2f} … {max(psnr):.2f}"])
    html = (reports["serial"] / "report.html").read_text()
    assert [row[:3] for row in table_rows(html, "Degradation oracle (positive control)")] == expected
    summary_rows = table_rows(html, "Summary per metric")
    assert summary_rows[-1] == ["PSNR oracle (reference)", "6", "6", "0", "0", "0", "0", "0", ""]
    assert '<tr class="reference">' in html
    summary = (reports["serial"] / "summary.md").read_text()
    assert "| PSNR oracle (reference) | 6 | 0 | 0 | 0 | 0 | 0 |  |" in summary
    assert "| noise_level_reversed | 6 | 6 | 0 | 0 | 0 | 0 |" in summary
    for step, detected, psnr in expected:
        assert f"| {step} | {detected} | {psnr} |" in summary


def test_compare_paper_keeps_the_separability_and_oracle_sections(tmp_path: Path) -> None:
    """--compare-paper adds its section to summary.md; it replaced the separability one."""
    from tests.test_junit import junit
    from tests.test_report_page import delta_case

    oracle = {"psnr": "30 31", "ssim": "0.8 0.8"}
    xml = junit(
        tmp_path / "j.xml",
        delta_case("piqe", "alpha", 5, (-2, -1), **oracle),
        delta_case("piqe", "beta", 5, (-3, -2), **oracle),
    )
    report(tmp_path / "out", xml, "--compare-paper")
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| piqe | 1.000 | 4 |" in summary  # every step-5 image below every clean one
    assert "| 5 | 2/2 | 30.00 … 31.00 | 0.800 … 0.800 |" in summary
    assert "| piqe | 0 | – (no shared seed image) |" in summary


@pytest.mark.slow
def test_a_run_whose_steps_did_not_change_reports_them_as_not_valid_trials(tmp_path: Path) -> None:
    """The suite's own JUnit on a set whose `frozen` steps copy its reference: report counts them
    as not valid trials with their PSNR, and the oracle row fails exactly those steps."""
    from tests.test_oracle import write_set as write_frozen_set

    write_frozen_set(tmp_path / "set")
    xml = suite(tmp_path / "set", tmp_path / "j.xml", NOISE, "--steps=5,10")
    out = report(tmp_path / "out", xml)
    assert [(r["seed_image"], r["step"], r["outcome"]) for r in rows(out)] == [
        ("frozen", "5", "invalid"),
        ("frozen", "10", "invalid"),
        ("noisy", "5", "passed"),
        ("noisy", "10", "passed"),
    ]
    html = (out / "report.html").read_text()
    summary = {row[0]: row[1:] for row in table_rows(html, "Summary per metric")}
    # cases, passed, failed, unresolved, not valid trial, skipped, error
    assert summary["noise_level"][:7] == ["4", "2", "0", "0", "2", "0", "0"]
    assert summary["PSNR oracle (reference)"][:3] == ["4", "2", "2"]
    oracle = [row[:2] for row in table_rows(html, "Degradation oracle (positive control)")]
    assert oracle == [["5", "1/2"], ["10", "1/2"]]
    markdown = (out / "summary.md").read_text()
    assert "- noise_level-frozen-step5: PSNR inf dB" in markdown
    assert "| noise_level | 4 | 0 | 0 | 0 | 0 | 2 |" in markdown


@pytest.mark.slow
def test_a_control_failure_is_in_the_summary_the_page_and_controls_csv(tmp_path: Path) -> None:
    """The real control family on a cheap numpy metric: laplacian_variance takes noise for detail,
    so its gaussian_noise case fails; the report shows that per metric and distortion."""
    xml = tmp_path / "controls.xml"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "banana_tests/families/control/test_control.py",
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    cmd += ["--metric=laplacian_variance", f"--junitxml={xml}", "--no-cache"]
    done = subprocess.run(cmd, cwd=PROJECT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    out = report(tmp_path / "r", xml)
    with (out / "controls.csv").open(newline="") as f:
        table = {(r["distortion"], r["outcome"]): r["message"] for r in csv.DictReader(f)}
    assert set(table) == {("gaussian_noise", "failed"), ("gaussian_blur", "passed"), ("jpeg", "passed")}
    assert re.fullmatch(r"normalised [\d.]+ ≥ [\d.]+", table["gaussian_noise", "failed"])
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "| laplacian_variance | pass | FAIL: normalised " in summary
    page = table_rows((out / "report.html").read_text(encoding="utf-8"), "Control degradations")
    assert page == [["laplacian_variance", "pass", f"FAIL: {table['gaussian_noise', 'failed']}", "pass"]]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "name"),
    [
        ("piq_tv", "piq_tv"),
        ("skimage_blur", "skimage_blur"),
        ("GradHead", "grad_head"),
        ("PyiqaNiqe", "pyiqa_niqe"),
    ],
    ids=["piq", "skimage", "weights-file", "pyiqa-niqe"],
)
def test_a_pypi_librarys_metric_wrapped_as_docs_wrap_md_says_runs_through_the_suite(
    tmp_path: Path, target: str, name: str
) -> None:
    """Each adapter of docs/wrap.md (piq, scikit-image, a class loading a weights file, pyiqa's
    NIQE), copied into an empty folder, run as a user would (`--pyargs banana_tests`, Δ cases at
    step 5): every seed image gets a verdict in the report."""
    env = dict(os.environ)
    if target == "PyiqaNiqe":  # offline, its file is put in pyiqa's cache, as docs/wrap.md says
        mirror = weights_mirror()
        if mirror is None:
            unavailable("no pyiqa weights mirror for NIQE")
        env["TORCH_HOME"] = str(tmp_path / "torch")
        (tmp_path / "torch" / "hub" / "pyiqa").mkdir(parents=True)
        shutil.copy(mirror / "niqe_modelparameters.mat", tmp_path / "torch" / "hub" / "pyiqa")
    page = (PROJECT / "docs" / "wrap.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in page.split("```python\n")[1:]]
    [code] = [b for b in blocks if re.search(rf"^(def|class) {target}\b", b, re.MULTILINE)]
    (tmp_path / "mymod.py").write_text(code, encoding="utf-8")
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "banana_tests", f"--metric=mymod:{target}"]
    cmd += ["--steps=5", "-k", "test_detects_degradation", "-q", "-p", "no:cacheprovider", "--junitxml=j.xml"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    table = rows(report(tmp_path / "r", tmp_path / "j.xml", "--allow-incomplete"))  # -k: a partial run
    assert {r["metric"] for r in table} == {name} and len(table) == 8
    assert {r["outcome"] for r in table} <= {"passed", "failed"}
