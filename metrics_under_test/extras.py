"""The extras of banana-tests (pyproject's optional dependencies) that its heavy parts need.

The core installs neither torch nor pyiqa. What needs them is checked from installed metadata,
without importing anything, so a missing extra is one line naming it, ready to paste, before a
case runs or an editor is built; never an ImportError deep inside a case, never another metric.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata

from metrics_under_test.metric_requests import MetricRequest, option_text
from metrics_under_test.spec import Backend, MetricSpec


@dataclass(frozen=True)
class Extra:
    """An extra and the distributions it installs that the code behind it imports."""

    name: str | None  # None: no extra of ours, the distributions themselves
    distributions: tuple[str, ...]

    def absent(self) -> list[str]:
        return [d for d in self.distributions if not installed(d)]

    @property
    def command(self) -> str:
        if self.name is None:
            return f"pip install {' '.join(self.distributions)}"
        return f"pip install 'banana-tests[{self.name}]'"


PYIQA = Extra("pyiqa", ("pyiqa", "torch"))  # the paper's metrics and every pyiqa metric
TAEF2 = Extra("taef2", ("torch",))  # the learned editor flux2-tiny-vae, the vae-roundtrip artifact
GEMINI = Extra("gemini", ("google-genai",))
DIFFUSERS = Extra("diffusers", ("diffusers", "transformers", "torch"))
VLM = Extra("vlm", ("torch", "transformers"))  # VisualQuality-R1, RALI
QALIGN = Extra("vlm", ("pyiqa", "torch", "transformers", "icecream"))  # pyiqa's Q-Align
# The shipped example metrics that import an optional library (metrics_under_test.examples).
EXAMPLES = {"metrics_under_test.examples:NoiseSigma": Extra(None, ("torch",))}
EDITORS = {"gemini": GEMINI, "diffusers": DIFFUSERS, "flux2-tiny-vae": TAEF2}
JUDGES = {"gemini": GEMINI}


def installed(distribution: str) -> bool:
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def of_metric(spec: MetricSpec) -> Extra | None:
    """The extra a metric's backend needs; for a custom metric, only a shipped example's library
    (another's is its own package's affair)."""
    if spec.backend is Backend.PYIQA:
        return PYIQA
    if spec.backend is Backend.VLM:
        return QALIGN if spec.name == "qalign" else VLM
    return EXAMPLES.get(spec.target or "")


def missing(what: str, extra: Extra | None) -> str | None:
    """`what needs X, not installed here: pip install 'banana-tests[extra]'`, or None."""
    absent = extra.absent() if extra else []
    if extra is None or not absent:
        return None
    names = ", ".join(absent[:-1]) + " and " + absent[-1] if len(absent) > 1 else absent[0]
    return f"{what} needs {names}, not installed here: {extra.command}"


def missing_for_metrics(specs: Iterable[MetricSpec], default: bool = False) -> str | None:
    """One line for every selected metric whose extra is missing, grouped by extra; `default`:
    the user named none, so the line says the metrics are the default."""
    by_extra: dict[Extra, list[str]] = {}
    for spec in specs:
        extra = of_metric(spec)
        if extra is not None and extra.absent():
            by_extra.setdefault(extra, []).append(spec.name)
    said = " (the default)" if default else ""
    lines = [
        missing(f"--metric={option_text([MetricRequest.of(n) for n in names])}{said}", extra)
        for extra, names in by_extra.items()
    ]
    return "; ".join(line for line in lines if line) or None
