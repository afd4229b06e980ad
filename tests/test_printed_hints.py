"""Every hint the suite prints runs as printed (issue 40, item 6): on 3466396 the default metrics
without their files said "was named with --metric" (they were not) and suggested
`--weights-dir DIR`, which the suite itself refuses ("write path options with '='")."""

from __future__ import annotations

import re

import pytest

from tests.conftest import suite_folder, unavailable, weights_mirror

MIRROR = weights_mirror()  # read before suite_folder clears $BANANA_WEIGHTS_DIR


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0,), steps=(1, 5))


def test_the_default_metrics_without_their_files_print_hints_that_run(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--dataset=data", "--steps=5")  # no --metric: brisque, niqe, piqe

    assert result.parseoutcomes()["errors"] == 4  # piqe has its verdicts
    output = result.stdout.str()
    assert "named with --metric" not in output
    errors = [line for line in result.stdout.lines if " is on trial but cannot load: " in line]
    assert {line.split()[0] for line in errors} == {"brisque", "niqe"} and len(errors) == 4
    hints = {hint for line in errors for hint in re.findall(r"--[\w-]+=[\w./-]+", line)}
    assert hints == {"--weights-dir=FOLDER", "--metric=offline"}, errors

    chosen = suite.runpytest_subprocess("--dataset=data", "--steps=5", "--metric=offline")  # as printed
    assert not {"errors", "error"} & chosen.parseoutcomes().keys(), chosen.stdout.str()[-2000:]
    assert "brisque" not in chosen.stdout.str()

    if MIRROR is None:
        unavailable("no pyiqa weights mirror")
    given = suite.runpytest_subprocess(
        "--dataset=data", "--steps=5", "--weights-dir=FOLDER".replace("FOLDER", str(MIRROR))
    )
    outcomes = given.parseoutcomes()
    assert not {"errors", "error"} & outcomes.keys() and outcomes.get("passed"), given.stdout.str()[-2000:]
