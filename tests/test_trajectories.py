from __future__ import annotations

import dataclasses
import errno
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from banana_tests.trajectories.case_plans import plan_cases, with_problems
from banana_tests.trajectories.imagefolder import BOM, read_imagefolder
from banana_tests.trajectories.records import (
    IDENTITY,
    REQUIRED,
    DataError,
    Problem,
    Record,
    TrajectorySet,
    check_for_iqa,
    check_index,
    check_name,
    resolve_inside,
)
from banana_tests.trajectories.selection import Selection
from tests.conftest import MakeSet


def test_reads_every_record(make_set: MakeSet) -> None:
    root = make_set(seeds=("a", "b", "c"), runs=(0, 1, 2), steps=(1, 5))
    ts = read_imagefolder(root)
    assert len(ts.records) == 3 * 3 * 2
    assert ts.variants == ["replicate"]
    assert all(r.path.is_file() and r.sha256 for r in ts.records)
    assert ts.records[0].source.endswith("metadata.jsonl:1")


def test_bad_lines_become_problems_and_the_rest_loads(make_set: MakeSet) -> None:
    root = make_set()
    meta = root / "metadata.jsonl"
    meta.write_text(meta.read_text() + '{"file_name": "x.png", "seed_image": "a"}\nnot json\n')
    ts = read_imagefolder(root)
    assert len(ts.records) == 16
    assert len(ts.problems) == 2
    assert "missing field(s) variant, run, step" in str(ts.problems[0])
    assert ":18:" in str(ts.problems[1])


def test_file_names_may_not_escape_the_root(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="escapes the data set root"):
        resolve_inside(tmp_path, "../etc/passwd")
    with pytest.raises(DataError, match="escapes"):
        resolve_inside(tmp_path, "/etc/passwd")
    (tmp_path / "sub").mkdir()
    with pytest.raises(DataError, match="escapes"):  # a name ending in `..` is the folder above
        resolve_inside(tmp_path, "sub/..")
    assert resolve_inside(tmp_path, "sub/.") == tmp_path.resolve() / "sub"


def test_a_relative_root_is_resolved_from_the_current_folder_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same relative `data` in two folders is two sets: an in-process run after another (the
    api, pytester) read the first folder's images."""
    for name in ("one", "two"):
        (tmp_path / name / "data").mkdir(parents=True)
        monkeypatch.chdir(tmp_path / name)
        assert resolve_inside(Path("data"), "a.png") == (tmp_path / name / "data" / "a.png").resolve()


def test_a_folder_without_metadata_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"no metadata\.jsonl"):
        read_imagefolder(tmp_path)


def test_canonical_sets_load_through_datasets_imagefolder(make_set: MakeSet) -> None:
    """A set made here is a Hugging Face imagefolder: push_to_hub and load_dataset read it."""
    datasets = pytest.importorskip("datasets")
    root = make_set(seeds=("a",), runs=(0, 1), steps=(1, 5))
    ds = datasets.load_dataset("imagefolder", data_dir=str(root), split="train")
    ds = ds.cast_column("image", datasets.Image(decode=False))
    ours = {(r.seed_image, r.run, r.step, r.path) for r in read_imagefolder(root).records}
    theirs = {(row["seed_image"], row["run"], row["step"], Path(row["image"]["path"])) for row in ds}
    assert ours == theirs
    assert json.loads((root / "metadata.jsonl").read_text().splitlines()[0])["sha256"] == ds[0]["sha256"]


# Property: random metadata.jsonl lines never break the reader, and bad ones stay with their records.
SEEDS, RUNS, STEPS = ("a", "β", "c d"), (0, 12), (1, 10, 20)
WRONG: dict[str, list[Any]] = {
    "seed_image": [None, "", 5, True, ["a"]],
    "variant": [None, "", 0, False],
    "run": [None, True, 0.9, -1, 10**30, 1e30, "0", [0]],
    "step": [None, True, 5.7, -1, 100_001, 1e30, "5", {}],
    "file_name": [None, "", 5, "a\0b.png", "../out.png", "/abs.png"],
    "sha256": ["xyz", 5],
}
Key = tuple[str, int, int]
Line = tuple[bytes, str, dict[str, Any] | None]  # bytes, kind, the identity it was made from


def row_of(key: Key) -> dict[str, Any]:
    seed, run, step = key
    return {
        "file_name": f"{seed}/{run}/{step}.png",
        "seed_image": seed,
        "variant": "replicate",
        "run": run,
        "step": step,
        "prompt": "é",
    }


def encode(row: dict[str, Any], ascii_only: bool = True) -> bytes:
    return json.dumps(row, ensure_ascii=ascii_only).encode()


keys = st.tuples(st.sampled_from(SEEDS), st.sampled_from(RUNS), st.sampled_from(STEPS))


