"""The same outputs as 0abd72f on the embedded set: every case id, outcome, Δ and JUnit property,
the report written from the JUnit, and the baseline and score snapshots 0abd72f wrote, read alike.

The reference (tests/data/reference_0abd72f/) was recorded from a checkout of 0abd72f with
brisque, niqe and piqe, every family a run over the embedded set has (Δ matrix, `--trend`,
`--search=20`, controls, invariance, snapshots) and a fresh score cache:

1. `pytest -n 2 --metric=brisque,niqe,piqe --trend --search=20 --cache-dir=A --junitxml=plain.xml`
   → `junit_plain.xml.gz`; `banana-tests report plain.xml --write-baseline=baseline.json` →
   `baseline.json` and `report_plain/`;
2. the same with `--baseline=baseline.json --strict-baseline`, a fresh cache again (a warm one
   replays the search's escape: another example count) → `cases.json` (`python -m
   tests.reference_cases`) and, reported, `report_gate/`; recorded again with a `-p` plugin that
   empties hypothesis's local constants for the process (`providers._get_local_constants =
   Constants`), as the search now does while it runs: 0abd72f's search drew the literals of its own
   modules, so its escape moved with every refactor (brisque's and piqe's rows changed, nothing else);
   0abd72f installed into a site-packages folder, whose modules hypothesis does not read, finds the
   recorded piqe escape without the plugin;
3. the snapshot files deleted and written again by `--snapshot-update -k test_scores_match_snapshot`
   → `snapshots/`.

This test runs step 2 on a copy of the current tree whose shipped snapshots are replaced by the
ones 0abd72f wrote (found wherever the tree keeps them), so the snapshot cases read 0abd72f's files.
The child imports the copy's code (PYTHONPATH), not this clone's through its editable install, and
each of its processes writes where its code came from (`ORIGIN`), which the test checks.
Δ and normalised figures may differ by the metric's measured machine drift, raw scores by the
same in raw units, pixel figures by float rounding; all else is exact (tests/reference_cases.py).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SHARED_MIRROR, unavailable
from tests.reference_cases import COMMAND, NUMBER, csv_differences, differences, read_run

pytestmark = pytest.mark.slow  # the whole suite with three real metrics, cold, in a child pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "data" / "reference_0abd72f"
NEEDED = ("brisque_svm_weights.pth", "niqe_modelparameters.mat")
MATRIX_KEYS = ("metric", "seed_image", "step", "run")
SNAPSHOT = "test_scores_match_snapshot[{}].json"
ORIGIN = """
import os

import banana_tests
import metrics_under_test


def pytest_configure(config):
    with open(os.environ["BANANA_ORIGINS"], "a", encoding="utf-8") as out:
        out.write(f"{banana_tests.__file__}\\n{metrics_under_test.__file__}\\n")
"""
"""A plugin (`-p banana_origin`) by which each process of the run says where its code came from."""


def mirror() -> Path:
    """The shared weights mirror beside the clone, else $BANANA_WEIGHTS_DIR."""
    candidates = [SHARED_MIRROR] + [Path(v) for v in [os.environ.get("BANANA_WEIGHTS_DIR")] if v]
    for folder in candidates:
        if all((folder / name).is_file() for name in NEEDED):
            return folder
    unavailable(f"no folder with {', '.join(NEEDED)} among {[str(c) for c in candidates]}")


def tree_copy(target: Path) -> Path:
    """The working tree's files (tracked and new, as they are now) copied to `target`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def shipped_snapshots(tree: Path) -> dict[str, Path]:
    """The embedded set's snapshot file of each reference metric in `tree`: `__snapshots__/<test
    module>/<file>` (another set's sit one folder deeper, under its label)."""
    found: dict[str, list[Path]] = {}
    for metric in ("brisque", "niqe", "piqe"):
        name = SNAPSHOT.format(metric)
        found[metric] = [
            p  # rglob would read the name's brackets as a pattern
            for p in (tree / "banana_tests").rglob("*.json")
            if p.name == name and p.parent.parent.name == "__snapshots__"
        ]
    assert all(len(paths) == 1 for paths in found.values()), found
    return {metric: paths[0] for metric, paths in found.items()}


