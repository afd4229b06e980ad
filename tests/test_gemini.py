"""The gemini editor through the real `google-genai` client, against a local stub of the REST API."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageOps

from banana_tests.editors import base, gemini
from banana_tests.editors.chains import ChainFailed, Job
from banana_tests.editors.generation import generate
from banana_tests.editors.prompts import resolve
from tests.conftest import needs, noisy_image
from tests.gemini_stub import KEY, REFUSAL, THOUGHT, serve

needs("google-genai", "google.genai")


def editor(url: str, timeout: float = 5.0, **kwargs: Any) -> tuple[gemini.GeminiEditor, list[float]]:
    """A gemini editor on the real SDK client, sending to `url`; its sleeps are recorded, not slept."""
    sleeps: list[float] = []
    client = gemini.sdk_client(KEY, url, timeout)
    return gemini.GeminiEditor(client, secrets=(KEY,), sleep=sleeps.append, **kwargs), sleeps


def request(step: int = 1, **kwargs: Any) -> base.EditRequest:
    return base.EditRequest(noisy_image("g", 0, 1), "Produce a replica.", step, 0, "g", **kwargs)


def free_port() -> int:
    """A port nothing listens on: connections to it are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_success_sends_parameters_and_returns_image_and_reasoning() -> None:
    with serve() as stub:
        ed, sleeps = editor(stub.url)
        result = ed.edit(request(seed=7, temperature=0.4, resolution="4K"))
        ed.edit(request())
    assert stub.paths[0].endswith("/models/gemini-3-pro-image-preview:generateContent")
    config = stub.requests[0]["generationConfig"]
    assert (config["seed"], config["temperature"], config["imageConfig"]) == (7, 0.4, {"imageSize": "4K"})
    assert config["responseModalities"] == ["TEXT", "IMAGE"]
    assert stub.requests[0]["contents"][0]["parts"][0] == {"text": "Produce a replica."}
    assert result.image.tobytes() == ImageOps.mirror(noisy_image("g", 0, 1)).tobytes()
    assert result.text == f"{THOUGHT}\n\nHere is the replica."
    assert (result.requests, sleeps) == (1, [])
    assert set(stub.requests[1]["generationConfig"]) == {"responseModalities", "thinkingConfig"}


def test_429_5xx_and_a_dropped_connection_are_retried_with_exponential_backoff() -> None:
    with serve([429, 503, "drop"]) as stub:
        ed, sleeps = editor(stub.url)
        result = ed.edit(request())
    assert (result.requests, sleeps, ed.requests_made, len(stub.requests)) == (4, [2.0, 4.0, 8.0], 4, 4)


def test_a_server_that_never_answers_times_out_and_is_asked_again() -> None:
    with serve(["hang"]) as stub:
        ed, sleeps = editor(stub.url, timeout=0.5)
        start = time.monotonic()
        result = ed.edit(request())
        took = time.monotonic() - start
    assert (result.requests, sleeps) == (2, [2.0]) and took < 10


def test_a_refused_connection_is_retried_a_bounded_number_of_times() -> None:
    ed, sleeps = editor(f"http://127.0.0.1:{free_port()}", retries=3)
    with pytest.raises(base.EditorError, match=r"failed after 4 attempt\(s\): ConnectError"):
        ed.edit(request())
    assert sleeps == [2.0, 4.0, 8.0]


def test_client_errors_are_not_retried_and_retries_run_out() -> None:
    with serve([400]) as stub:
        ed, sleeps = editor(stub.url)
        with pytest.raises(base.EditorError, match=r"failed after 1 attempt\(s\): 400 INVALID_ARGUMENT"):
            ed.edit(request())
    assert sleeps == []
    with serve([500] * 3) as stub:
        ed, sleeps = editor(stub.url, retries=2)
        with pytest.raises(base.EditorError, match=r"failed after 3 attempt\(s\)"):
            ed.edit(request())
    assert sleeps == [2.0, 4.0]


