"""One retry policy for the paid API calls, the editors' and the judges': which failures may pass
on a retry, how long to wait before it and how many to make.

429 and 5xx answers and refused, dropped or timed-out connections are retried; any other answer
would not change. The waits double from `backoff` up to MAX_WAIT seconds. The caller counts and
budgets the attempts itself (each one may cost money), so a refused budget is never retried.
"""

from __future__ import annotations

import importlib
import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

MAX_WAIT = 120.0
"""Seconds: the longest wait between two attempts, however many failed before."""

T = TypeVar("T")


def retryable(code: object) -> bool:
    """Rate limits (429) and server errors (5xx) pass; other answers will not change on retry."""
    return isinstance(code, int) and (code == 429 or 500 <= code <= 599)


def transient(exc: BaseException) -> bool:
    """A retryable HTTP answer (an error with an int `code`: the SDK's, or urllib's), or a transport
    failure: a refused, dropped or timed-out connection, raised as is, wrapped in urllib's URLError,
    or as the SDK's HTTP client's TransportError."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return retryable(code)
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, (ConnectionError, TimeoutError)):
        return True
    for transport in (
        "httpx",
        "httpx2",
    ):  # google-genai's HTTP client (httpx2 from google-genai 3); unwrapped
        try:
            module = importlib.import_module(transport)
        except ImportError:
            continue
        if isinstance(exc, module.TransportError):
            return True
    return False


@dataclass(frozen=True)
class RetryPolicy:
    """At most `retries` retries, waiting `backoff`, then twice as long each time (MAX_WAIT at most)."""

    retries: int = 6
    backoff: float = 2.0
    sleep: Callable[[float], None] = time.sleep

    def request(self, never: tuple[type[BaseException], ...] = ()) -> Retries:
        """The retries of one request; `never`: errors that are not retried (a spent budget)."""
        return Retries(self, never)


class Retries:
    """One request's retries. Its failures count over every call made through it, so a request
    the caller sends again for its own reasons (a reply without an image) shares one limit."""

    def __init__(self, policy: RetryPolicy, never: tuple[type[BaseException], ...]) -> None:
        self.failures = 0
        self._retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(lambda e: not isinstance(e, never) and transient(e)),
            stop=lambda _: self.failures >= policy.retries,
            wait=lambda _: min(policy.backoff * 2**self.failures, MAX_WAIT),
            before_sleep=self._failed,
            sleep=policy.sleep,
            reraise=True,
        )

    def _failed(self, _: tenacity.RetryCallState) -> None:
        self.failures += 1

    def __call__(self, attempt: Callable[[], T]) -> T:
        """`attempt()` until it answers, a failure that may not pass is raised, or retries run out."""
        return self._retrying(attempt)
