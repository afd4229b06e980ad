"""Your own metric: dotted targets, entry points, protocol checks, the examples, end to end."""

from __future__ import annotations

import textwrap
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from metrics_under_test import custom
from metrics_under_test.examples import NoiseSigma, laplacian_variance
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import UnknownMetric, resolve
from metrics_under_test.spec import Backend, Cost
from tests.conftest import assert_outcomes, needs, suite_folder

GOOD = """
class Tiny:
    name = "tiny"
    lower_better = True
    score_range = (0.0, 10.0)
    cost = "fast"

    def __init__(self, device="cpu"):
        self.device = device

    def __call__(self, images):
        return [float(img.mean()) / 25.5 for img in images]


def factory():
    return Tiny()
"""


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Writes `source` as an importable module and returns its name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:
        name = f"usermetric_{uuid.uuid4().hex}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        return name

    return write


def test_a_dotted_target_is_a_custom_metric_named_by_its_declared_name(module) -> None:  # type: ignore[no-untyped-def]
    mod = module(GOOD)
    for target in (f"{mod}:Tiny", f"{mod}:factory"):
        (spec,) = resolve(target)
        assert (spec.name, spec.backend, spec.target) == ("tiny", Backend.CUSTOM, target)
        assert (spec.low, spec.high, spec.lower_better, spec.cost) == (0.0, 10.0, True, Cost.FAST)
        assert type(spec.backend) is Backend and type(spec.cost) is Cost  # converted from the string
    metric = custom.build(resolve(f"{mod}:Tiny")[0], "cuda")
    assert metric.device == "cuda"  # type: ignore[attr-defined]


def install(
    site: Path, distribution: str, module_name: str, source: str, entry_points: dict[str, str]
) -> Path:
    """A distribution as pip leaves it in site-packages, without pip: its module and a
    `<name>-1.0.dist-info` folder (METADATA, entry_points.txt), found by importlib.metadata on
    the path `site` is on."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module_name}.py").write_text(textwrap.dedent(source))
    info = site / f"{distribution}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{custom.GROUP}]\n{lines}")
    return site


def test_an_installed_entry_point_answers_to_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = f"usermetric_{uuid.uuid4().hex}"
    site = install(tmp_path / "site", "tiny_iqa", mod, GOOD, {"tiny": f"{mod}:Tiny"})
    monkeypatch.syspath_prepend(str(site))
    assert [(s.name, s.target) for s in resolve("piqe,TINY")] == [("piqe", None), ("tiny", f"{mod}:Tiny")]
    with pytest.raises(
        UnknownMetric, match=r"unknown metric 'tin'. Did you mean 'tiny'.*package\.module:attr"
    ):
        resolve("tin")


@pytest.mark.slow
def test_an_entry_point_named_apart_from_its_metric_is_refused_naming_both(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One name per metric (docs/metrics.md): `tiny_ep` installed for a metric declared `tiny` is
    refused where it is named, and listed as refused, not as `tiny`, by `banana-tests metrics`."""
    mod = f"usermetric_{uuid.uuid4().hex}"
    site = install(pytester.path / "site", "tiny_iqa", mod, GOOD, {"tiny_ep": f"{mod}:Tiny"})
    suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 20))
    monkeypatch.setenv("PYTHONPATH", str(site))
    refusal = f"entry point 'tiny_ep' -> {mod}:Tiny declares name 'tiny'; rename one so they agree"

    listing = pytester.run("banana-tests", "metrics")
    assert listing.ret == 0
    (row,) = [line for line in listing.outlines if line.startswith("tiny_ep ")]
    assert row.endswith(refusal), row
    assert not [line for line in listing.outlines if line.startswith("tiny ")]

    named = pytester.runpytest_subprocess("--dataset=data", "--metric=tiny_ep")
    assert named.ret == pytest.ExitCode.USAGE_ERROR
    assert refusal in named.stderr.str()
    declared = pytester.runpytest_subprocess("--dataset=data", "--metric=tiny")
    assert declared.ret == pytest.ExitCode.USAGE_ERROR
    assert f"unknown metric 'tiny': {refusal}" in declared.stderr.str()


def test_the_examples_are_installed_as_entry_points() -> None:
    assert custom.entry_points()["laplacian_variance"] == "metrics_under_test.examples:laplacian_variance"
    assert [s.name for s in resolve("laplacian_variance,noise_sigma")] == [
        "laplacian_variance",
        "noise_sigma",
    ]


