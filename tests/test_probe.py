"""The load-time probe (metrics_under_test.custom) judges the metric, and a metric that fails it, or
fails to build, errors each of its cases in one short line (issue 33, item 2)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from metrics_under_test import custom
from metrics_under_test.custom import PROBE
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import resolve
from metrics_under_test.weights import MissingWeights
from tests import test_custom_metrics
from tests.conftest import suite_folder

# NaN on what no case scores: an image under 64 px a side, or a synthetic pattern of a few grey
# levels (a published BRISQUE returned NaN on the old probe's 40×40 checkerboard).
DEGENERATE_NAN = """
import math

import numpy as np

from metrics_under_test.examples import laplacian_variance
from metrics_under_test.protocol import metric


@metric("fussy", lower_better=False, score_range=(0.0, 2000.0))
def fussy(images):
    def degenerate(img):
        return min(img.shape[:2]) < 64 or len(np.unique(img[..., 1])) < 16

    return [math.nan if degenerate(i) else s for i, s in zip(images, laplacian_variance(images))]
"""

BROKEN = """
from metrics_under_test.protocol import metric


@metric("one_score", lower_better=False, score_range=(0.0, 255.0))
def one_score(images):
    return [float(sum(float(i.mean()) for i in images) / len(images))]  # one for the whole batch


@metric("complex_scores", lower_better=False, score_range=(0.0, 1.0))
def complex_scores(images):
    import torch

    return torch.ones(len(images), dtype=torch.complex64)  # float() of it raised RuntimeError


class Crashing:
    name, lower_better, score_range = "crashing", False, (0.0, 1.0)

    def __init__(self):
        raise RuntimeError("no GPU today")

    def __call__(self, images):
        return [0.0] * len(images)
"""


module = test_custom_metrics.module  # the fixture: writes a source as an importable module


def test_the_probe_scores_seed_crops_of_two_shapes() -> None:
    """A batch of two of one shape, then another shape: what the suite's batches are."""
    shapes = [[(image.height, image.width) for image in batch] for batch in PROBE]
    assert shapes == [[(256, 256), (256, 256)], [(192, 320)]]
    for batch in PROBE:
        for image in batch:
            pixels = image.pixels()
            assert pixels.shape == (image.height, image.width, 3) and str(pixels.dtype) == "uint8"


def test_a_metric_that_is_nan_only_on_degenerate_images_loads(module) -> None:  # type: ignore[no-untyped-def]
    (spec,) = resolve(f"{module(DEGENERATE_NAN)}:fussy")
    metric = custom.build(spec, "cpu")
    assert all(s == s for s in metric([image.pixels() for batch in PROBE for image in batch]))


@pytest.mark.parametrize(
    "call, error",
    [
        (
            "return [0.0] * len(images) if images[0].shape[0] == images[0].shape[1] else [float('nan')]",
            r"metric 'x' failed the load-time probe \(its scores on coffee.png \(192×320 crop\)\): "
            r"non-finite score\(s\), coffee.png \(192×320 crop\): nan$",
        ),
        (
            "raise ValueError('expected a square image')",
            r"metric 'x' failed the load-time probe \(its scores on astronaut.png \(256×256 crop\) and "
            r"brick.png \(256×256 crop\)\): it raised ValueError: expected a square image "
            r"\(at .*usermetric_\w+\.py:9 in __call__\)$",
        ),
        ("return 'good'", r"it returned 'good', not one float per image$"),
        ("return None", r"it returned None, not one float per image$"),
        # float() takes each of these; on 3466396 they loaded (text, booleans) or escaped the probe
        # as a RuntimeError traceback (complex and meta tensors)
        (
            "return ['0.5'] * len(images)",
            r"it returned '0.5', text, not a number: return one float per image$",
        ),
        (
            "return [True] * len(images)",
            r"it returned True, a boolean, not a score: return one float per image$",
        ),
        (
            "return [1 + 2j] * len(images)",
            r"it returned \(1\+2j\), a complex number, not a score: return one",
        ),
        (
            "return np.ones(len(images), bool)",
            r"it returned np.True_, a boolean, not a score: return one float",
        ),
        (
            "return torch.ones(len(images), dtype=torch.complex64)",
            r", a complex number \(torch.complex64\), not a score",
        ),
        (
            "return torch.ones(len(images), device='meta')",
            r"it returned a tensor on the meta device \(torch.float32\), which holds no value",
        ),
        ("return torch.ones(len(images), 2)", r"it returned tensor\(\[1., 1.\]\), 2 values where one is due"),
        ("return torch.tensor(0.5)", r"it returned tensor\(0.5000\), not one float per image \(TypeError: "),
    ],
)
def test_a_probe_failure_names_the_probe_image_and_what_came_back(module, call: str, error: str) -> None:  # type: ignore[no-untyped-def]
    (spec,) = resolve(f"{module(returning(call))}:M")
    with pytest.raises(MetricError, match=error) as raised:
        custom.build(spec, "cpu")
    assert "\n" not in str(raised.value)


def returning(call: str) -> str:
    """A metric `M` named 'x' whose `__call__` body is `call` (numpy and torch imported)."""
    return (
        "import numpy as np\nimport torch\n\n"
        "class M:\n    name = 'x'\n    lower_better = True\n    score_range = (0, 1)\n"
        f"    def __call__(self, images):\n        {call}\n"
    )


