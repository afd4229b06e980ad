from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from banana_tests.plan import plan_cases
from banana_tests.selection import Selection
from banana_tests.sources import with_problems
from banana_tests.trajectories import (
    BOM,
    IDENTITY,
    REQUIRED,
    DataError,
    read_imagefolder,
    resolve_inside,
)
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