@pytest.mark.parametrize(
    "body, error",
    [
        ("lower_better = True\n    score_range = (0, 1)", "missing attribute 'name'"),
        ("name = 'x'\n    score_range = (0, 1)", "missing attribute 'lower_better'"),
        ("name = 'x'\n    lower_better = 1\n    score_range = (0, 1)", "lower_better must be True or False"),
        (
            "name = 'x'\n    lower_better = True\n    score_range = (1, 1)",
            "score_range must be finite .* got \\(1, 1\\)",
        ),
        (
            "name = 'x'\n    lower_better = True\n    score_range = (0, float('nan'))",
            "score_range must be finite",
        ),
        ("name = 'x'\n    lower_better = True\n    score_range = 5", "score_range must be finite"),
        ("name = 'a b'\n    lower_better = True\n    score_range = (0, 1)", "name must be"),
        ("name = 'x'\n    lower_better = True\n    score_range = (0, 1)\n    cost = 'free'", "cost must be"),
        (
            "name = 'x'\n    lower_better = True\n    score_range = (0, 1)\n    files = 5",
            "files must be a path or a tuple of paths .* got 5",
        ),
        (
            "name = 'x'\n    lower_better = True\n    score_range = (0, 1)\n    snapshot_points = -1",
            "snapshot_points must be a finite number >= 0, got -1",
        ),
        (
            "name = 'x'\n    lower_better = True\n    score_range = (0, 1)\n    invariance_points = 'loose'",
            "invariance_points must be a finite number >= 0, got 'loose'",
        ),
        (
            "name = 'x'\n    lower_better = True\n    score_range = (0, 1)\n    invariance_points = 1e999",
            "invariance_points must be a finite number >= 0, got inf",
        ),
    ],
)
def test_protocol_attributes_are_checked_at_load(module, body: str, error: str) -> None:  # type: ignore[no-untyped-def]
    mod = module(
        f"class M:\n    {body}\n\n    def __call__(self, images):\n        return [0.0] * len(images)\n"
    )
    with pytest.raises(MetricError, match=rf"metric '{mod}:M': {error}"):
        resolve(f"{mod}:M")


def test_a_class_that_cannot_score_is_refused(module) -> None:  # type: ignore[no-untyped-def]
    mod = module("class M:\n    name = 'x'\n    lower_better = True\n    score_range = (0, 1)\n")
    with pytest.raises(MetricError, match="must be callable on a list of images"):
        resolve(f"{mod}:M")


@pytest.mark.parametrize(
    "call, error",
    [
        ("return [0.0]", r"it returned 1 score\(s\) for 2 image\(s\): \[0.0\]"),
        (
            "return [float('nan')] * len(images)",
            r"non-finite score\(s\), astronaut.png \(256×256 crop\): nan; brick.png \(256×256 crop\): nan",
        ),
    ],
)
def test_scores_are_checked_when_the_metric_is_built(module, call: str, error: str) -> None:  # type: ignore[no-untyped-def]
    mod = module(
        "class M:\n    name = 'x'\n    lower_better = True\n    score_range = (0, 1)\n"
        f"    def __call__(self, images):\n        {call}\n"
    )
    (spec,) = resolve(f"{mod}:M")
    probe = r"failed the load-time probe \(its scores on astronaut.png \(256×256 crop\) and brick.png"
    with pytest.raises(MetricError, match=rf"^metric 'x' {probe} .*\): {error}$"):
        custom.build(spec, "cpu")


@pytest.mark.parametrize(
    "target, error",
    [
        ("no_such_module_xyz:M", "cannot import module 'no_such_module_xyz'"),
        ("metrics_under_test.examples:nothing", "has no attribute 'nothing'"),
        ("metrics_under_test.examples:_LUMA", "not a class, factory or metric instance"),
    ],
)
def test_bad_targets_say_what_is_missing(target: str, error: str) -> None:
    with pytest.raises(MetricError, match=error):
        resolve(target)


def test_laplacian_variance_drops_with_blur() -> None:
    rng = np.random.default_rng(0)
    sharp = rng.integers(0, 256, (64, 64, 3)).astype(np.float64)
    blurred = (sharp + np.roll(sharp, 1, 0) + np.roll(sharp, 1, 1) + np.roll(sharp, (1, 1), (0, 1))) / 4
    a, b = laplacian_variance([sharp.astype(np.uint8), blurred.astype(np.uint8)])
    assert a > 4 * b > 0
    assert laplacian_variance([np.full((8, 8, 3), 77, np.uint8)]) == [0.0]


@pytest.mark.parametrize("sigma", [2.0, 8.0])
def test_noise_sigma_estimates_gaussian_noise(sigma: float) -> None:
    needs("torch")
    rng = np.random.default_rng(1)
    y, x = np.mgrid[0:128, 0:160]
    scene = 60 + 0.5 * x + 0.3 * y  # a smooth ramp: the estimator cancels it
    noisy = scene + rng.normal(0, sigma, scene.shape)
    img = np.repeat(np.clip(np.rint(noisy), 0, 255).astype(np.uint8)[..., None], 3, axis=-1)
    (estimate,) = NoiseSigma()([img])
    assert estimate == pytest.approx(sigma, rel=0.1)


@pytest.mark.slow
def test_an_example_runs_through_the_suite_and_junit(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 20))
    result = pytester.runpytest_subprocess(
        "--dataset=data",
        "--steps=20",
        "--metric=metrics_under_test.examples:laplacian_variance",
        "--junitxml=j.xml",
        "-o",
        "junit_family=xunit1",
    )
    assert_outcomes(result, passed=0, missed=1)  # noise raises the Laplacian's variance: a miss
    (case,) = ET.parse(pytester.path / "j.xml").iter("testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert case.get("name") == "test_detects_degradation[laplacian_variance-alpha-step20]"
    assert (props["metric"], props["score_cached"]) == ("laplacian_variance", "false")
    assert float(props["score_step"]) > float(props["score_reference"])
