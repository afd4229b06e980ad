"""The `gemini` editor: Nano Banana Pro and Nano Banana 2 through the `google-genai` SDK.

Each edit is a fresh `generate_content` call (no chat history): the prompt and the previous
image as lossless PNG in, an image and the model's thought summary out. A trajectory set can
cost hundreds of dollars, so every attempt is counted against `--max-requests`. Transient
failures (429, 5xx, a refused or dropped connection, no answer within `timeout`) are retried
with exponential backoff, at most `retries` times over the edit (banana_tests.http_retry). A
reply without an image is asked again at most `no_image_retries` times, then only that run stops
(`NoImage`); a blocked prompt is not asked again. The API key is read from the environment,
handed to the SDK and scrubbed from every message this module raises. The SDK is imported only
when a real client is built (`pip install 'banana-tests[gemini]'`).
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image

from banana_tests.editors.base import (
    EditorConfig,
    EditorError,
    EditRequest,
    EditResult,
    NoImage,
    redact,
    take_options,
)
from banana_tests.http_retry import RetryPolicy

KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
ALIASES = {
    "nano-banana-pro": "gemini-3-pro-image-preview",
    "nano-banana-2": "gemini-3.1-flash-image-preview",
}
DEFAULT_MODEL = ALIASES["nano-banana-pro"]
RESOLUTIONS = ("1K", "2K", "4K")
PRICE_USD = {
    ("gemini-3-pro-image-preview", "1K"): 0.134,
    ("gemini-3-pro-image-preview", "2K"): 0.134,
    ("gemini-3-pro-image-preview", "4K"): 0.24,
    ("gemini-3.1-flash-image-preview", "1K"): 0.067,
}
"""Google's list price per output image at the time of writing; `--price-per-image` overrides."""


class BudgetExhausted(EditorError):
    """`--max-requests` calls were made; finished steps are kept and a rerun continues."""


def api_key() -> str:
    for name in KEY_ENV:
        if os.environ.get(name):
            return os.environ[name]
    raise EditorError(f"the gemini editor needs an API key in {' or '.join(KEY_ENV)}")


def sdk_client(key: str, endpoint: str | None = None, timeout: float | None = None) -> Any:
    """A real `google.genai.Client` sending to `endpoint` (default: the SDK's, which its
    GOOGLE_GEMINI_BASE_URL variable may set), giving up on a request after `timeout` seconds."""
    try:
        from google import genai
    except ImportError as exc:
        raise EditorError("the gemini editor needs google-genai: pip install 'banana-tests[gemini]'") from exc
    http: dict[str, Any] = {}
    if endpoint is not None:
        http["base_url"] = endpoint
    if timeout is not None:
        http["timeout"] = max(1, round(timeout * 1000))  # the SDK takes milliseconds
    return genai.Client(api_key=key, http_options=genai.types.HttpOptions(**http) if http else None)


