"""The `gemini` editor: Nano Banana Pro and Nano Banana 2 through the `google-genai` SDK.

Each edit is a fresh `generate_content` call (no chat history): the prompt and the previous
image as lossless PNG in, an image and the model's thought summary out. A trajectory set can
cost hundreds of dollars, so every attempt is counted against `--max-requests`, 429 and 5xx
answers are retried with exponential backoff, and the API key is read from the environment,
handed to the SDK and scrubbed from every message this module raises. The SDK is imported only
when a real client is built (`pip install 'banana-tests[gemini]'`); tests inject a fake client.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable
from typing import Any

from PIL import Image

from banana_tests.editors.base import EditorConfig, EditorError, EditRequest, EditResult, redact, take_options

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


def retryable(code: object) -> bool:
    """Rate limits (429) and server errors (5xx) pass; other answers will not change on retry."""
    return isinstance(code, int) and (code == 429 or 500 <= code <= 599)


class BudgetExhausted(EditorError):
    """`--max-requests` calls were made; finished steps are kept and a rerun continues."""


def api_key() -> str:
    for name in KEY_ENV:
        if os.environ.get(name):
            return os.environ[name]
    raise EditorError(f"the gemini editor needs an API key in {' or '.join(KEY_ENV)}")


def sdk_client(key: str) -> Any:
    """A real `google.genai.Client`; imported here so the suite never needs the SDK."""
    try:
        from google import genai
    except ImportError as exc:
        raise EditorError("the gemini editor needs google-genai: pip install 'banana-tests[gemini]'") from exc
    return genai.Client(api_key=key)


class GeminiEditor:
    name = "gemini"
    accepts = frozenset({"seed", "temperature", "resolution"})

    def __init__(
        self,
        client: Any,
        model: str = DEFAULT_MODEL,
        *,
        max_requests: int | None = None,
        retries: int = 6,
        backoff: float = 2.0,
        price_per_image: float | None = None,
        secrets: tuple[str, ...] = (),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = ALIASES.get(model, model)
        self._client, self._secrets, self._sleep = client, secrets, sleep
        self.max_requests, self.retries, self.backoff = max_requests, retries, backoff
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
        attempts = 0
        while True:
            if self.max_requests is not None and self.requests_made >= self.max_requests:
                raise BudgetExhausted(
                    f"request budget of {self.max_requests} used up; finished steps are kept, rerun to go on"
                )
            self.requests_made += 1
            attempts += 1
            try:
                response = self._client.models.generate_content(
                    model=self.model, contents=contents, config=config
                )
            except Exception as exc:
                code = getattr(exc, "code", None)
                if retryable(code) and attempts <= self.retries:
                    self._sleep(min(self.backoff * 2 ** (attempts - 1), 120.0))
                    continue
                raise EditorError(
                    self._safe(f"{self.model} call failed after {attempts} attempt(s): {exc}")
                ) from None
            image, text = self._parse(response)
            return EditResult(image, text, requests=attempts)

    def _parse(self, response: Any) -> tuple[Image.Image, str | None]:
        """The last image of the first candidate, and its thought summary and reply text."""
        candidates = getattr(response, "candidates", None) or []
        parts = (getattr(getattr(candidates[0], "content", None), "parts", None) or []) if candidates else []
        image: Image.Image | None = None
        thoughts: list[str] = []
        replies: list[str] = []
        for part in parts:
            data = getattr(getattr(part, "inline_data", None), "data", None)
            if data:
                image = Image.open(io.BytesIO(data)).convert("RGB")
            elif getattr(part, "text", None):
                (thoughts if getattr(part, "thought", False) else replies).append(part.text)
        if image is None:
            reason = getattr(candidates[0], "finish_reason", None) if candidates else "no candidates"
            said = " ".join(replies)[:200]
            raise EditorError(
                self._safe(f"{self.model} returned no image (finish reason {reason}; text: {said!r})")
            )
        text = "\n\n".join(thoughts + replies) or None
        return image, text

    def _safe(self, message: str) -> str:
        return redact(message, self._secrets)


def make(config: EditorConfig) -> GeminiEditor:
    """`--model` is a model id or `nano-banana-pro` / `nano-banana-2`; `--option retries=N,backoff=S`."""
    options = take_options(config, "gemini", {"retries": 6, "backoff": 2.0})
    key = api_key()
    try:
        client = sdk_client(key)
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
        price_per_image=config.price_per_image,
        secrets=(key,),
    )
