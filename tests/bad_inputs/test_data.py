"""Bad data, one row per bad input (issue 12): exactly which cases error, that each error names the
file and the line, and that every other case keeps its verdict.

Most rows run at the reader + planner level (`load`, `plan_cases`, `with_problems`), on a set of
seed images a and b, runs 0 and 1, steps 1, 5 and 10, whose metadata.jsonl lines are, in order:
a run 0 (lines 1-3), a run 1 (4-6), b run 0 (7-9), b run 1 (10-12). Cases: steps 5 and 10 against
step 1, so `a-5` is (a, step 5). A few rows run the suite itself and read its exit code and JUnit XML.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sqlite3
import stat
import subprocess
import sys
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from banana_tests.trajectories.case_plans import CasePlan, plan_cases, with_problems
from banana_tests.trajectories.images import DEFAULT_MAX_PIXELS, max_file_bytes
from banana_tests.trajectories.records import DataError
from banana_tests.trajectories.selection import Selection
from banana_tests.trajectories.sources import SourceOptions, load
from tests.conftest import suite_folder, write_set

SEEDS, RUNS, STEPS = ("a", "b"), (0, 1), (1, 5, 10)
TESTED = (5, 10)
Lines = list[bytes]
Spoil = Callable[[Lines, Path], Lines]


def base_lines() -> Lines:
    return [
        json.dumps(
            {
                "file_name": f"{s}/run{r}/step{i:03d}.png",
                "seed_image": s,
                "variant": "replicate",
                "run": r,
                "step": i,
            }
        ).encode()
        + b"\n"
        for s in SEEDS
        for r in RUNS
        for i in STEPS
    ]


def replace(n: int, new: bytes) -> Spoil:
    return lambda lines, _: [new if i == n else line for i, line in enumerate(lines, start=1)]


def edit(n: int, old: bytes, new: bytes) -> Spoil:
    def spoil(lines: Lines, _: Path) -> Lines:
        assert old in lines[n - 1]
        return replace(n, lines[n - 1].replace(old, new))(lines, _)

    return spoil


def field(n: int, key: str, value: Any = None, drop: bool = False) -> Spoil:
    """Line n with `key` set to `value` (or dropped), written as JSON."""

    def spoil(lines: Lines, _: Path) -> Lines:
        row = json.loads(lines[n - 1])
        if drop:
            del row[key]
        else:
            row[key] = value
        return replace(n, json.dumps(row).encode() + b"\n")(lines, _)

    return spoil


def append(raw: bytes) -> Spoil:
    return lambda lines, _: [*lines, raw]


def torn(at: bytes) -> Spoil:
    """The last line cut just before `at` (or just after it, when it ends with a digit), with no newline."""

    def spoil(lines: Lines, _: Path) -> Lines:
        last = lines[-1]
        cut = last.index(at) + (len(at) if at[-1:].isdigit() else 0)
        return [*lines[:-1], last[:cut]]

    return spoil


def symlink_out(lines: Lines, root: Path) -> Lines:
    (root.parent / "outside.png").write_bytes(b"")
    (root / "a" / "run1").mkdir(parents=True, exist_ok=True)
    (root / "a" / "run1" / "link.png").symlink_to(root.parent / "outside.png")
    return field(5, "file_name", "a/run1/link.png")(lines, root)


def empty_beside_generate_json(lines: Lines, root: Path) -> Lines:
    """What a first `banana-tests generate` that failed leaves."""
    (root / "generate.json").write_text("{}")
    return []


def twice(n: int) -> Spoil:
    return lambda lines, _: [*lines, lines[n - 1]]


@dataclass(frozen=True)
class Row:
    spoil: Spoil
    errors: frozenset[str]  # the cases that error, as "<seed>-<step>"
    says: tuple[str, ...]  # what each of their errors (or the warning) says
    line: int | None  # the metadata.jsonl line each error (or the warning) names
    warns: bool = False


def row(spoil: Spoil, errors: str, *says: str, line: int | None = 5, warns: bool = False) -> Row:
    return Row(spoil, frozenset(errors.split()), says, line, warns)


MISSING_A5 = "a run 1 has no step 5 (the data set holds steps [1, 10] of that run)"
ROWS: dict[str, Row] = {
    # whole-run aborts before (item 8)
    "null line in place of a record": row(replace(5, b"null\n"), "a-5", MISSING_A5, "got null"),
    "null line added": row(
        append(b"null\n"), "", "a line must be a JSON object, got null", line=13, warns=True
    ),
    "number line added": row(append(b"5\n"), "", "a line must be a JSON object, got 5", line=13, warns=True),
    "array line added": row(
        append(b"[1, 2]\n"), "", "a line must be a JSON object, got [1, 2]", line=13, warns=True
    ),
    "non-UTF-8 byte in seed_image": row(
        edit(5, b'"a"', b'"a\xff"'), "a-5", MISSING_A5, "not UTF-8 text: byte 0xff"
    ),
    "non-UTF-8 byte in variant": row(
        edit(5, b'"replicate"', b'"replic\xe9te"'), "a-5", "not UTF-8 text: byte 0xe9"
    ),
    "NUL in file_name": row(field(5, "file_name", "a/run1/step\0.png"), "a-5", "contains a NUL character"),
    # errors spread too far before (item 9)
    "malformed JSON line": row(edit(5, b', "run"', b',, "run"'), "a-5", MISSING_A5, "not JSON: Expecting"),
    "malformed line showing nothing, in place of a record": row(
        replace(5, b"{oops\n"), "a-5", MISSING_A5, "not JSON"
    ),
    "malformed line showing nothing, added": row(append(b"{oops\n"), "", "not JSON", line=13, warns=True),
    "torn last line": row(
        torn(b', "step"'), "b-10", "b run 1 has no step 10", "was its write cut short?", line=12
    ),
    "torn last line, mid-number": row(
        torn(b'"step": 1'), "b-10", "b run 1 has no step 10", "not JSON", line=12
    ),
    "UTF-8 BOM on line 1": row(edit(1, b"{", b"\xef\xbb\xbf{"), "", line=None),
    "UTF-8 BOM on line 5": row(edit(5, b"{", b"\xef\xbb\xbf{"), "a-5", "not JSON: Unexpected UTF-8 BOM"),
    "file_name ../ escapes the root": row(
        field(5, "file_name", "../outside.png"), "a-5", "escapes the data set root"
    ),
    "absolute file_name": row(field(5, "file_name", "/etc/passwd"), "a-5", "escapes the data set root"),
    "symlink out of the root": row(symlink_out, "a-5", "'a/run1/link.png' escapes the data set root"),
    "duplicate record": row(twice(5), "a-5", "duplicate records for a run 1 step 5", "metadata.jsonl:13"),
    "duplicate reference record": row(twice(4), "a-5 a-10", "duplicate records for a run 1 step 1", line=4),
    "missing file_name": row(field(5, "file_name", drop=True), "a-5", "missing field(s) file_name"),
    "missing variant": row(field(5, "variant", drop=True), "a-5", MISSING_A5, "missing field(s) variant"),
    "missing step": row(field(5, "step", drop=True), "a-5", MISSING_A5, "missing field(s) step"),
    "missing seed_image": row(
        field(5, "seed_image", drop=True), "a-5", MISSING_A5, "missing field(s) seed_image"
    ),
    "repeated key": row(
        edit(5, b'"step": 5', b'"step": 5, "step": 6'), "a-5", "'step' appear more than once"
    ),
    # silent coercion before (item 10)
    "step 5.7": row(field(5, "step", 5.7), "a-5", MISSING_A5, "step must be a JSON integer, got 5.7"),
    "run 0.9": row(
        field(2, "run", 0.9), "a-5", "a run 0 has no step 5", "run must be a JSON integer, got 0.9", line=2
    ),
    "step true": row(field(5, "step", True), "a-5", MISSING_A5, "step must be a JSON integer, got true"),
    "step -1": row(field(5, "step", -1), "a-5", MISSING_A5, "step must be between 0 and 100,000, got -1"),
    "step 1e30": row(field(5, "step", 1e30), "a-5", MISSING_A5, "step must be a JSON integer, got 1e+30"),
    "step 10**12": row(field(5, "step", 10**12), "a-5", MISSING_A5, "step must be between 0 and 100,000"),
    'step "5"': row(field(5, "step", "5"), "a-5", MISSING_A5, 'step must be a JSON integer, got "5"'),
    "run null": row(field(5, "run", None), "a-5", "run must be a JSON integer, got null"),
    "seed_image null": row(
        field(5, "seed_image", None), "a-5", MISSING_A5, "seed_image must be a non-empty string, got null"
    ),
    'seed_image ""': row(
        field(5, "seed_image", ""), "a-5", MISSING_A5, 'seed_image must be a non-empty string, got ""'
    ),
    "seed_image 7": row(
        field(5, "seed_image", 7), "a-5", MISSING_A5, "seed_image must be a non-empty string, got 7"
    ),
    "variant null": row(
        field(5, "variant", None), "a-5", MISSING_A5, "variant must be a non-empty string, got null"
    ),
    "file_name 5": row(field(5, "file_name", 5), "a-5", "file_name must be a non-empty string, got 5"),
    'sha256 "xyz"': row(field(5, "sha256", "xyz"), "a-5", 'sha256 must be 64 hexadecimal digits, got "xyz"'),
    'for_iqa "maybe"': row(field(5, "for_iqa", "maybe"), "a-5", 'for_iqa must be true or false, got "maybe"'),
    # bad records the selection does not want touch nothing
    "bad record of another variant": row(
        append(b'{"file_name": "m.png", "seed_image": "a", "variant": "mirror", "run": 0, "step": 5.7}\n'),
        "",
        line=None,
    ),
    "bad record at a step not tested": row(
        append(
            b'{"file_name": "../x.png", "seed_image": "a", "variant": "replicate", "run": 0, "step": 7}\n'
        ),
        "",
        line=None,
    ),
}


def spoilt(tmp_path: Path, spoil: Spoil) -> Path:
    root = tmp_path / "set"
    root.mkdir(parents=True, exist_ok=True)
    (root / "metadata.jsonl").write_bytes(b"".join(spoil(base_lines(), root)))
    return root


def planned(root: Path, selection: Selection, per_run: bool = False) -> tuple[list[CasePlan], list[str]]:
    """The cases of `root` after problems, and the warnings given."""
    loaded = load(SourceOptions(str(root)), selection)
    plans = plan_cases(loaded.records, ["m"], selection.steps, 1, per_run, held=loaded.held)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        out = with_problems(plans, loaded.problems, selection, ["m"])
    return out, [str(w.message) for w in warned]


def name(plan: CasePlan) -> str:
    run = "" if plan.key.run is None else f"-run{plan.key.run}"
    return f"{plan.key.seed_image}{run}-{plan.key.step}"


def pairs(plan: CasePlan) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    return [(a.path.parts[-3:], b.path.parts[-3:]) for a, b in plan.pairs]


@pytest.mark.parametrize("case", ROWS.values(), ids=list(ROWS))
def test_a_bad_input_errors_exactly_its_cases_and_names_its_line(tmp_path: Path, case: Row) -> None:
    clean = {
        name(p): p
        for p in planned(spoilt(tmp_path / "clean", lambda lines, _: lines), Selection(steps=TESTED))[0]
    }
    root = spoilt(tmp_path, case.spoil)
    plans, warned = planned(root, Selection(steps=TESTED))
    assert {name(p) for p in plans if p.error} == case.errors
    named = f"{root / 'metadata.jsonl'}:{case.line}"
    for plan in plans:
        if plan.error:
            assert all(s in plan.error for s in case.says), plan.error
            assert named in plan.error
        else:  # every other case keeps its verdict: the same images, paired the same way
            assert pairs(plan) == pairs(clean[name(plan)])
    assert set(map(name, plans)) == set(clean)
    if case.warns:
        assert len(warned) == 1 and named + ":" in warned[0] and all(s in warned[0] for s in case.says)
    else:
        assert warned == []


def test_a_known_bad_record_errors_only_its_run_under_per_run_cases(tmp_path: Path) -> None:
    root = spoilt(tmp_path, field(5, "file_name", "../outside.png"))
    plans, _ = planned(root, Selection(steps=TESTED), per_run=True)
    assert {name(p) for p in plans if p.error} == {"a-run1-5"}


def test_a_known_bad_record_of_a_run_with_no_other_record_gets_cases_of_its_own(tmp_path: Path) -> None:
    spoil = append(
        b'{"file_name": "../x.png", "seed_image": "a", "variant": "replicate", "run": 7, "step": 5}\n'
    )
    plans, _ = planned(spoilt(tmp_path, spoil), Selection(steps=TESTED), per_run=True)
    assert {name(p) for p in plans if p.error} == {"a-run7-5"}
    plans, _ = planned(spoilt(tmp_path, spoil), Selection(steps=TESTED))
    assert {name(p) for p in plans if p.error} == {"a-5"}  # the run mean would have used it


def test_a_run_whose_every_record_is_bad_is_still_one_of_the_first_runs(tmp_path: Path) -> None:
    """--runs 1 with a's run 0 unusable: a's cases say why, instead of quietly taking run 1."""

    def spoil(lines: Lines, _: Path) -> Lines:
        return [line.replace(b'"a/run0', b'"../a/run0') for line in lines]

    plans, _ = planned(spoilt(tmp_path, spoil), Selection(steps=TESTED, runs=1))
    assert {name(p) for p in plans if p.error} == {"a-5", "a-10"}
    assert {r.run for p in plans for r in p.records} == {0}


@pytest.mark.parametrize("temperature, errors", [(0.4, {"a-5"}), (0.8, set())])
def test_where_selects_bad_records_by_their_fields(
    tmp_path: Path, temperature: float, errors: set[str]
) -> None:
    def spoil(lines: Lines, _: Path) -> Lines:
        extra = b', "temperature": %s}' % str(temperature).encode()
        bad = lines[4].replace(b'"a/run1', b'"../a/run1').replace(b"}", extra)
        return [line.replace(b"}", b', "temperature": 0.4}') for line in lines] + [bad]

    plans, warned = planned(spoilt(tmp_path, spoil), Selection(steps=TESTED, where={"temperature": "0.4"}))
    assert {name(p) for p in plans if p.error} == errors and warned == []


# A file that holds no usable record at all is one usage error naming it (exit 4).
FILE_LEVEL: dict[str, tuple[Spoil, str]] = {
    "empty": (lambda lines, _: [], "no usable records (no lines)"),
    "blank lines only": (lambda lines, _: [b"\n", b"  \t\r\n", b"\n"], "no usable records (no lines)"),
    "no line usable": (
        lambda lines, _: [b"null\n", b"{oops\n"],
        ":1: a line must be a JSON object, got null",
    ),
    "empty, beside a generate.json": (empty_beside_generate_json, "no usable records"),
}


@pytest.mark.parametrize("spoil, says", FILE_LEVEL.values(), ids=list(FILE_LEVEL))
def test_a_wholly_unusable_file_is_one_error_naming_it(tmp_path: Path, spoil: Spoil, says: str) -> None:
    root = spoilt(tmp_path, spoil)
    with pytest.raises(DataError) as info:
        load(SourceOptions(str(root)), Selection(steps=TESTED))
    assert str(info.value).startswith(f"{root / 'metadata.jsonl'}: no usable records")
    assert says in str(info.value)


def test_a_missing_step_names_the_steps_of_its_own_run(tmp_path: Path) -> None:
    root = spoilt(tmp_path, lambda lines, _: [line for i, line in enumerate(lines, start=1) if i != 5])
    plans, _ = planned(root, Selection(steps=TESTED))
    assert [p.error for p in plans if p.error] == [MISSING_A5]


def test_a_step_not_in_the_set_names_the_steps_held_before_selection(tmp_path: Path) -> None:
    plans, _ = planned(spoilt(tmp_path, lambda lines, _: lines), Selection(steps=(3,)))
    assert [p.error for p in plans if p.key.seed_image == "a"] == [
        "a run 0 has no step 3 (the data set holds steps [1, 5, 10] of that run); "
        "a run 1 has no step 3 (the data set holds steps [1, 5, 10] of that run)"
    ]


# Typed columns (CSV through `datasets`): a cell of digits is an integer, 5.7 or True is not.
CSV_CELLS = {  # row 5's cell in a column: what a-5's error says ("" = no case errors)
    "step digits": ("step", "5", ""),
    "step 5.7": ("step", "5.7", "step must be an integer, got 5.7"),  # a float column: 1.0 and 10.0 pass
    "step True": ("step", "True", 'step must be an integer, got "True"'),
    "step empty": ("step", "", "step must be an integer, got"),
    "seed_image empty": ("seed_image", "", "seed_image must be a non-empty string, got null"),
    "file_name empty, among the first rows": ("file_name", "", "image column holds NoneType"),
}


@pytest.mark.parametrize("column, cell, says", CSV_CELLS.values(), ids=list(CSV_CELLS))
def test_a_csv_cell(tmp_path: Path, column: str, cell: str, says: str) -> None:
    pytest.importorskip("datasets")
    columns = ["file_name", "seed_image", "run", "step"]
    rows = [json.loads(line) for line in base_lines()]
    rows[4][column] = cell
    if column == "file_name":  # the cell at the top, where the loader samples paths to find keys
        rows.insert(0, rows.pop(4))
    table = tmp_path / "set.csv"
    table.write_text(
        ",".join(columns) + "\n" + "".join(",".join(str(r[c]) for c in columns) + "\n" for r in rows)
    )
    plans, _ = planned(table, Selection(steps=TESTED))
    errors = {name(p): p.error for p in plans if p.error}
    if not says:
        assert errors == {}
        return
    assert list(errors) == ["a-5"]
    row = 1 if column == "file_name" else 5
    assert says in errors["a-5"] and f"set.csv row {row}" in errors["a-5"]


def test_a_bad_row_at_the_reference_step_is_not_a_step_its_run_holds(tmp_path: Path) -> None:
    """A CSV row of a run 1 step 1 whose sha256 is no digest: the cases of that run lack step 1,
    and say the run holds steps 5 and 10. It said "has no step 1 (the data set holds steps
    [1, 5, 10] of that run)": a row's key was counted before its record was found usable."""
    pytest.importorskip("datasets")
    columns = ["file_name", "seed_image", "run", "step", "sha256"]
    rows = [{**json.loads(line), "sha256": "0" * 64} for line in base_lines()]
    rows[3]["sha256"] = "xyz"  # a run 1 step 1
    table = tmp_path / "set.csv"
    table.write_text(
        ",".join(columns) + "\n" + "".join(",".join(str(r[c]) for c in columns) + "\n" for r in rows)
    )
    plans, _ = planned(table, Selection(steps=TESTED))
    errors = {name(p): p.error or "" for p in plans if p.error}
    assert set(errors) == {"a-5", "a-10"}
    for error in errors.values():
        assert error.startswith("a run 1 has no step 1 (the data set holds steps [5, 10] of that run); ")
        assert f"{table} row 4 (a/run1/step001.png): sha256 must be 64 hexadecimal digits" in error


