"""report.html and its figures as people see them: the run's facts only, the paper comparison
as a table, numbers to the paper's precision, colours that keep a sign, few files for many
steps, and, in headless Chromium at 1400 px, no horizontal scrolling and no broken image."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from banana_tests.cases import CaseKey
from banana_tests.cli import main
from banana_tests.reports.page.figure_style import INVALID, NO_FAILURE, UNRESOLVED
from banana_tests.reports.page.figures import (
    ORACLE_CHANGED,
    colour_limit,
    failure_counts,
    gap_colours,
    render_figures,
)
from banana_tests.reports.page.html import html_chunks
from banana_tests.reports.paper import compare, paper_cells
from banana_tests.verdicts.matrix import Cell, Matrix, Outcome
from tests.test_junit import case, junit

METRICS = ("brisque", "niqe", "piqe")
SEEDS = ("astronaut", "brick", "coffee", "rocket")
STEPS = range(2, 101)  # `--steps all` on 100 images per trajectory, reference step 1
# A tool's run property (Hypothesis writes one per test): a long unbreakable string.
TOOL_PROPERTY = ("hypothesis-statistics-banana_tests/families/control/test_control.py::x", "QUJD" * 400)


def delta(metric: int, seed: int, step: int) -> float:
    """Deterministic gaps that cross 0 at different steps per metric and seed."""
    return round((metric - 1) * 4.0 + (seed - 1.5) * 3.0 - step / 10 + 0.123456789, 9)


def many_steps_xml(path: Path) -> Path:
    cases = []
    for m, metric in enumerate(METRICS):
        for s, seed in enumerate(SEEDS):
            for step in STEPS:
                d = delta(m, s, step)
                child = "<failure message='missed' />" if d >= 0 else ""
                props = {"delta": repr(d), "score_reference": "30.0", "score_step": repr(30.0 + d)}
                props |= {"reference_step": "1", "runs": "2", "dataset": "/data/emulated"}
                cases.append(case(metric, seed, step, child, **props))
    text = junit(path, *cases).read_text()
    name, value = TOOL_PROPERTY
    tool = f'<properties><property name="{name}" value="{value}" /></properties>'
    path.write_text(re.sub(r"(<testsuite [^>]*>)", lambda m: m.group(1) + tool, text, count=1))
    return path


@pytest.fixture(scope="module")
def steps_all(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report of a `--steps all` run: 3 metrics × 4 seed images × 99 steps, compared with the paper."""
    root = tmp_path_factory.mktemp("steps-all")
    xml = many_steps_xml(root / "junit.xml")
    assert main(["report", str(xml), "--out", str(root / "out"), "--compare-paper"]) == 0
    return root / "out"


def section(html: str, heading: str) -> str:
    """The page from `<h2>heading</h2>` to the next h2."""
    start = html.index(f"<h2>{heading}</h2>")
    end = html.find("<h2>", start + 1)
    return html[start : end if end > 0 else None]


@pytest.mark.slow
def test_a_steps_all_report_draws_a_step_summary_and_the_papers_steps(steps_all: Path) -> None:
    names = sorted(p.name for p in steps_all.iterdir())
    assert len(names) <= 20, names
    figures = {n for n in names if n.endswith(".png")}
    assert figures == {"gaps_step5.png", "gaps_step10.png", "gaps_step20.png"} | {
        "steps_summary.png",
        "failure_counts.png",
    }
    assert len((steps_all / "matrix.csv").read_text().splitlines()) == 1 + 3 * 4 * 99


@pytest.mark.slow
def test_figure_steps_chooses_the_heatmaps(tmp_path: Path) -> None:
    xml = many_steps_xml(tmp_path / "junit.xml")
    assert main(["report", str(xml), "--out", str(tmp_path / "out"), "--figure-steps", "7,50"]) == 0
    heatmaps = sorted(p.name for p in (tmp_path / "out").glob("gaps_step*.png"))
    assert heatmaps == ["gaps_step50.png", "gaps_step7.png"]