@st.composite
def bad_lines(draw: st.DrawFn) -> Line:
    kind = draw(st.sampled_from(["wrong", "missing", "torn", "text", "bytes"]))
    row = row_of(draw(keys))
    if kind == "wrong":
        name = draw(st.sampled_from(sorted(WRONG)))
        return encode({**row, name: draw(st.sampled_from(WRONG[name]))}), f"wrong {name}", row
    if kind == "missing":
        name = draw(st.sampled_from(REQUIRED))
        return encode({k: v for k, v in row.items() if k != name}), f"missing {name}", row
    if kind == "torn":
        full = encode(row, draw(st.booleans()))
        digits = [i + 1 for i, c in enumerate(full[:-1]) if chr(c).isdigit()]  # a number cut short
        return full[: draw(st.integers(1, len(full) - 1) | st.sampled_from(digits))], kind, row
    if kind == "text":
        text = draw(st.text(st.characters(blacklist_characters='\n\ufeff"', blacklist_categories=["Cs"])))
        return text.encode(), kind, None
    raw = draw(st.binary().filter(lambda b: b"\n" not in b and b'"' not in b and not b.startswith(BOM)))
    return raw, kind, None


@st.composite
def files(draw: st.DrawFn) -> tuple[list[Line], bool, bool]:
    good = [(encode(row_of(k), draw(st.booleans())), "good", row_of(k)) for k in draw(st.sets(keys))]
    lines = draw(st.permutations(good + draw(st.lists(bad_lines(), max_size=8))))
    return lines, draw(st.booleans()), draw(st.booleans())  # lines, a BOM, a final newline


def blank(raw: bytes) -> bool:
    return not raw.strip(b" \t\r")


@given(files())
def test_random_lines_never_break_the_reader_and_stay_with_their_records(
    tmp_path_factory: pytest.TempPathFactory, drawn: tuple[list[Line], bool, bool]
) -> None:
    lines, bom, newline = drawn
    root = tmp_path_factory.mktemp("prop")
    body = b"\n".join(raw for raw, _, _ in lines) + (b"\n" if newline else b"")
    (root / "metadata.jsonl").write_bytes((BOM if bom else b"") + body)
    good = [(n, row) for n, (_, kind, row) in enumerate(lines, start=1) if kind == "good"]
    if not good:
        with pytest.raises(DataError, match="no usable records"):
            read_imagefolder(root)
        return
    ts = read_imagefolder(root)
    clean = root / "clean"
    clean.mkdir()
    (clean / "metadata.jsonl").write_text("".join(json.dumps(row) + "\n" for _, row in good))
    same = [
        (r.seed_image, r.variant, r.run, r.step, r.path.relative_to(clean), r.sha256, dict(r.extra))
        for r in read_imagefolder(clean).records
    ]
    assert [
        (r.seed_image, r.variant, r.run, r.step, r.path.relative_to(root), r.sha256, dict(r.extra))
        for r in ts.records
    ] == same
    assert [int(r.source.rsplit(":", 1)[1]) for r in ts.records] == [n for n, _ in good]
    bad = [
        (n, kind, row)
        for n, (raw, kind, row) in enumerate(lines, start=1)
        if kind != "good" and not blank(raw)
    ]
    assert [int(p.where.rsplit(":", 1)[1]) for p in ts.problems] == [n for n, _, _ in bad]
    for p, (_, kind, row) in zip(ts.problems, bad, strict=True):
        shown = {k: getattr(p, k) for k in IDENTITY if getattr(p, k) is not None}
        assert row is not None or shown == {}, (kind, p)  # nothing is made up for junk
        if row is not None:
            assert shown.items() <= row.items(), (kind, p)  # what it shows is what the line said
        if kind.startswith(("wrong", "missing")):
            spoilt = kind.split()[1]
            assert set(shown) == set(IDENTITY) - {spoilt}, (kind, p)

    plans = plan_cases(ts.records, ["m"], [10, 20], 1)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        out = with_problems(plans, list(ts.problems), Selection(steps=(10, 20)), ["m"])
    told = [str(w.message) for w in warned]
    for p in ts.problems:  # every problem is shown: on the cases it could touch, or as a warning
        on = [c for c in out if c.error and str(p) in c.error]
        assert on or any(str(p) in t for t in told), p
        for case in on:
            assert p.seed_image in (None, case.key.seed_image)
            assert p.step in (None, case.key.step, case.reference_step)
            assert p.key is not None or case.missing or case.key not in {c.key for c in plans}
        if p.key is not None:  # a known record errors every case that would use it
            seed, _, step = p.key
            assert on == [c for c in out if c.key.seed_image == seed and step in (c.key.step, 1)]
    clean_plans = {c.key: c for c in plan_cases(read_imagefolder(clean).records, ["m"], [10, 20], 1)}
    for case in out:  # a case no problem touches keeps exactly the clean file's plan
        if case.error is None or "unusable record" not in case.error:
            twin = clean_plans[case.key]
            assert case.error == twin.error
            assert [(a.path, b.path) for a, b in case.pairs] == [
                (root / a.path.relative_to(clean), root / b.path.relative_to(clean)) for a, b in twin.pairs
            ]


