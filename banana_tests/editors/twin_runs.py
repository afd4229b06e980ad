"""Replicate runs that are copies of each other, spotted while a set is generated."""

from __future__ import annotations

from collections.abc import Callable


class Twins:
    """Warns once when runs are not independent: replicate runs of a deterministic editor (or of
    a fixed seed) are copies, and averaging copies only pretends to measure run-to-run spread."""

    def __init__(
        self, editor: str, made_by: dict[tuple[str, int, str], int], log: Callable[[str], None]
    ) -> None:
        self.editor, self.made_by, self.log, self.warned = editor, made_by, log, False

    def warn(self, what: str) -> None:
        if not self.warned:
            self.warned = True
            self.log(
                f"warning: {what}, so replicate runs add no information; use --runs 1, or give the"
                " runs different seeds (--seed with --vary-seed) if the editor takes one"
            )

    def check(self, name: str, run: int, step: int, sha: str) -> None:
        other = self.made_by.setdefault((name, step, sha), run)
        if other != run:
            self.warn(
                f"editor {self.editor!r} made byte-identical images in runs {other} and {run}"
                f" of {name} at step {step}"
            )
