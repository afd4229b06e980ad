"""Failure baselines: the cells a team already knows fail, kept as a small sorted JSON file.

Under `pytest --baseline FILE` those cells are expected failures, so CI stays quiet about them
and speaks up on a new failure (or, with `--strict-baseline`, on a fixed one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from banana_tests.cases import CaseKey, sort_key
from banana_tests.matrix import Matrix

FORMAT = "banana-tests-baseline/1"


class BaselineError(ValueError):
    """A baseline file that cannot be read; the message names the file and the entry."""


def _entry(key: CaseKey) -> dict[str, Any]:
    entry: dict[str, Any] = {"metric": key.metric, "seed_image": key.seed_image, "step": key.step}
    if key.run is not None:
        entry["run"] = key.run
    return entry


def dump_baseline(keys: Iterable[CaseKey], path: Path) -> None:
    """Write failing cells sorted and one per line, so a refreshed baseline reviews as a short diff."""
    entries = [json.dumps(_entry(k)) for k in sorted(set(keys), key=sort_key)]
    failures = "[\n" + ",\n".join("    " + e for e in entries) + "\n  ]" if entries else "[]"
    body = f'{{\n  "format": "{FORMAT}",\n  "failures": {failures}\n}}\n'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")


def write_baseline(matrix: Matrix, path: Path) -> None:
    """The matrix's failing cells (Δ ≥ 0) as a baseline file."""
    dump_baseline([k for k, cell in matrix.cells.items() if cell.outcome == "failed"], path)


def load_baseline(path: Path) -> frozenset[CaseKey]:
    """The failing cells a baseline file lists."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BaselineError(f"baseline {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(f"baseline {path}: not a {FORMAT} file (missing or wrong 'format')")
    keys = []
    for i, entry in enumerate(data.get("failures", [])):
        try:
            run = entry.get("run")
            keys.append(
                CaseKey(
                    str(entry["metric"]),
                    str(entry["seed_image"]),
                    int(entry["step"]),
                    None if run is None else int(run),
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BaselineError(f"baseline {path}: failure entry {i} {entry!r} is malformed: {exc}") from exc
    return frozenset(keys)
