"""Small trajectory sets built in a temporary folder, for the project's own tests."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import json
import os
import re
import signal
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import numpy as np
import pytest
from hypothesis import settings
from PIL import Image

from banana_tests.trajectories.records import Record
from metrics_under_test.extras import installed

MakeSet = Callable[..., Path]
PROJECT = Path(__file__).resolve().parent.parent

# These tests run suites in subprocesses beside each other under xdist: one OpenMP thread each,
# or the threads fight over the cores (BRISQUE measured 3-20x slower).
os.environ.setdefault("OMP_NUM_THREADS", "1")

# CI stays within minutes: no per-example deadline (first calls import numpy paths), bounded examples.
settings.register_profile("banana", deadline=None, max_examples=100)
settings.load_profile("banana")
# tests/mutation.py runs the same tests once per mutant: the same draws each time, nothing stored.
settings.register_profile("mutation", deadline=None, max_examples=100, derandomize=True, database=None)


def noisy_image(seed: str, run: int, step: int, size: tuple[int, int] = (96, 128)) -> Image.Image:
    """A smooth gradient scene with Gaussian noise that grows with `step`."""
    h, w = size
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x / w, y / h, (x + y) / (w + h)], axis=-1) * 200 + 20
    digest = hashlib.sha256(f"{seed}/{run}/{step}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))  # the same pixels in every process
    noisy = base + rng.normal(0, 3.0 * step, base.shape)
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def write_set(
    root: Path,
    seeds: Iterable[str] = ("alpha", "beta"),
    runs: Iterable[int] = (0, 1),
    steps: Iterable[int] = (1, 5, 10, 20),
    extra: dict[str, Any] | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    lines = []
    for seed in seeds:
        for run in runs:
            for step in steps:
                name = f"{seed}/run{run}/step{step:03d}.png"
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                noisy_image(seed, run, step).save(root / name)
                row = {
                    "file_name": name,
                    "seed_image": seed,
                    "variant": "replicate",
                    "run": run,
                    "step": step,
                }
                row["sha256"] = hashlib.sha256((root / name).read_bytes()).hexdigest()
                lines.append({**row, **(extra or {})})
    (root / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return root


# The JUnit properties issue 2 requires on every Δ case: together they rebuild the matrix.
CASE_PROPERTIES = frozenset(
    {"metric", "seed_image", "step", "reference_step", "delta", "score_reference", "score_step", "runs"}
)
SUITE_MODULE = (
    "from banana_tests.families.degradation.test_degradation import test_detects_degradation  # noqa: F401\n"
)


def offline(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """What a fresh machine without a network has: no downloads, an empty pyiqa cache, no mirror."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TORCH_HOME", str(root / "torch"))
    monkeypatch.delenv("BANANA_WEIGHTS_DIR", raising=False)


def suite_folder(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    module: str = SUITE_MODULE,
    **trajectories: Any,
) -> pytest.Pytester:
    """A pytester folder as a fresh offline machine sees it: a trajectory set in `data/` (the
    arguments of write_set) and `test_suite.py` holding `module`, by default the suite's Δ cases."""
    write_set(pytester.path / "data", **trajectories)
    pytester.makepyfile(test_suite=module)
    offline(monkeypatch, pytester.path)
    return pytester


