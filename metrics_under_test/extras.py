"""The extras of banana-tests (pyproject's optional dependencies) that its heavy parts need, and
the library behind each metric with the licence its installed metadata declares.

The core installs neither torch nor pyiqa. What needs them is checked from installed metadata,
without importing anything, so a missing extra is one line naming it, ready to paste, before a
case runs or an editor is built; never an ImportError deep inside a case, never another metric.
The licences are for `banana-tests metrics`: pyiqa's is non-commercial, which `pip show` (reading
`License` only) prints as blank, so a team sees it before adopting a metric rather than in a
legal review.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import metadata

from metrics_under_test.registry import MetricRequest, option_text
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


_SHORT = 80  # a `License` field longer than this, or of several lines, is the licence's text


@dataclass(frozen=True)
class Library:
    """A metric's implementing distribution: its version and licence when installed, else the
    extra that installs it."""

    name: str
    version: str | None = None
    licence: str | None = None
    extra: str | None = None

    def describe(self) -> str:
        if self.version is None:
            how = f"pip install 'banana-tests[{self.extra}]'" if self.extra else "its own package"
            return f"{self.name}: not installed ({how})"
        return f"{self.name} {self.version}: {self.licence or 'no licence declared in its metadata'}"


def declared_licence(meta: metadata.PackageMetadata) -> str | None:
    """License-Expression (PEP 639), else a one-line License, else the licence classifiers."""
    expression = (meta.get_all("License-Expression") or [""])[0]
    if expression:
        return str(expression)
    text = str((meta.get_all("License") or [""])[0]).strip()
    if text and "\n" not in text and len(text) <= _SHORT:
        return text
    classifiers = [
        c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")
    ]
    return ", ".join(classifiers) or None


@cache
def library(distribution: str, extra: str | None = None) -> Library:
    try:
        meta = metadata.metadata(distribution)
    except metadata.PackageNotFoundError:
        return Library(distribution, extra=extra)
    return Library(meta["Name"], meta["Version"], declared_licence(meta), extra)


def library_of(spec: MetricSpec) -> Library | None:
    """The library a metric runs in: pyiqa for pyiqa's metrics and Q-Align, transformers for the
    other VLM adapters, the distribution that ships a custom metric's module (None for a module
    no distribution installed, such as one beside the user's tests)."""
    extra = of_metric(spec)
    if spec.backend is Backend.PYIQA or spec.name == "qalign":
        return library("pyiqa", extra.name if extra else None)
    if spec.backend is Backend.VLM:
        return library("transformers", extra.name if extra else None)
    top = (spec.target or "").split(":", 1)[0].split(".", 1)[0]
    owners = metadata.packages_distributions().get(top, [])
    return library(owners[0]) if owners else None