def test_the_run_table_holds_the_runs_facts_only(steps_all: Path) -> None:
    html = (steps_all / "report.html").read_text()
    assert "hypothesis-statistics" not in html and TOOL_PROPERTY[1] not in html
    run = section(html, "Run")
    facts = dict(re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td></tr>", run))
    assert "<th>fact</th>" in run
    assert facts["data set"] == "/data/emulated"
    assert facts["variant"] == "replicate"
    assert facts["metrics"] == "brisque, niqe, piqe"
    assert facts["steps"] == "2–100 (99 steps)"
    assert facts["reference step"] == "1"


def test_every_case_shows_three_decimals_and_the_run_mean(steps_all: Path) -> None:
    html = (steps_all / "report.html").read_text()
    d = delta(0, 0, 2)
    row = re.search(r'<tr id="case-brisque-astronaut-step2"[^>]*>(.*?)</tr>', html)
    assert row is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    assert cells[:5] == ["brisque", "astronaut", "2", f"{d:+.3f}", "passed"]
    assert cells[11] == "mean"  # the run column, after the run range, its sd, PSNR, SSIM and scores
    assert f"brisque,astronaut,2,{d!r}," in (steps_all / "matrix.csv").read_text()  # every digit


def test_the_comparison_is_a_table_whose_differences_link_to_their_rows() -> None:
    paper = Matrix.of(paper_cells())
    run = Matrix.of(c for c in paper_cells() if c.key.metric == "brisque")
    key = CaseKey("brisque", "Dongpo", 5)
    run.add(Cell(key, Outcome.PASSED, -1.23456))
    html = "".join(html_chunks(run, [], {}, "t", comparisons=compare(run, paper)))
    part = section(html, "Compared with the paper (Figure 5)")
    assert "<pre>" not in part and "| metric |" not in part
    assert re.search(r"<td>brisque</td><td[^>]*>36</td><td[^>]*>35/36</td>", part)
    assert '<a href="#case-brisque-Dongpo-step5">brisque-Dongpo-step5</a>' in part
    assert (
        '<td class="short">passed</td><td class="num">-1.235</td><td>failed</td><td class="num">+5.2</td>'
        in part
    )
    assert '<tr id="case-brisque-Dongpo-step5" class="passed">' in html


@pytest.mark.parametrize("gap", [0.2, 0.0, -0.0])
def test_a_small_missed_gap_is_plainly_red(gap: float) -> None:
    """A failure (Δ ≥ 0, -0.0 too) takes the red side at full scale ±27, not near-white."""
    from matplotlib.colors import Normalize

    r, g, b, _ = gap_colours()(Normalize(-27, 27)(gap))
    assert r - b > 0.3 and r - g > 0.2


def test_a_small_detected_gap_is_plainly_blue() -> None:
    from matplotlib.colors import Normalize

    r, _, b, _ = gap_colours()(Normalize(-27, 27)(-0.2))
    assert b - r > 0.2


def test_the_colour_scale_clips_no_gap() -> None:
    cells = [
        Cell(CaseKey("brisque", "brick", 20), Outcome.FAILED, 16.8),
        Cell(CaseKey("piqe", "rocket", 20), Outcome.PASSED, -26.4),
    ]
    assert colour_limit(Matrix.of(cells)) >= 26.4


@pytest.mark.filterwarnings("error")
def test_a_matrix_without_cells_draws_no_figure(tmp_path: Path) -> None:
    assert render_figures(Matrix(), tmp_path) == []  # empty axes warned "identical low and high xlims"
    assert not list(tmp_path.iterdir())


def test_no_failure_is_neutral_in_failure_counts(tmp_path: Path) -> None:
    cells = [Cell(CaseKey("niqe", "alpha", s), Outcome.PASSED, -1.0) for s in (5, 10, 20)]
    cells += [Cell(CaseKey("piqe", "alpha", s), Outcome.FAILED, 1.0) for s in (5, 10, 20)]
    png = failure_counts(Matrix.of(cells), tmp_path / "counts")[0]
    pixels = np.asarray(Image.open(png).convert("RGB")).reshape(-1, 3)
    neutral = np.array([int(NO_FAILURE[i : i + 2], 16) for i in (1, 3, 5)])
    assert (pixels == neutral).all(axis=1).sum() > 2000  # the 0/3 cell, not a pale red
    salmon = (pixels[:, 0].astype(int) - pixels[:, 2] > 40) & (pixels[:, 1] > 200)
    assert salmon.sum() < 500  # only the colour bar's low end


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Run after the page's load: what the browser laid out, written into the page for --dump-dom.
PROBE = """<script>window.addEventListener("load", function () {
  var imgs = Array.from(document.images), out = document.createElement("pre");
  out.id = "probe";
  var loaded = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  out.textContent = JSON.stringify({width: window.innerWidth,
    scroll: document.documentElement.scrollWidth, images: imgs.length, loaded: loaded});
  document.body.appendChild(out);
});</script>"""


def chromium(page: Path, profile: Path, *args: str) -> str:
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    cmd += ["--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"]
    done = subprocess.run(
        [*cmd, *args, page.as_uri()], capture_output=True, text=True, timeout=120, check=False
    )
    return done.stdout


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH")
def test_the_page_fits_1400_px_and_every_image_loads(steps_all: Path, tmp_path: Path) -> None:
    probed = tmp_path / "probed.html"
    probed.write_text((steps_all / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    dom = chromium(probed, tmp_path / "profile", "--window-size=1400,900", "--dump-dom")
    found = re.search(r'<pre id="probe">([^<]*)</pre>', dom)
    assert found, "chromium ran no probe: " + dom[:300]
    seen = json.loads(found.group(1))
    assert seen["width"] == 1400
    assert seen["scroll"] <= seen["width"], f"horizontal overflow: {seen}"
    assert seen["images"] == 5 and seen["loaded"] == 5, seen
    shot = tmp_path / "report.png"
    chromium(
        steps_all / "report.html", tmp_path / "profile", "--window-size=1400,2400", f"--screenshot={shot}"
    )
    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)
    assert (np.abs(pixels[:, 0] - pixels[:, 2]) > 60).mean() > 0.01  # the figures' colours are on screen


def delta_case(
    metric: str, seed: str, step: int, run_deltas: tuple[float, ...], child: str = "", **extra: str
) -> str:
    """A Δ record as this version writes it: each run's normalised scores (reference 50), the
    run mean's Δ, and any `extra` figures (strict, psnr, ssim)."""
    mean = sum(run_deltas) / len(run_deltas)
    props = {
        "reference_step": "1",
        "delta": repr(mean),
        "score_reference": "50.0",
        "score_step": repr(50.0 + mean),
        "runs": str(len(run_deltas)),
        "run_norm_references": " ".join("50" for _ in run_deltas),
        "run_norm_steps": " ".join(f"{50 + d:g}" for d in run_deltas),
        **extra,
    }
    return case(metric, seed, step, child, variant=None, record="delta/2", **props)


UNRESOLVED_SKIP = "<skipped type='pytest.skip' message='unresolved: the runs disagree in sign' />"
INVALID_SKIP = "<skipped type='pytest.skip' message='not a valid trial: did not change' />"
MISSED = "<failure message='Failed: piqe did not detect' />"


@pytest.fixture(scope="module")
def strict_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A --banana-strict-runs run: piqe has one unresolved, one missed, one detected case; niqe
    one unresolved case; brisque one case whose step did not change (PSNR inf: not a valid trial)."""
    root = tmp_path_factory.mktemp("strict")
    changed = {"psnr": "30 31 32", "ssim": "0.8 0.8 0.8"}
    xml = junit(
        root / "j.xml",
        delta_case("piqe", "alpha", 5, (-1, 1, 2), UNRESOLVED_SKIP, strict="unresolved", **changed),
        delta_case("piqe", "alpha", 10, (2, 3, 4), MISSED, strict="missed", **changed),
        delta_case("piqe", "beta", 5, (-5, -4, -3), strict="detected", **changed),
        delta_case("niqe", "alpha", 5, (-2, 0.5, -1), UNRESOLVED_SKIP, strict="unresolved", **changed),
        delta_case("brisque", "beta", 10, (0.5, 0.5, 0.5), INVALID_SKIP, psnr="inf inf inf", ssim="1 1 1"),
    )
    assert main(["report", str(xml), "--out", str(root / "out")]) == 0
    return root / "out"


def rows_of(html: str, heading: str) -> list[list[str]]:
    """The body rows of the first table under `<h2>heading</h2>`, each cell's text."""
    part = section(html, heading)
    body = part[part.index("<tbody>") : part.index("</tbody>")]
    return [
        [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body)
    ]


@pytest.mark.slow
def test_unresolved_cells_are_counted_apart_never_as_passes(strict_report: Path) -> None:
    html = (strict_report / "report.html").read_text()
    summary = {row[0]: row[1:] for row in rows_of(html, "Summary per metric")}
    # cases, passed, failed, unresolved, not valid trial, skipped, error, worst Δ
    assert summary["piqe"] == ["3", "1", "1", "1", "0", "0", "0", "+3.000"]
    assert summary["niqe"] == ["1", "0", "0", "1", "0", "0", "0", ""]
    markdown = (strict_report / "summary.md").read_text()
    assert "| piqe | 3 | 1 | 0 | 0 | 1 | 0 | +3.000 |" in markdown
    assert "| niqe | 1 | 0 | 0 | 0 | 1 | 0 |  |" in markdown
    rows = list(csv.DictReader((strict_report / "matrix.csv").open()))
    assert [(r["metric"], r["seed_image"], r["step"], r["outcome"]) for r in rows] == [
        ("brisque", "beta", "10", "invalid"),
        ("niqe", "alpha", "5", "unresolved"),
        ("piqe", "alpha", "5", "unresolved"),
        ("piqe", "alpha", "10", "failed"),
        ("piqe", "beta", "5", "passed"),
    ]


def test_each_case_shows_its_run_range_and_spread(strict_report: Path) -> None:
    html = (strict_report / "report.html").read_text()
    row = re.search(r'<tr id="case-piqe-alpha-step5" class="unresolved">(.*?)</tr>', html)
    assert row is not None
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))]
    # metric, seed image, step, Δ, outcome, run Δ range, run Δ sd, PSNR, SSIM
    assert cells[:9] == [
        "piqe",
        "alpha",
        "5",
        "+0.667",
        "unresolved",
        "-1.000 … +2.000",
        "1.528",
        "31.00",
        "0.800",
    ]
    assert 'title="runs Δ -1.000, +1.000, +2.000; the range covers the median Δ with 75 %"' in row.group(1)
    assert 'title="runs: 30.00, 31.00, 32.00"' in row.group(1)


