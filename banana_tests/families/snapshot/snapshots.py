"""The snapshot family's comparison: a metric's raw scores on the data set, compared within a per-metric
tolerance in normalised points (or `--banana-snapshot-rtol`, whichever is wider), so that they hold on
any machine: how far each metric moves between machines is measured in docs/snapshots.md.

A pyiqa upgrade or a code change that moves scores then fails with the largest moves, how many
more there are, and the command that re-records an intended change, instead of a wall of JSON.
A run narrowed by the selection options compares only what it scored. Snapshots of an installed
suite are written under the user's rootdir (`--banana-snapshot-dir`), never into site-packages: the
shipped ones are read-only.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
import site
import sys
import sysconfig
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

from syrupy.extensions.json import JSONSnapshotExtension

from banana_tests.data import EMBEDDED
from banana_tests.trajectories.records import Record
from banana_tests.trajectories.table_rows import HUB
from metrics_under_test.spec import MetricSpec

Scores = dict[str, float]
DEFAULT_DIR = "banana_snapshots"
NO_SNAPSHOT = "no snapshot recorded for this metric yet: record it with"


def score_id(record: Record) -> str:
    """A score's place in the snapshot: variant, seed image, run and step."""
    return f"{record.variant}/{record.seed_image}/run{record.run}/step{record.step}"


# Normalised points a score may move before its snapshot fails: float noise between machines
# (other CPU kernels, BLAS paths, threads) must pass. Measured by benchmarks/snapshot_drift.py;
# the table and the reasons are in docs/snapshots.md. PIQE thresholds 16×16 blocks: a rounding
# difference in MKL's colour conversion flips one, 0.164 points on the embedded set (MKL_CBWR
# and another machine alike), and one block weighs up to 100/(active blocks + 1) = 0.26 points there.
# BRISQUE moved 0.073 points under one-ulp input noise (0.016 on MKL's portable path).
DEFAULT_POINTS = 0.1
MACHINE_POINTS = {"piqe": 0.6, "brisque": 0.2, "niqe": 0.1}
SHOWN = 3  # moved scores listed without -vv: pytest cuts an explanation after ~8 lines


@dataclass(frozen=True)
class Tolerance:
    """How far a metric's scores may move: `points` normalised points, `atol` the same in raw units."""

    points: float
    atol: float


def tolerance(spec: MetricSpec) -> Tolerance:
    """The metric's declared `snapshot_points`, else its measured machine drift, else the default."""
    points = spec.snapshot_points if spec.snapshot_points is not None else MACHINE_POINTS.get(spec.name)
    points = DEFAULT_POINTS if points is None else points
    return Tolerance(points, points * (spec.scale.high - spec.scale.low) / 100)


class Change(Enum):
    MOVED = "moved"
    NEW = "new"
    GONE = "gone"


@dataclass(frozen=True)
class Drift:
    """One score that differs from its snapshot beyond the tolerance."""

    score: str
    change: Change
    old: float | None
    new: float | None

    @property
    def size(self) -> float:
        """How far it moved; appeared and vanished scores rank first."""
        return math.inf if self.old is None or self.new is None else abs(self.new - self.old)

    def __str__(self) -> str:
        if self.new is None:
            return f"{self.score}: {self.old!r} in the snapshot, not scored now"
        if self.old is None:
            return f"{self.score}: scored {self.new!r}, not in the snapshot"
        rel = f" ({(self.new - self.old) / abs(self.old):+.2%})" if self.old else ""
        return f"{self.score}: {self.old:.6g} → {self.new:.6g}, moved {self.new - self.old:+.6g}{rel}"


def drift(
    expected: Mapping[str, float],
    actual: Mapping[str, float],
    rtol: float,
    atol: float = 0.0,
    narrowed: bool = False,
) -> list[Drift]:
    """Each score that moved beyond both `rtol` and `atol`, appeared or disappeared, largest
    first; empty when it matches. A narrowed run does not miss the scores it did not select."""
    found = []
    for name in sorted(expected.keys() | actual.keys()):
        if name not in actual:
            if not narrowed:
                found.append(Drift(name, Change.GONE, expected[name], None))
        elif name not in expected:
            found.append(Drift(name, Change.NEW, None, actual[name]))
        elif not math.isclose(actual[name], expected[name], rel_tol=rtol, abs_tol=atol):
            found.append(Drift(name, Change.MOVED, expected[name], actual[name]))
    return sorted(found, key=lambda d: d.size, reverse=True)


@dataclass(frozen=True)
class Rerecord:
    """What re-records a metric's snapshot: the suite's test, the data set and the metric."""

    tests: tuple[str, ...]  # `--pyargs banana_tests` for an installed suite, else the module's path
    dataset: tuple[str, ...]  # the data-set options of this run, `--banana-dataset=...` etc.
    metric: str

    @property
    def command(self) -> str:
        return shlex.join(
            [
                "pytest",
                *self.tests,
                *self.dataset,
                f"--banana-metric={self.metric}",
                "-k",
                "test_scores_match_snapshot",
                "--snapshot-update",
            ]
        )


