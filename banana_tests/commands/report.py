"""`banana-tests report`: JUnit XML from one or more runs → matrix.csv, figures, report.html, summary.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from banana_tests.core.machine import SUITE, local_path, package_versions
from banana_tests.counts import decimal_number_type
from banana_tests.families.family import Report
from banana_tests.families.family_list import RECORD_FAMILIES, section_of
from banana_tests.reports.embedded_images import input_folders
from banana_tests.reports.junit import MAX_INPUT_MB, JUnitError, Reading, read_junit
from banana_tests.reports.merge_checks import INCOMPLETE_EXIT, MIXED_EXIT, Ledger, disagreements
from banana_tests.reports.sourced import describe_replacements
from banana_tests.trajectories.records import DataError, check_index
from banana_tests.verdicts.baseline import Other, write_baseline
from banana_tests.verdicts.matrix import Matrix

MAX_INPUT_LIMIT_MB = 65536  # 64 GiB: a JUnit file is read whole into memory


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "report",
        help="render the failure matrix from JUnit XML (or the paper's own) as CSV, figures and HTML",
        description="Merge JUnit XML written by the suite (shards, xdist runs, reruns: a case seen "
        "twice keeps its newest result) and write matrix.csv, gaps_step<i>.png/.svg, "
        "failure_counts.png/.svg, report.html and summary.md into --out.",
    )
    p.add_argument(
        "junit", nargs="*", type=local_path, metavar="JUNIT_XML", help="JUnit XML files written by the suite"
    )
    p.add_argument(
        "--out", type=local_path, required=True, metavar="DIR", help="folder to write the report into"
    )
    p.add_argument(
        "--compare-paper",
        action="store_true",
        help="line the matrix up with the paper's Figure 5: sign agreement per metric, and where it differs",
    )
    p.add_argument(
        "--paper-only",
        action="store_true",
        help="render the paper's own Figure 5 matrix instead of JUnit XML",
    )
    p.add_argument(
        "--write-baseline",
        type=local_path,
        metavar="FILE",
        help="also write the run's failing cases (Δ, trend, control and invariance) as a baseline file "
        "(known failures)",
    )
    p.add_argument(
        "--figure-steps",
        type=_steps,
        metavar="STEPS",
        help="steps that get a gaps_step<i> heatmap, e.g. 5,10,20 (default: every step of a run "
        "with at most 6; else the paper's 5, 10, 20 and a step summary figure)",
    )
    p.add_argument(
        "--max-input-mb",
        type=decimal_number_type(0, MAX_INPUT_LIMIT_MB, above_low=True),
        default=MAX_INPUT_MB,
        metavar="MB",
        help=f"refuse a JUnit XML file larger than this, above 0 and at most {MAX_INPUT_LIMIT_MB} "
        f"(default: {MAX_INPUT_MB} MiB)",
    )
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help=f"exit 0 even when a case some run planned is in none of the files, or a case has two "
        f"different outcomes (default: both are listed and the exit code is {INCOMPLETE_EXIT})",
    )
    p.add_argument(
        "--judgments",
        type=local_path,
        metavar="FILE",
        help="a `banana-tests judge` file: adds each run's first step whose reasoning acknowledges the noise",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from banana_tests.reports.paper import PAPER_CSV, compare, comparison_markdown, paper_cells
    from banana_tests.reports.write import staged, summary_sections, write_report

    if args.paper_only == bool(args.junit):
        print(
            "banana-tests report: give JUnit XML files or --paper-only, not both or neither", file=sys.stderr
        )
        return 2
    notes: list[tuple[str, str]] = []
    summary_extra = ""
    families: list[Report] = []  # each family's section, for the families the files hold
    failing_others: list[Other] = []
    incomplete = False
    if args.paper_only:
        matrix = Matrix.of(paper_cells())
        metadata = {
            "source": f"the paper's Figure 5 ({PAPER_CSV.name}), arXiv 2604.03400",
            "reference_step": "1",
        }
        title = "Banana100 paper: Figure 5 failure matrix"
    else:
        try:
            reading = read_junit(args.junit, args.max_input_mb)
        except JUnitError as exc:
            print(f"banana-tests report: {exc}", file=sys.stderr)
            return 2
        mixed = disagreements(reading.ledger.facts)
        if mixed:
            print("banana-tests report: these files come from runs that cannot be merged:", file=sys.stderr)
            for line in mixed:
                print(f"  {line}", file=sys.stderr)
            return MIXED_EXIT
        matrix, title = reading.matrix, "banana-tests failure matrix"
        failing_others = reading.failing_others()
        inputs = input_folders(args.junit)
        for family in RECORD_FAMILIES:
            cases = reading.family_cases.get(family.kind)
            if cases:
                families.append(section_of(family).report(cases, inputs))
        for line in (warning for family_report in families for warning in family_report.warnings):
            print(line, file=sys.stderr)
        metadata = _metadata(reading)
        for path in reading.repeated:
            print(f"{path} is given more than once; it is read once", file=sys.stderr)
        if reading.replaced:
            lines = describe_replacements(reading.replaced)
            print(f"{len(reading.replaced)} case(s) seen twice; the newest result is kept:", file=sys.stderr)
            for line in lines:
                print(f"  {line}", file=sys.stderr)
            notes.append(("Cases seen twice (newest kept)", "\n".join(lines)))
        incomplete = _completeness(reading.ledger, notes)
        metadata["merge"] = _merge_fact(reading.ledger)
    lacked = _lacked_steps(args.figure_steps, matrix)
    if lacked is not None:
        print(f"banana-tests report: {lacked}", file=sys.stderr)
        return 2
    metadata = {**metadata, **_shape(matrix), "report tool": package_versions((SUITE, "matplotlib"))}
    for section in summary_sections(matrix):  # separability and the oracle, also in summary.md
        print(section)
    comparisons = None
    if args.compare_paper:
        comparisons = compare(matrix, Matrix.of(paper_cells()))
        text = comparison_markdown(comparisons)
        print(text)
        summary_extra = text
    for family_report in families:
        if family_report.markdown:
            print(family_report.markdown)
    if args.judgments:
        judged = _judgments(args.judgments)
        if judged is None:
            return 2
        print(judged)
        summary_extra = f"{summary_extra}\n\n{judged}" if summary_extra else judged
    try:
        with staged(args.out) as stage:
            written = write_report(
                matrix,
                stage,
                metadata,
                title,
                notes,
                summary_extra,
                comparisons,
                args.figure_steps,
                families,
            )
            written = [args.out / p.name for p in written]
            if args.write_baseline:
                write_baseline(matrix, args.write_baseline, failing_others)
    except OSError as exc:
        print(f"banana-tests report: cannot write the report: {exc}", file=sys.stderr)
        return 1
    for line in matrix.render():
        print(line)
    print(f"wrote {len(written)} files to {args.out}")  # the report's own, each once
    if args.write_baseline:
        print(f"wrote the baseline to {args.write_baseline}")
    return INCOMPLETE_EXIT if incomplete and not args.allow_incomplete else 0


def _completeness(ledger: Ledger, notes: list[tuple[str, str]]) -> bool:
    """Say which planned cases no file holds, which have two outcomes, and whether the merge is
    partial (its runs narrowed by `-k`, `--lf`, ...: stderr and the summary's notes); whether
    the merge is anything but complete."""
    if ledger.planless and ledger.with_plan:  # only files of earlier versions: nothing to check
        names = ", ".join(map(str, ledger.planless))
        print(f"{names}: no plan recorded (written before banana-tests recorded one)", file=sys.stderr)
    stopped = [
        f"{path}: its run stopped before its end: {ran} of {planned} planned case(s) ran"
        for path, ran, planned in ledger.stopped_early
    ]
    for line in stopped:
        print(line, file=sys.stderr)
    if stopped:
        notes.append(("Runs stopped early", "\n".join(stopped)))
    sections = (
        ("planned case(s) are in none of the files", "Planned cases missing", ledger.missing),
        ("case(s) have different outcomes", "Cases with different outcomes", ledger.conflicts),
    )
    for says, title, lines in sections:
        if lines:
            print(f"{len(lines)} {says}:", file=sys.stderr)
            for line in lines:
                print(f"  {line}", file=sys.stderr)
            notes.append((title, "\n".join(lines)))
    partial = ledger.left_out_missing
    if partial:
        by = ledger.narrowing_of(ledger.narrowed)
        print(f"partial: {len(partial)} case(s) left out by {by} are in none of the files:", file=sys.stderr)
        for line in partial:
            print(f"  {line}", file=sys.stderr)
        notes.append((f"Partial: cases left out by {by}", "\n".join(partial)))
    unknown = ledger.unknown_plan
    if unknown:
        files = sum(ledger.uncollected[p] for p in unknown)
        line = (
            f"partial: every file comes from a run narrowed by {ledger.narrowing_of(unknown)} that did not "
            f"collect {files} test file(s) ({', '.join(map(str, unknown))}): their cases are not known"
        )
        print(line, file=sys.stderr)
        notes.append(("Partial: test files not collected", line.removeprefix("partial: ")))
    if ledger.repeated:
        print(
            f"{len(ledger.repeated)} case(s) ran more than once, with the same outcome each time",
            file=sys.stderr,
        )
    return not ledger.complete


def _merge_fact(ledger: Ledger) -> str:
    """The Run table's word on the merge: complete, incomplete or partial, with the counts."""
    held = len(ledger.outcomes)
    known = len(ledger.outcomes.keys() | ledger.expected | ledger.left_out)
    if not ledger.with_plan:
        return f"{held} cases, no plan recorded"
    if ledger.complete:
        return f"complete: {held} of {known} planned cases"
    if ledger.missing or ledger.conflicts:
        return f"incomplete: {held} of {known} cases; {len(ledger.missing)} planned case(s) missing"
    unknown = sum(ledger.uncollected[p] for p in ledger.unknown_plan)
    rest = f"; {unknown} test file(s) not collected, their cases unknown" if unknown else ""
    return f"partial, narrowed by {ledger.narrowing_of(ledger.narrowed)}: {held} of {known} cases known{rest}"


def _judgments(path: Path) -> str | None:
    """The judge's section of the report, or None after saying why the file cannot be read."""
    from banana_tests.judging.judgments import markdown, read_judgments
    from banana_tests.trajectories.records import DataError

    try:
        if not path.exists():
            raise DataError(f"{path}: no such judgments file (write one with `banana-tests judge`)")
        judgments = read_judgments(path)
        if not judgments:
            raise DataError(f"{path}: no judgments in it")
    except (OSError, DataError) as exc:
        print(f"banana-tests report: {exc}", file=sys.stderr)
        return None
    return markdown(judgments)


def _steps(text: str) -> list[int]:
    """--figure-steps: comma-separated step numbers, as the data set reader takes a step."""
    try:
        return [check_index("step", s.strip(), columnar=True) for s in text.split(",")]
    except DataError as exc:
        raise argparse.ArgumentTypeError(
            f"{exc} (in {text!r}; steps are digits 0-9, comma-separated)"
        ) from None


def _lacked_steps(chosen: list[int] | None, matrix: Matrix) -> str | None:
    """Why --figure-steps asks for a heat map the run cannot draw (a step it lacks), or None."""
    missing = sorted(set(chosen or ()) - set(matrix.steps))
    if not missing:
        return None
    held = ", ".join(map(str, matrix.steps)) or "none"
    return f"--figure-steps: the run has no step {', '.join(map(str, missing))} (its steps: {held})"


def _metadata(reading: Reading) -> dict[str, str]:
    """What the files say about the run: their names, plus suite and per-case run properties."""
    meta = {"JUnit XML": ", ".join(str(p) for p in reading.files)}
    meta.update({name: ", ".join(values) for name, values in reading.metadata.items()})
    return meta


def _shape(matrix: Matrix) -> dict[str, str]:
    references = {c.reference_step for c in matrix.cells.values() if c.reference_step is not None}
    return {
        "metrics": ", ".join(matrix.metrics),
        "seed images": ", ".join(matrix.seed_images),
        "steps": ", ".join(str(s) for s in matrix.steps),
        "cases": str(len(matrix.cells)),
        "reference_step": ", ".join(map(str, sorted(references))),
    }
