"""The gemini editor against a fake `google-genai` client injected at the SDK boundary."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from PIL import Image, ImageOps

from banana_tests.editors import base, gemini
from banana_tests.editors.generate import Job, generate
from banana_tests.editors.prompts import resolve
from tests.conftest import noisy_image

KEY = "AIzaFAKE-secret-key-0123456789"


class APIError(Exception):
    """Shaped like `google.genai.errors.APIError`: an HTTP status in `code`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code} {message}")
        self.code = code


class FakeModels:
    """`client.models`: plays a script of errors, then answers with the mirrored input image."""

    def __init__(self, script: list[Exception] | None = None) -> None:
        self.script = list(script or [])
        self.calls: list[dict[str, Any]] = []

    def generate_content(self, *, model: str, contents: list[Any], config: dict[str, Any]) -> Any:
        self.calls.append({"model": model, "contents": contents, "config": config})
        if self.script:
            raise self.script.pop(0)
        png = contents[0]["parts"][1]["inline_data"]["data"]
        out = io.BytesIO()
        ImageOps.mirror(Image.open(io.BytesIO(png))).save(out, format="PNG")
        parts = [
            SimpleNamespace(text="**Checking the image** I see faint noise.", thought=True, inline_data=None),
            SimpleNamespace(text=None, thought=None, inline_data=SimpleNamespace(data=out.getvalue())),
            SimpleNamespace(text="Here is the replica.", thought=None, inline_data=None),
        ]
        content = SimpleNamespace(parts=parts)
        return SimpleNamespace(candidates=[SimpleNamespace(content=content, finish_reason="STOP")])


class FakeClient:
    def __init__(self, script: list[Exception] | None = None) -> None:
        self.models = FakeModels(script)


def editor(script: list[Exception] | None = None, **kwargs: Any) -> tuple[gemini.GeminiEditor, list[float]]:
    sleeps: list[float] = []
    made = gemini.GeminiEditor(FakeClient(script), secrets=(KEY,), sleep=sleeps.append, **kwargs)
    return made, sleeps


def request(step: int = 1, **kwargs: Any) -> base.EditRequest:
    return base.EditRequest(noisy_image("g", 0, 1), "Produce a replica.", step, 0, "g", **kwargs)


def test_success_passes_parameters_and_returns_image_and_reasoning() -> None:
    ed, sleeps = editor()
    result = ed.edit(request(seed=7, temperature=0.4, resolution="4K"))
    call = ed._client.models.calls[0]
    assert call["model"] == "gemini-3-pro-image-preview"
    assert call["config"]["seed"] == 7 and call["config"]["temperature"] == 0.4
    assert call["config"]["image_config"] == {"image_size": "4K"}
    assert call["config"]["response_modalities"] == ["TEXT", "IMAGE"]
    assert call["contents"][0]["parts"][0] == {"text": "Produce a replica."}
    assert result.image.tobytes() == ImageOps.mirror(noisy_image("g", 0, 1)).tobytes()
    assert result.text == "**Checking the image** I see faint noise.\n\nHere is the replica."
    assert (result.requests, sleeps) == (1, [])
    bare = editor()[0]
    bare.edit(request())
    assert set(bare._client.models.calls[0]["config"]) == {"response_modalities", "thinking_config"}


def test_429_and_5xx_are_retried_with_exponential_backoff() -> None:
    ed, sleeps = editor([APIError(429, "RESOURCE_EXHAUSTED"), APIError(503, "UNAVAILABLE")])
    result = ed.edit(request())
    assert (result.requests, sleeps, ed.requests_made) == (3, [2.0, 4.0], 3)


def test_client_errors_are_not_retried_and_retries_run_out() -> None:
    ed, sleeps = editor([APIError(400, "INVALID_ARGUMENT")])
    with pytest.raises(base.EditorError, match="failed after 1 attempt"):
        ed.edit(request())
    ed, sleeps = editor([APIError(500, "INTERNAL")] * 3, retries=2)
    with pytest.raises(base.EditorError, match="failed after 3 attempt"):
        ed.edit(request())
    assert sleeps == [2.0, 4.0]


def test_budget_counts_every_attempt() -> None:
    ed, _ = editor([APIError(429, "slow down")], max_requests=3)
    ed.edit(request())  # two requests
    ed.edit(request(step=2))  # the third
    with pytest.raises(gemini.BudgetExhausted, match="request budget of 3 used up"):
        ed.edit(request(step=3))
    assert len(ed._client.models.calls) == 3


