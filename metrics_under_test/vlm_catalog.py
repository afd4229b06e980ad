"""The paper's vision-language quality scorers: what they are, where their files live, their licences.

Table 2 of Banana100 lists 23 metrics: 21 from pyiqa and two outside it, VisualQuality-R1 and
RALI, the only two with no failure. Q-Align is one of the 21 (pyiqa's `qalign`), but like the
other two its files are a hub repository, not a pyiqa parameter file. Read without importing
torch or transformers, so `banana-tests metrics` lists them instantly.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from metrics_under_test.weights import MissingWeights, offline


class Runs(Enum):
    """How a metric runs on this project's machine (no GPU, no hub access)."""

    REAL = "real parameters"
    SYNTHETIC = "synthetic parameters (plumbing only)"
    TINY = "tiny random model (plumbing only); the real model needs a GPU"
    TINY_CPU_READY = "tiny random model (plumbing only); the real one also runs on CPU, once downloaded"


@dataclass(frozen=True)
class VlmModel:
    """A hub-hosted model a VLM metric loads, with what a user must know before fetching it."""

    metric: str  # the suite's metric name
    paper_name: str
    repo: str  # hub repository id
    files: tuple[str, ...]  # the files whose absence means "not downloaded"
    license: str
    size: str
    runs_here: Runs
    pin_variable: str | None  # the environment variable that pins its hub revision, if it can be
    low: float = 1.0
    high: float = 5.0

    @property
    def folder(self) -> Path:
        """Where the files are looked for: the repository's folder in the Hugging Face cache, as
        huggingface_hub names it."""
        return hf_hub_cache() / ("models--" + self.repo.replace("/", "--"))

    def asked_revision(self) -> str:
        """The pin (a commit, tag or branch in `pin_variable`), else the hub's default `main`."""
        pinned = os.environ.get(self.pin_variable, "").strip() if self.pin_variable else ""
        return pinned or "main"

    def cached_commit(self) -> str | None:
        """The commit the Hugging Face cache holds for the asked revision: a commit hash itself
        if its snapshot is there, else what huggingface_hub recorded in `refs/<revision>`."""
        asked = self.asked_revision()
        if _COMMIT.fullmatch(asked):
            return asked if (self.folder / "snapshots" / asked).is_dir() else None
        ref = self.folder / "refs" / asked
        commit = ref.read_text().strip() if ref.is_file() else ""
        return commit if _COMMIT.fullmatch(commit) else None

    def load_revision(self) -> str:
        """What the adapter loads: the cached commit, so that the files scored are the ones the
        score cache keys (`cached_commit`), even online when `main` has moved; the asked revision
        only when nothing is cached yet (the first download)."""
        return self.cached_commit() or self.asked_revision()

    def identity(self) -> str:
        """The revision in the score cache key: a commit hash once the files are cached."""
        return self.cached_commit() or f"{self.asked_revision()} (not in the cache)"

    def missing(self) -> list[str]:
        """Files not in the cached snapshot of the revision to load (all, when none is cached)."""
        commit = self.cached_commit()
        snapshot = self.folder / "snapshots" / commit if commit else None
        return [f for f in self.files if snapshot is None or not (snapshot / f).exists()]

    def how_to_provide(self) -> str:
        revision = "" if self.asked_revision() == "main" else f" --revision {self.asked_revision()}"
        return (
            f"run once with network access (HF_HUB_OFFLINE unset) so they are downloaded, "
            f"or `hf download {self.repo} {' '.join(self.files)}{revision}`"
        )


_COMMIT = re.compile(r"[0-9a-f]{40}")


def check_files(model: VlmModel) -> None:
    """Fail fast, before torch or transformers load, when offline and a file is missing."""
    missing = model.missing()
    if missing and offline():
        raise MissingWeights(
            f"{model.metric}: missing model file(s) {', '.join(missing)} of {model.repo} in "
            f"{model.folder}; {model.how_to_provide()}"
        )


def hf_hub_cache() -> Path:
    """`huggingface_hub.constants.HF_HUB_CACHE`, by its rules, without importing it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")), "huggingface"
    )
    return Path(home).expanduser() / "hub"


VISUALQUALITY_R1 = VlmModel(
    metric="visualquality_r1",
    paper_name="VisualQuality-R1",
    repo="TianheWu/VisualQuality-R1-7B",
    files=("config.json", "model.safetensors.index.json", "preprocessor_config.json", "tokenizer.json"),
    license="MIT (model card); base model Qwen2.5-VL-7B-Instruct under Apache-2.0",
    size="8.3B parameters, 16.6 GB in bfloat16; about 17 GB of GPU memory",
    runs_here=Runs.TINY,
    pin_variable="BANANA_VISUALQUALITY_R1_REVISION",
)
RALI = VlmModel(
    metric="rali",
    paper_name="RALI",
    repo="ByteDance/Q-Insight",  # its RALI/ folder, as github.com/xuanyuzhang21/RALI links it
    files=(
        "RALI/ckpt.pt",
        "RALI/pca.pkl",
        "RALI/basis.npz",
        "RALI/best/config.json",
        "RALI/best/preprocessor_config.json",
    ),
    license="code Apache-2.0 (github.com/bytedance/Q-Insight); weights: see the hub card ByteDance/Q-Insight",
    size="a CLIP image encoder and 32-odd prototypes: under 5% of Q-Insight's 7B parameters (paper)",
    runs_here=Runs.TINY_CPU_READY,
    pin_variable="BANANA_RALI_REVISION",
)
Q_ALIGN = VlmModel(
    metric="qalign",
    paper_name="Q-Align",
    repo="q-future/one-align",
    files=("config.json", "tokenizer_config.json", "preprocessor_config.json"),
    license="MIT (model card); pyiqa's adapter code is non-commercial",
    size="8.2B parameters (mPLUG-Owl2, LLaMA-2-7B), 16.4 GB in float16",
    runs_here=Runs.TINY,
    pin_variable=None,  # pyiqa loads `main` itself: keyed by the commit cached for it
)
OUTSIDE_PYIQA = (VISUALQUALITY_R1, RALI)
BY_METRIC = {m.metric: m for m in (*OUTSIDE_PYIQA, Q_ALIGN)}
