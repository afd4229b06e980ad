"""The library behind each metric and the licence its installed metadata declares, for
`banana-tests metrics`: pyiqa's is non-commercial, which `pip show` (reading `License` only)
prints as blank, so a team sees it before adopting a metric rather than in a legal review."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import metadata

from metrics_under_test.extras import of_metric
from metrics_under_test.spec import Backend, MetricSpec

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


def of(spec: MetricSpec) -> Library | None:
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