def report(junit: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The current tree's `banana-tests report` of `junit` into `out`."""
    cmd = [str(Path(sys.executable).with_name("banana-tests")), "report", str(junit), f"--out={out}", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=out.parent)


def summary_lines(text: str) -> list[str]:
    """summary.md with the search table's seconds column blanked (a wall time)."""
    lines = []
    for line in text.splitlines():
        cells = line.split(" | ")
        if line.startswith("| ") and len(cells) == 10 and NUMBER.fullmatch(cells[4]):
            cells[4] = "<seconds>"
        lines.append(" | ".join(cells))
    return lines


def summary_differences(reference: str, found: str) -> list[str]:
    """Lines of two summary.md that differ beyond the widest metric drift (PIQE's 0.6 points)."""
    from tests.reference_cases import same_value

    was, now = summary_lines(reference), summary_lines(found)
    if len(was) != len(now):
        return [f"summary.md has {len(now)} lines, the reference {len(was)}"]
    return [
        f"summary.md: {a!r} → {b!r}" for a, b in zip(was, now, strict=True) if not same_value(a, b, 0.6, 0)
    ]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """The reference command on a copy of this tree holding 0abd72f's snapshots, the copy's code
    imported: (the run, its JUnit, the copy; `origins.txt` beside the JUnit)."""
    weights = mirror()
    out = tmp_path_factory.mktemp("reference")
    tree = tree_copy(out / "tree")
    for metric, path in shipped_snapshots(tree).items():
        shutil.copyfile(REFERENCE / "snapshots" / SNAPSHOT.format(metric), path)
    xml = out / "junit.xml"
    (out / "plugins").mkdir()
    (out / "plugins" / "banana_origin.py").write_text(ORIGIN)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), str(out / "plugins")]),
        "BANANA_ORIGINS": str(out / "origins.txt"),
        "HF_HUB_OFFLINE": "1",
        "TORCH_HOME": str(out / "torch"),
        "BANANA_WEIGHTS_DIR": str(weights),
    }
    cmd = [sys.executable, "-m", "pytest", *COMMAND, "-p", "banana_origin", "-p", "no:cacheprovider"]
    cmd += [f"--cache-dir={out / 'cache'}"]
    cmd += [f"--junitxml={xml}", f"--weights-dir={weights}", f"--baseline={REFERENCE / 'baseline.json'}"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree)
    return done, xml, tree


def test_the_run_passes_under_0abd72fs_baseline_from_the_copy(
    run: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    """Exit 0 under --strict-baseline: no new failure and no fixed cell."""
    done = run[0]
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-3000:]


def test_every_process_of_the_run_imported_the_copys_code(
    run: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    """Not this clone's, which its editable install would give: the copy is what is compared."""
    _, xml, tree = run
    origins = (xml.parent / "origins.txt").read_text(encoding="utf-8").split()
    assert len(origins) >= 2 and all(Path(o).is_relative_to(tree) for o in origins), origins


def test_every_case_outcome_and_property_is_0abd72fs(
    run: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    """Same ids, outcomes, run facts and properties (numbers within the measured drift); the
    snapshot cases pass on the snapshots 0abd72f wrote."""
    reference = json.loads((REFERENCE / "cases.json").read_text(encoding="utf-8"))
    found = read_run(run[1])
    assert differences(reference, found) == []
    snapshot_cases = [name for name in found["cases"] if name.startswith("test_scores_match_snapshot[")]
    assert len(snapshot_cases) == 3 and all(found["cases"][n]["outcome"] == "passed" for n in snapshot_cases)


def test_the_report_of_this_run_is_0abd72fs(
    run: tuple[subprocess.CompletedProcess[str], Path, Path], tmp_path: Path
) -> None:
    done = report(run[1], tmp_path / "report")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    gate = REFERENCE / "report_gate"
    matrix = (tmp_path / "report" / "matrix.csv").read_text(encoding="utf-8")
    assert csv_differences((gate / "matrix.csv").read_text(encoding="utf-8"), matrix, MATRIX_KEYS) == []
    controls = (tmp_path / "report" / "controls.csv").read_text(encoding="utf-8")
    assert controls == (gate / "controls.csv").read_text(encoding="utf-8")
    summary = (tmp_path / "report" / "summary.md").read_text(encoding="utf-8")
    assert summary_differences((gate / "summary.md").read_text(encoding="utf-8"), summary) == []


def test_0abd72fs_junit_reports_and_baselines_as_0abd72f_did(tmp_path: Path) -> None:
    """A JUnit file written by 0abd72f, read by this tree's report: the same files, byte for byte."""
    junit = tmp_path / "plain.xml"
    junit.write_bytes(gzip.decompress((REFERENCE / "junit_plain.xml.gz").read_bytes()))
    baseline = tmp_path / "baseline.json"
    done = report(junit, tmp_path / "report", f"--write-baseline={baseline}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert baseline.read_text(encoding="utf-8") == (REFERENCE / "baseline.json").read_text(encoding="utf-8")
    for name in ("matrix.csv", "controls.csv", "summary.md"):
        written = (tmp_path / "report" / name).read_text(encoding="utf-8")
        assert written == (REFERENCE / "report_plain" / name).read_text(encoding="utf-8"), name
