"""The registry: what `--metric` asks for, parsed once, and one record per metric on trial, read
without importing torch or pyiqa.

`metric_requests` turns the option's text (or the api's `metrics` argument) into typed requests,
a metric named or a group chosen; `resolve` turns them into specs, and nothing else splits, joins
or re-reads the option's text (tests/test_layout.py checks). pyiqa's NR metrics come from
`pyiqa_catalog.json`, a snapshot of pyiqa 0.1.16's own configuration (name, direction, score
range, parameter files) that a test checks against the installed pyiqa. The paper's 21 metrics
take their range from Table 2 (`PAPER_METRICS`, kept as data so that normalisation has one
source) and answer to their paper names too. PI's range is only "≥ 0" in the paper; the upper
bound 55 is our choice, documented in docs/matrix.md: PI = (10 − NRQM + NIQE) / 2 with NRQM in
[0, 10] and NIQE in [0, 100] cannot exceed 55.
"""

from __future__ import annotations

import difflib
import enum
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from metrics_under_test.spec import Backend, Cost, MetricSpec, WeightFile
from metrics_under_test.vlm_catalog import OUTSIDE_PYIQA, Q_ALIGN
from metrics_under_test.weights import stage

CATALOG = Path(__file__).with_name("pyiqa_catalog.json")


class UnknownMetric(LookupError):
    """A --metric name that is not a metric on trial; the message lists what is."""


@cache
def _catalog_file() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CATALOG.read_text(encoding="utf-8"))
    return data


@cache
def catalog() -> dict[str, MetricSpec]:
    """Every selectable metric by canonical name: pyiqa's NR metrics, Table 2 ranges on top."""
    data = _catalog_file()
    paper = {p.pyiqa_name: p for p in PAPER_METRICS}
    specs: dict[str, MetricSpec] = {}
    for row in data["metrics"]:
        name = row["name"]
        p = paper.get(name)
        low, high = (p.low, p.high) if p else tuple(row["range"])
        specs[name] = MetricSpec(
            name=name,
            backend=Backend.PYIQA,
            low=low,
            high=high,
            lower_better=p.lower_better if p else row["lower_better"],
            weights=tuple(WeightFile(**w) for w in row["weights"]),
            cost=Cost(row["cost"]),
            paper_name=p.paper_name if p else None,
            weights_note=row.get("weights_note", ""),
        )
    specs.update(_vlm_specs())
    return specs


def stage_mirror(mirror: Path | None) -> list[str]:
    """Every parameter file of the catalog that the `--weights-dir` mirror holds, checked and
    staged where pyiqa looks (metrics_under_test.weights.stage), whichever metrics run: a user's
    metric that calls pyiqa inside needs them as much as the suite's own. Returns the names staged."""
    if mirror is None or not mirror.is_dir():
        return []
    files = {w.path: w.file for spec in catalog().values() for w in spec.weights}
    return stage(mirror, ((name, path) for path, name in files.items()))


def _vlm_specs() -> dict[str, MetricSpec]:
    """The paper's VLM metrics (`metrics_under_test.vlm`): the two outside pyiqa, and Q-Align,
    whose hub files pyiqa's catalog row cannot name."""
    out = {}
    for m in (*OUTSIDE_PYIQA, Q_ALIGN):
        out[m.metric] = MetricSpec(
            name=m.metric,
            backend=Backend.VLM,
            low=m.low,
            high=m.high,
            lower_better=False,
            cost=Cost.VLM,
            paper_name=m.paper_name,
            weights_note=f"loads {m.repo} ({', '.join(m.files)})",
        )
    return out


@cache
def _aliases() -> dict[str, str]:
    names = {n.lower(): n for n in catalog()}
    names.update({p.paper_name.lower(): p.pyiqa_name for p in PAPER_METRICS})
    names.update({m.paper_name.lower(): m.metric for m in OUTSIDE_PYIQA})
    return names


