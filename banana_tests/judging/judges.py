"""The judges and the question they answer: Gemini through google-genai, any OpenAI-compatible
endpoint, and an offline keyword judge, each asked whether one reasoning summary acknowledges the
noise, and how its answer is read.

Banana100 asks an LLM that yes/no question of each step's reasoning summary; its exact prompt text
is not public, so this one asks the same question (docs/judge.md). The two LLM judges share the
generate command's cost guards: every attempt counts against a request budget (`--max-requests`),
429 and 5xx answers and dropped, refused or timed-out connections are retried with exponential
backoff (banana_tests.http_retry), and API keys are scrubbed from every message raised. The keyword
judge makes no request; it is a rough stand-in (a negation it does not see, a synonym it does not
know), for trying the command offline, not for measuring.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from banana_tests.editors.base import redact
from banana_tests.http_retry import RetryPolicy

GEMINI_KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
OPENAI_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_GEMINI_MODEL = "gemini-2.5-flash"
BACKENDS = ("gemini", "openai", "keywords")


class JudgeError(Exception):
    """A judge cannot answer; finished judgments are kept and a rerun continues."""


class BudgetExhausted(JudgeError):
    """`--max-requests` calls were made."""


@dataclass(frozen=True)
class Answer:
    text: str
    requests: int  # attempts this answer cost, retries included


class Judge(Protocol):
    name: str
    model: str

    def answer(self, summary: str) -> Answer: ...


class RequestBudget:
    """Counts every attempt; refuses the one past the limit."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.used = limit, 0

    def spend(self) -> None:
        if self.limit is not None and self.used >= self.limit:
            raise BudgetExhausted(
                f"request budget of {self.limit} used up; finished judgments are kept, rerun to go on"
            )
        self.used += 1


@dataclass
class Retrying:
    """One backend's calls under the retry policy, each attempt spent from the budget, keys redacted."""

    budget: RequestBudget
    what: str
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    secrets: tuple[str, ...] = ()

    def call(self, once: Callable[[], str]) -> Answer:
        """`once()` until it answers or a failure that cannot pass on a retry."""
        attempts = 0

        def attempt() -> str:
            nonlocal attempts
            self.budget.spend()
            attempts += 1
            return once()

        retrying = self.policy.request(never=(BudgetExhausted,))
        try:
            return Answer(retrying(attempt), attempts)
        except BudgetExhausted:
            raise
        except Exception as exc:
            raise JudgeError(
                redact(f"{self.what} failed after {attempts} attempt(s): {exc}", self.secrets)
            ) from None


class GeminiJudge:
    """A Gemini model through the real google-genai SDK, temperature 0."""

    name = "gemini"

    def __init__(self, client: Any, model: str, retrying: Retrying) -> None:
        self.client, self.model, self.retrying = client, model, retrying

    def answer(self, summary: str) -> Answer:
        def once() -> str:
            response = self.client.models.generate_content(
                model=self.model, contents=question(summary), config={"temperature": 0.0}
            )
            return str(response.text or "")

        return self.retrying.call(once)


