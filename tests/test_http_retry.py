"""One retry policy (banana_tests.http_retry) for the gemini editor and both LLM judges: the same
failures retried, the same waits, the same number of attempts, through their real clients
against the local stub of the services."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from banana_tests.editors import base, gemini
from banana_tests.http_retry import RetryPolicy
from banana_tests.judging import judges
from tests.conftest import needs, noisy_image
from tests.gemini_stub import KEY, serve

needs("google-genai", "google.genai")

Caller = Callable[[str, RetryPolicy], Callable[[], int]]
"""A client sending to the stub's url under a policy: one request, which returns its attempts."""


def editor(url: str, policy: RetryPolicy) -> Callable[[], int]:
    made = gemini.GeminiEditor(
        gemini.sdk_client(KEY, url, 5.0), retries=policy.retries, backoff=policy.backoff, sleep=policy.sleep
    )
    image = noisy_image("g", 0, 1)
    return lambda: made.edit(base.EditRequest(image, "Produce a replica.", 1, 0, "g")).requests


def gemini_judge(url: str, policy: RetryPolicy) -> Callable[[], int]:
    retrying = judges.Retrying(judges.RequestBudget(None), "m", policy, (KEY,))
    judge = judges.GeminiJudge(gemini.sdk_client(KEY, url, 5.0), "gemini-2.5-flash", retrying)
    return lambda: judge.answer("a summary").requests


def openai_judge(url: str, policy: RetryPolicy) -> Callable[[], int]:
    retrying = judges.Retrying(judges.RequestBudget(None), "m", policy)
    judge = judges.OpenAIJudge(f"{url}/v1", "m", None, retrying, timeout=5.0)
    return lambda: judge.answer("a summary").requests


GAVE_UP = (base.EditorError, judges.JudgeError)
CALLERS = pytest.mark.parametrize("caller", [editor, gemini_judge, openai_judge], ids=lambda c: c.__name__)


@CALLERS
def test_429_5xx_and_a_dropped_connection_are_retried_with_doubling_waits(caller: Caller) -> None:
    sleeps: list[float] = []
    with serve([429, 500, 503, "drop"]) as stub:
        attempts = caller(stub.url, RetryPolicy(sleep=sleeps.append))()
    assert (attempts, len(stub.requests), sleeps) == (5, 5, [2.0, 4.0, 8.0, 16.0])


@CALLERS
@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_other_answers_are_not_retried(caller: Caller, status: int) -> None:
    sleeps: list[float] = []
    with (
        serve([status]) as stub,
        pytest.raises(GAVE_UP, match="after 1 attempt"),
    ):
        caller(stub.url, RetryPolicy(sleep=sleeps.append))()
    assert (len(stub.requests), sleeps) == (1, [])


@CALLERS
def test_retries_run_out_and_waits_stop_growing_at_the_cap(caller: Caller) -> None:
    sleeps: list[float] = []
    with (
        serve([503] * 4) as stub,
        pytest.raises(GAVE_UP, match="after 4 attempt"),
    ):
        caller(stub.url, RetryPolicy(retries=3, backoff=50.0, sleep=sleeps.append))()
    assert (len(stub.requests), sleeps) == (4, [50.0, 100.0, 120.0])