# Foreign layouts (no `variant` field, read row by row from their files): a bad line or row is an
# error naming it on the cases it could touch, here a-5, whose record it held; it used to stop the read.
def foreign(kind: str, bad: str) -> Callable[[Path], Path]:
    def write(tmp_path: Path) -> Path:
        lines = [json.loads(line) for line in base_lines()]
        rows: list[Any] = [{k: v for k, v in r.items() if k != "variant"} for r in lines]
        target = tmp_path / "set"
        target.mkdir()
        if kind == "metadata.jsonl":
            text = [json.dumps(r) for r in rows]
            text[4] = bad
            (target / kind).write_text("\n".join(text) + "\n")
            return target
        if kind == "set.csv":
            cells = [",".join(str(v) for v in r.values()) for r in rows]
            cells[4] = bad
            (target / kind).write_text(",".join(rows[0]) + "\n" + "\n".join(cells) + "\n")
        else:
            rows[4] = json.loads(bad)
            (target / kind).write_text(json.dumps(rows))
        return target / kind

    return write


FOREIGN = {  # writes the set, what a-5's error says
    "torn line of a metadata.jsonl without variant": (
        foreign("metadata.jsonl", '{"file_name": "a/run1/step005.png", "seed_image": "a", "run": 1, "st'),
        "metadata.jsonl:5: not JSON",
    ),
    "CSV row with more cells than the header": (
        foreign("set.csv", "a/run1/step005.png,a,1,5,extra"),
        "set.csv row 5: 5 cells for the 4 columns of the header",
    ),
    "JSON array item that is not an object": (
        foreign("set.json", "5"),
        "set.json row 5: a row must be a JSON object, got int",
    ),
}