def test_a_step_that_did_not_change_is_not_a_valid_trial_with_its_psnr(strict_report: Path) -> None:
    html = (strict_report / "report.html").read_text()
    summary = {row[0]: row[1:] for row in rows_of(html, "Summary per metric")}
    assert summary["brisque"] == ["1", "0", "0", "0", "1", "0", "0", ""]  # not brisque's failure
    # the oracle's reference row, one cell per (seed image, step): beta at step 10 did not change
    assert summary["PSNR oracle (reference)"] == ["4", "3", "1", "0", "0", "0", "0", ""]
    assert rows_of(html, "Degradation oracle (positive control)") == [
        ["5", "2/2", "30.00 … 32.00", "0.800 … 0.800"],
        ["10", "1/2", "30.00 … inf", "0.800 … 1.000"],
    ]
    oracle = section(html, "Degradation oracle (positive control)")
    assert '<a href="#case-brisque-beta-step10">brisque-beta-step10</a></td><td>inf, inf, inf</td>' in oracle
    assert re.search(
        r'<tr id="case-brisque-beta-step10" class="invalid"><td>brisque</td>'
        r'.*?<td class="short">not a valid trial</td>',
        html,
    )
    markdown = (strict_report / "summary.md").read_text()
    assert "| brisque | 1 | 0 | 0 | 0 | 0 | 1 |  |" in markdown
    assert "| PSNR oracle (reference) | 4 | 1 | 0 | 0 | 0 | 0 |  |" in markdown
    assert "- brisque-beta-step10: PSNR inf, inf, inf dB" in markdown


