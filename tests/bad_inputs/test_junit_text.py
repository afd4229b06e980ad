"""A failure's JUnit text holds its whole message (issue 50): one row, the worst-escape search.

An escape's verdict line (its drawn degradation and its PNG pair) runs past the 500 characters
pytest keeps in a failure's `message` attribute: the attribute kept the figure alone, with
"[+1 more line; full report in element text]", and the element text held only the figure too.
The row runs the search in a real pytest process, serial and on two workers, with a metric that
scores every image alike, so every degradation escapes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.conftest import suite_folder

pytestmark = pytest.mark.slow  # each test runs pytest in a child process: the slow tier

SEARCH_MODULE = (
    "from banana_tests.families.search.test_search import banana_search, test_no_worst_escape  # noqa: F401\n"
)
METRICS = """
class Blind:
    '''Every image scores the same: every degradation escapes.'''

    name = "blind"
    lower_better = False
    score_range = (0.0, 1.0)
    cost = "fast"

    def __call__(self, images):
        return [0.5 for _ in images]

"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_an_escapes_junit_failure_holds_its_whole_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    suite_folder(pytester, monkeypatch, module=SEARCH_MODULE, seeds=("alpha",), runs=(0,), steps=(1, 5))
    pytester.makepyfile(usermetrics=METRICS)

    result = pytester.runpytest_subprocess(
        "--metric=usermetrics:Blind", "--search=2", "--no-cache", "-n", workers, "--junitxml=j.xml",
        "-p", "no:randomly", timeout=300,
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    [line] = [x for x in result.outlines if x.startswith("blind scores a plainly degraded image as well")]
    [case] = ET.parse(pytester.path / "j.xml").iter("testcase")
    failure = case.find("failure")
    assert failure is not None and case.get("name") == "test_no_worst_escape[blind]"
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    pair = f"pair (clean, escaped): {properties['clean_png']} {properties['degraded_png']}"
    assert len(line) > 500 and pair in line  # past pytest's budget for the message attribute
    assert failure.text is not None and failure.text.splitlines() == [failure.text.splitlines()[0], line]
    assert failure.text.startswith("escaped at PSNR ")
