"""The paper's Table 2: typical range and direction of the 21 pyiqa metrics it tests.

Kept as data so that normalisation has one source. PI's range is only "≥ 0" in the paper;
the upper bound 55 is our choice, documented in docs/matrix.md: PI = (10 − NRQM + NIQE) / 2 with
NRQM in [0, 10] and NIQE in [0, 100] cannot exceed 55.
"""

from __future__ import annotations

from typing import NamedTuple


class PaperMetric(NamedTuple):
    paper_name: str
    pyiqa_name: str
    low: float
    high: float
    lower_better: bool


PAPER_METRICS: tuple[PaperMetric, ...] = (
    PaperMetric("ARNIQA", "arniqa", 0.0, 1.0, False),
    PaperMetric("BRISQUE", "brisque", 0.0, 150.0, True),
    PaperMetric("CLIPIQA", "clipiqa", 0.0, 1.0, False),
    PaperMetric("CNNIQA", "cnniqa", 0.0, 1.0, False),
    PaperMetric("DBCNN", "dbcnn", 0.0, 1.0, False),
    PaperMetric("HyperIQA", "hyperiqa", 0.0, 1.0, False),
    PaperMetric("ILNIQE", "ilniqe", 0.0, 100.0, True),
    PaperMetric("LIQE", "liqe", 1.0, 5.0, False),
    PaperMetric("MANIQA", "maniqa", 0.0, 1.0, False),
    PaperMetric("MUSIQ", "musiq", 0.0, 100.0, False),
    PaperMetric("NIMA", "nima", 0.0, 10.0, False),
    PaperMetric("NIQE", "niqe", 0.0, 100.0, True),
    PaperMetric("NRQM", "nrqm", 0.0, 10.0, False),
    PaperMetric("PaQ-2-PiQ", "paq2piq", 0.0, 100.0, False),
    PaperMetric("PI", "pi", 0.0, 55.0, True),
    PaperMetric("PIQE", "piqe", 0.0, 100.0, True),
    PaperMetric("Q-Align", "qalign", 1.0, 5.0, False),
    PaperMetric("QualiCLIP", "qualiclip", 0.0, 1.0, False),
    PaperMetric("TOPIQ NR", "topiq_nr", 0.0, 1.0, False),
    PaperMetric("TReS", "tres", 0.0, 100.0, False),
    PaperMetric("WaDIQaM", "wadiqam_nr", -1.0, 0.1, False),
)