@pytest.mark.parametrize("write, says", FOREIGN.values(), ids=list(FOREIGN))
def test_a_bad_row_of_a_foreign_layout(tmp_path: Path, write: Callable[[Path], Path], says: str) -> None:
    plans, _ = planned(write(tmp_path), Selection(steps=TESTED))
    errors = {name(p): p.error for p in plans if p.error}
    assert list(errors) == ["a-5"]
    assert MISSING_A5 in errors["a-5"] and says in errors["a-5"]


# End to end: the suite itself, its exit code and the outcome of every case in its JUnit XML.
E2E: dict[str, tuple[Spoil, int, set[str], str]] = {  # spoil, exit code, error cases, what the output says
    "null line in place of a record": (replace(5, b"null\n"), 1, {"a-5"}, "metadata.jsonl:5: a line must be"),
    "non-UTF-8 byte": (edit(5, b'"a"', b'"a\xff"'), 1, {"a-5"}, "metadata.jsonl:5: not UTF-8 text"),
    "torn last line": (torn(b', "step"'), 1, {"b-10"}, "metadata.jsonl:12: not JSON"),
    "line naming nothing, added": (append(b"{oops\n"), 1, set(), "metadata.jsonl:13: not JSON"),
    "empty metadata.jsonl beside a generate.json": (
        empty_beside_generate_json,
        4,
        set(),
        "metadata.jsonl: no usable records",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("spoil, code, errors, says", E2E.values(), ids=list(E2E))
def test_the_suite_on_a_bad_input(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    spoil: Spoil,
    code: int,
    errors: set[str],
    says: str,
) -> None:
    suite_folder(pytester, monkeypatch, seeds=SEEDS, runs=RUNS, steps=STEPS)
    meta = pytester.path / "data" / "metadata.jsonl"
    meta.write_bytes(b"".join(spoil(meta.read_bytes().splitlines(keepends=True), meta.parent)))
    args = ["--dataset=data", "--metric=laplacian_variance", "--steps=5,10", "--no-cache", "--junitxml=j.xml"]
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == code, output
    assert says in output and "Traceback" not in output
    if code == 4:
        return
    outcomes = {}
    for tc in ET.parse(pytester.path / "j.xml").iter("testcase"):
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        kid = next((c.tag for c in tc if c.tag in ("failure", "error", "skipped")), "passed")
        outcomes[f"{props['seed_image']}-{props['step']}"] = kid
    assert set(outcomes) == {f"{s}-{i}" for s in SEEDS for i in TESTED}
    assert {k for k, v in outcomes.items() if v == "error"} == errors
    # laplacian variance rises with the noise, so it misses every degradation: each verdict a failure
    assert all(v == "failure" for k, v in outcomes.items() if k not in errors)


# A data-set entry that is no regular file, or too large to be an image (issue 50): it used to be
# read whole, whatever it was. A FIFO hung every command, /dev/zero grew memory by gigabytes a
# second, a 40 GB sparse file ended in MemoryError. Now each is one DataError naming its record
# (a run 1 step 5: line 5) on its cases only, in the suite (serial and under xdist), `plan` and
# `score`. A regression must not hang or swamp CI: every process has a time and memory limit.
ENTRY_LIMIT_S = 180
ENTRY_MEMORY = 4 * 2**30  # bytes of address space; the suite's processes need well under 2 GiB


def fifo(path: Path) -> None:
    os.mkfifo(path)


def zero_device(path: Path) -> None:
    """/dev/zero's node (char 1:5) inside the set: a symlink to it would escape the root."""
    try:
        os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD (root)")


def sparse_over_limit(path: Path) -> None:
    """One byte over the default limit, without writing it (a regression reads ~200 MB, not 40 GB)."""
    with path.open("wb") as handle:
        handle.truncate(max_file_bytes(DEFAULT_MAX_PIXELS) + 1)


ENTRIES: dict[str, tuple[Callable[[Path], None], str]] = {
    "FIFO": (fifo, "cannot read image: not a regular file but a FIFO (named pipe)"),
    "character device (/dev/zero)": (
        zero_device,
        "cannot read image: not a regular file but a character device",
    ),
    "sparse file over the size limit": (
        sparse_over_limit,
        f"cannot read image: {max_file_bytes(DEFAULT_MAX_PIXELS) + 1:,} bytes, over the "
        f"{max_file_bytes(DEFAULT_MAX_PIXELS):,}-byte limit (3 bytes a pixel of --max-pixels, plus 16 MiB)",
    ),
}
COMMANDS = ("suite", "suite -n 2", "plan", "score")


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ENTRY_MEMORY, ENTRY_MEMORY))


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("make, says", ENTRIES.values(), ids=list(ENTRIES))
def test_an_entry_that_is_no_regular_image_file_is_one_error_on_its_cases(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[Path], None],
    says: str,
    command: str,
) -> None:
    suite_folder(pytester, monkeypatch, seeds=SEEDS, runs=RUNS, steps=STEPS)
    entry = pytester.path / "data" / "a" / "run1" / "step005.png"
    entry.unlink()
    make(entry)
    line = f"data/metadata.jsonl:5 ({entry}): {says}"
    options = ["--dataset=data", "--metric=laplacian_variance", "--steps=5,10"]
    if command.startswith("suite"):
        args = [*options, "--no-cache", "--junitxml=j.xml", "-p", "no:cacheprovider", *command.split()[1:]]
        run = [sys.executable, "-m", "pytest", *args]
    else:
        extra = ["--cache-dir=cache"] if command == "score" else []
        run = [sys.executable, "-m", "banana_tests.cli", command, *options, *extra]
    done = subprocess.run(
        run, cwd=pytester.path, capture_output=True, text=True, timeout=ENTRY_LIMIT_S, preexec_fn=limited
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    if command == "plan":  # one line, and the other 11 images counted
        assert [row for row in done.stderr.splitlines() if str(entry) in row] == [
            f"banana-tests plan: DataError: {line}"
        ]
        assert re.search(r"^laplacian_variance +11 ", done.stdout, re.M), done.stdout
        return
    if command == "score":  # one line, and the other 11 images scored into a sound cache
        assert [row for row in done.stdout.splitlines() if str(entry) in row] == [
            f"laplacian_variance: 12 images, 0 from the cache, 11 scored; {line}"
        ]
        with sqlite3.connect(pytester.path / "cache" / "scores.sqlite") as db:
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            metric = "SELECT COUNT(*) FROM scores WHERE metric NOT LIKE 'oracle%'"  # keyed by identity
            assert db.execute(metric).fetchone() == (11,)
        return
    assert line in output, output
    outcomes = {}
    for tc in ET.parse(pytester.path / "j.xml").iter("testcase"):
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        kid = next((c for c in tc if c.tag in ("failure", "error", "skipped")), None)
        outcomes[f"{props['seed_image']}-{props['step']}"] = "passed" if kid is None else kid.tag
        if kid is not None and kid.tag == "error":
            assert line in (kid.get("message") or "") + (kid.text or "")
    assert set(outcomes) == {f"{s}-{i}" for s in SEEDS for i in TESTED}  # every planned case
    assert {k for k, v in outcomes.items() if v == "error"} == {"a-5"}
    # laplacian variance rises with the noise: every other verdict is the failure it always is
    assert all(v == "failure" for k, v in outcomes.items() if k != "a-5")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["suite", "plan"])
