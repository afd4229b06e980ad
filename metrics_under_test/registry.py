"""The registry: one record per metric on trial, read without importing torch or pyiqa.

pyiqa's NR metrics come from `pyiqa_catalog.json`, a snapshot of pyiqa 0.1.16's own
configuration (name, direction, score range, parameter files) that a test checks against the
installed pyiqa. The paper's 21 metrics take their range from Table 2 and answer to their paper
names too.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from metrics_under_test.metric_requests import MetricGroup, MetricRequest, metric_requests, option_text
from metrics_under_test.spec import Backend, Cost, MetricSpec, WeightFile
from metrics_under_test.table2 import PAPER_METRICS
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
    """The metrics asked for (`--metric`'s text is read by metric_requests) → specs, in the
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