def unavailable(reason: str) -> NoReturn:
    """Skip a test whose data or engine is missing here; fail it in CI (`CI=true`), which has
    everything and must run every test."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run this test: {reason}")
    pytest.skip(reason)


def needs(distribution: str, module: str | None = None) -> ModuleType:
    """The module of an optional distribution (an extra's, or piq): a skip where it is not
    installed (a venv without extras, as .ci/run's first step has), and where it is installed but
    does not import, the import's own error, so a broken extra fails instead of skipping."""
    if not installed(distribution):
        pytest.skip(f"{distribution} is not installed (an extra of banana-tests)", allow_module_level=True)
    return importlib.import_module(module or distribution)


# Test modules that import an extra's distribution at module level: not collected where it is
# not installed; collected, and failing if it does not import, where it is.
EXTRA_MODULES = {
    "test_tiny_vae.py": "torch",
    "test_probe.py": "torch",
    "test_vlm_adapters.py": "transformers",
}
collect_ignore = [name for name, distribution in EXTRA_MODULES.items() if not installed(distribution)]


CI_VARIABLES = ("CI", "BUILD_NUMBER")  # pytest's running_on_ci


def default_stops() -> None:
    """A child's SIGINT and SIGTERM as a terminal's foreground job has them (a `preexec_fn`):
    a shell started in the background ignores SIGINT and its children inherit SIG_IGN, so Python
    installs no KeyboardInterrupt handler and banana-tests leaves SIGTERM as it found it; the
    tests that stop a child would then test nothing (they failed 5 of 5 in a background CI run)."""
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, signal.SIG_DFL)


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester, whose runs keep pytest-randomly (a dev dependency for tests/test_beside_plugins.py,
    which turns it back on with `-p randomly`) out: it would shuffle, reseed and import numpy in
    every run these tests start. pytester clears PYTEST_ADDOPTS when it is made, so it is set after.
    Its runs also lay their terminal out as off CI: on CI (`CI` or `BUILD_NUMBER` set) pytest's short
    summary prints each failure's whole message, which the tests of the terminal count line by line
    (tests/test_output.py pins the CI layout). Its child processes start with `default_stops`.
    An in-process run after another may warn that banana_tests was imported before it could be
    rewritten (it is, by this session), depending on the order xdist deals the tests; the runs
    ignore that warning, which says nothing of the suite, so the tests that count lines hold."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly -W ignore::pytest.PytestAssertRewriteWarning")
    for name in CI_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(pytester, "popen", functools.partial(pytester.popen, preexec_fn=default_stops))
    return pytester


@pytest.fixture
def make_set(tmp_path: Path) -> MakeSet:
    def make(name: str = "set", **kwargs: Any) -> Path:
        return write_set(tmp_path / name, **kwargs)

    return make


def assert_outcomes(result: pytest.RunResult, *, missed: int = 0, **outcomes: int) -> None:
    """pytester's `assert_outcomes`, with the suite's failing verdicts counted apart: pytest files
    them as `missed` (banana_tests.session.reporter.MISSED), its other failures as `failed`."""
    result.assert_outcomes(**outcomes)
    assert result.parseoutcomes().get("missed", 0) == missed, result.parseoutcomes()


def parse_matrix(text: str) -> dict[tuple[str, str], str]:
    """The terminal failure matrix cell by cell: (row, metric) -> label, the row a seed image or
    `total`. After the legend, each block of columns has a header line (indented: its first column
    is blank) and rows down to `total`; a label is right-aligned, so it ends where its metric does."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "banana-tests failure matrix" in line) + 1
    cells: dict[tuple[str, str], str] = {}
    while True:
        while at < len(lines) and not lines[at].startswith(" "):
            at += 1
        if at == len(lines) or not lines[at].strip():
            break
        columns = [(m.group(), m.end()) for m in re.finditer(r"\S+", lines[at])]
        for row in lines[at + 1 :]:
            at += 1
            name = row.split(" ", 1)[0]
            begin = len(name)
            for metric, end in columns:
                cells[(name, metric)] = row[begin:end].strip()
                begin = end
            if name == "total":
                break
        at += 1
        if (
            at >= len(lines)
            or lines[at].strip()
            or not lines[at + 1 : at + 2]
            or not lines[at + 1].startswith(" ")
        ):
            break
    assert cells, f"no matrix in:\n{text[-2000:]}"
    return cells


# The working tree must come out of a test session as it went in: no test writes into it.
TOOL_CACHES = {
    ".venv",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    "build",
    ".tox",
    ".ci-cache",  # .ci/run's TORCH_HOME: the suite stages pyiqa's weights there, as it should
}


def tree_state() -> dict[str, float]:
    """`git status --porcelain --ignored` entries, each with the newest mtime under it."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"],  # a new folder shows once, its files by mtime
        cwd=PROJECT, capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    state = {}
    for line in out.splitlines():
        path = line[3:].strip('"')
        top = path.split("/", 1)[0]
        if top in TOOL_CACHES or top.endswith(".egg-info") or "__pycache__" in path:
            continue
        files = [PROJECT / path] if not path.endswith("/") else list((PROJECT / path).rglob("*"))
        state[line] = max((f.stat().st_mtime for f in files if f.exists()), default=0.0)
    return state