def colour_share(png: Path, colour: str) -> float:
    pixels = np.asarray(Image.open(png).convert("RGB")).reshape(-1, 3)
    rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    return float((np.abs(pixels.astype(int) - rgb).max(axis=1) <= 2).mean())


def test_the_heatmap_draws_unresolved_and_invalid_cells_in_their_own_colours(strict_report: Path) -> None:
    """At step 5 two cells are unresolved (yellow) and none invalid; at step 10 brisque's is not
    a valid trial (blue-grey); the oracle's column is drawn beside the metrics at both."""
    step5, step10 = strict_report / "gaps_step5.png", strict_report / "gaps_step10.png"
    assert colour_share(step5, UNRESOLVED) > 0.02 and colour_share(step5, INVALID) == 0
    assert colour_share(step10, INVALID) > 0.01 and colour_share(step10, UNRESOLVED) == 0
    assert colour_share(step5, ORACLE_CHANGED) > 0.02


def test_a_record_with_psnr_only_gives_the_oracle_row_without_ssim(tmp_path: Path) -> None:
    """A hand-made or partial record may carry PSNR without SSIM: the oracle still reads it."""
    xml = junit(tmp_path / "j.xml", delta_case("piqe", "alpha", 5, (-1, -2), psnr="30 50"))
    assert main(["report", str(xml), "--out", str(tmp_path / "out")]) == 0
    html = (tmp_path / "out" / "report.html").read_text()
    assert rows_of(html, "Degradation oracle (positive control)") == [
        ["5", "1/1", "30.00 … 50.00", "nan … nan"]
    ]