@cache
def _refused() -> dict[str, str]:
    return {k.lower(): v for k, v in _catalog_file()["refused"].items()}


def lookup(name: str) -> MetricSpec:
    """A metric by pyiqa or paper name, case-insensitive (`TOPIQ NR`, `paq-2-piq`)."""
    key = name.strip().lower()
    canonical = _aliases().get(key)
    if canonical is not None:
        return catalog()[canonical]
    if key in _refused():
        raise UnknownMetric(f"{name!r} is not a no-reference image metric: {_refused()[key]}")
    from metrics_under_test import custom

    installed = {n.lower(): (n, t) for n, t in custom.entry_points().items()}
    if key in installed:
        return custom.entry_point_spec(*installed[key])
    for entry_point, target in installed.values():  # one name per metric: say whose it is
        if _declared_name(target) == key:
            raise UnknownMetric(
                f"unknown metric {name!r}: entry point {entry_point!r} -> {target} declares name "
                f"{key!r}; rename one so they agree"
            )
    valid = sorted([*catalog(), *installed])
    raise UnknownMetric(
        f"unknown metric {name!r}.{_did_you_mean(key, installed)} Valid names: {', '.join(MetricGroup)}, "
        + ", ".join(valid)
        + "; or package.module:attr for your own metric"
    )


def _declared_name(target: str) -> str | None:
    """The `name` an entry point's target declares without being built (a class, an instance or
    an `@metric` function); None for a factory or a target that does not import. Only asked on
    the way to an unknown-metric error."""
    from metrics_under_test import custom

    try:
        declared = getattr(custom.import_target(target), "name", None)
    except Exception:  # a broken entry point is its own error when it is named
        return None
    return declared.lower() if isinstance(declared, str) else None


def _did_you_mean(key: str, installed: Iterable[str]) -> str:
    """Up to three names close to a mistyped one (pyiqa, paper or installed), since the full list
    of valid names is too long to scan."""
    names = {**_aliases(), **{n: n for n in installed}, **{g.value: g.value for g in MetricGroup}}
    close = dict.fromkeys(names[m] for m in difflib.get_close_matches(key, names, n=3))
    return f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def resolve(requests: str | Sequence[MetricRequest], mirror: Path | None = None) -> list[MetricSpec]:
    """The metrics asked for (`--metric`'s text is read by `metric_requests`) → specs, in the
    order given, without duplicates. `package.module:attr` and names installed in the
    `banana_tests.metrics` entry point group are custom metrics. `offline` counts files in
    `mirror` (--weights-dir) as present: the suite stages them in."""
    specs: dict[str, MetricSpec] = {}
    for request in metric_requests(requests) if isinstance(requests, str) else requests:
        specs.update((s.name, s) for s in _chosen(request, mirror))
    if not specs:
        shown = requests if isinstance(requests, str) else option_text(requests)
        raise UnknownMetric(f"--metric {shown!r} names no metric")
    return list(specs.values())


def _chosen(request: MetricRequest, mirror: Path | None) -> list[MetricSpec]:
    """The specs of one request: a group's metrics, a target's or a name's."""
    if request.group is MetricGroup.ALL:
        return list(catalog().values())
    if request.group is MetricGroup.OFFLINE:
        return [
            s
            for s in catalog().values()
            if s.cost is not Cost.VLM and not s.missing_weights(mirror) and not s.weights_note
        ]
    if request.is_target:
        from metrics_under_test import custom

        return [custom.spec_for(request.text)]
    return [lookup(request.text)]


def selector(spec: MetricSpec) -> str:
    """What `--metric` takes to select `spec` again: its name, or the target of a custom metric
    that no entry point installs under that name (a printed command must run as printed)."""
    if spec.target is None:
        return spec.name
    from metrics_under_test.custom import entry_points

    return spec.name if entry_points().get(spec.name) == spec.target else spec.target