def test_budget_counts_every_attempt() -> None:
    with serve([429]) as stub:
        ed, _ = editor(stub.url, max_requests=3)
        ed.edit(request())  # two requests
        ed.edit(request(step=2))  # the third
        with pytest.raises(gemini.BudgetExhausted, match="request budget of 3 used up"):
            ed.edit(request(step=3))
    assert len(stub.requests) == 3


def test_a_blocked_prompt_reports_its_block_reason_and_is_not_asked_again() -> None:
    with serve(["block"]) as stub:
        ed, _ = editor(stub.url)
        with pytest.raises(base.NoImage) as info:
            ed.edit(request())
    assert str(info.value) == (
        "gemini-3-pro-image-preview returned no image: prompt blocked"
        " (blockReason PROHIBITED_CONTENT: The prompt was blocked.)"
    )
    assert len(stub.requests) == 1


def test_a_text_only_reply_is_asked_again_then_names_its_finish_reason_and_text() -> None:
    with serve(["text"]) as stub:
        ed, _ = editor(stub.url)
        assert ed.edit(request()).requests == 2
    with serve(["text"] * 3) as stub:
        ed, _ = editor(stub.url, no_image_retries=2)
        with pytest.raises(
            base.NoImage, match=f"no image in 3 replies: finishReason STOP; text: '{REFUSAL}'"
        ):
            ed.edit(request())
    assert len(stub.requests) == 3
    with pytest.raises(base.EditorError, match="resolution must be one of 1K, 2K, 4K"):
        ed.edit(request(resolution="8K"))


def test_errors_never_show_the_key() -> None:
    with serve([403]) as stub:
        stub.error_message = f"API key {KEY} not valid"
        ed, _ = editor(stub.url)
        with pytest.raises(base.EditorError) as info:
            ed.edit(request())
    assert KEY not in str(info.value) and "<redacted>" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_cost_estimate_uses_list_prices_or_the_override() -> None:
    ed, _ = editor("http://127.0.0.1:9", max_requests=500)
    assert ed.cost_estimate(1000, "4K") == (
        "1000 gemini-3-pro-image-preview calls at $0.240: about $240.00 before retries; at most 500 requests"
        " this run"
    )
    assert "$134.00" in (ed.cost_estimate(1000, None) or "")
    nb2 = gemini.GeminiEditor(None, "nano-banana-2")
    assert nb2.model == "gemini-3.1-flash-image-preview"
    assert "no price known" in (nb2.cost_estimate(10, "4K") or "")
    assert "$0.50" in (gemini.GeminiEditor(None, price_per_image=0.05).cost_estimate(10, "4K") or "")


def test_factory_reads_the_key_from_the_environment_and_sends_to_the_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in gemini.KEY_ENV:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(base.EditorError, match="needs an API key in GEMINI_API_KEY or GOOGLE_API_KEY"):
        base.create("gemini", base.EditorConfig())
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    with serve() as stub:
        config = base.EditorConfig(model="nano-banana-2", endpoint=stub.url, options={"retries": "1"})
        made = base.create("gemini", config)
        assert isinstance(made, gemini.GeminiEditor)
        made.edit(request())
    assert (made.model, made.retry.retries) == ("gemini-3.1-flash-image-preview", 1)
    assert [p.rsplit("/", 1)[1] for p in stub.paths] == ["gemini-3.1-flash-image-preview:generateContent"]
    assert KEY not in json.dumps(made.settings())
    with pytest.raises(base.EditorError, match=r"option timeout='soon' is not a float"):
        base.create("gemini", base.EditorConfig(options={"timeout": "soon"}))


def job(tmp_path: Path, steps: int = 3, runs: int = 2) -> Job:
    seed = tmp_path / "seeds" / "gy.png"
    seed.parent.mkdir(parents=True, exist_ok=True)
    noisy_image("gy", 0, 2).save(seed)
    return Job(
        "gemini", resolve("replicate"), "replicate", runs, steps, {"gy": seed}, seed=5, temperature=0.0
    )


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "metadata.jsonl").read_text().splitlines()]


