"""Bad step numbers, one row each: a JUnit case's `step`, a baseline entry's `step` and
`report --figure-steps`. Each is read as the data set reader reads a step (digits 0-9, a whole
number within its MAX_INDEX, never a bool, a fraction or another script's digit), and a bad one is
one line naming the file and record (or the option): exit 2 for `report`, a usage error (pytest's
exit 4) for `--baseline`. Before, 10**23 died in matplotlib (exit 1), 1e999 was an INTERNALERROR
(exit 3), and 5.9, true, "٥", ٣ or -5 were coerced or drew no heat map without a word.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from banana_tests.cli import main
from banana_tests.session.collection import BaselineGate
from tests.test_junit import case, junit

Act = Callable[[Path], int]


@dataclass(frozen=True)
class Row:
    """`act(root)` runs the command on an input it builds under `root`; `code` is its exit code
    (or the exception it raises), `says` a regex its one message line must match (`{root}` for
    the folder)."""

    id: str
    act: Act
    code: int | type[Exception]
    says: str


def cli(*args: str) -> int:
    try:
        return main(list(args))
    except SystemExit as exc:  # argparse's usage error
        return int(exc.code or 0)


def report_of_step(text: str, prop: str = "step") -> Act:
    """A delta case of step 5, reference step 1, with `prop` written as `text`."""

    def act(root: Path) -> int:
        good = {"step": "5", "reference_step": "1"}
        testcase = case("piqe", "alpha", 5, delta="-1.0", record="delta/2", reference_step="1")
        testcase = testcase.replace(f'name="{prop}" value="{good[prop]}"', f'name="{prop}" value="{text}"')
        return cli("report", str(junit(root / "j.xml", testcase)), "--out", str(root / "out"))

    return act


def report_with_figure_steps(steps: str) -> Act:
    def act(root: Path) -> int:
        xml = junit(
            root / "j.xml", case("piqe", "alpha", 5, delta="-1.0"), case("piqe", "alpha", 10, delta="-2.0")
        )
        return cli("report", str(xml), "--out", str(root / "out"), f"--figure-steps={steps}")

    return act


def baseline_with_step(step: str) -> Act:
    """`step` is written into the JSON as it stands (1e999 is a JSON number Python reads as inf)."""

    def act(root: Path) -> int:
        entry = f'{{"metric": "piqe", "seed_image": "alpha", "step": {step}}}'
        path = root / "b.json"
        path.write_text(f'{{"format": "banana-tests-baseline/2", "failures": [{entry}]}}')
        BaselineGate(path, strict=False)
        return 0

    return act


JUNIT_STEP = r"{root}/j\.xml: testcase '.*piqe-alpha-step5.*': .*{what} must be"
BASELINE_STEP = r"--baseline: baseline {root}/b\.json: failure entry 0 .* is malformed: step must be"
FIGURE_STEPS = r"argument --figure-steps: step must be .*in '{given}'"

ROWS = [
    *(
        Row(f"junit step {name}", report_of_step(step), 2, JUNIT_STEP.format(root="{root}", what="step"))
        for name, step in (
            ("10^23", "1" + "0" * 23),
            ("5.9", "5.9"),
            ("true", "true"),
            ("arabic-indic five", "٥"),
            ("-5", "-5"),
            ("empty", ""),
        )
    ),
    Row(
        "junit reference_step arabic-indic one",
        report_of_step("١", "reference_step"),
        2,
        JUNIT_STEP.format(root="{root}", what="reference_step"),
    ),
    *(
        Row(f"baseline step {name}", baseline_with_step(step), pytest.UsageError, BASELINE_STEP)
        for name, step in (
            ("1e999", "1e999"),
            ("5.9", "5.9"),
            ("5.0", "5.0"),
            ("true", "true"),
            ("arabic-indic five", json.dumps("٥")),
            ("digits as a string", json.dumps("5")),
            ("10^23", "1" + "0" * 23),
            ("-5", "-5"),
        )
    ),
    *(
        Row(
            f"--figure-steps={steps}",
            report_with_figure_steps(steps),
            2,
            FIGURE_STEPS.format(given=re.escape(steps)),
        )
        for steps in ("٣", "-5", "5.9", "1" + "0" * 23, "5,,10", "")
    ),
    Row(
        "--figure-steps a step the run lacks",
        report_with_figure_steps("5,7"),
        2,
        r"--figure-steps: the run has no step 7 \(its steps: 5, 10\)",
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_a_bad_step_number_is_one_line_naming_where_it_is(
    row: Row, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if isinstance(row.code, int):
        assert row.act(tmp_path) == row.code
        message = capsys.readouterr().err
    else:
        with pytest.raises(row.code) as info:
            row.act(tmp_path)
        message = str(info.value)
    assert "Traceback" not in message
    assert re.search(row.says.replace("{root}", re.escape(str(tmp_path))), message), message
    assert not (tmp_path / "out").exists(), "no report from a bad input"


def test_good_steps_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The rows' inputs with a good step: the same commands pass and draw what was asked."""
    assert report_with_figure_steps("10")(tmp_path) == 0
    assert sorted(p.name for p in (tmp_path / "out").glob("gaps_step*.png")) == ["gaps_step10.png"]
    assert baseline_with_step("5")(tmp_path) == 0
    again = tmp_path / "again"
    again.mkdir()
    assert report_of_step("20")(again) == 0
    assert (again / "out" / "gaps_step20.png").is_file()
