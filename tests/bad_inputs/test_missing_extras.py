"""A metric, editor or judge whose extra is not installed: one line naming the extra, ready to
paste, exit 4, before any case runs or any file is written; never an ImportError inside a case,
never other metrics instead.

Where the extra is installed (CI's full venv) its distributions are hidden: their metadata reads
as absent and their import fails, as in a venv without them. In a venv without the extras
(.ci/run's first step) nothing is hidden: they are absent. A suite run is a child pytest that
hides them from itself (`HIDE`): pytester's in-process run would drop what it imported (numpy.fft)
from this process's modules while their C extensions stay loaded, and a later import would fail.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from metrics_under_test.extras import installed
from tests.conftest import suite_folder

HIDDEN = ("pyiqa", "torch", "transformers", "icecream", "diffusers", "google-genai")
MODULES = {"google-genai": "google.genai"}


@pytest.fixture
def without_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as a venv without the extras sees it."""
    real = metadata.distribution

    def distribution(name: str) -> metadata.Distribution:
        if name.lower() in HIDDEN:
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "distribution", distribution)
    for name in HIDDEN:
        if installed(name):
            monkeypatch.setitem(sys.modules, MODULES.get(name, name), None)


HIDE = f"""
import sys
from importlib import metadata

HIDDEN, MODULES = {HIDDEN!r}, {MODULES!r}
real = metadata.distribution


def installed(name):
    try:
        return bool(real(name))
    except metadata.PackageNotFoundError:
        return False


present = [name for name in HIDDEN if installed(name)]


def distribution(name):
    if name.lower() in HIDDEN:
        raise metadata.PackageNotFoundError(name)
    return real(name)


metadata.distribution = distribution
for name in present:
    sys.modules[MODULES.get(name, name)] = None
"""
"""A plugin (`-p hide_extras`, loaded before the suite's) that hides the extras from its run."""


# (options, what the one line must carry)
SUITE_ROWS: dict[str, tuple[list[str], str]] = {
    "pyiqa-metric": (["--metric=brisque"], "--metric=brisque needs pyiqa and torch"),
    "default-metric": ([], "--metric=brisque,niqe,piqe (the default) needs pyiqa and torch"),
    "vlm-metric": (
        ["--metric=laplacian_variance,qalign"],
        "--metric=qalign needs pyiqa, torch, transformers",
    ),
    "torch-example-metric": (["--metric=noise_sigma"], "--metric=noise_sigma needs torch"),
    "taef2-artifact": (
        ["--metric=laplacian_variance", "--artifact=vae_roundtrip"],
        "--artifact=vae_roundtrip needs torch",
    ),
}
INSTALL = {
    "pyiqa-metric": "pip install 'banana-tests[pyiqa]'",
    "default-metric": "pip install 'banana-tests[pyiqa]'",
    "vlm-metric": "pip install 'banana-tests[vlm]'",
    "torch-example-metric": "pip install torch",  # a shipped example, not an extra's
    "taef2-artifact": "pip install 'banana-tests[taef2]'",
}


@pytest.mark.slow
@pytest.mark.parametrize("row", list(SUITE_ROWS))
def test_a_suite_run_whose_extra_is_missing_is_one_usage_error(
    row: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    options, says = SUITE_ROWS[row]
    suite = suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))
    pytester.makepyfile(hide_extras=HIDE)
    trial_sets = any(o.startswith("--artifact") for o in options)  # built from the embedded seeds
    data = [] if trial_sets else ["--dataset=data"]
    result = suite.runpytest_subprocess("-p", "hide_extras", *data, *options, "--no-cache")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    errors = [line for line in result.stderr.lines if line.startswith("ERROR: ")]
    assert len(errors) == 1 and says in errors[0], output
    assert errors[0].endswith(f", not installed here: {INSTALL[row]}"), errors[0]
    assert "Traceback" not in output and "test_detects_degradation" not in output


# (command line, what the one line must carry, the extra)
COMMAND_ROWS: dict[str, tuple[list[str], str, str]] = {
    "taef2-editor": (["generate", "--editor=flux2-tiny-vae"], "--editor=flux2-tiny-vae needs torch", "taef2"),
    "diffusers-editor": (
        ["generate", "--editor=diffusers"],
        "--editor=diffusers needs diffusers",
        "diffusers",
    ),
    "gemini-judge": (["judge", "set", "--judge=gemini"], "--judge=gemini needs google-genai", "gemini"),
}


@pytest.mark.usefixtures("without_extras")
@pytest.mark.parametrize("row", list(COMMAND_ROWS))
def test_a_command_whose_extra_is_missing_is_one_line_exit_4(
    row: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from banana_tests.cli import main

    arguments, says, extra = COMMAND_ROWS[row]
    seeds = Path(__file__).resolve().parents[2] / "fixtures" / "seeds"
    if arguments[0] == "generate":
        arguments = [*arguments, f"--seed-images={next(seeds.glob('*.png'))}", "--out=out", "--steps=1"]
    monkeypatch.chdir(tmp_path)
    code = main(arguments)
    out, err = capsys.readouterr()
    assert code == 4, out + err
    [line] = err.splitlines()
    assert line.startswith(f"banana-tests {arguments[0]}: error: {says}"), err
    assert line.endswith(f", not installed here: pip install 'banana-tests[{extra}]'"), err
    assert not out and not list(tmp_path.iterdir())  # nothing written


@pytest.mark.slow
def test_these_rows_leave_the_process_as_they_found_it() -> None:
    """The rows before a test that imports numpy.fft and scipy (generate's soften artifact) in
    one process: no module is imported twice."""
    here = Path(__file__).resolve()
    later = here.parents[1] / "test_generate.py::test_a_torn_last_line_and_an_unrecorded_image_are_made_again"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(here),
        later,
        "-p",
        "no:randomly",
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    cmd += ["-k", "not leave_the_process"]
    done = subprocess.run(cmd, cwd=here.parents[2], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
