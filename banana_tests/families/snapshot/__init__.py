"""The snapshot family: a metric's raw scores must not drift from the recorded ones. Its
descriptor, options and settings here; the comparison and syrupy's extension in `snapshots`, the
deselection of other metrics' snapshots in `snapshot_selection`, the cases in `test_snapshots`
(whose name names the snapshot folders, shipped under `__snapshots__/` and the user's).

Its cases write no case record: their JUnit output is pytest's and syrupy's alone, so it is a
`Family`, not a `RecordFamily`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from banana_tests.counts import decimal_number
from banana_tests.families.family import AddOption, OptionValue, Place, RunSettings

NAME = "snapshot"
PARAM = "snapshot_metric"
"""The parameter its test parametrizes itself with: every selected metric and every recorded one."""
DIR_INI = "banana_snapshot_dir"
DEFAULT_DIR = "banana_snapshots"


@dataclass(frozen=True)
class SnapshotSettings:
    """`--snapshot-dir` (else the ini key, else DEFAULT_DIR, from the rootdir) and `--snapshot-rtol`."""

    folder: Path = Path(DEFAULT_DIR)  # where an installed suite writes the user's score snapshots
    rtol: float = 1e-3

    def facts(self) -> tuple[tuple[str, str], ...]:
        return (("snapshot_rtol", repr(self.rtol)),)

    @classmethod
    def of(cls, settings: RunSettings) -> SnapshotSettings:
        found = settings.families.get(NAME)
        return found if isinstance(found, cls) else cls()


MODULE = Path(__file__).resolve().with_name("test_snapshots.py")
SHIPPED = MODULE.with_name("__snapshots__") / MODULE.stem
"""The embedded set's shipped snapshots, beside the module as syrupy keeps them."""


class SnapshotFamily:
    """The snapshot family's descriptor (banana_tests.families.family.Family): collected in every
    run, a case per selected or recorded metric."""

    name = NAME
    module = MODULE
    option = None
    params = frozenset({PARAM})
    shard_facts: Mapping[str, str] = {}
    run_facts: Mapping[str, str] = {"snapshot_rtol": "--snapshot-rtol"}
    ini: Mapping[str, str] = {
        DIR_INI: f"where an installed suite writes score snapshots (default: {DEFAULT_DIR})"
    }
    plugin = "banana_tests.families.snapshot.snapshot_selection"

    def add_options(self, addoption: AddOption) -> None:
        addoption(
            "--snapshot-dir",
            default=None,
            metavar="DIR",
            help="where an installed suite writes score snapshots, relative to the rootdir (default: "
            f"ini {DIR_INI}, else {DEFAULT_DIR}); the shipped ones are only read",
        )
        addoption(
            "--snapshot-rtol",
            default="1e-3",
            metavar="RTOL",
            help="relative tolerance of score snapshots, from 0 to 1 (default: 1e-3); scores within the "
            "metric's measured machine drift (0.1 to 0.6 normalised points; docs/snapshots.md) match too",
        )

    def read_settings(self, value: OptionValue, place: Place) -> SnapshotSettings:
        # math.isclose refuses a negative rtol mid-run, and nan matches nothing
        rtol = decimal_number("--snapshot-rtol", value("snapshot-rtol"), 0, 1)
        folder = value("snapshot-dir") or place.ini.get(DIR_INI) or DEFAULT_DIR
        return SnapshotSettings(place.rootdir / folder, rtol)


FAMILY = SnapshotFamily()
