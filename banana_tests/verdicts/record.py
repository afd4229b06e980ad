"""The case record: what one suite case writes into JUnit, and how it is read back.

The live matrix, the JUnit file and `banana-tests report` share it, so a case is recognised by
its record and never by a test function's name or by a bare `metric`/`step` property that any
test may record. Every property name the suite writes on a case is a `banana_tests.cases.Field`;
the first one, `banana_record`, says the record's kind and schema version (e.g. `delta/2`).

Schema 1 is the layout written before `banana_record` existed:
`banana_tests.reports.junit_testcase` reads those files through `legacy_record`, to the same records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from banana_tests.cases import SCHEMA, CaseKey, CaseKind, FamilyKey, Field
from banana_tests.families.family_list import family_of
from banana_tests.scoring.oracle import valid_trial
from banana_tests.trajectories.records import DataError, check_index
from banana_tests.verdicts.gaps import StrictOutcome
from banana_tests.verdicts.matrix import Cell, Outcome

FIGURES = {
    CaseKind.DELTA: frozenset(
        {Field.DELTA, Field.SCORE_REFERENCE, Field.SCORE_STEP, Field.NORM_REFERENCE, Field.NORM_STEP}
        | {Field.RUNS, Field.SCORE_CACHED}
        | {Field.STRICT, Field.PSNR, Field.SSIM, Field.RUN_NORM_REFERENCES, Field.RUN_NORM_STEPS}
    ),
}
"""The measured fields each kind may carry; identity fields come from its key. A registered
family's are its own (banana_tests.families.family.Family.figures)."""

Key = CaseKey | FamilyKey


def figure_order(kind: CaseKind) -> tuple[Field, ...]:
    """A kind's figures in `Field` order, the order a record keeps them in."""
    family = family_of(kind)
    names = FIGURES[kind] if family is None else family.figures
    return tuple(name for name in Field if name in names)


def numbers_of(kind: CaseKind) -> tuple[Field, ...]:
    family = family_of(kind)
    return () if family is None else family.numbers


def figure_properties(figures: Mapping[Field, str]) -> list[tuple[str, str]]:
    """Figures as JUnit properties, named by plain `str` (see CaseRecord.identity)."""
    return [(name.value, value) for name, value in figures.items()]


class RecordError(ValueError):
    """A testcase that carries a case record the reader cannot use; the message says why."""


