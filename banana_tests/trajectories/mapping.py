"""Which column (or part of the image path) holds each key of a record, for sets in other layouts.

Explicit `--dataset-map` entries win, then named groups of `--dataset-path-pattern`, then common
column names. A set that still lacks a key gets an error listing its columns and sample paths,
because the layout of a foreign set (Banana100 on the hub included) cannot be assumed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from banana_tests.trajectories.records import DataError

KEYS = ("seed_image", "step", "run", "variant")
DEFAULTS: dict[str, Any] = {"run": 0, "variant": "replicate"}  # a set with one run, or one variant
COMMON_NAMES: dict[str, tuple[str, ...]] = {
    "seed_image": ("seed_image", "seed", "source_image", "source", "image_name", "initial_image", "scene"),
    "step": ("step", "iteration", "iter", "turn", "round", "step_idx"),
    "run": ("run", "trial", "repeat", "repetition", "run_id", "run_idx"),
    "variant": ("variant", "setting", "task", "prompt_type", "experiment"),
    "image": ("image", "file_name", "image_path", "path", "file", "img"),
}
DEFAULT_PATTERN = r"(?P<seed_image>[^/]+)/run_?(?P<run>\d+)/(?:step_?)?(?P<step>\d+)\.[A-Za-z]+$"


@dataclass(frozen=True)
class FieldMap:
    """Resolved sources of each key: a column name, or None to take it from the path pattern."""

    columns: Mapping[str, str] = field(default_factory=dict)
    pattern: re.Pattern[str] | None = None
    image: str = "image"

    def fields(self, row: Mapping[str, Any], path: str) -> dict[str, Any]:
        """The record keys of one row; `path` is the image path the pattern matches against."""
        out = dict(DEFAULTS)
        if self.pattern is not None:
            m = self.pattern.search(path)
            if m is None:
                raise DataError(f"image path {path!r} does not match --dataset-path-pattern")
            out.update({k: v for k, v in m.groupdict().items() if v is not None})
        out.update({key: row.get(col) for key, col in self.columns.items()})  # absent: null, refused
        return out


def parse_map(text: str | None) -> dict[str, str]:
    """`seed_image=name,step=turn` → {"seed_image": "name", "step": "turn"}; `image` may be mapped too."""
    if not text:
        return {}
    out = {}
    for item in text.split(","):
        key, sep, column = (s.strip() for s in item.partition("="))
        if not sep or not column or key not in (*KEYS, "image"):
            raise ValueError(
                f"--dataset-map takes key=column pairs with keys {', '.join((*KEYS, 'image'))}, got {item!r}"
            )
        out[key] = column
    return out


def resolve(
    columns: Sequence[str],
    sample_paths: Sequence[str],
    explicit: Mapping[str, str],
    pattern: str | None,
    image: str | None,
) -> FieldMap:
    """A FieldMap for a set with `columns`; a DataError that shows what was found if keys are missing."""
    compiled = _compile(pattern) if pattern else None
    from_pattern = set(compiled.groupindex) if compiled else set()
    unknown = [c for c in explicit.values() if c not in columns]
    if unknown:
        raise _mapping_error(
            f"--dataset-map names missing column(s) {', '.join(unknown)}", columns, sample_paths
        )
    chosen = {k: v for k, v in explicit.items() if k != "image"}
    for key in KEYS:
        if key in chosen or key in from_pattern:
            continue
        found = _common_column(columns, key)
        if found is not None:
            chosen[key] = found
    if compiled is None and not {"seed_image", "step"} <= set(chosen):
        fallback = re.compile(DEFAULT_PATTERN)
        if sample_paths and all(fallback.search(p) for p in sample_paths):
            compiled, from_pattern = fallback, set(fallback.groupindex) - set(chosen)
    missing = [k for k in ("seed_image", "step") if k not in chosen and k not in from_pattern]
    if missing:
        raise _mapping_error(f"cannot tell the {' and '.join(missing)} of each image", columns, sample_paths)
    if not image:
        raise _mapping_error("no image column", columns, sample_paths)
    return FieldMap(chosen, compiled, image)


def image_column(
    columns: Sequence[str], explicit: Mapping[str, str], image_features: Sequence[str]
) -> str | None:
    """The column holding images: mapped, else the first Image feature, else a common name."""
    return explicit.get("image") or next(iter(image_features), None) or _common_column(columns, "image")


def _common_column(columns: Sequence[str], key: str) -> str | None:
    """The column under one of `key`'s common names, matched case-insensitively, in their order."""
    lower = {c.lower(): c for c in columns}
    return next((lower[n] for n in COMMON_NAMES[key] if n in lower), None)


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise DataError(f"--dataset-path-pattern {pattern!r}: {exc}") from exc
    stray = set(compiled.groupindex) - set(KEYS)
    if stray:
        raise DataError(
            f"--dataset-path-pattern: unknown group(s) {', '.join(sorted(stray))}; use {', '.join(KEYS)}"
        )
    return compiled


def _mapping_error(what: str, columns: Sequence[str], sample_paths: Sequence[str]) -> DataError:
    samples = "".join(f"\n    {p}" for p in sample_paths[:3]) or " (none)"
    return DataError(
        f"{what}.\n  columns: {', '.join(columns) or '(none)'}\n  sample image paths:{samples}\n"
        "  map them with --dataset-map seed_image=<column>,step=<column>,run=<column>,variant=<column> "
        "or --dataset-path-pattern with named groups, e.g. "
        r"'(?P<seed_image>[^/]+)/run_?(?P<run>\d+)/(?P<step>\d+)\.png'"
    )