def test_a_metadata_file_that_is_a_fifo_is_one_error_naming_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """Not a regular file, so never opened (it hung the run); one usage error naming it."""
    suite_folder(pytester, monkeypatch, seeds=SEEDS, runs=RUNS, steps=STEPS)
    meta = pytester.path / "data" / "metadata.jsonl"
    meta.unlink()
    os.mkfifo(meta)
    options = [f"--dataset={pytester.path / 'data'}", "--metric=laplacian_variance", "--steps=5,10"]
    if command == "suite":
        run = [sys.executable, "-m", "pytest", *options, "--no-cache", "-p", "no:cacheprovider"]
    else:
        run = [sys.executable, "-m", "banana_tests.cli", "plan", *options]
    done = subprocess.run(run, cwd=pytester.path, capture_output=True, text=True, timeout=ENTRY_LIMIT_S)
    output = done.stdout + done.stderr
    assert done.returncode == (4 if command == "suite" else 2), output
    assert f"{meta}: cannot read it: not a regular file but a FIFO (named pipe)" in output
    assert "Traceback" not in output


@pytest.mark.slow
def test_a_foreign_imagefolder_given_by_a_relative_path_is_read(tmp_path: Path) -> None:
    """Its files were found under the path as given and made relative to its real path: a
    ValueError traceback."""
    lines = [{k: v for k, v in json.loads(line).items() if k != "variant"} for line in base_lines()]
    root = write_set(tmp_path / "set", seeds=SEEDS, runs=RUNS, steps=STEPS)
    (root / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    command = [
        sys.executable,
        "-m",
        "banana_tests.cli",
        "plan",
        "--dataset=set",
        "--metric=laplacian_variance",
    ]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=ENTRY_LIMIT_S)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^laplacian_variance +12 ", done.stdout, re.M), done.stdout


