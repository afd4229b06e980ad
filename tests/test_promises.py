"""One test per documented promise not checked elsewhere, each through pytest itself: exit codes 2, 4
and 5, what a fully cached run imports, what invalidates the score cache (a parameter file
included), and the selection options (`--reference-step`, `--variant`, `--seed-image`, `--where`,
`--runs`, `--image-budget`).

Runs use the known-verdict metrics of tests/known_metrics.py (numpy only) unless the promise is
about pyiqa.
"""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import SUITE_MODULE, junit_cases, parse_matrix, unavailable, weights_mirror

pytestmark = pytest.mark.slow  # each test runs pytest in a child process: the slow tier

NOISE = "known_metrics:noise_level"
IMPORTS_PLUGIN = """
import sys


def pytest_sessionfinish(session):
    loaded = sorted({"torch", "numpy", "pyiqa"} & set(sys.modules))
    print("\\nHEAVY MODULES:", ",".join(loaded) or "none")
"""


# ---- exit codes (docs/gate.md "Exit codes") ----


def test_exit_2_when_interrupted(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--dataset=data", "--metric=known_metrics:interrupted", "--no-cache")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*"])


def test_exit_5_when_nothing_is_collected(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--dataset=data", f"--metric={NOISE}", "-k", "no_such_case")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--aggregate=median"], "--aggregate: invalid choice: 'median'"),
        (["--image-budget=0"], "--image-budget takes a whole number of 1 or more, in digits 0-9, got '0'"),
        (["--runs=-1"], "--runs takes a whole number of 1 or more, in digits 0-9, got '-1'"),
        (["--baseline=notjson.json"], "notjson.json"),
        (["--dataset=empty"], "empty"),
    ],
    ids=["bad-choice", "image-budget-zero", "runs-negative", "baseline-not-json", "dataset-unusable"],
)
def test_exit_4_for_the_causes_the_options_table_lacks(
    suite: pytest.Pytester, options: list[str], message: str
) -> None:
    """The rest of docs/gate.md's exit-4 list is tests/bad_inputs/test_options.py and test_baseline.py."""
    (suite.path / "notjson.json").write_text("{not json")
    (suite.path / "empty").mkdir()
    (suite.path / "empty" / "metadata.jsonl").write_text("null\n5\n")
    defaults = {"--dataset": "--dataset=data", "--metric": f"--metric={NOISE}"}
    given = {o.split("=")[0] for o in options}
    # Not in process: pytester then drops the modules the run imported, and a later import of
    # numpy's C extensions in this worker fails ("cannot load module more than once per process").
    result = suite.runpytest_subprocess(*[v for k, v in defaults.items() if k not in given], *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert message in result.stderr.str()
    assert "test_detects_degradation" not in result.stdout.str()


# ---- a fully cached run (docs/speed.md) and a changed parameter file (its "Score cache") ----


def niqe_parameters(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A writable copy of NIQE's parameter file in a TORCH_HOME of the run's own (no mirror)."""
    mirror = weights_mirror()
    if mirror is None or not (mirror / "niqe_modelparameters.mat").is_file():
        unavailable("no pyiqa weights mirror beside the clone or in $BANANA_WEIGHTS_DIR (README, 'Install')")
    params = suite.path / "torch" / "hub" / "pyiqa" / "niqe_modelparameters.mat"
    params.parent.mkdir(parents=True)
    shutil.copyfile(mirror / params.name, params)
    monkeypatch.setenv("TORCH_HOME", str(suite.path / "torch"))
    monkeypatch.delenv("BANANA_WEIGHTS_DIR", raising=False)
    return params


def shift_pristine_mean(params: Path, mtime_ns: int) -> None:
    """NIQE's pristine mean scaled by 1.5, rewritten in place: the same size, other bytes, and
    the file's mtime set to `mtime_ns`."""
    from scipy.io import loadmat

    raw = bytearray(params.read_bytes())
    mu = loadmat(params)["mu_prisparam"].astype("<f8").tobytes()
    at = raw.find(mu)
    assert at > 0 and raw.find(mu, at + 1) == -1, "the mean's bytes are not in the file once"
    raw[at : at + len(mu)] = (np.frombuffer(mu, "<f8") * 1.5).tobytes()
    params.write_bytes(bytes(raw))
    os.utime(params, ns=(mtime_ns, mtime_ns))


INVARIANCE = [f"test_score_is_invariant[niqe-{c}]" for c in ("batch", "png", "repeat", "resize", "shift")]


def test_a_cached_pyiqa_run_imports_no_torch_until_a_parameter_file_changes(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NIQE on one seed image and step, and its invariance checks, four runs; imports are read
    from the run's own sys.modules at its end (docs/speed.md: a fully cached run imports none of
    torch, pyiqa and numpy). Between the runs, NIQE's parameter file changes content but not
    size: refused by its bytes, with a new mtime and with the old one put back, until the published
    bytes return and the cached scores are served again."""
    params = niqe_parameters(suite, monkeypatch)
    size, stamp = params.stat().st_size, params.stat().st_mtime_ns
    suite.makeconftest(IMPORTS_PLUGIN)
    suite.makepyfile(
        test_suite=SUITE_MODULE
        + "from banana_tests.families.invariance.test_invariance import (  # noqa: F401\n"
        + "    test_score_is_invariant,\n)\n"
    )

    def run() -> tuple[set[str], dict[str, tuple[str, str, str, str]]]:
        """The heavy modules the run imported; its cases' outcome, score_cached and figures (a Δ
        case's two scores, an invariance case's change)."""
        result = suite.runpytest_subprocess(
            "--dataset=data", "--metric=niqe", "--seed-image=alpha", "--steps=5", "--junitxml=j.xml", "-s"
        )
        [line] = [x for x in result.outlines if x.startswith("HEAVY MODULES:")]
        cases = junit_cases(suite.path / "j.xml")
        assert sorted(cases) == ["test_detects_degradation[niqe-alpha-step5]", *INVARIANCE]
        failed = {o for o, _ in cases.values()} != {"passed"}
        expected = pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK
        assert result.ret == expected, result.stdout.str()
        figures = {
            k: (o, p["score_cached"], p.get("score_reference", p.get("change", "")), p.get("score_step", ""))
            for k, (o, p) in cases.items()
        }
        return set(line.split(": ", 1)[1].split(",")) - {"none"}, figures

    def cached(cases: dict[str, tuple[str, str, str, str]]) -> dict[str, tuple[str, str, str, str]]:
        return {k: (o, "true", r, s) for k, (o, _, r, s) in cases.items()}

    imported, cold = run()
    assert imported == {"numpy", "pyiqa", "torch"}
    # NIQE misses step 5 on these 96×128 crops (Δ = +0.445): pinned, the data are sha256-seeded.
    # It passes its invariance checks (docs/matrix.md, "Invariance").
    assert {(o, c) for o, c, _, _ in cold.values()} == {("failure", "false"), ("passed", "false")}
    assert cold["test_detects_degradation[niqe-alpha-step5]"][0] == "failure"
    imported, warm = run()
    assert imported == set()
    assert warm == cached(cold)

    # Other content at the same size, with a new mtime and with the old one put back (as `cp -p`,
    # `rsync -a` and `tar` leave it): a published parameter file is checked by its bytes every run,
    # so NIQE is refused, naming the file, and none of its cases gets a verdict or a cached score.
    original = params.read_bytes()
    for mtime in (stamp + 1_000_000_000, stamp):
        shift_pristine_mean(params, mtime)
        assert params.stat().st_size == size
        refused = suite.runpytest_subprocess(
            "--dataset=data", "--metric=niqe", "--seed-image=alpha", "--steps=5", "--junitxml=j.xml"
        )
        assert {o for o, _ in junit_cases(suite.path / "j.xml").values()} == {"error"}
        refused.stdout.fnmatch_lines(
            ["*niqe_modelparameters.mat: not the published niqe_modelparameters.mat*"]
        )
    # The published bytes again: the scores of the first run are served, and nothing heavy imported.
    params.write_bytes(original)
    imported, warm = run()
    assert imported == set()
    assert warm == cached(cold)


# ---- what invalidates the score cache (docs/speed.md "Score cache") ----

CUSTOM = """
import numpy as np

class Level:
    name, lower_better, score_range = "level", True, (0.0, 100.0)
    version = {version!r}
    precision = {precision!r}

    def __call__(self, images):
        return [float(np.asarray(img, dtype=np.float64).std()) for img in images]
"""


def test_a_change_of_version_precision_or_source_rescores(suite: pytest.Pytester) -> None:
    def run(version: str, precision: str, comment: str = "") -> set[str]:
        (suite.path / "levelmod.py").write_text(CUSTOM.format(version=version, precision=precision) + comment)
        result = suite.runpytest_subprocess(
            "--dataset=data", "--metric=levelmod:Level", "--steps=5", "--junitxml=j.xml"
        )
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        return {p["score_cached"] for _, p in junit_cases(suite.path / "j.xml").values()}

    assert run("1", "float32") == {"false"}
    assert run("1", "float32") == {"true"}
    assert run("2", "float32") == {"false"}  # version
    assert run("2", "float32") == {"true"}
    assert run("2", "float64") == {"false"}  # precision
    assert run("2", "float64", "# an edit\n") == {"false"}  # the module's source
    assert run("2", "float64", "# an edit\n") == {"true"}


WEIGHTED = """
import numpy as np
from pathlib import Path

class Weighted:
    name, lower_better, score_range = "weighted", True, (0.0, 100.0)
    files = "weights.bin"

    def __call__(self, images):
        sign = 1.0 if Path(__file__).with_name("weights.bin").read_bytes() == b"+" * 64 else -1.0
        return [50.0 + sign * float(np.asarray(img, dtype=np.float64).std()) / 10 for img in images]
"""


def test_a_declared_file_rewritten_with_its_mtime_restored_rescores(suite: pytest.Pytester) -> None:
    """Issue 33: weights rewritten to the same size with every score's sign flipped, the mtime put
    back (as `cp -p`, `rsync -a` and `tar` leave it), were served from the cache."""
    from tests.test_cache import _rewrite_keeping_mtime

    (suite.path / "weightedmod.py").write_text(WEIGHTED)
    weights = suite.path / "weights.bin"
    weights.write_bytes(b"+" * 64)

    def cached() -> set[str]:
        result = suite.runpytest_subprocess(
            "--dataset=data", "--metric=weightedmod:Weighted", "--steps=5", "--junitxml=j.xml"
        )
        assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
        return {p["score_cached"] for _, p in junit_cases(suite.path / "j.xml").values()}

    assert cached() == {"false"}
    assert cached() == {"true"}
    mtime = weights.stat().st_mtime_ns
    _rewrite_keeping_mtime(weights, b"-" * 64)
    assert weights.stat().st_mtime_ns == mtime and weights.stat().st_size == 64
    assert cached() == {"false"}


TINYLIB_USER = """
import numpy as np
import tinylib

class Tiny:
    name, lower_better, score_range = "tiny", True, (0.0, 100.0)

    def __call__(self, images):
        return [float(np.asarray(img, dtype=np.float64).std()) * tinylib.FACTOR for img in images]
"""


def install_tinylib(target: Path, version: str) -> None:
    """`tinylib` as `pip install --target` leaves it: the package beside its `.dist-info` (METADATA,
    RECORD); an earlier version's metadata is replaced, the package's code stays the same."""
    for old in target.glob("tinylib-*.dist-info"):
        shutil.rmtree(old)
    (target / "tinylib").mkdir(parents=True, exist_ok=True)
    (target / "tinylib" / "__init__.py").write_text("FACTOR = 1.0\n")
    info = target / f"tinylib-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tinylib\nVersion: {version}\n")
    (info / "RECORD").write_text(f"tinylib/__init__.py,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")


def test_a_new_version_of_an_imported_library_rescores_and_is_a_run_fact(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33: upgrading the library that computes a custom metric's score served the old
    scores, and the JUnit run facts never named that library. Two runs sharing one cache, the
    library upgraded (its version only) between them."""
    libs = suite.path / "libs"
    monkeypatch.setenv("PYTHONPATH", str(libs))
    (suite.path / "tinyuser.py").write_text(TINYLIB_USER)

    def run() -> tuple[set[str], str]:
        result = suite.runpytest_subprocess(
            "--dataset=data", "--metric=tinyuser:Tiny", "--steps=5", "--junitxml=j.xml"
        )
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        facts = ET.parse(suite.path / "j.xml").iterfind("testsuite/properties/property")
        libraries = next(p.get("value", "") for p in facts if p.get("name") == "libraries")
        return {p["score_cached"] for _, p in junit_cases(suite.path / "j.xml").values()}, libraries

    numpy = f"numpy {metadata.version('numpy')}"
    install_tinylib(libs, "1.0")
    assert run() == ({"false"}, f"{numpy}; tinylib 1.0")
    assert run() == ({"true"}, f"{numpy}; tinylib 1.0")
    install_tinylib(libs, "2.0")
    assert run() == ({"false"}, f"{numpy}; tinylib 2.0")


# ---- selection through pytest (docs/datasets.md "Selection", docs/options.md) ----


def run_cases(suite: pytest.Pytester, *options: str) -> dict[str, tuple[str, dict[str, str]]]:
    result = suite.runpytest_subprocess("--dataset=data", f"--metric={NOISE}", "--junitxml=j.xml", *options)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    return junit_cases(suite.path / "j.xml")


def test_reference_step_moves_the_reference(suite: pytest.Pytester) -> None:
    got = run_cases(suite, "--reference-step=5", "--steps=10,20")
    assert sorted(got) == sorted(
        f"test_detects_degradation[noise_level-{s}-step{i}]" for s in ("alpha", "beta") for i in (10, 20)
    )
    assert {(o, p["reference_step"]) for o, p in got.values()} == {("passed", "5")}
    plain = run_cases(suite, "--steps=10,20")
    for name, (_, props) in got.items():  # the step's score is the same; its reference is step 5's
        assert props["score_step"] == plain[name][1]["score_step"]
        assert float(props["score_reference"]) > float(plain[name][1]["score_reference"])


def retag(suite: pytest.Pytester, seed: str, **fields: object) -> None:
    """Give every record of `seed` these fields."""
    meta = suite.path / "data" / "metadata.jsonl"
    rows = [json.loads(line) for line in meta.read_text().splitlines()]
    meta.write_text(
        "".join(json.dumps({**r, **(fields if r["seed_image"] == seed else {})}) + "\n" for r in rows)
    )


def test_variant_seed_image_and_where_select_records(suite: pytest.Pytester) -> None:
    retag(suite, "beta", variant="mirror", editor="x")
    assert {p["seed_image"] for _, p in run_cases(suite).values()} == {"alpha"}  # replicate by default
    mirror = run_cases(suite, "--variant=mirror")
    assert {p["seed_image"] for _, p in mirror.values()} == {"beta"}
    facts = {p.get("name"): p.get("value") for p in ET.parse(suite.path / "j.xml").iter("property")}
    assert facts["variant"] == "mirror"  # a run fact, on the testsuite
    retag(suite, "beta", variant="replicate")
    assert {p["seed_image"] for _, p in run_cases(suite, "--seed-image=beta").values()} == {"beta"}
    assert {p["seed_image"] for _, p in run_cases(suite, "--where=editor=x").values()} == {"beta"}
    both = run_cases(suite, "--seed-image=alpha", "--seed-image=beta")
    assert {p["seed_image"] for _, p in both.values()} == {"alpha", "beta"}


def test_runs_takes_the_first_runs(suite: pytest.Pytester) -> None:
    one = run_cases(suite, "--runs=1", "--aggregate=per-run")
    assert {name.split("-")[-2] for name in one} == {"run0"}
    mean = run_cases(suite, "--runs=1")
    assert {p["runs"] for _, p in mean.values()} == {"1"}
    for name, (_, props) in mean.items():
        run0 = name.replace("-step", "-run0-step")
        assert props["delta"] == one[run0][1]["delta"]


def test_a_tiny_image_budget_changes_no_verdict(suite: pytest.Pytester) -> None:
    """The budget bounds the decoded images kept; scores and verdicts stay the same."""
    ample = run_cases(suite, "--no-cache")
    tiny = suite.runpytest_subprocess(
        "--dataset=data", f"--metric={NOISE}", "--junitxml=j.xml", "--no-cache", "--image-budget=1"
    )
    assert tiny.ret == pytest.ExitCode.OK
    assert {k: (o, p["delta"]) for k, (o, p) in junit_cases(suite.path / "j.xml").items()} == {
        k: (o, p["delta"]) for k, (o, p) in ample.items()
    }
    assert parse_matrix(tiny.stdout.str())[("total", "noise_level")] == "0/6"
