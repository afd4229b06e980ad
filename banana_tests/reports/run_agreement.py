"""Whether JUnit files come from runs that may be merged: the same data, selection and verdict rules.

Shards and reruns of one run differ only in `--shard`, `-k`, `--lf`, `-n` and the machine. Each
run writes what decides its cases and their verdicts as testsuite properties (written by
banana_tests.core.selection_facts), and `banana-tests report` refuses files whose values
differ (exit 3, naming each value's files) rather than merge a `--runs=2` shard into a full one:

- every file: the verdict rules (EVERY_RUN), and the records of each seed image two files share
  (SEED_RECORDS), so runs split by metric or by seed image still merge, as docs/reports.md says;
- `--shard` runs: also the whole selection (AMONG_SHARDS): each deals the same units.

A file without a property (written before it was recorded) is not compared on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

RECORDS = "selected_records"
"""A digest of the selected records' identities, file names and sizes (and sha256 where the data
set records one), with their count: another `--dataset`, revision or selection changes it."""
SEED_RECORDS = "seed_records"
"""A JSON object, seed image → the digest of its records: compared where files share a seed image."""
SHARD = "shard"
"""The run's `--shard` (K/N), empty for a run of the whole selection."""
EVERY_RUN = {
    "variant": "--variant",
    "reference_step": "--reference-step",
    "runs": "--runs",
    "where": "--where",
    "aggregate": "--aggregate",
    "strict_runs": "--strict-runs",
    "max_pixels": "--max-pixels",
    "snapshot_rtol": "--snapshot-rtol",
}
AMONG_SHARDS = {
    RECORDS: "selected records",
    "metric_set": "--metric",
    "selected_steps": "--steps",
    "seed_selection": "--seed-image",
    "trend": "--trend",
}
AGREED = {**EVERY_RUN, **AMONG_SHARDS, SEED_RECORDS: "records of each seed image", SHARD: "--shard"}
"""Every property of the check → what it is, as the messages name it."""
SEEDS_SHOWN = 5
"""Seed images whose records differ named one a line; the rest counted."""
MIXED_EXIT = 3
"""`banana-tests report`'s exit code for files of runs that cannot be merged (nothing is written)."""


def disagreements(facts: Mapping[Path, Mapping[str, str]]) -> list[str]:
    """One line per property with more than one value among the files it applies to, naming each
    value's files; a differing record digest names the files' `--dataset` too."""
    shards = {path: props for path, props in facts.items() if props.get(SHARD)}
    lines = [_differs(label, name, facts) for name, label in EVERY_RUN.items()]
    lines += [
        _differs(f"{label} (between --shard runs)", name, shards) for name, label in AMONG_SHARDS.items()
    ]
    per_seed = {path: _seeds(props.get(SEED_RECORDS, "")) for path, props in facts.items()}
    seeds = sorted({seed for found in per_seed.values() for seed in found})
    differing = []
    for seed in seeds:
        having = {path: {"seed": found[seed]} for path, found in per_seed.items() if seed in found}
        differing.append(_differs(f"records of seed image {seed}", "seed", having))
    differing = [line for line in differing if line]
    if len(differing) > SEEDS_SHOWN:
        more = len(differing) - SEEDS_SHOWN
        differing[SEEDS_SHOWN:] = [f"records of {more} more seed image(s) differ likewise"]
    return [line for line in lines if line] + differing


def _differs(label: str, name: str, facts: Mapping[Path, Mapping[str, str]]) -> str:
    values: dict[str, list[Path]] = {}
    for path, props in facts.items():
        if name in props:
            values.setdefault(props[name], []).append(path)
    if len(values) < 2:
        return ""
    each = "; ".join(
        f"{_shown(name, value, paths, facts)} in {', '.join(map(str, paths))}"
        for value, paths in values.items()
    )
    return f"{label}: {each}"


def _shown(name: str, value: str, paths: list[Path], facts: Mapping[Path, Mapping[str, str]]) -> str:
    if name != RECORDS:
        return value or "(none)"
    sources = dict.fromkeys(facts[p]["dataset"] for p in paths if "dataset" in facts[p])
    return f"{value} of --dataset={', '.join(sources)}" if sources else value


def _seeds(text: str) -> dict[str, str]:
    try:
        found = json.loads(text or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