# One line per failure (issue 56, item 11): a case whose data cannot be used errors with its
# message alone. Before, the terminal showed the fixture's traceback with every frame's locals
# (`state = SuiteState(...)`, the batch's `Record(...)`s), and for a truncated PNG in a set
# without sha256 PIL's chained traceback too (~250 lines) before the clear line.
def truncated(lines: Lines, root: Path) -> Lines:
    """a run 1 step 5 cut to half its bytes, every sha256 dropped (the user's tool wrote none)."""
    image = root / "a" / "run1" / "step005.png"
    image.write_bytes(image.read_bytes()[: image.stat().st_size // 2])
    return [
        json.dumps({k: v for k, v in json.loads(line).items() if k != "sha256"}).encode() + b"\n"
        for line in lines
    ]


ONE_LINE: dict[str, tuple[Spoil, str]] = {  # spoil, what a-5's one line says
    "truncated PNG, no sha256": (truncated, "metadata.jsonl:5 ({image}): unreadable or truncated image: "),
    "null line in place of a record": (replace(5, b"null\n"), MISSING_A5),
}


@pytest.mark.parametrize("spoil, says", ONE_LINE.values(), ids=list(ONE_LINE))
def test_a_case_whose_data_cannot_be_used_shows_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, spoil: Spoil, says: str
) -> None:
    suite_folder(pytester, monkeypatch, seeds=SEEDS, runs=RUNS, steps=STEPS)
    root = pytester.path / "data"
    meta = root / "metadata.jsonl"
    meta.write_bytes(b"".join(spoil(meta.read_bytes().splitlines(keepends=True), root)))
    args = ["--dataset=data", "--metric=laplacian_variance", "--steps=5,10", "--no-cache", "--junitxml=j.xml"]
    result = pytester.runpytest_inprocess(*args, "-p", "no:cacheprovider")

    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    said = says.format(image=root / "a" / "run1" / "step005.png")
    header = next(i for i, line in enumerate(output.splitlines()) if "ERROR at setup of" in line)
    assert said in output.splitlines()[header + 1], output  # the line right under its header
    assert output.count("ERROR at setup of") == 1
    for banned in ("SuiteState", "Record(", "direct cause", "During handling", "PIL", "def "):
        assert banned not in output, output
    assert len(output.splitlines()) <= 40, output  # the run's fixed lines, its 3 misses, its error


@pytest.mark.parametrize("command", ["plan", "score"])
def test_plan_and_score_on_a_set_whose_every_record_escapes_the_root_exit_1_naming_each(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: "0 images", exit 0. pytest errors these cases; the commands say so and exit 1."""
    from banana_tests.cli import main

    (tmp_path / "set").mkdir()
    rows = [f"../outside/s{i}.png,alpha,replicate,0,{i}" for i in STEPS]
    (tmp_path / "set" / "data.csv").write_text(
        "file_name,seed_image,variant,run,step\n" + "\n".join(rows) + "\n"
    )
    monkeypatch.chdir(tmp_path)
    metric = "--metric=metrics_under_test.examples:laplacian_variance"

    assert main([command, "--dataset=set/data.csv", metric]) == 1

    said = [line for line in capsys.readouterr().err.splitlines() if "unusable record" in line]
    assert len(said) == len(STEPS), said
    for line, step in zip(said, STEPS, strict=True):
        assert line.startswith(f"banana-tests {command}: unusable record: set/data.csv row ")
        assert f"'../outside/s{step}.png' escapes the data set root" in line


def test_reading_an_image_leaves_pils_pixel_limit_as_the_process_had_it(tmp_path: Path) -> None:
    """Before: the first image read set PIL.Image.MAX_IMAGE_PIXELS to None for the whole process,
    so the host project's own image reads lost their decompression-bomb guard."""
    from PIL import Image

    from banana_tests.trajectories.imagefolder import read_imagefolder
    from banana_tests.trajectories.images import decode, header_pixels

    record = read_imagefolder(write_set(tmp_path / "set", seeds=("a",), runs=(0,), steps=(1,))).select(
        "replicate"
    )[0]
    before = Image.MAX_IMAGE_PIXELS
    try:
        Image.MAX_IMAGE_PIXELS = 10**6  # the host process's own limit
        assert header_pixels(record) == 96 * 128
        assert decode(record)[0].shape == (96, 128, 3)
        assert Image.MAX_IMAGE_PIXELS == 10**6
    finally:
        Image.MAX_IMAGE_PIXELS = before
