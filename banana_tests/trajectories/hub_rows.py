"""A hub data set's rows (`--dataset hf:owner/name`), through `datasets` with images left undecoded.

Remote code is never run: the loader passes no `trust_remote_code`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from banana_tests.trajectories.local_rows import Row
from banana_tests.trajectories.records import DataError

HUB = "hf:"


@dataclass(frozen=True)
class HubRows:
    """A hub data set's rows through `datasets` (downloaded once, then read from its cache),
    images left undecoded."""

    label: str
    data: Any  # a datasets Dataset or IterableDataset
    image_columns: tuple[str, ...]
    root: None = None
    columns: tuple[str, ...] = ()
    batch: int = 1000

    @classmethod
    def open(cls, source: str, split: str, *, streaming: bool, revision: str | None) -> HubRows:
        """`source` is `hf:owner/name`; `revision` a branch, tag or commit (None: the default branch)."""
        import datasets

        repo = source[len(HUB) :]
        kwargs: dict[str, Any] = {"split": split, "streaming": streaming}
        if revision:
            kwargs["revision"] = revision
        try:
            ds = datasets.load_dataset(repo, **kwargs)
        except Exception as exc:
            raise _hub_error(source, revision, exc) from exc
        features = ds.features or {}
        images = tuple(k for k, f in features.items() if isinstance(f, datasets.Image))
        for column in images:
            ds = ds.cast_column(column, datasets.Image(decode=False))
        label = f"{source}[{split}]"
        return cls(label, ds, images, columns=tuple(features))

    def rows(self) -> Iterator[Row]:
        number = 0
        try:
            for batch in self.data.iter(batch_size=self.batch):  # columns of a batch, not rows
                names = list(batch)
                for values in zip(*(batch[n] for n in names), strict=True):
                    number += 1
                    yield f"{self.label} row {number}", dict(zip(names, values, strict=True))
        except Exception as exc:  # datasets, pyarrow and pandas each raise their own kinds for a bad file
            raise DataError(f"{self.label}: reading rows failed: {type(exc).__name__}: {exc}") from exc


def _hub_error(source: str, revision: str | None, exc: Exception) -> DataError:
    from huggingface_hub import constants

    download = f"huggingface-cli download --repo-type dataset {source[len(HUB) :]}"
    download += f" --revision {revision}" if revision else ""
    if constants.HF_HUB_OFFLINE:
        return DataError(
            f"{source}: the data set is not cached here and HF_HUB_OFFLINE is set. Get it once "
            f"online with `{download}` (or run once "
            f"without HF_HUB_OFFLINE), or download it and pass the folder as --dataset PATH. ({exc})"
        )
    return DataError(f"{source}: datasets could not load it: {type(exc).__name__}: {exc}")