class GeminiEditor:
    name = "gemini"
    accepts = frozenset({"seed", "temperature", "resolution", "endpoint"})

    def __init__(
        self,
        client: Any,
        model: str = DEFAULT_MODEL,
        *,
        max_requests: int | None = None,
        retries: int = 6,
        backoff: float = 2.0,
        no_image_retries: int = 2,
        price_per_image: float | None = None,
        secrets: tuple[str, ...] = (),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = ALIASES.get(model, model)
        self._client, self._secrets = client, secrets
        self.max_requests, self.retry = max_requests, RetryPolicy(retries, backoff, sleep)
        self.no_image_retries = no_image_retries
        self.price_per_image = price_per_image
        self.requests_made = 0

    def settings(self) -> dict[str, Any]:
        return {"model": self.model}

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        price = self.price_per_image or PRICE_USD.get((self.model, resolution or "2K"))
        budget = f"; at most {self.max_requests} requests this run" if self.max_requests is not None else ""
        if price is None:
            return f"{edits} {self.model} calls: no price known for it (pass --price-per-image){budget}"
        return (
            f"{edits} {self.model} calls at ${price:.3f}: about ${edits * price:,.2f} before retries{budget}"
        )

    def edit(self, request: EditRequest) -> EditResult:
        if request.resolution is not None and request.resolution not in RESOLUTIONS:
            raise EditorError(
                f"resolution must be one of {', '.join(RESOLUTIONS)}, got {request.resolution!r}"
            )
        buffer = io.BytesIO()
        request.image.convert("RGB").save(buffer, format="PNG")
        contents = [
            {
                "role": "user",
                "parts": [
                    {"text": request.prompt},
                    {"inline_data": {"mime_type": "image/png", "data": buffer.getvalue()}},
                ],
            }
        ]
        config: dict[str, Any] = {
            "response_modalities": ["TEXT", "IMAGE"],
            "thinking_config": {"include_thoughts": True},
        }
        if request.seed is not None:
            config["seed"] = request.seed
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.resolution is not None:
            config["image_config"] = {"image_size": request.resolution}
        attempts = no_image = 0

        def attempt() -> Any:
            nonlocal attempts
            if self.max_requests is not None and self.requests_made >= self.max_requests:
                raise BudgetExhausted(
                    f"request budget of {self.max_requests} used up; finished steps are kept, rerun to go on"
                )
            self.requests_made += 1
            attempts += 1
            return self._client.models.generate_content(model=self.model, contents=contents, config=config)

        retrying = self.retry.request(never=(BudgetExhausted,))  # one limit over the edit's replies
        while True:
            try:
                response = retrying(attempt)
            except BudgetExhausted:
                raise
            except Exception as exc:
                said = f"{type(exc).__name__}: {exc}" if not getattr(exc, "code", None) else f"{exc}"
                raise EditorError(
                    self._safe(f"{self.model} call failed after {attempts} attempt(s): {said}")
                ) from None
            reply = _parse(response)
            if reply.image is not None:
                return EditResult(reply.image, reply.text, requests=attempts)
            if reply.blocked or no_image >= self.no_image_retries:
                again = "" if reply.blocked else f" in {no_image + 1} replies"
                raise NoImage(self._safe(f"{self.model} returned no image{again}: {reply.why}"), attempts)
            no_image += 1

    def _safe(self, message: str) -> str:
        return redact(message, self._secrets)


@dataclass(frozen=True)
class Reply:
    """What one answer held: an image or why not (`blocked`: the prompt itself was refused)."""

    image: Image.Image | None
    text: str | None
    why: str = ""
    blocked: bool = False


def _name(value: object) -> str:
    """An SDK enum (`FinishReason.STOP`) as the API spells it (`STOP`)."""
    return str(getattr(value, "value", value))


def _parse(response: Any) -> Reply:
    """The last image of the first candidate, with its thought summary and reply text."""
    feedback = getattr(response, "prompt_feedback", None)
    block = getattr(feedback, "block_reason", None)
    candidates = getattr(response, "candidates", None) or []
    if block is not None and not candidates:
        detail = getattr(feedback, "block_reason_message", None)
        why = f"prompt blocked (blockReason {_name(block)}" + (f": {detail})" if detail else ")")
        return Reply(None, None, why, blocked=True)
    if not candidates:
        return Reply(None, None, "no candidates in the reply")
    candidate = candidates[0]
    parts = getattr(getattr(candidate, "content", None), "parts", None) or []
    image: Image.Image | None = None
    thoughts: list[str] = []
    replies: list[str] = []
    for part in parts:
        data = getattr(getattr(part, "inline_data", None), "data", None)
        if data:
            image = Image.open(io.BytesIO(data)).convert("RGB")
        elif getattr(part, "text", None):
            (thoughts if getattr(part, "thought", False) else replies).append(part.text)
    text = "\n\n".join(thoughts + replies) or None
    if image is not None:
        return Reply(image, text)
    reason = getattr(candidate, "finish_reason", None)
    message = getattr(candidate, "finish_message", None)
    why = f"finishReason {_name(reason)}" + (f", finishMessage {message!r}" if message else "")
    return Reply(None, text, f"{why}; text: {' '.join(replies)[:200]!r}")


def make(config: EditorConfig) -> GeminiEditor:
    """`--model` is a model id or `nano-banana-pro` / `nano-banana-2`; `--endpoint URL`;
    `--option retries=N`, `backoff=S`, `timeout=S`, `no_image_retries=N`."""
    options = take_options(
        config, "gemini", {"retries": 6, "backoff": 2.0, "timeout": 300.0, "no_image_retries": 2}
    )
    key = api_key()
    try:
        client = sdk_client(key, config.endpoint, options["timeout"])
    except EditorError:
        raise
    except Exception as exc:
        raise EditorError(redact(f"could not create the google-genai client: {exc}", (key,))) from None
    return GeminiEditor(
        client,
        config.model or DEFAULT_MODEL,
        max_requests=config.max_requests,
        retries=options["retries"],
        backoff=options["backoff"],
        no_image_retries=options["no_image_retries"],
        price_per_image=config.price_per_image,
        secrets=(key,),
    )
