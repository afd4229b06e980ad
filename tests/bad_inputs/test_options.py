"""Options a run can never satisfy: one usage error (exit 4) naming the option, before any case.

Each row runs the suite through pytest itself on a tiny set with a numpy-only metric; the
commands' rows run `banana-tests` itself (argparse's usage error, exit 2).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from banana_tests.families.search import MAX_SEARCH
from banana_tests.scheduler.sharding import MAX_SHARDS
from tests.conftest import assert_outcomes, suite_folder

# Each row runs in-process in the fast tier, and again in a child process (serial and under -n 2
# for the suite, `python -m banana_tests.cli` for the commands) in the slow tier.
CHILD = pytest.mark.slow
SHARD_TAKES = (
    f"--shard takes K/N, shard K of N jobs with 1 <= K <= N <= {MAX_SHARDS} in digits 0-9 (e.g. 1/3), "
)
SECONDS_TAKE = "takes a number of seconds above 0 and at most 604800, in digits 0-9"
SEARCH_TAKES = f"--search takes a number of examples per metric from 1 to {MAX_SEARCH}, in digits 0-9, "
DOTS = "from metrics_under_test.examples import laplacian_variance as metric\n\nmetric.name = {name!r}\n"
# the files a row's folder needs beside the data set: metric modules that raise on import (as a
# native library that fails to load does), a factory that raises when called, metrics named as a
# path step, and an installed distribution whose entry point is named so
FILES: dict[str, dict[str, str]] = {
    "metric-import-oserror": {"native.py": 'raise OSError("libnative.so: cannot open shared object file")\n'},
    "metric-import-runtimeerror": {"native_rt.py": 'raise RuntimeError("CUDA driver too old")\n'},
    "metric-factory-raises": {"factory.py": 'def make():\n    raise RuntimeError("no GPU context")\n'},
    "metric-named-dot-dot": {"dots.py": DOTS.format(name="..")},
    "metric-named-dot": {"dots.py": DOTS.format(name=".")},
    "metric-named-a-path": {"dots.py": DOTS.format(name="../x")},
    "metric-entry-point-named-dot-dot": {
        "dots.py": DOTS.format(name=".."),
        "dots_iqa-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: dots_iqa\nVersion: 1.0\n",
        "dots_iqa-1.0.dist-info/entry_points.txt": "[banana_tests.metrics]\n.. = dots:metric\n",
    },
    "dataset-empty": {"empty/": ""},
}
NAME_RULE = "name must be a non-empty string of letters, digits, '_', '.', '+' and single '-' between them"
# (options, what the error must say)
ROWS: dict[str, tuple[list[str], str]] = {
    "steps-0-absent": (
        ["--steps=0"],
        "at step(s) 0 (the data set holds steps 1, 5, 10, 20)",
    ),
    "steps-absent": (["--steps=3"], "at step(s) 3 (the data set holds steps 1, 5, 10, 20)"),
    "steps-equal-reference": (["--steps=1"], "--steps=1 includes the reference step 1"),
    "steps-fullwidth": (
        ["--steps=\uff15"],
        "--steps takes a comma list of whole numbers (digits 0-9) or 'all'",
    ),
    "steps-not-numbers": (
        ["--steps=five"],
        "--steps takes a comma list of whole numbers (digits 0-9) or 'all', got 'five'",
    ),
    "reference-step-absent": (
        ["--reference-step=99"],
        "at step(s) 99 (the data set holds steps 1, 5, 10, 20)",
    ),
    "reference-step-negative": (
        ["--reference-step=-1"],
        "--reference-step takes a step number of 0 or more, in digits 0-9, got '-1'",
    ),
    "max-pixels-zero": (
        ["--max-pixels=0"],
        "--max-pixels takes a whole number of 1 or more, in digits 0-9, got '0'",
    ),
    "max-pixels-negative": (["--max-pixels=-1"], "--max-pixels takes a whole number of 1 or more"),
    "image-budget-negative": (["--image-budget=-5"], "--image-budget takes a whole number of 1 or more"),
    "image-budget-underscore": (["--image-budget=1_024"], "got '1_024'"),
    "runs-zero": (["--runs=0"], "--runs takes a whole number of 1 or more, in digits 0-9, got '0'"),
    "runs-fullwidth": (["--runs=\uff11"], "--runs takes a whole number of 1 or more"),
    "where-matches-nothing": (["--where=editor=nobody"], "--dataset=data: "),
    "seed-image-unknown": (["--seed-image=gamma"], "--dataset=data: "),
    "variant-unknown": (["--variant=mirror"], "--dataset=data: "),
    "dataset-missing": (["--dataset=nowhere"], "--dataset=nowhere: nowhere: no such file or folder"),
    "dataset-empty": (["--dataset=empty"], "--dataset=empty: empty: no image files and no metadata.jsonl"),
    "dataset-hub-offline": (
        ["--dataset=hf:some/repo"],
        "the data set is not cached here and HF_HUB_OFFLINE is set",
    ),
    "dataset-format-unmatched": (["--dataset-format=csv"], "no .csv files for --dataset-format csv"),
    "device-cuda-without-cuda": (["--device=cuda"], "--device=cuda: CUDA is not available on this machine"),
    "device-cuda-1-without-cuda": (
        ["--device=cuda:1"],
        "--device=cuda:1: CUDA is not available on this machine",
    ),
    "device-cuda-x": (
        ["--device=cuda:x"],
        "--device takes auto, cpu, cuda or cuda:N (N a GPU index, as cuda:1), got 'cuda:x'",
    ),
    "metric-unknown": (["--metric=brisk"], "unknown metric 'brisk'. Did you mean 'brisque'?"),
    "metric-import-oserror": (
        ["--metric=laplacian_variance,native:metric"],
        "metric 'native:metric': cannot import module 'native': OSError: libnative.so: cannot open shared "
        "object file",
    ),
    "metric-import-runtimeerror": (
        ["--metric=laplacian_variance,native_rt:metric"],
        "metric 'native_rt:metric': cannot import module 'native_rt': RuntimeError: CUDA driver too old",
    ),
    "metric-factory-raises": (
        ["--metric=laplacian_variance,factory:make"],
        "--metric=factory:make: RuntimeError: no GPU context",
    ),
    **{
        f"metric-named-{name}": (
            ["--metric=laplacian_variance,dots:metric"],
            f"metric 'dots:metric': {NAME_RULE}",
        )
        for name in ("dot-dot", "dot", "a-path")
    },
    "metric-entry-point-named-dot-dot": (
        ["--metric=laplacian_variance,.."],
        f"entry point '..' -> dots:metric: {NAME_RULE}, not '.' or '..', got '..'",
    ),
    "weights-dir-missing": (["--weights-dir=nowhere"], "--weights-dir=nowhere: no such directory"),
    **{
        f"{option}-{name}": ([f"--{option}={given}"], f"--{option} {takes}, got {given!r}")
        for option, takes in {
            "heartbeat": "takes a number of seconds (0: never) from 0 to 604800, in digits 0-9",
            "batch-timeout": SECONDS_TAKE,
            "load-timeout": SECONDS_TAKE,
        }.items()
        for name, given in {
            "negative": "-1",
            "inf": "inf",
            "nan": "nan",
            "fullwidth": "\uff13\uff10",
            "over-a-week": "604801",
            **({"huge": "1e400", "underscore": "1_0"} if option == "batch-timeout" else {}),
        }.items()
    },
    **{
        f"{option}-zero": ([f"--{option}=0"], f"--{option} {SECONDS_TAKE}, got '0'")
        for option in ("batch-timeout", "load-timeout")
    },
    "cache-dir-url": (
        ["--cache-dir=s3://bucket/x"],
        "--cache-dir=s3://bucket/x: a URL is not supported; the score cache is one local SQLite file",
    ),
    **{
        f"{option}-url": ([f"--{option}=s3://bucket/x"], f"--{option}=s3://bucket/x: a URL is not supported")
        for option in ("dataset", "dataset-cache", "weights-dir", "baseline")
    },
    "snapshot-dir-url": (  # syrupy's namespace: --banana- only
        ["--banana-snapshot-dir=s3://bucket/x"],
        "--snapshot-dir=s3://bucket/x: a URL is not supported",
    ),
    "junitxml-under-a-file": (
        ["--junitxml=data/metadata.jsonl/j.xml"],
        "data/metadata.jsonl/j.xml: cannot write the report there: ",
    ),
    **{
        f"shard-{name}": ([f"--shard={given}"], f"{SHARD_TAKES}got {given!r}")
        for name, given in {
            "zero": "0/2",
            "beyond": "3/2",
            "not-k-of-n": "x",
            "fullwidth": "\uff11/3",
            "over-the-bound": f"1/{MAX_SHARDS + 1}",
            "huge": "1/1000000000000000000000",
            "signed": "+1/3",
        }.items()
    },
    **{
        f"snapshot-rtol-{name}": (
            [f"--banana-snapshot-rtol={given}"],
            f"--snapshot-rtol takes a number from 0 to 1, in digits 0-9, got {given!r}",
        )
        for name, given in {
            "negative": "-0.1",
            "nan": "nan",
            "inf": "inf",
            "fullwidth": "\uff11",
            "over-1": "2",
        }.items()
    },
    **{
        f"search-{name}": ([f"--search={given}"], f"{SEARCH_TAKES}got {given!r}")
        for name, given in {
            "zero": "0",
            "not-a-number": "many",
            "huge": "1000000000000000000000",
            "over-the-bound": str(MAX_SEARCH + 1),
            "fullwidth": "\uff13",
            "underscore": "1_0",
        }.items()
    },
    "artifact-unknown": (
        ["--artifact=stati"],
        "--artifact=stati: 'stati' is not an artifact; known: replicate, soften, resynthesis, tint, static, "
        "scatter, vae_roundtrip, or all",
    ),
    "artifact-empty": (["--artifact=,"], "--artifact=,: no name is not an artifact"),
    "artifact-with-dataset": (
        ["--banana-artifact=static"],
        "--artifact=static: the trial sets are built from the embedded seed images; leave out --dataset=",
    ),
}


# Rows whose metric module renames the shared example function: in-process the new name would
# stay for every later run in the process, so they run in a child only.
RENAMING = {row for row, files in FILES.items() if any("metric.name" in text for text in files.values())}
RUNNERS = ((None, "in-process", []), ([], "serial", [CHILD]), (["-n", "2"], "xdist", [CHILD]))


@pytest.mark.parametrize(
    ("row", "workers"),
    [
        pytest.param(row, workers, id=f"{row}-{name}", marks=marks)
        for row in ROWS
        for workers, name, marks in RUNNERS
        if not (workers is None and row in RENAMING)
    ],
)
def test_an_impossible_option_is_one_usage_error(
    row: str, workers: list[str] | None, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serial and under `-n 2` alike: xdist's controller checks the options, the metrics and the
    data set before any worker starts (a worker's usage error was a crashed node, exit 3). In-process
    (pytester's own pytest run, no child), the same error from the same checks."""
    options, message = ROWS[row]
    suite = suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0,), steps=(1, 5, 10, 20))
    if row.endswith("-without-cuda") and _hasgpu_driver_loaded():
        pytest.skip("this machine has a GPU driver")
    for name, text in FILES.get(row, {}).items():  # a name ending in "/" is a folder
        folder = suite.path / name if name.endswith("/") else (suite.path / name).parent
        folder.mkdir(parents=True, exist_ok=True)
        if not name.endswith("/"):
            (suite.path / name).write_text(text)
    defaults = ["--dataset=data", "--metric=laplacian_variance", "--no-cache"]
    given = {o.split("=")[0] for o in options}
    arguments = [*[d for d in defaults if d.split("=")[0] not in given], *options]
    if workers is None:
        result = suite.runpytest(*arguments)
    else:
        result = suite.runpytest_subprocess(*arguments, *workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR: ") or "error: " in line]
    assert len(errors) == 1 and message in errors[0], result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert "test_detects_degradation" not in result.stdout.str()


def _hasgpu_driver_loaded() -> bool:
    from banana_tests.core.machine import gpu_driver_loaded

    return gpu_driver_loaded()


@CHILD
def test_a_spaced_path_option_that_would_move_the_rootdir_is_refused(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--dataset /abs/path` made pytest collect the data set's folder (and all its tests)."""
    suite = suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))
    outside = pytester.path.parent / f"{pytester.path.name}-outside"
    (outside / "data").mkdir(parents=True)
    (outside / "test_stranger.py").write_text("def test_stranger():\n    pass\n")
    (pytester.path / "pytest.ini").write_text("[pytest]\n")
    from tests.conftest import write_set

    write_set(outside / "data", seeds=("alpha",), runs=(0,), steps=(1, 5))
    spaced = suite.runpytest_subprocess("--dataset", str(outside / "data"), "--metric=laplacian_variance")
    assert spaced.ret == pytest.ExitCode.USAGE_ERROR
    assert f"write path options with '=': --dataset={outside / 'data'}" in spaced.stderr.str()
    monkeypatch.setenv("PYTEST_ADDOPTS", f"--cache-dir {outside}")
    assert suite.runpytest_subprocess("--metric=laplacian_variance").ret == pytest.ExitCode.USAGE_ERROR
    monkeypatch.delenv("PYTEST_ADDOPTS")
    joined = suite.runpytest_subprocess(
        f"--dataset={outside / 'data'}", "--metric=laplacian_variance", "--steps=5"
    )
    assert_outcomes(joined, missed=1)
    assert "test_stranger" not in joined.stdout.str()


def _takes(what: str, bounds: str) -> str:
    return f"takes {what} {bounds}, in digits 0-9"


# the commands' counts and amounts: (command and its other arguments, option, what it takes, values)
COMMAND_OPTIONS = {
    "plan --job-cores": (["plan"], _takes("a whole number", "from 1 to 1024"), ("\uff11", "0", "-3", "1025")),
    "plan --job-hours": (["plan"], _takes("a number", "above 0 and at most 720"), ("inf", "nan", "0", "721")),
    **{
        f"generate --{option}": (["generate", "--editor=jpeg", "--seed-images=s", "--out=o"], takes, values)
        for option, takes, values in (
            ("runs", _takes("a whole number", "from 1 to 1000"), ("\uff11", "0", "-3", "1001")),
            ("steps", _takes("a whole number", "from 1 to 1000"), ("\uff15", "0", "1001")),
            ("seed", _takes("a whole number", "from 0 to 2147483647"), ("\uff11", "-1", "2147483648")),
            ("max-requests", _takes("a whole number", "of 1 or more"), ("\uff11", "0", "-1")),
            ("temperature", _takes("a number", "from 0 to 2"), ("nan", "-0.5", "3")),
            ("price-per-image", _takes("a number", "from 0 to 1000"), ("inf", "-1")),
        )
    },
    "judge --max-requests": (
        ["judge", "set", "--judge=keywords"],
        _takes("a whole number", "of 1 or more"),
        ("0", "\uff11"),
    ),
    "report --max-input-mb": (
        ["report", "j.xml", "--out=out"],
        _takes("a number", "above 0 and at most 65536"),
        ("nan", "inf", "0", "65537"),
    ),
}
COMMAND_ROWS = {
    f"{name}={given}": (arguments, name.split()[1], takes, given)
    for name, (arguments, takes, values) in COMMAND_OPTIONS.items()
    for given in values
}


def _cli_in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`banana-tests ARGV` in this process: argparse's usage error is its SystemExit."""
    from banana_tests.cli import main

    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("where", [pytest.param("in-process"), pytest.param("child", marks=CHILD)])
@pytest.mark.parametrize("row", list(COMMAND_ROWS))
def test_a_commands_impossible_count_is_one_usage_error(
    row: str,
    where: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """argparse's `type=int` and `type=float` took `１`, `-3`, `inf` and `nan`: each count and
    amount goes through counts.whole_number or decimal_number, one usage line (exit 2) naming the
    option, before anything is read or written."""
    arguments, option, takes, given = COMMAND_ROWS[row]
    argv = [*arguments, f"{option}={given}"]
    if where == "child":
        command = [sys.executable, "-m", "banana_tests.cli", *argv]
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        code, out, err = done.returncode, done.stdout, done.stderr
    else:
        monkeypatch.chdir(tmp_path)
        code, out, err = _cli_in_process(argv, capsys)
    assert code == 2, out + err
    errors = [line for line in err.splitlines() if "error: " in line]
    assert errors == [f"banana-tests {arguments[0]}: error: argument {option}: {takes}, got {given!r}"], err
    assert "Traceback" not in err and not out
    assert not list(tmp_path.iterdir())  # nothing written
