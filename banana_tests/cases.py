"""A case's identity and its record's vocabulary, defined once: test ids, the JUnit property
names (`Field`), the matrix and baselines use them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Protocol

_ID = re.compile(r"^(?P<head>.+)-step(?P<step>\d+)$")
_RUN = re.compile(r"^(?P<head>.+)-run(?P<run>\d+)$")
_XDIST_GROUP = re.compile(r"@[^\]@]+$")
_PY_SUFFIX = re.compile(r"\.py$")


METRIC_FIXTURE = "banana_metric"  # the public fixture, and the parameter that names a case's metric
CASE_FIXTURE = "banana_case"  # the indirect parameter that carries a case's key

SCHEMA = 2
"""The record's version; bump it when a field changes meaning or goes away (adding one is fine)."""


class CaseKind(Enum):
    """What a case checks: a Δ cell of the matrix, a trend over steps, a control distortion, an
    invariance property of the metric, or a search for the worst escape."""

    DELTA = "delta"
    TREND = "trend"
    CONTROL = "control"
    INVARIANCE = "invariance"
    SEARCH = "search"


class Field(StrEnum):
    """The JUnit property names of a case record, in the order they are written."""

    RECORD = "banana_record"  # `<kind>/<schema>`: what makes a testcase one of the suite's
    METRIC = "metric"
    SEED_IMAGE = "seed_image"
    STEP = "step"
    RUN = "run"
    DISTORTION = "distortion"
    REFERENCE_STEP = "reference_step"
    # Δ figures (Verdict.properties)
    DELTA = "delta"
    SCORE_REFERENCE = "score_reference"
    SCORE_STEP = "score_step"
    NORM_REFERENCE = "norm_reference"
    NORM_STEP = "norm_step"
    RUNS = "runs"
    SCORE_CACHED = "score_cached"
    # each run's normalised scores (space-separated, in run order, 7 digits): each run's Δ, their
    # spread and range (verdicts.gaps) and the AUC (families.degradation.matrix_sections) follow from them
    RUN_NORM_REFERENCES = "run_norm_references"
    RUN_NORM_STEPS = "run_norm_steps"
    STRICT = "strict"  # detected | missed | unresolved, under --banana-strict-runs
    # the degradation oracle (banana_tests.scoring.oracle): each run's step against its reference
    PSNR = "psnr"  # dB, space-separated, in run order; inf when identical
    SSIM = "ssim"
    # trend figures (Trend.properties)
    SPEARMAN = "spearman"
    FIRST_DETECTION_STEP = "first_detection_step"
    TREND_STEPS = "trend_steps"
    TREND_SERIES = "trend_series"
    # invariance cases (banana_tests/families/invariance): which check, and its measured change
    # and tolerance in normalised points
    INVARIANCE = "invariance"
    CHANGE = "change"
    TOLERANCE = "tolerance"
    CROP_SIDE = "crop_side"  # px
    RAISED = "raised"  # what the metric raised on the crops, when it could not be checked
    # worst-escape searches (banana_tests/families/search): the image shown is the worst escape, else
    # the most degraded image detected; its normalised scores are NORM_REFERENCE (clean) and
    # NORM_STEP, its PSNR and SSIM against the clean image PSNR and SSIM
    EXAMPLES = "examples"  # examples the search scored
    ESCAPED = "escaped"  # true | false
    SEARCH_SECONDS = "search_seconds"
    DEGRADATION = "degradation"  # the crop and the drawn degradation's parameters
    CLEAN_PNG = "clean_png"
    DEGRADED_PNG = "degraded_png"


class FamilyKey(Protocol):
    """A case of a test family (banana_tests.families) outside the matrix: a frozen, ordered
    dataclass that names its kind, its metric, its id's parameters and the record and baseline
    fields that identify it, so the record and the baseline write it without knowing its family."""

    @property
    def kind(self) -> CaseKind: ...

    @property
    def metric(self) -> str: ...

    @property
    def test_id(self) -> str: ...

    @property
    def unit_image(self) -> str | None:
        """The seed image of the `--shard` unit it falls in; None: its metric's other tests."""
        ...

    def identity(self) -> list[tuple[Field, str]]:
        """The record fields after `metric` that name the case."""
        ...

    def entry(self) -> dict[str, str]:
        """The case as a baseline entry, `kind` first."""
        ...

    def rank(self) -> tuple[int, str]:
        """Where a baseline lists it among its metric's entries (its Δ cells come first, at 0)."""
        ...


@dataclass(frozen=True, order=True)
class CaseKey:
    """One verdict: does `metric` score `seed_image` at `step` below the reference step?

    `run` is None when scores are averaged over runs (the default aggregate).
    """

    metric: str
    seed_image: str
    step: int
    run: int | None = None

    @property
    def test_id(self) -> str:
        run = "" if self.run is None else f"-run{self.run}"
        return f"{self.metric}-{self.seed_image}{run}-step{self.step}"

    @classmethod
    def from_test_id(cls, test_id: str, metrics: list[str] | tuple[str, ...]) -> CaseKey:
        """Parse an id made by `test_id`; `metrics` resolves names that contain '-'."""
        test_id = strip_xdist_group(test_id)
        m = _ID.match(test_id)
        if m is None:
            raise ValueError(f"not a banana-tests case id: {test_id!r}")
        head, step = m["head"], int(m["step"])
        run: int | None = None
        r = _RUN.match(head)
        if r is not None:
            head, run = r["head"], int(r["run"])
        for metric in sorted(metrics, key=len, reverse=True):
            if head.startswith(metric + "-"):
                return cls(metric, head[len(metric) + 1 :], step, run)
        raise ValueError(f"case id {test_id!r} names none of the metrics {sorted(metrics)}")


def metric_of_id(test_id: str, metrics: list[str] | tuple[str, ...]) -> str | None:
    """The metric a parametrized test's id starts with: a case id, a control, trend or snapshot
    id (`brisque-blur`, `brisque`), or a user's test on `banana_metric`, which the plugin puts
    first (`brisque-1`); None when the id starts with none of `metrics`."""
    test_id = strip_xdist_group(test_id)
    for metric in sorted(metrics, key=len, reverse=True):
        if test_id == metric or test_id.startswith(metric + "-"):
            return metric
    return None


def strip_xdist_group(name: str) -> str:
    """Drop the `@group` suffix xdist's loadgroup adds to test names."""
    return _XDIST_GROUP.sub("", name)


def junit_id(nodeid: str, prefix: str | None = None) -> str:
    """A test's id as pytest's JUnit writer spells it: `classname::name` (its
    `mangle_test_address`: the path dotted without `.py`, classes joined by dots; `--junit-prefix`
    before the classname)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = _PY_SUFFIX.sub("", names[0].replace("/", "."))
    names[-1] += bracket + params
    classname = ".".join(names[:-1])
    if prefix:
        classname = f"{prefix}.{classname}"
    return f"{classname}::{names[-1]}"


def id_of_testcase(classname: str, name: str) -> str:
    """A JUnit testcase's id, as `junit_id` spells the test's (xdist's `@group` dropped)."""
    return f"{classname}::{strip_xdist_group(name)}"


def sort_key(key: CaseKey) -> tuple[str, str, int, int]:
    """A total order on keys, also when run-mean (run None) and per-run cells mix."""
    return key.metric, key.seed_image, key.step, -1 if key.run is None else key.run