def drift_report(moved: list[Drift], limits: str, rerecord: Rerecord, listed: int | None) -> Iterator[str]:
    """The drift message: the count, when and how to re-record, the largest moves, how many more."""
    yield f"{len(moved)} score(s) moved beyond {limits} (snapshot → now, largest first):"
    shown = moved if listed is None else moved[:listed]
    yield from (f"  {d}" for d in shown)
    if len(moved) > len(shown):
        yield f"  … and {len(moved) - len(shown)} more (-vv lists them all)"
    yield f"Intended (a new pyiqa, torch or metric version, your edit)? Re-record: {rerecord.command}"
    yield "Otherwise find why before re-recording: other machines' float noise is within the tolerance."


SITE_FOLDERS = ("site-packages", "dist-packages")


def installed(path: Path) -> bool:
    """`path` lies in an installed package, which a run must never write to: in this interpreter's
    site-packages, the user's, or any other site folder on sys.path (a venv made with
    --system-site-packages, or one a .pth file adds)."""
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")} | {site.getusersitepackages()}
    roots |= set(site.getsitepackages()) | {p for p in sys.path if Path(p).name in SITE_FOLDERS}
    return any(path.resolve().is_relative_to(Path(root).resolve()) for root in roots)


def dataset_label(source: str, artifacts: bool, rootdir: Path) -> str | None:
    """None for the embedded set (its snapshots stay where they always were); else a folder-safe
    name of the set's location, so that two sets' snapshots never meet and none is `.` or `..`: a
    hub set by its id, the trial sets (`artifacts`) by their folder's content-keyed name, a local
    set by its resolved path's name and a digest of that path, taken relative to the `rootdir`
    when inside it (a checkout or CI runner anywhere finds the same label)."""
    if source.startswith(HUB):
        return "hf-" + _folder_safe(source.removeprefix(HUB).strip("/").replace("/", "--"))
    where = Path(source).resolve()
    if where == EMBEDDED.resolve():
        return None
    if artifacts:
        return _folder_safe(where.name)
    root = rootdir.resolve()
    place = where.relative_to(root).as_posix() if where.is_relative_to(root) else where.as_posix()
    return f"{_folder_safe(where.name)}-{hashlib.sha256(place.encode()).hexdigest()[:8]}"


def _folder_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).lstrip(".") or "dataset"


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
    tolerance: ClassVar[Tolerance] = Tolerance(DEFAULT_POINTS, 0.0)
    narrowed: ClassVar[bool] = False
    folder: ClassVar[Path | None] = None
    rerecord: ClassVar[Rerecord] = Rerecord(("banana_tests/families/snapshot/test_snapshots.py",), (), "NAME")
    listed: ClassVar[int | None] = SHOWN

    @classmethod
    def configured(
        cls,
        rtol: float,
        tolerance: Tolerance,
        narrowed: bool,
        folder: Path,
        rerecord: Rerecord,
        listed: int | None = SHOWN,
    ) -> type[ScoreSnapshotExtension]:
        settings = {
            "rtol": rtol,
            "tolerance": tolerance,
            "narrowed": narrowed,
            "folder": folder,
            "rerecord": rerecord,
            "listed": listed,
        }
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
        return not self._drift(expected, serialized_data)

    def diff_lines(self, serialized_data: Any, snapshot_data: Any) -> Iterator[str]:
        expected = _loads(snapshot_data)
        if expected is None:
            yield f"{NO_SNAPSHOT} {self.rerecord.command}"
            return
        limits = f"rtol={self.rtol:g} and {self.tolerance.points:g} normalised points"
        yield from drift_report(self._drift(expected, serialized_data), limits, self.rerecord, self.listed)

    def _drift(self, expected: Scores, serialized_data: Any) -> list[Drift]:
        actual = json.loads(serialized_data)
        return drift(expected, actual, self.rtol, self.tolerance.atol, self.narrowed)


_RUN_OPTIONS = ("dataset", "artifact", "variant", "snapshot-dir", "weights-dir", "rootdir")
"""The options a re-record needs as the run had them: those that chose its data set (`--dataset*`,
`--artifact`, `--variant`), where its snapshots live and where its metric's weights come from."""


def run_options(args: Sequence[str]) -> tuple[str, ...]:
    """The `_RUN_OPTIONS` among a run's arguments, as typed
    (short or `--banana-` spelling, `=value` or a separate value)."""
    wanted = tuple(f"--{p}{name}" for name in _RUN_OPTIONS for p in ("", "banana-"))
    kept: list[str] = []
    for i, arg in enumerate(args):
        option = arg.split("=", 1)[0]
        if not option.startswith(wanted):
            continue
        kept.append(arg)
        if "=" not in arg and i + 1 < len(args):
            kept.append(args[i + 1])
    return tuple(kept)