def test_no_image_and_bad_resolution_are_clear_errors() -> None:
    ed, _ = editor()
    ed._client.models.generate_content = lambda **_: SimpleNamespace(
        candidates=[SimpleNamespace(content=SimpleNamespace(parts=[]), finish_reason="IMAGE_SAFETY")]
    )
    with pytest.raises(base.EditorError, match="returned no image \\(finish reason IMAGE_SAFETY"):
        ed.edit(request())
    with pytest.raises(base.EditorError, match="resolution must be one of 1K, 2K, 4K"):
        ed.edit(request(resolution="8K"))


def test_errors_never_show_the_key() -> None:
    ed, _ = editor([APIError(403, f"API key {KEY} not valid")])
    with pytest.raises(base.EditorError) as info:
        ed.edit(request())
    assert KEY not in str(info.value) and "<redacted>" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_cost_estimate_uses_list_prices_or_the_override() -> None:
    ed, _ = editor(max_requests=500)
    assert ed.cost_estimate(1000, "4K") == (
        "1000 gemini-3-pro-image-preview calls at $0.240: about $240.00 before retries; at most 500 requests"
        " this run"
    )
    assert "$134.00" in (ed.cost_estimate(1000, None) or "")
    nb2 = gemini.GeminiEditor(FakeClient(), "nano-banana-2")
    assert nb2.model == "gemini-3.1-flash-image-preview"
    assert "no price known" in (nb2.cost_estimate(10, "4K") or "")
    assert "$0.50" in (gemini.GeminiEditor(FakeClient(), price_per_image=0.05).cost_estimate(10, "4K") or "")


def test_factory_reads_the_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in gemini.KEY_ENV:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(base.EditorError, match="needs an API key in GEMINI_API_KEY or GOOGLE_API_KEY"):
        base.create("gemini", base.EditorConfig())
    seen: list[str] = []
    monkeypatch.setattr(gemini, "sdk_client", lambda key: seen.append(key) or FakeClient())
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    made = base.create("gemini", base.EditorConfig(model="nano-banana-2", options={"retries": "1"}))
    assert isinstance(made, gemini.GeminiEditor) and seen == [KEY]
    assert (made.model, made.retries) == ("gemini-3.1-flash-image-preview", 1)
    assert KEY not in json.dumps(made.settings())


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
    failing = gemini.GeminiEditor(FakeClient(), secrets=(KEY,), sleep=lambda s: None)
    original = failing._client.models.generate_content
    calls = {"n": 0}

    def flaky(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 5:
            raise APIError(400, "INVALID_ARGUMENT: bad request")
        return original(**kwargs)

    failing._client.models.generate_content = flaky
    with pytest.raises(base.EditorError, match="INVALID_ARGUMENT"):
        generate(j, failing, out, log=lambda _: None)
    assert [(r["run"], r["step"]) for r in rows(out)] == [(0, 1), (0, 2), (0, 3), (1, 1)]
    resumed = gemini.GeminiEditor(FakeClient(), sleep=lambda s: None)
    summary = generate(j, resumed, out, log=lambda _: None)
    assert (summary.already_done, summary.made) == (4, 2)
    got = rows(out)
    assert [(r["run"], r["step"]) for r in got] == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3)]
    sent = resumed._client.models.calls[0]["contents"][0]["parts"][1]["inline_data"]["data"]
    assert sent == (out / got[3]["file_name"]).read_bytes()  # step 1's output is step 2's input
    assert all(r["model"] == "gemini-3-pro-image-preview" and r["seed"] == 5 for r in got)
    assert all(r["temperature"] == 0.0 and "faint noise" in r["text"] for r in got)


def test_budget_stops_a_run_which_a_rerun_finishes(tmp_path: Path) -> None:
    out, j = tmp_path / "set", job(tmp_path, steps=2)
    notes: list[str] = []
    with pytest.raises(gemini.BudgetExhausted):
        generate(j, gemini.GeminiEditor(FakeClient(), max_requests=3), out, log=notes.append)
    assert notes[0] == (
        "4 gemini-3-pro-image-preview calls at $0.134: about $0.54 before retries;"
        " at most 3 requests this run"
    )
    # the fake client answers every request alike, so runs 0 and 1 repeat each other: a warning
    assert notes[1:] == [
        "warning: editor 'gemini' made byte-identical images in runs 0 and 1 of gy at step 1, so "
        "replicate runs add no information; use --runs 1, or give the runs different seeds "
        "(--seed with --vary-seed) if the editor takes one"
    ]
    assert len(rows(out)) == 3
    generate(j, gemini.GeminiEditor(FakeClient(), max_requests=3), out, log=notes.append)
    assert len(rows(out)) == 4 and notes[-2].startswith("1 gemini-3-pro-image-preview calls")
    assert notes[-1].startswith("warning: editor 'gemini' made byte-identical images in runs 0 and 1")