# ---- exact edges of the reader: each test kills mutants of trajectories.py (tests/MUTATION.md) ----


def metadata(root: Path, *lines: str) -> Path:
    """A set of `lines` alone (no images: nothing here opens one)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "metadata.jsonl").write_text("".join(line + "\n" for line in lines))
    return root


def good_line(seed: str = "a", variant: str = "replicate") -> str:
    return json.dumps(
        {"file_name": f"{seed}.png", "seed_image": seed, "variant": variant, "run": 0, "step": 1}
    )


def test_select_keeps_the_records_of_one_variant(tmp_path: Path) -> None:
    ts = read_imagefolder(metadata(tmp_path, good_line("a"), good_line("b", "mirror"), good_line("c")))
    assert [r.seed_image for r in ts.select("replicate")] == ["a", "c"]
    assert [r.seed_image for r in ts.select("mirror")] == ["b"]
    assert ts.select("other") == []
    assert ts.variants == ["mirror", "replicate"]


def test_records_problems_and_sets_are_frozen_values_without_their_extra(tmp_path: Path) -> None:
    """`extra` (prompt, editor, ...) is carried, not identity: two records of one image are equal
    and hash alike whatever else their lines say, and a dict in it never makes them unhashable."""
    record = Record("a", "replicate", 0, 1, tmp_path / "a.png", "m:1", extra={"prompt": "p"})
    assert record.sha256 is None  # a record made outside a set (scorer.file_record) has no digest
    twin = dataclasses.replace(record, extra={"prompt": "q"})
    assert record == twin and hash(record) == hash(twin) and len({record, twin}) == 1
    problem = Problem("m:2", "bad", "a", "replicate", 0, 1, extra={"x": 1})
    assert problem == dataclasses.replace(problem, extra={"x": 2})
    assert hash(problem) == hash(dataclasses.replace(problem, extra={"x": 2}))
    for value in (record, problem, TrajectorySet(tmp_path, (record,), (problem,))):
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.__setattr__(dataclasses.fields(value)[0].name, None)


def test_a_line_that_does_not_parse_keeps_no_fields(tmp_path: Path) -> None:
    ts = read_imagefolder(metadata(tmp_path, good_line(), "not json", "{}"))
    unparsed, parsed = ts.problems
    assert unparsed.extra is None  # None: the line did not parse
    assert parsed.extra == {}


@pytest.mark.parametrize("unknown", IDENTITY)
def test_a_problem_has_a_key_only_when_its_whole_identity_is_known(unknown: str) -> None:
    known = {"seed_image": "a", "variant": "replicate", "run": 0, "step": 5}
    assert Problem("m:1", "bad", **known).key == ("a", 0, 5)
    assert Problem("m:1", "bad", **{**known, unknown: None}).key is None


def test_a_line_nested_too_deeply_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    ts = read_imagefolder(metadata(tmp_path, good_line(), "[" * 100_000 + "]" * 100_000))
    [problem] = ts.problems
    assert problem.message == "not JSON: nested too deeply"
    assert (problem.seed_image, problem.run, problem.extra) == (None, None, None)


def test_missing_fields_come_first_then_what_the_line_has_cut_at_120(tmp_path: Path) -> None:
    many = {f"field_{i:02d}": i for i in range(20)}
    root = metadata(tmp_path, good_line(), "{}", json.dumps({"seed_image": 5, "run": 0}), json.dumps(many))
    nothing, wrong_seed, crowded = (p.message for p in read_imagefolder(root).problems)
    assert nothing == "missing field(s) file_name, seed_image, variant, run, step (has none)"
    assert wrong_seed == (
        "missing field(s) file_name, variant, step (has run, seed_image); "
        "seed_image must be a non-empty string, got 5"
    )
    has = ", ".join(sorted(many))
    assert crowded == f"missing field(s) {', '.join(REQUIRED)} (has {has[:117]}...)"


@pytest.mark.parametrize("bad", [5, 6])
def test_a_set_without_records_shows_its_first_five_problems(tmp_path: Path, bad: int) -> None:
    with pytest.raises(DataError) as raised:
        read_imagefolder(metadata(tmp_path, *(["null"] * bad)))
    lines = str(raised.value).splitlines()
    assert lines[0].endswith("metadata.jsonl: no usable records")
    assert [line.split(": ", 1)[1] for line in lines[1:6]] == ["a line must be a JSON object, got null"] * 5
    assert lines[6:] == ([] if bad == 5 else ["  ... and 1 more"])


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (["x" * 54], '["' + "x" * 54 + '"]'),  # 58 characters: shown whole
        ("x" * 58, '"' + "x" * 58 + '"'),  # 60: shown whole
        ("x" * 59, '"' + "x" * 56 + "..."),  # 61: cut to 60, the last three a "..."
        (b"ab", "b'ab'"),  # not JSON: its repr
        (b"a" * 100, "b'" + "a" * 55 + "..."),
        (10**5000, "an integer too long to show"),
    ],
    ids=["58-chars", "60-chars", "61-chars", "bytes", "long-bytes", "huge-int"],
)
def test_a_bad_value_is_shown_as_json_writes_it_cut_at_60(value: object, shown: str) -> None:
    with pytest.raises(DataError) as raised:
        check_index("run", value)
    assert str(raised.value).endswith(f", got {shown}")
    assert str(raised.value).startswith("run must be ")
    if isinstance(value, str):
        return  # a good name
    with pytest.raises(DataError) as named:
        check_name("seed_image", value)
    assert str(named.value) == f"seed_image must be a non-empty string, got {shown}"


def test_run_and_step_bounds_are_inclusive_and_json_takes_no_text() -> None:
    assert check_index("step", 100_000) == check_index("run", 0) + 100_000
    assert check_index("step", "100000", columnar=True) == 100_000
    assert check_index("step", "0000100000", columnar=True) == 100_000  # zero-padded, as paths write it
    with pytest.raises(DataError, match="between 0 and 100,000"):
        check_index("step", "100001", columnar=True)
    with pytest.raises(DataError, match=r'^run must be a JSON integer, got "5"$'):
        check_index("run", "5")  # a JSON line says exactly what it means: text is not a number


def test_a_byte_that_is_not_utf8_is_named_with_its_column(tmp_path: Path) -> None:
    root = metadata(tmp_path, good_line())
    with (root / "metadata.jsonl").open("ab") as f:
        f.write(b'{"seed_image": "a\xff"}\n')
    [problem] = read_imagefolder(root).problems
    assert problem.message == "not UTF-8 text: byte 0xff at column 18"


def test_sha256_is_no_extra_field_and_repeated_keys_are_all_named(tmp_path: Path) -> None:
    row = json.loads(good_line())
    digest = "ab" * 32
    repeated = '{"seed_image": "a", "run": 0, "seed_image": "a", "run": 0}'
    root = metadata(tmp_path, json.dumps({**row, "sha256": digest, "prompt": "p"}), repeated)
    ts = read_imagefolder(root)
    [record] = ts.records
    assert (record.sha256, dict(record.extra)) == (digest, {"prompt": "p"})
    [problem] = ts.problems
    assert problem.message == "not JSON: key(s) 'run', 'seed_image' appear more than once"


def test_a_value_is_shown_in_its_own_characters(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r'^run must be a JSON integer, got "é"$'):
        check_index("run", "é")


def test_a_metadata_file_that_cannot_be_read_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = metadata(tmp_path, good_line())
    real_open = Path.open

    def broken(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.name == "metadata.jsonl":
            raise OSError(errno.EIO, "Input/output error", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", broken)
    with pytest.raises(DataError, match=r"metadata\.jsonl: cannot read it: Input/output error$"):
        read_imagefolder(root)


def test_a_record_names_its_source_and_path_unless_it_is_a_file_of_its_own(tmp_path: Path) -> None:
    image = tmp_path / "step005.png"
    in_set = Record("alpha", "replicate", 0, 5, image, "metadata.jsonl:3")
    alone = Record("alpha", "replicate", 0, 5, image, str(image))
    assert (in_set.is_file, in_set.named) == (False, f"metadata.jsonl:3 ({image})")
    assert (alone.is_file, alone.named) == (True, str(image))


@pytest.mark.parametrize(
    ("value", "columnar", "read"),
    [
        (None, False, None),
        (True, False, True),
        (False, True, False),
        ("TRUE ", True, True),
        (" false", True, False),
        ("", True, None),
    ],
)
def test_for_iqa_is_a_boolean_or_absent(value: Any, columnar: bool, read: bool | None) -> None:
    assert check_for_iqa(value, columnar) is read


@pytest.mark.parametrize(("value", "columnar"), [("true", False), ("yes", True), (1, False), (0, True)])
def test_for_iqa_refuses_anything_else(value: Any, columnar: bool) -> None:
    with pytest.raises(DataError, match=r"for_iqa must be true or false, got "):
        check_for_iqa(value, columnar)
    with pytest.raises(DataError):  # JSON, by default: the text "true" is no boolean
        check_for_iqa("true")