@dataclass(frozen=True)
class CaseRecord:
    """One suite case: its key (which case), its reference step and its measured figures.

    `figures` holds the measured values as written (text, every digit of a float kept), by
    field; a case that skipped or errored before measuring has none.
    """

    key: Key
    reference_step: int | None = None
    figures: Mapping[Field, str] = field(default_factory=dict)

    @property
    def kind(self) -> CaseKind:
        return CaseKind.DELTA if isinstance(self.key, CaseKey) else self.key.kind

    def identity(self) -> list[tuple[str, str]]:
        """The properties that name the case, `banana_record` first; recorded before it is
        measured, so a case that skips or errors still says which one it was. Names are plain
        `str`, as xdist sends a report's properties to its controller."""
        key = self.key
        out = [(Field.RECORD, f"{self.kind.value}/{SCHEMA}"), (Field.METRIC, key.metric)]
        if isinstance(key, CaseKey):
            out += [(Field.SEED_IMAGE, key.seed_image), (Field.STEP, str(key.step))]
            if key.run is not None:
                out.append((Field.RUN, str(key.run)))
        else:
            out += key.identity()
        if self.reference_step is not None:
            out.append((Field.REFERENCE_STEP, str(self.reference_step)))
        return [(name.value, value) for name, value in out]

    def properties(self) -> list[tuple[str, str]]:
        """The whole record as JUnit properties."""
        return [*self.identity(), *figure_properties(self.figures)]

    def number(self, name: Field) -> float | None:
        text = self.figures.get(name)
        return None if text in (None, "") else float(text)

    def cell(self, outcome: Outcome, message: str = "") -> Cell:
        """A Δ record with its test outcome, as a matrix cell (ValueError for another kind)."""
        if not isinstance(self.key, CaseKey):
            raise ValueError(f"a {self.kind.value} case is no matrix cell")
        parsed = self._parsed_cell
        if (outcome, message) == (parsed.outcome, parsed.message):
            return parsed
        return replace(parsed, outcome=outcome, message=message)

    @cached_property
    def _parsed_cell(self) -> Cell:
        """The record as a passed cell, its figures parsed once: `of` validates a record by
        parsing them, and the reader then asks for its cell."""
        assert isinstance(self.key, CaseKey)
        runs = self.figures.get(Field.RUNS)
        return Cell(
            self.key,
            Outcome.PASSED,
            self.number(Field.DELTA),
            self.number(Field.SCORE_REFERENCE),
            self.number(Field.SCORE_STEP),
            self.reference_step,
            None if runs in (None, "") else int(runs),
            "",
            StrictOutcome(strict) if (strict := self.figures.get(Field.STRICT)) else None,
            valid_trial(self.figures.get(Field.PSNR, "")),
            self.numbers(Field.RUN_NORM_REFERENCES),
            self.numbers(Field.RUN_NORM_STEPS),
            self.numbers(Field.PSNR),
            self.numbers(Field.SSIM),
        )

    def step_number(self, name: Field) -> int | None:
        """A step figure (the first detection step); None when recorded as `none` or not at all."""
        text = self.figures.get(name, "none")
        return None if text in ("none", "") else _index(name.value, text)

    def numbers(self, name: Field) -> tuple[float, ...]:
        """A space-separated figure (one value per run); empty when not recorded."""
        return tuple(float(v) for v in self.figures.get(name, "").split())

    @classmethod
    def read(cls, props: Mapping[str, str]) -> CaseRecord | None:
        """The record a testcase's properties carry; None when they carry none (another test's
        case, whatever its other properties are called) or are of a family this suite does not
        hold. RecordError when it cannot be read."""
        tag = props.get(Field.RECORD)
        if tag is None:
            return None
        kind_text, _, version = tag.partition("/")
        if not version.isdigit():
            raise RecordError(f"{Field.RECORD} {tag!r} is not <kind>/<schema version>")
        if int(version) > SCHEMA:
            raise RecordError(
                f"written by a newer banana-tests (record schema {version}; this one reads up to "
                f"{SCHEMA}): upgrade banana-tests to read it"
            )
        try:
            kind = CaseKind(kind_text)
        except ValueError:
            known = ", ".join(k.value for k in CaseKind)
            raise RecordError(f"{Field.RECORD} {tag!r}: unknown kind {kind_text!r} ({known})") from None
        if kind not in FIGURES and family_of(kind) is None:
            return None  # a family whose folder is gone
        return cls.of(kind, props)

    @classmethod
    def of(cls, kind: CaseKind, props: Mapping[str, str]) -> CaseRecord:
        """A `kind` record from its properties (this schema's or schema 1's: the names are the
        same); RecordError naming the property that is missing or malformed."""
        try:
            metric = props[Field.METRIC]
            key: Key
            family = family_of(kind)
            if family is not None:
                key = family.key(props)
            else:
                run = props.get(Field.RUN)
                step = _index(Field.STEP.value, props[Field.STEP])
                key = CaseKey(
                    metric,
                    props[Field.SEED_IMAGE],
                    step,
                    None if run is None else _index(Field.RUN.value, run),
                )
            reference = props.get(Field.REFERENCE_STEP)
            reference_step = (
                None if reference in (None, "") else _index(Field.REFERENCE_STEP.value, reference)
            )
        except KeyError as exc:
            raise RecordError(f"a {kind.value} record without its {str(exc.args[0])!r} property") from None
        except ValueError as exc:
            raise RecordError(f"a {kind.value} record with a malformed property: {exc}") from None
        figures = {name: props[name] for name in figure_order(kind) if name in props}
        record = cls(key, reference_step, figures)
        for name in numbers_of(kind):
            try:
                record.number(name)
            except ValueError:
                raise RecordError(
                    f"the {kind.value} record's {name.value!r} is not a number: {figures[name]!r}"
                ) from None
        if kind is CaseKind.DELTA:
            try:
                record.cell(Outcome.PASSED)  # its figures parse as numbers
            except ValueError as exc:
                raise RecordError(f"a delta record with a malformed figure: {exc}") from None
        return record


def _index(name: str, text: str) -> int:
    """A step or run number as the data set reader takes one (ASCII digits, at most its
    MAX_INDEX): `int()` took `٥`, `5_0` and 10**23, which broke the report's figures."""
    try:
        return check_index(name, text, columnar=True)
    except DataError as exc:
        raise ValueError(str(exc)) from None