def test_mid_run_failure_keeps_finished_steps_and_a_rerun_continues(tmp_path: Path) -> None:
    out, j = tmp_path / "set", job(tmp_path)
    with serve(["image"] * 4 + [400]) as stub:
        failing, _ = editor(stub.url)
        with pytest.raises(base.EditorError, match="INVALID_ARGUMENT"):
            generate(j, failing, out, log=lambda _: None)
    assert [(r["run"], r["step"]) for r in rows(out)] == [(0, 1), (0, 2), (0, 3), (1, 1)]
    with serve() as stub:
        summary = generate(j, editor(stub.url)[0], out, log=lambda _: None)
    assert (summary.already_done, summary.made) == (4, 2)
    got = rows(out)
    assert [(r["run"], r["step"]) for r in got] == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3)]
    assert stub.sent_image(0) == (out / got[3]["file_name"]).read_bytes()  # step 1's output is step 2's input
    assert all(r["model"] == "gemini-3-pro-image-preview" and r["seed"] == 5 for r in got)
    assert all(r["temperature"] == 0.0 and "faint noise" in r["text"] for r in got)


def test_a_run_without_an_image_stops_alone_and_a_rerun_asks_again(tmp_path: Path) -> None:
    """Run 0 gets text-only replies at step 2 beyond its retries; run 1 still goes to the end."""
    out, j = tmp_path / "set", job(tmp_path)
    notes: list[str] = []
    with serve(["image", "text", "text"]) as stub:
        summary = generate(j, editor(stub.url, no_image_retries=1)[0], out, log=notes.append)
    assert [(r["run"], r["step"]) for r in rows(out)] == [(0, 1), (1, 1), (1, 2), (1, 3)]
    assert summary.stopped == (
        "gy run 0 step 2: gemini-3-pro-image-preview returned no image in 2 replies: finishReason STOP;"
        f" text: '{REFUSAL}'",
    )
    assert (summary.made, summary.requests) == (4, 6)
    assert [n for n in notes if n.startswith("warning: gy run 0 step 2:")] == [
        f"warning: {summary.stopped[0]}; this run stops here, the others go on"
    ]
    with serve() as stub:
        again = generate(j, editor(stub.url)[0], out, log=notes.append)
    assert (again.already_done, again.made, again.stopped) == (4, 2, ())
    assert sorted((r["run"], r["step"]) for r in rows(out)) == [(r, s) for r in (0, 1) for s in (1, 2, 3)]


def test_budget_stops_a_run_which_a_rerun_finishes(tmp_path: Path) -> None:
    out, j = tmp_path / "set", job(tmp_path, steps=2)
    notes: list[str] = []
    with serve() as stub:
        with pytest.raises(ChainFailed, match=r"^gy run \d step \d: request budget of 3 used up") as failed:
            generate(j, editor(stub.url, max_requests=3)[0], out, log=notes.append)
        assert isinstance(failed.value.__cause__, gemini.BudgetExhausted)
        assert notes[0] == (
            "4 gemini-3-pro-image-preview calls at $0.134: about $0.54 before retries;"
            " at most 3 requests this run"
        )
        # the stub answers every request alike, so runs 0 and 1 repeat each other: a warning
        assert notes[1:] == [
            "warning: editor 'gemini' made byte-identical images in runs 0 and 1 of gy at step 1, so "
            "replicate runs add no information; use --runs 1, or give the runs different seeds "
            "(--seed with --vary-seed) if the editor takes one"
        ]
        assert len(rows(out)) == 3
        generate(j, editor(stub.url, max_requests=3)[0], out, log=notes.append)
    assert len(rows(out)) == 4 and notes[-2].startswith("1 gemini-3-pro-image-preview calls")
    assert notes[-1].startswith("warning: editor 'gemini' made byte-identical images in runs 0 and 1")