class MetricGroup(enum.StrEnum):
    """A name that chooses metrics instead of naming one; the metrics it chose may skip when their
    parameter files are missing, a metric named on its own fails instead."""

    OFFLINE = "offline"  # every catalogued metric whose parameter files are present, VLMs aside
    ALL = "all"  # every catalogued metric


@dataclass(frozen=True)
class MetricRequest:
    """One part of `--metric`: a metric's name (the registry's, a paper name or an installed entry
    point), a `package.module:attr` target, or a group."""

    text: str  # as given, without surrounding spaces: hung metrics and error messages quote it
    group: MetricGroup | None = None

    @classmethod
    def of(cls, part: str) -> MetricRequest:
        text = part.strip()
        try:
            return cls(text, MetricGroup(text.lower()))
        except ValueError:
            return cls(text)

    @property
    def is_target(self) -> bool:
        """A `package.module:attr` target, imported to build the metric."""
        return self.group is None and ":" in self.text


DEFAULT_METRICS: tuple[MetricRequest, ...] = tuple(MetricRequest.of(n) for n in ("brisque", "niqe", "piqe"))
"""The metrics a run scores when none are chosen: the three classical ones whose weights ship."""


def metric_requests(value: str | Iterable[str]) -> tuple[MetricRequest, ...]:
    """`--metric`'s comma list, or the api's sequence of names and targets, as requests in the
    order given; empty parts are dropped, so the result may be empty."""
    parts = value.split(",") if isinstance(value, str) else value
    return tuple(MetricRequest.of(part) for part in parts if part.strip())


def option_text(requests: Iterable[MetricRequest]) -> str:
    """The requests as `--metric` writes them: for the option's default, its help and errors."""
    return ",".join(r.text for r in requests)


def metric_set(names: Iterable[str]) -> str:
    """The selected metrics' names, sorted, as a run's facts record them (JUnit `metric_set`,
    which `banana-tests report` compares across the files it merges)."""
    return ",".join(sorted(names))


class PaperMetric(NamedTuple):
    paper_name: str
    pyiqa_name: str
    low: float
    high: float
    lower_better: bool


PAPER_METRICS: tuple[PaperMetric, ...] = (
    PaperMetric("ARNIQA", "arniqa", 0.0, 1.0, False),
    PaperMetric("BRISQUE", "brisque", 0.0, 150.0, True),
    PaperMetric("CLIPIQA", "clipiqa", 0.0, 1.0, False),
    PaperMetric("CNNIQA", "cnniqa", 0.0, 1.0, False),
    PaperMetric("DBCNN", "dbcnn", 0.0, 1.0, False),
    PaperMetric("HyperIQA", "hyperiqa", 0.0, 1.0, False),
    PaperMetric("ILNIQE", "ilniqe", 0.0, 100.0, True),
    PaperMetric("LIQE", "liqe", 1.0, 5.0, False),
    PaperMetric("MANIQA", "maniqa", 0.0, 1.0, False),
    PaperMetric("MUSIQ", "musiq", 0.0, 100.0, False),
    PaperMetric("NIMA", "nima", 0.0, 10.0, False),
    PaperMetric("NIQE", "niqe", 0.0, 100.0, True),
    PaperMetric("NRQM", "nrqm", 0.0, 10.0, False),
    PaperMetric("PaQ-2-PiQ", "paq2piq", 0.0, 100.0, False),
    PaperMetric("PI", "pi", 0.0, 55.0, True),
    PaperMetric("PIQE", "piqe", 0.0, 100.0, True),
    PaperMetric("Q-Align", "qalign", 1.0, 5.0, False),
    PaperMetric("QualiCLIP", "qualiclip", 0.0, 1.0, False),
    PaperMetric("TOPIQ NR", "topiq_nr", 0.0, 1.0, False),
    PaperMetric("TReS", "tres", 0.0, 100.0, False),
    PaperMetric("WaDIQaM", "wadiqam_nr", -1.0, 0.1, False),
)
