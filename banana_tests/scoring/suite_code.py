"""The suite's own code between an image's bytes and its stored score, in every metric's score
cache identity: an upgrade of banana-tests that changes how an image is decoded, batched, handed
to a backend or its score read back rescores; one that changes only reports, commands or verdicts
keeps the scores.

Listed by module, so that an edit elsewhere rescores nothing; tests/test_metric_identity.py keeps
the list whole: every module of the suite's that a listed one imports (at its top or inside a
function) is listed too, or in UNSCORED with why it cannot change a stored value. Scores are
stored raw, so the normalisation (metrics_under_test.scale) is no part of them; the one
normalised figure the cache holds, an invariance check's change, names the scale and its code in
its own cache name (banana_tests/families/invariance/test_invariance.py).
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

from metrics_under_test.file_hash import file_sha256
from metrics_under_test.spec import Backend

SCORING = (
    "banana_tests.trajectories.images",  # an image file's bytes → RGB uint8 pixels
    "banana_tests.scoring.score_book",  # decode windows, batches, a raising batch tried smaller
    "banana_tests.scoring.batching",  # which images share a call, in what order
    "banana_tests.scoring.pixels",  # in-memory images, batched as files are
    "banana_tests.scoring.returned_scores",  # what a metric returned → one float per image
    "metrics_under_test.score_value",  # the conversion of one returned value
    "banana_tests.scoring.metric_model",  # how a spec's model is built, and built again (after a hang)
    "banana_tests.scoring.process_tuning",  # torch's threads: the order a reduction sums in
)
"""Every backend's scoring path."""

BACKENDS = {
    Backend.PYIQA: ("metrics_under_test.pyiqa_backend",),
    Backend.VLM: (
        "metrics_under_test.vlm.adapters",
        "metrics_under_test.vlm_catalog",
        "metrics_under_test.vlm.rali",
        "metrics_under_test.vlm.qalign_compat",
    ),
    Backend.CUSTOM: ("metrics_under_test.custom",),
}
"""Each backend's adapter: the pyiqa adapter's edit rescores no VLM."""

UNSCORED = {
    "banana_tests": "the package: its version only",
    "banana_tests.scoring": "a package docstring",
    "banana_tests.trajectories": "a package docstring",
    "metrics_under_test": "a package docstring",
    "metrics_under_test.vlm": "a package docstring",
    "banana_tests.regular_files": "reads a file's bytes unchanged (their sha256 keys the score)",
    "banana_tests.trajectories.records": "the record type and its errors",
    "banana_tests.scoring.batch_watch": (
        "runs a call under a time limit and returns what it returned; remembers a metric that hung"
    ),
    "banana_tests.scoring.cache": "stores the scores; what keys them is its `identity`, itself the key",
    "banana_tests.scoring.loaded_libraries": "what a metric loads, itself in the key",
    "metrics_under_test.own_code": "finds a custom metric's code for its key",
    "metrics_under_test.weights": "stages parameter files, whose sha256 is in the key",
    "metrics_under_test.spec": "the spec, whose name, backend and parameter files are in the key",
    "metrics_under_test.protocol": "the metric protocol's types and errors",
    "metrics_under_test.probe": "checks a built metric on images of its own; nothing it scores is kept",
    "banana_tests.scoring.faults": "says which exceptions are the environment's; no score passes it",
    "metrics_under_test.pyiqa_files": "checks and stages the files pyiqa loads, whose sha256 is in the key",
}
"""The suite's modules the scoring path imports that cannot change a stored score, and why."""


def scoring_modules(backend: Backend) -> tuple[str, ...]:
    """The modules whose code decides a `backend` metric's stored scores."""
    return (*SCORING, *BACKENDS[backend])


@cache
def code_hashes(backend: Backend) -> dict[str, str]:
    """{module: sha256 of its source file} of `scoring_modules(backend)`, read once a process."""
    return {name: file_sha256(module_file(name)) for name in scoring_modules(backend)}


def module_file(name: str) -> Path:
    """The source file of one of the suite's modules, found without running it."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"banana-tests' module {name} is missing", name=name)
    return Path(spec.origin)