def pytest_sessionstart(session: pytest.Session) -> None:
    # The controller sees the whole session; tests/mutation.py's children skip the check.
    if not hasattr(session.config, "workerinput") and not os.environ.get("BANANA_MUTANT"):
        session.config.stash[_TREE] = tree_state()


def pytest_sessionfinish(session: pytest.Session) -> None:
    before = session.config.stash.get(_TREE, None)
    if before is None:
        return
    after = tree_state()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if not changed:
        return
    message = "the test session changed the working tree: " + "; ".join(changed)
    # Other developers edit this tree at the same time; in CI (a fresh clone) it is an error.
    strict = os.environ.get("CI") == "true"
    session.config.get_terminal_writer().line(message, red=strict, yellow=not strict)
    if strict:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_TREE = pytest.StashKey[dict[str, float]]()


Crop = tuple[str, int, int, int, int, int]  # seed image, embedded step, top, left, height, width


def write_crops(root: Path, crops: Iterable[Crop]) -> list[Record]:
    """Crops of the embedded set's run-0 images as PNG records in `root`: real textures, small
    enough for the slow metrics."""
    from banana_tests.data import EMBEDDED

    out = []
    for step, (seed, at, top, left, h, w) in enumerate(crops):
        source = EMBEDDED / "images" / seed / "run0" / f"step{at:03d}.png"
        with Image.open(source) as im:
            crop = np.asarray(im.convert("RGB"))[top : top + h, left : left + w]
        path = root / f"{seed}.png"
        Image.fromarray(crop).save(path)
        out.append(Record(seed, "replicate", 0, step, path, f"crop of {source.name}"))
    return out


SHARED_MIRROR = PROJECT.parent / "shared" / "pyiqa-weights"  # read-only pyiqa parameters beside the clone
Cases = dict[str, tuple[str, dict[str, str]]]


def weights_mirror() -> Path | None:
    """The shared mirror of pyiqa parameter files beside the clone (as CI lays it out), else
    $BANANA_WEIGHTS_DIR, else None."""
    if SHARED_MIRROR.is_dir():
        return SHARED_MIRROR
    env = os.environ.get("BANANA_WEIGHTS_DIR")
    return Path(env) if env else None


def junit_cases(xml: Path) -> Cases:
    """JUnit test cases by name: (outcome, properties)."""
    out = {}
    for tc in ET.parse(xml).iter("testcase"):
        kids = {c.tag for c in tc}
        outcome = next((o for o in ("failure", "error", "skipped") if o in kids), "passed")
        out[tc.get("name", "")] = (
            outcome,
            {p.get("name", ""): p.get("value", "") for p in tc.iter("property")},
        )
    return out


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester folder with a tiny trajectory set, the suite's test module and the known metrics."""
    from tests.known_metrics import install_known_metrics

    folder = suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0, 1), steps=(1, 5, 10, 20))
    install_known_metrics(folder.path)
    return folder


@contextlib.contextmanager
def held_lock(path: Path) -> Iterator[None]:
    """`path`'s lock held by another process (the way a second command would find it) until the
    block ends; the process is killed, as a crashed writer would be."""
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from filelock import FileLock; lock = FileLock({str(path)!r}); lock.acquire()"
            "; print('held', flush=True); input()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait(timeout=30)
