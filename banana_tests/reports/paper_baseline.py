"""The paper's own failure matrix (Figure 5) as a ready baseline, to gate a run against it.

`python -m banana_tests.reports.paper_baseline [OUT]` rewrites it (default: fixtures/baselines/paper.json)
from the published gaps that `banana_tests.reports.paper` reads; a cell fails as the paper counts it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from banana_tests.data import BASELINES
from banana_tests.reports.paper import paper_cells
from banana_tests.verdicts.baseline import write_baseline
from banana_tests.verdicts.matrix import Matrix

FIXTURE = BASELINES / "paper.json"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else FIXTURE
    write_baseline(Matrix.of(paper_cells()), out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
