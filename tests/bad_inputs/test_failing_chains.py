"""A chain that fails under `generate --workers 2`, one row each: the exit code, the one line naming
the seed image, run and step, the other workers stopped (no request after the failure is
answered into the set), and the finished steps kept, so that a rerun continues. Forks workers:
slow tier."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from banana_tests.cli import main
from tests.conftest import needs, noisy_image
from tests.gemini_stub import KEY, serve


@dataclass(frozen=True)
class Row:
    id: str
    script: list[str | int]  # the service's answers in turn (tests.gemini_stub), then images
    message: str  # what the service says
    says: str  # a regex the one line must match


ROWS = [
    Row(
        "the service refuses a step's image",
        ["image", "image", 400],
        "Unable to process input image. Please retry or report in the troubleshooting guide",
        r"^banana-tests generate: error: (alpha|beta) run [01] step [123]: .*400 INVALID_ARGUMENT"
        r".*Unable to process input image",
    ),
    Row(
        "the service's key is refused mid-run",
        ["image", 403],
        "Permission denied: Consumer 'api_key:xyz' has been suspended.",
        r"^banana-tests generate: error: (alpha|beta) run [01] step [123]: .*403 .*suspended",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_a_failing_chain_stops_the_others_in_one_line_naming_seed_and_step(
    row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    needs("google-genai", "google.genai")
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    seeds, out = tmp_path / "seeds", tmp_path / "set"
    seeds.mkdir()
    for name, size in (("alpha", (60, 80)), ("beta", (72, 48))):
        noisy_image(name, 0, 1, size).save(seeds / f"{name}.png")
    with serve(list(row.script)) as stub:
        stub.error_message, stub.delay = row.message, 0.05  # the other worker is mid-request
        argv = ["generate", "--editor", "gemini", "--endpoint", stub.url, "--seed-images", str(seeds),
                "--out", str(out), "--runs", "2", "--steps", "3", "--workers", "2"]  # fmt: skip
        assert main(argv) == 1
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in err, err
        assert re.search(row.says, lines[0]), lines[0]
        kept = (out / "metadata.jsonl").read_text().splitlines()
        assert len(kept) < 2 * 2 * 3, "the other chains went on"
        on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*.png")}
        assert len(on_disk) == len(kept) and not list(out.rglob("*.tmp"))
        assert main(argv) == 0, capsys.readouterr().err  # the finished steps are kept: a rerun continues
    assert f"{12 - len(kept)} step(s) made" in capsys.readouterr().out