def report_process(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`banana-tests report` in a process of its own, as a user runs it."""
    import sys

    cmd = [sys.executable, "-m", "banana_tests.cli", "report", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


# Rules that let a browser cut a word or number where it likes (`hubble_deep_f|ield`, `82.0|5`).
TOKEN_BREAKING = re.compile(
    r"overflow-wrap:\s*(anywhere|break-word)|word-break:\s*break-(all|word)|hyphens:\s*auto"
)


@pytest.mark.slow
def test_the_page_never_breaks_a_token_a_wide_table_scrolls_instead(tmp_path: Path) -> None:
    """Long seed image and metric names, and numbers, in narrow columns: no rule of the page may
    break inside them, and every table sits in a box of its own that scrolls sideways."""
    seed, metric = "hubble_deep_field_" + "x" * 60, "a_metric_with_a_long_name_" + "y" * 40
    cases = [case(metric, seed, step, delta="82.05", **{"score_reference": "82.05"}) for step in (5, 10)]
    done = report_process(junit(tmp_path / "j.xml", *cases), "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "out" / "report.html").read_text("utf-8")
    style = page[page.index("<style>") : page.index("</style>")]
    assert not TOKEN_BREAKING.search(style), style
    assert page.count("<table") == page.count('<div class="scroll"><table') > 0
    assert "div.scroll { overflow-x: auto" in style
    assert seed in page and metric in page and "82.050" in page


@pytest.mark.slow
def test_a_search_only_report_has_no_empty_table_or_section(tmp_path: Path) -> None:
    """A run of the worst-escape search alone has no Δ case: neither the page nor summary.md
    shows the matrix's tables with headers and no rows, nor a Figures heading without figures."""
    props = {"banana_record": "search/2", "examples": "17", "escaped": "true", "search_seconds": "5.1",
             "norm_reference": "96.5", "norm_step": "97.0", "psnr": "20.8", "ssim": "0.33",
             "degradation": "coffee[45:229, 44:357] (313x184) after steps=8"}  # fmt: skip
    body = "".join(f'<property name="{k}" value="{v}" />' for k, v in {**props, "metric": "piqe"}.items())
    search = (
        '<testcase classname="banana_tests.test_search" name="test_no_worst_escape[piqe]">'
        f"<properties>{body}</properties><failure message='escape' /></testcase>"
    )
    done = report_process(junit(tmp_path / "j.xml", search), "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "out" / "report.html").read_text("utf-8")
    assert "<h2>Worst escape</h2>" in page and "<td>piqe</td>" in page
    for heading in ("Summary per metric", "Every case", "Figures"):
        assert f"<h2>{heading}</h2>" not in page
    assert "<tbody></tbody>" not in page
    summary = (tmp_path / "out" / "summary.md").read_text("utf-8").splitlines()
    assert "| piqe | error | escape | 17 |" in "\n".join(summary)  # its failure is no AssertionError
    for i, line in enumerate(summary):  # every Markdown table has a row below its header
        if line.startswith("|---"):
            assert i + 1 < len(summary) and summary[i + 1].startswith("|"), summary[i - 1]


def _invariance_case(metric: str, check: str, change: str, tolerance: str, child: str = "") -> str:
    props = {"banana_record": "invariance/2", "metric": metric, "invariance": check}
    props |= {"change": change, "tolerance": tolerance}
    body = "".join(f'<property name="{k}" value="{v}" />' for k, v in props.items())
    name = f"test_score_is_invariant[{metric}-{check}]"
    head = f'<testcase classname="banana_tests.test_invariance" name="{name}">'
    return f"{head}<properties>{body}</properties>{child}</testcase>"


def test_the_page_shows_the_invariance_results_summary_md_has(tmp_path: Path) -> None:
    """Invariance results were in summary.md only: the page has the same table, its cells the
    change against the tolerance."""
    failure = "<failure message='AssertionError: moved' />"
    xml = junit(
        tmp_path / "j.xml",
        _invariance_case("piqe", "shift", "0.17", "0.3"),
        _invariance_case("piqe", "resize", "4.1", "3.9", failure),
    )
    assert main(["report", str(xml), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "report.html").read_text()
    summary = (tmp_path / "out" / "summary.md").read_text()
    section = page.split("<h2>Invariance</h2>", 1)[1].split("<h2>", 1)[0]
    for cell in ("pass 0.17 ≤ 0.3", "FAIL 4.1 &gt; 3.9"):
        assert cell in section
    assert "pass 0.17 ≤ 0.3" in summary and "FAIL 4.1 > 3.9" in summary