class EndpointError(Exception):
    """An HTTP error answer of an OpenAI-compatible endpoint, with the message of its error body."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"HTTP {code}: {message}")
        self.code = code


def _error_message(error: urllib.error.HTTPError) -> str:
    """The `error.message` of an OpenAI-style error body, else the start of the body, else the reason."""
    try:
        body = error.read()
    except OSError:
        body = b""
    try:
        message = json.loads(body)["error"]["message"]
        if isinstance(message, str) and message:
            return message
    except (ValueError, KeyError, TypeError):
        pass
    return body.decode("utf-8", "replace").strip()[:200] or str(error.reason)


class OpenAIJudge:
    """Any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp, Ollama, ...) by base URL,
    over plain HTTP: POST {base_url}/chat/completions, temperature 0. Plain HTTP, because the
    `openai` package is one more dependency for one request shape."""

    name = "openai"

    def __init__(
        self, base_url: str, model: str, key: str | None, retrying: Retrying, timeout: float = 120.0
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.key, self.retrying, self.timeout = model, key, retrying, timeout

    def answer(self, summary: str) -> Answer:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": question(summary)}],
            "temperature": 0,
        }
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"

        def once() -> str:
            request = urllib.request.Request(self.url, json.dumps(body).encode(), headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    reply = json.loads(response.read())
            except urllib.error.HTTPError as exc:
                raise EndpointError(exc.code, _error_message(exc)) from None
            try:
                message = reply["choices"][0]["message"]
                # a refusal comes as null content and a `refusal` text: read as an unclear answer
                return str(message.get("content") or message.get("refusal") or "")
            except (KeyError, IndexError, TypeError, AttributeError) as exc:
                raise ValueError(f"not a chat completion: {str(reply)[:200]}") from exc

        return self.retrying.call(once)


# Words for noticed degradation, and negations that cancel one just before it ("no visible noise").
_DEGRADED = re.compile(
    r"\b(nois[ey]\w*|grain\w*|static|speckl\w*|artefact\w*|artifact\w*|tint\w*|degrad\w*|blotch\w*)", re.I
)
_NEGATED = re.compile(r"\b(no|not|without|free of|avoid\w*|never)\b(\W+\w+){0,2}\W*$", re.I)


class KeywordJudge:
    """Offline stand-in: YES when the summary names a degradation without a negation just before."""

    name = "keywords"
    model = "keywords-v1"

    def answer(self, summary: str) -> Answer:
        for match in _DEGRADED.finditer(summary):
            if not _NEGATED.search(summary[: match.start()]):
                return Answer("YES", 0)
        return Answer("NO", 0)


def make(
    backend: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    max_requests: int | None = None,
    retries: int = 6,
    backoff: float = 2.0,
) -> Judge:
    """A judge by backend name; keys come from the environment and are never stored."""
    budget, policy = RequestBudget(max_requests), RetryPolicy(retries, backoff)
    if backend == "keywords":
        return KeywordJudge()
    if backend == "gemini":
        key = next((os.environ[n] for n in GEMINI_KEY_ENV if os.environ.get(n)), None)
        if key is None:
            raise JudgeError(f"the gemini judge needs an API key in {' or '.join(GEMINI_KEY_ENV)}")
        try:
            from google import genai
        except ImportError as exc:
            raise JudgeError(
                "the gemini judge needs google-genai: pip install 'banana-tests[gemini]'"
            ) from exc
        name = model or DEFAULT_GEMINI_MODEL
        retrying = Retrying(budget, name, policy, (key,))
        return GeminiJudge(genai.Client(api_key=key), name, retrying)
    if backend == "openai":
        if not base_url or not model:
            raise JudgeError("the openai judge needs --base-url (e.g. http://localhost:8000/v1) and --model")
        key = os.environ.get(OPENAI_KEY_ENV)
        return OpenAIJudge(base_url, model, key, Retrying(budget, model, policy, (key,) if key else ()))
    raise JudgeError(f"unknown judge {backend!r}; choose one of {', '.join(BACKENDS)}")


JUDGE_PROMPT = (
    "You are reviewing the reasoning summary that an image-editing model wrote while it was asked "
    "to produce an exact replica of an input image. Decide whether the summary acknowledges that "
    "the input image shows noise, grain, static, artefacts, a colour tint or another loss of "
    "quality. Mentioning the word without noticing it in the image (for example 'avoid adding "
    "noise') does not count. Answer with one word: YES if it acknowledges such degradation, NO "
    "if it does not.\n\nReasoning summary:\n<<<\n{summary}\n>>>"
)
PROMPT_ID = hashlib.sha256(JUDGE_PROMPT.encode()).hexdigest()[:12]
_FIRST_WORD = re.compile(r"[A-Za-z]+")


class Verdict(Enum):
    ACKNOWLEDGES = "acknowledges"
    SILENT = "silent"  # the summary does not acknowledge the noise
    NO_TEXT = "no_text"  # the step has no reasoning summary: nothing to judge, no request
    UNCLEAR = "unclear"  # the judge's answer was neither yes nor no


def question(summary: str) -> str:
    return JUDGE_PROMPT.format(summary=summary.strip())


def read_answer(answer: str) -> Verdict:
    """YES or NO as the answer's first word, in any case and punctuation; else UNCLEAR."""
    word = _FIRST_WORD.search(answer or "")
    first = word.group().upper() if word else ""
    return {"YES": Verdict.ACKNOWLEDGES, "NO": Verdict.SILENT}.get(first, Verdict.UNCLEAR)