def test_interleaved_resolutions_are_requested_in_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--resolution 1K,2K,4K`: the paper's interleaving, step by step, through the command line."""
    from banana_tests.cli import main

    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    noisy_image("gy", 0, 2).save(tmp_path / "gy.png")
    out = tmp_path / "set"
    with serve() as stub:
        argv = ["generate", "--editor", "gemini", "--endpoint", stub.url, "--out", str(out),
                "--seed-images", str(tmp_path / "gy.png"), "--runs", "1", "--steps", "4",
                "--resolution", "1K,2K,4K"]  # fmt: skip
        assert main(argv) == 0
    sizes = [r["generationConfig"]["imageConfig"]["imageSize"] for r in stub.requests]
    assert sizes == [r["resolution"] for r in rows(out)] == ["1K", "2K", "4K", "1K"]
    assert json.loads((out / "generate.json").read_text())["resolution"] == ["1K", "2K", "4K"]
    with pytest.raises(SystemExit, match="2"):
        main([*argv[:-1], "1K,8K"])  # argparse refuses an unknown size


def test_a_resumed_interleaved_run_goes_on_with_the_cycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped by the budget after 2K, the rerun asks 4K then 1K: the size follows the step."""
    from banana_tests.cli import main

    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    noisy_image("gy", 0, 2).save(tmp_path / "gy.png")
    out = tmp_path / "set"
    with serve() as stub:
        argv = ["generate", "--editor", "gemini", "--endpoint", stub.url, "--out", str(out),
                "--seed-images", str(tmp_path / "gy.png"), "--runs", "1", "--steps", "4",
                "--resolution", "1K,2K,4K"]  # fmt: skip
        assert main([*argv, "--max-requests", "2"]) == 1
        assert len(stub.requests) == 2
        assert main(argv) == 0
    sizes = [r["generationConfig"]["imageConfig"]["imageSize"] for r in stub.requests]
    assert sizes == [r["resolution"] for r in rows(out)] == ["1K", "2K", "4K", "1K"]


def test_the_papers_own_crop_passes_through_the_stub_and_a_larger_one_is_flagged(tmp_path: Path) -> None:
    """The paper's 5632x3072 -> 2816x1504 at 1/32 scale (176x96 -> 88x47, the same output ratio),
    made by the stub and read back through the SDK: not flagged; then 88x47 -> 88x44: flagged."""
    seed = tmp_path / "wide.png"
    Image.fromarray(np.full((96, 176, 3), 128, dtype=np.uint8)).save(seed)
    j = Job("gemini", resolve("replicate"), "replicate", 1, 3, {"wide": seed}, seed=5, temperature=0.0)
    out, notes = tmp_path / "set", []
    with serve(["size:88x47", "size:88x44", "image"]) as stub:
        generate(j, editor(stub.url)[0], out, log=notes.append)
    sizes = [(r["input_size"], r["output_size"], r["aspect_changed"]) for r in rows(out)]
    assert sizes == [([176, 96], [88, 47], False), ([88, 47], [88, 44], True), ([88, 44], [88, 44], False)]
    warnings = [n for n in notes if n.startswith("warning:")]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "warning: wide run 0 step 2: 'gemini' changed the aspect ratio ([88, 47] -> [88, 44])"
    )


def test_an_aspect_ratio_changed_beyond_the_papers_crop_is_warned_and_recorded(tmp_path: Path) -> None:
    """The paper's crop (5632x3072 -> 2816x1504, 2.1 %) passes; a 10 % cut of the width is flagged."""
    from banana_tests.editors.chains import ASPECT_TOLERANCE, aspect_changed

    assert not aspect_changed((5632, 3072), (2816, 1504), None)
    assert aspect_changed((5632, 3072), (2816, 1450), None)
    assert not aspect_changed((60, 80), (80, 60), "rotate")
    out, j = tmp_path / "set", job(tmp_path, runs=1)
    notes: list[str] = []
    with serve(["crop:0.01", "crop:0.1"]) as stub:
        generate(j, editor(stub.url)[0], out, log=notes.append)
    assert [r["aspect_changed"] for r in rows(out)] == [False, True, False]
    first = rows(out)[1]
    assert notes[1:] == [
        f"warning: gy run 0 step 2: 'gemini' changed the aspect ratio ({first['input_size']} ->"
        f" {first['output_size']}) beyond the paper's {ASPECT_TOLERANCE:.1%} crop; recorded as aspect_changed"
    ]
