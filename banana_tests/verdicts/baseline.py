"""Failure baselines: the cases a team already knows fail, kept as a small sorted JSON file.

Under `pytest --baseline FILE` those cases are expected failures, so CI stays quiet about them
and speaks up on a new failure (or, with `--strict-baseline`, on a fixed one). A baseline lists
every kind of case the suite can fail: Δ cells, trend cases, control degradations,
invariance checks and worst-escape searches, so a baseline written from a run makes that same run pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from banana_tests.cases import CaseKey, CaseKind, FamilyKey
from banana_tests.families.family_list import family_of
from banana_tests.safe_files import NotReadable, read_regular, write_atomic
from banana_tests.trajectories.records import DataError, check_index
from banana_tests.verdicts.matrix import Matrix, Outcome

FORMAT = "banana-tests-baseline/2"
READABLE = frozenset({"banana-tests-baseline/1", FORMAT})  # /1 files (Δ cells only) still load
MAX_BASELINE_BYTES = 64 * 2**20  # a baseline lists failing cases, a few dozen bytes each
TOP_KEYS = frozenset({"format", "failures"})


Other = FamilyKey
"""A case outside the matrix that a baseline can list (a family's, banana_tests.families)."""
Known = CaseKey | Other
"""Any case a baseline can list."""

# Entry keys by kind: a Δ cell has no `kind` (the /1 format), the others name theirs; a family's
# entries are its own (banana_tests.families.family.Family.entry_fields).
ENTRY_KEYS: dict[str | None, tuple[set[str], set[str]]] = {
    None: ({"metric", "seed_image", "step"}, {"run"}),
}


class BaselineError(ValueError):
    """A baseline file that cannot be read; the message names the file and the entry."""


def _entry(key: Known) -> dict[str, Any]:
    if not isinstance(key, CaseKey):
        return dict(key.entry())
    entry: dict[str, Any] = {"metric": key.metric, "seed_image": key.seed_image, "step": key.step}
    if key.run is not None:
        entry["run"] = key.run
    return entry


def _order(key: Known) -> tuple[str, int, str, int, int]:
    """A metric's entries together: its Δ cells (as `cases.sort_key`), then each family's cases by
    their rank (trends, controls, invariance checks, searches)."""
    if not isinstance(key, CaseKey):
        rank, name = key.rank()
        return key.metric, rank, name, 0, 0
    return key.metric, 0, key.seed_image, key.step, -1 if key.run is None else key.run


def dump_baseline(keys: Iterable[Known], path: Path) -> None:
    """Write failing cases sorted and one per line, so a refreshed baseline reviews as a short
    diff; atomically, so an interrupted refresh leaves the old file whole."""
    entries = [json.dumps(_entry(k)) for k in sorted(set(keys), key=_order)]
    failures = "[\n" + ",\n".join("    " + e for e in entries) + "\n  ]" if entries else "[]"
    body = f'{{\n  "format": "{FORMAT}",\n  "failures": {failures}\n}}\n'
    write_atomic(Path(path), body.encode("utf-8"))


def write_baseline(matrix: Matrix, path: Path, others: Iterable[Other] = ()) -> None:
    """The matrix's failing cells (Δ ≥ 0), and the failing trend, control and invariance cases,
    as a baseline.
    A cell that failed without a Δ (its metric named but not loadable) is no verdict to expect."""
    cells = [k for k, c in matrix.cells.items() if c.outcome is Outcome.FAILED and c.delta is not None]
    dump_baseline([*cells, *others], path)


def load_baseline(path: Path) -> frozenset[Known]:
    """The failing cases a baseline file lists; a BaselineError names the file and entry."""
    try:
        data = json.loads(read_regular(path, MAX_BASELINE_BYTES).decode("utf-8"))
    except (NotReadable, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"baseline {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") not in READABLE:
        raise BaselineError(f"baseline {path}: not a {FORMAT} file (missing or wrong 'format')")
    unknown = sorted(set(data) - TOP_KEYS)
    failures = data.get("failures", [])
    if unknown or not isinstance(failures, list):
        what = f"unknown key(s) {', '.join(map(repr, unknown))}" if unknown else "'failures' is not a list"
        raise BaselineError(f"baseline {path}: {what}; a baseline holds only {sorted(TOP_KEYS)}")
    keys = []
    for i, entry in enumerate(failures):
        try:
            key = _key(entry)
            if key is not None:
                keys.append(key)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BaselineError(f"baseline {path}: failure entry {i} {entry!r} is malformed: {exc}") from exc
    return frozenset(keys)


def entry_keys() -> dict[str | None, tuple[set[str], set[str]]]:
    """The fields of each kind's entries, in `CaseKind` order: the Δ cell's, then each kind's a
    registered family or this module reads."""
    found = dict(ENTRY_KEYS)
    for kind in CaseKind:
        family = family_of(kind)
        if family is not None:
            found[kind.value] = (set(family.entry_fields), set())
    return {None: found[None], **{k.value: found[k.value] for k in CaseKind if k.value in found}}


def _key(entry: dict[str, Any]) -> Known | None:
    """An entry's case; None for a kind of a family this suite does not hold (its folder deleted)."""
    kind = entry.get("kind")
    kinds = entry_keys()
    if kind not in kinds:
        if kind in {k.value for k in CaseKind}:
            return None
        known = ", ".join(k for k in kinds if k is not None)
        raise ValueError(f"unknown kind {kind!r} (known: {known}, or none for a Δ cell)")
    required, optional = kinds[kind]
    unknown = sorted(set(entry) - required - optional)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))}")
    if kind is not None:
        family = family_of(CaseKind(kind))
        assert family is not None
        return family.key(entry)
    run = entry.get("run")
    try:  # JSON integers within the data set reader's bound: never 5.9, true, "٥" or 1e999
        step = check_index("step", entry["step"])
        return CaseKey(
            str(entry["metric"]),
            str(entry["seed_image"]),
            step,
            None if run is None else check_index("run", run),
        )
    except DataError as exc:
        raise ValueError(str(exc)) from None
