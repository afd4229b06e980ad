"""The Run table of report.html: the run's own facts from the JUnit metadata, in a fixed order,
with a long list of steps shown as ranges."""

from __future__ import annotations

from collections.abc import Mapping

# The run's own facts, in the Run table's order: (metadata key, label). Anything else a JUnit
# file carries (hypothesis statistics, other plugins' properties) is a tool's, not the run's.
RUN_FACTS = (
    ("source", "source"),
    ("dataset", "data set"),
    ("selected_records", "records"),
    ("runs", "runs"),
    ("shard", "shards"),
    ("variant", "variant"),
    ("metrics", "metrics"),
    ("seed images", "seed images"),
    ("steps", "steps"),
    ("reference_step", "reference step"),
    ("cases", "cases"),
    ("merge", "merge"),
    ("versions", "versions"),
    ("libraries", "metric libraries"),
    ("device", "device"),
    ("date", "date"),
    ("timestamp", "date"),
    ("command", "command line"),
    ("command_line", "command line"),
    ("JUnit XML", "JUnit XML"),
    ("report tool", "report tool"),
)


def _steps(text: str) -> str:
    """A long list of steps as ranges: "2–100 (99 steps)" rather than 99 numbers."""
    try:
        steps = sorted(int(s) for s in text.split(","))
    except ValueError:
        return text
    if len(steps) <= 6:
        return text

    def span(a: int, b: int) -> str:
        return str(a) if a == b else f"{a}–{b}"

    ranges, start, prev = [], steps[0], steps[0]
    for step in steps[1:]:
        if step != prev + 1:
            ranges.append(span(start, prev))
            start = step
        prev = step
    ranges.append(span(start, prev))
    return f"{', '.join(ranges)} ({len(steps)} steps)"


def run_facts(metadata: Mapping[str, str]) -> list[tuple[str, str]]:
    """The Run table's rows: the run's own facts from `metadata`, in RUN_FACTS order."""
    facts = []
    for key, label in RUN_FACTS:
        if metadata.get(key):
            facts.append((label, _steps(metadata[key]) if key == "steps" else metadata[key]))
    return facts
