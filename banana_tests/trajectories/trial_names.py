"""The names of the per-artifact trials, and how a trial's seed image is named: light (no numpy),
so the option parser and the reports read them without importing the emulator.

A trial set holds each embedded seed image degraded by one artifact family alone; its seed image
ids are `<seed image>.<artifact>` (`astronaut.static`), so one run can hold every family and the
matrix, baselines and JUnit records need no new field.
"""

from __future__ import annotations

from enum import StrEnum


class Artifact(StrEnum):
    """What a trial set's images went through: the composite recipe, or one artifact family alone,
    in the composite's order. Each family in banana_tests.editors.artifacts bears its
    value as its name (reframing is no trial: it is in every set, step 1 is the reference)."""

    REPLICATE = "replicate"
    SOFTEN = "soften"
    RESYNTHESIS = "resynthesis"
    TINT = "tint"
    STATIC = "static"
    SCATTER = "scatter"
    VAE_ROUNDTRIP = "vae_roundtrip"


COMPOSITE = Artifact.REPLICATE
"""The composite recipe: every family, as in the embedded set."""
TRIALS = tuple(artifact for artifact in Artifact if artifact is not COMPOSITE)
"""The artifact families with a trial set of their own, in the composite's order."""
ARTIFACTS = tuple(Artifact)
ALL = "all"
SEPARATOR = "."


def artifact_named(name: str) -> Artifact:
    """The artifact called `name`; ValueError listing the known ones for any other name."""
    if name not in ARTIFACTS:
        raise ValueError(f"unknown artifact {name!r}; known: {', '.join(ARTIFACTS)}")
    return Artifact(name)


def trial_id(seed_image: str, artifact: Artifact) -> str:
    return f"{seed_image}{SEPARATOR}{artifact}"


def split_trial(seed_image: str) -> tuple[str, Artifact] | None:
    """(seed image, artifact) of a trial's seed image id; None for any other id."""
    seed, sep, artifact = seed_image.rpartition(SEPARATOR)
    return (seed, Artifact(artifact)) if sep and seed and artifact in ARTIFACTS else None


def parse_artifacts(text: str) -> tuple[Artifact, ...]:
    """`--artifact`'s value: a comma list of artifact names, or `all` (the composite and every
    family). ValueError naming the option for anything else."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if names == [ALL]:
        return ARTIFACTS
    unknown = [n for n in names if n not in ARTIFACTS]
    if not names or unknown:
        raise ValueError(
            f"--artifact={text}: {', '.join(map(repr, unknown)) or 'no name'} is not an artifact; "
            f"known: {', '.join(ARTIFACTS)}, or {ALL}"
        )
    return tuple(dict.fromkeys(map(Artifact, names)))
