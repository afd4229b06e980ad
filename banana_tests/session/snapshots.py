"""Score snapshots: a metric's raw scores on the data set, compared within a relative tolerance
and an absolute one of 0.1 normalised points (float noise: another CPU, or a near-zero score).

A pyiqa upgrade or a code change that moves scores then fails with a list of the images and
steps that moved and by how much, instead of a wall of JSON. A run narrowed by the selection
options compares only what it scored. Snapshots of an installed suite are written under the
user's rootdir (`--snapshot-dir`), never into site-packages: the shipped ones are read-only.
"""

from __future__ import annotations

import json
import math
import re
import site
import sysconfig
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from syrupy.extensions.json import JSONSnapshotExtension

from banana_tests.session.suite import SuiteState
from banana_tests.trajectories.records import Record
from metrics_under_test.spec import MetricSpec

Scores = dict[str, float]
DEFAULT_DIR = "banana_snapshots"
NO_SNAPSHOT = "no snapshot recorded for this metric yet: record it with --snapshot-update"


def score_id(record: Record) -> str:
    """A score's place in the snapshot: variant, seed image, run and step."""
    return f"{record.variant}/{record.seed_image}/run{record.run}/step{record.step}"


# Normalised points. The same code on two machines of this project's kind moved NIQE by up to 0.028
# points (BLAS kernels differ by CPU); verdicts are decided by gaps of whole points.
ATOL_NORMALISED = 0.1


def abs_tolerance(spec: MetricSpec) -> float:
    """ATOL_NORMALISED in the metric's raw units."""
    return ATOL_NORMALISED * (spec.scale.high - spec.scale.low) / 100


def drift(
    expected: Mapping[str, float],
    actual: Mapping[str, float],
    rtol: float,
    atol: float = 0.0,
    narrowed: bool = False,
) -> list[str]:
    """One line per score that moved beyond both `rtol` and `atol`, appeared or disappeared;
    empty when it matches. A narrowed run does not miss the scores it did not select."""
    lines = []
    for name in sorted(expected.keys() | actual.keys()):
        if name not in actual:
            if not narrowed:
                lines.append(f"{name}: {expected[name]!r} in the snapshot, not scored now")
        elif name not in expected:
            lines.append(f"{name}: scored {actual[name]!r}, not in the snapshot")
        elif not math.isclose(actual[name], expected[name], rel_tol=rtol, abs_tol=atol):
            old, new = expected[name], actual[name]
            rel = f" ({(new - old) / abs(old):+.2%})" if old else ""
            lines.append(f"{name}: {old:.6g} → {new:.6g}, moved {new - old:+.6g}{rel}")
    return lines


def installed(path: Path) -> bool:
    """`path` lies in an installed package (site-packages), which a run must never write to."""
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")} | {site.getusersitepackages()}
    return any(path.resolve().is_relative_to(Path(root).resolve()) for root in roots)


def dataset_label(state: SuiteState) -> str | None:
    """None for the embedded set; else a folder-safe name of the set, so that its snapshots
    never meet another set's scores."""
    if state.embedded:
        return None
    name = state.source.source.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "dataset"


def snapshot_folder(user_dir: Path, module: Path, label: str | None, name: str, updating: bool) -> Path:
    """Where `module`'s snapshot file `name` for the data set `label` is read and written.

    Beside the module, as syrupy does, unless the module is installed: then in `user_dir`,
    falling back to the shipped file (read-only) while the user has none of their own."""
    place = Path(module.stem) if label is None else Path(label, module.stem)  # syrupy wants the stem last
    shipped = module.parent / "__snapshots__" / place
    if not installed(module):
        return shipped
    own = user_dir / place
    if updating or (own / name).is_file() or not (shipped / name).is_file():
        return own
    return shipped


def _loads(data: Any) -> Scores | None:
    return json.loads(data) if data else None


class ScoreSnapshotExtension(JSONSnapshotExtension):
    """JSON snapshots of {score id: raw score} that match within `rtol` or `atol` and diff as
    moved scores, kept in `folder`."""

    rtol: ClassVar[float] = 1e-3
    atol: ClassVar[float] = 0.0
    narrowed: ClassVar[bool] = False
    folder: ClassVar[Path | None] = None

    @classmethod
    def configured(
        cls, rtol: float, atol: float, narrowed: bool, folder: Path
    ) -> type[ScoreSnapshotExtension]:
        settings = {"rtol": rtol, "atol": atol, "narrowed": narrowed, "folder": folder}
        return type(cls.__name__, (cls,), settings)

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        if cls.folder is None:
            return super().dirname(test_location=test_location)
        return str(cls.folder)

    def matches(self, *, serialized_data: Any, snapshot_data: Any) -> bool:
        expected = _loads(snapshot_data)
        if expected is None:
            return False
        return not drift(expected, json.loads(serialized_data), self.rtol, self.atol, self.narrowed)

    def diff_lines(self, serialized_data: Any, snapshot_data: Any) -> Iterator[str]:
        expected = _loads(snapshot_data)
        if expected is None:
            yield NO_SNAPSHOT
            return
        moved = drift(expected, json.loads(serialized_data), self.rtol, self.atol, self.narrowed)
        limits = f"rtol={self.rtol:g} and atol={self.atol:g}"
        yield f"{len(moved)} score(s) moved beyond {limits} (snapshot → now):"
        yield from (f"  {line}" for line in moved)