@pytest.mark.parametrize(
    "call",
    [
        "return torch.full((len(images),), 0.1, dtype=torch.float16)",
        "return torch.full((len(images), 1), 0.1, dtype=torch.bfloat16)",
        "return [np.float16(0.1)] * len(images)",
        "return np.arange(len(images))",
    ],
)
def test_low_precision_floats_and_integers_are_scores(module, call: str) -> None:  # type: ignore[no-untyped-def]
    """Decided (docs/metrics.md): a float16 or bfloat16 score is widened exactly; its resolution is
    the metric's own."""
    (spec,) = resolve(f"{module(returning(call))}:M")
    metric = custom.build(spec, "cpu")
    assert metric is not None


def test_weights_missing_at_the_first_call_are_missing_weights_not_a_probe_failure(module) -> None:  # type: ignore[no-untyped-def]
    """A model that fetches its weights when first called: the missing-weights rule (a skip, or
    a failure when named with --metric) names the file, the probe does not swallow it."""
    mod = module(
        "from metrics_under_test.weights import MissingWeights\n\n"
        "class M:\n    name = 'x'\n    lower_better = True\n    score_range = (0, 1)\n"
        "    def __call__(self, images):\n        raise MissingWeights('x: no file m.pth in the cache')\n"
    )
    (spec,) = resolve(f"{mod}:M")
    with pytest.raises(MissingWeights, match=r"^x: no file m.pth in the cache$"):
        custom.build(spec, "cpu")


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    folder = suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0, 1), steps=(1, 5, 10, 20))
    (folder.path / "fussy.py").write_text(DEGENERATE_NAN)
    (folder.path / "broken.py").write_text(BROKEN)
    return folder


def junit_cases(path: Path) -> dict[str, tuple[str, str]]:
    """Test name -> (outcome, failure or error text) from a JUnit report."""
    out = {}
    for case in ET.parse(path).iter("testcase"):
        kid = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        text = "" if kid is None else f"{kid.get('message', '')}\n{kid.text or ''}"
        out[str(case.get("name"))] = ("passed" if kid is None else kid.tag, text)
    return out


@pytest.mark.slow
def test_a_metric_nan_only_on_degenerate_images_gets_a_verdict_on_every_case(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(
        "--pyargs", "banana_tests", "--dataset=data", "--metric=fussy:fussy", "--no-cache",
        "-k", "not snapshot", "--junitxml=j.xml",
    )  # fmt: skip
    cases = junit_cases(suite.path / "j.xml")
    families = {name.split("[")[0] for name in cases}
    assert families == {
        "test_detects_degradation",
        "test_detects_control_degradation",
        "test_score_is_invariant",
    }
    assert {outcome for outcome, _ in cases.values()} <= {"passed", "failure"}, result.stdout.str()[-3000:]
    assert not any("probe" in text for _, text in cases.values())


def case_sections(lines: list[str]) -> dict[str, list[str]]:
    """The lines pytest prints for each failed or errored case, by its section header, up to the
    suite's own sections."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith("===") and "banana-tests" in line:
            break
        if line.startswith("_") and line.endswith("_"):  # a long test id leaves one `_` each side
            current = sections.setdefault(line.strip("_ "), [])
        elif current is not None and not line.startswith(("===", "- generated xml file")):
            current.append(line)
    return sections


# What each case's message must carry: the metric, the probe and its images, what came back.
PROBE_FAILURE = (
    "'one_score'",
    "load-time probe",
    "astronaut.png (256×256 crop)",
    "1 score(s) for 2 image(s)",
)
BUILD_FAILURE = ("'crashing'", "could not load", "RuntimeError: no GPU today")
COMPLEX_FAILURE = (
    "'complex_scores'",
    "load-time probe",
    "brick.png (256×256 crop)",
    "complex",
    "torch.complex64",
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "target, says",
    [
        ("broken:one_score", PROBE_FAILURE),
        ("broken:Crashing", BUILD_FAILURE),
        ("broken:complex_scores", COMPLEX_FAILURE),
    ],
    ids=["probe", "build", "complex tensor"],
)
def test_a_metric_that_cannot_load_errors_each_case_in_a_few_lines(
    suite: pytest.Pytester, target: str, says: tuple[str, ...]
) -> None:
    """Every family's cases (Δ, trend, control, invariance, snapshot) say why, in one line each but
    the first case's (a build's traceback is shown once); no case carries another test's
    hypothesis note. Re-raising one exception object printed 41,927 lines for 33 cases."""
    result = suite.runpytest_subprocess(
        "--pyargs", "banana_tests", "--dataset=data", f"--metric={target}", "--no-cache", "--trend",
        "--junitxml=j.xml",
    )  # fmt: skip
    output = result.stdout.lines + result.stderr.lines
    cases = junit_cases(suite.path / "j.xml")
    assert len(cases) == 6 + 2 + 3 + 5 + 1, sorted(cases)  # Δ, trend, control, invariance, snapshot
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert len(output) < 200, "\n".join(output[-200:])
    # the first case to load a metric that cannot be built shows the build's own exception, once:
    # a failure in a test's call, an error where a fixture loads it (the trend family's, collected first)
    first = says[-1] if "could not load" in says else None
    short = [
        text
        for outcome, text in cases.values()
        if outcome in ("error", "failure") and all(s in text for s in says)
    ]
    shown = [
        text
        for outcome, text in cases.values()
        if outcome in ("error", "failure")
        and first is not None
        and first in text
        and not all(s in text for s in says)
    ]
    assert len(short) + len(shown) == len(cases), {name: text[:300] for name, (_, text) in cases.items()}
    assert len(shown) <= 1
    sections = case_sections(result.stdout.lines)
    assert len(sections) == len(cases)
    assert sum(len(lines) > 1 for lines in sections.values()) <= 1, sections  # the build's traceback
    for name, (_, text) in cases.items():
        if not name.startswith("test_detects_control_degradation"):
            assert "explicit example" not in text, (name, text)
