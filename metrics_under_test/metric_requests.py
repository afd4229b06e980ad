"""What `--metric` asks for, parsed once: a typed request per metric named, target given or group
chosen. The option validator (banana_tests.core.settings) and the api's `metrics` argument turn
their value into these here; the registry resolves them (metrics_under_test.registry.resolve), and
nothing else splits, joins or re-reads the option's text (tests/test_layout.py checks)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


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
