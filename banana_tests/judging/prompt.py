"""The question the judge answers about one reasoning summary, and how its answer is read.

Banana100 asks an LLM whether each step's reasoning summary acknowledges the noise; its exact
prompt text is not public, so this one asks the same yes/no question (docs/judge.md).
"""

from __future__ import annotations

import hashlib
import re
from enum import Enum

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
