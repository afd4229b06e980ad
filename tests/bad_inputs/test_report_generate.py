"""Bad inputs at `report`, baselines and `generate` (issue 12): one row each.

Every row builds its own small input in a temporary folder, calls the command in-process (or the
baseline loader and gate), and states the exit code (or exception), a message that names the
file or record, and what happened to the user's files: an error changes none of them and leaves
no partial output; a repair changes only the files it names.
"""

from __future__ import annotations

import builtins
import errno
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import pytest

from banana_tests.cli import main
from banana_tests.families.trend.trends import figure_stem
from banana_tests.reports.junit import MAX_ATTRIBUTE
from banana_tests.session.collection import BaselineGate
from tests.conftest import needs, noisy_image
from tests.test_junit import case, junit

Act = Callable[[], int]


@dataclass(frozen=True)
class Row:
    """`arrange(root, monkeypatch)` builds the input under `root` and returns the call to make.

    `code` is the exit code, or the exception the call raises; `says` a regex the message must
    match, with `{root}` standing for the folder; `rewrites` the user files a repair may change
    and `creates` the files it makes (relative to root); `check` looks at the result.
    """

    id: str
    arrange: Callable[[Path, pytest.MonkeyPatch], Act]
    code: int | type[Exception]
    says: str
    rewrites: frozenset[str] = frozenset()
    creates: frozenset[str] = frozenset()
    check: Callable[[Path], bool] = lambda root: True


def report(*args: str | Path) -> Act:
    return lambda: main(["report", *map(str, args)])


def good_junit(root: Path) -> Path:
    return junit(
        root / "j.xml", case("piqe", "alpha", 5, "<failure message='AssertionError: m' />", delta="1.0")
    )


def file_with(root: Path, name: str, data: bytes | str) -> Path:
    path = root / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def read_only(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """What a read-only folder does to writes inside it (the tests may run as root, which
    permission bits do not stop): every create, rename or write there fails with EROFS."""
    inside = str(folder.resolve()) + os.sep

    def guard(path: Any) -> None:
        if os.path.abspath(os.fspath(path)).startswith(inside):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))

    def wrap(real: Callable[..., Any], write: Callable[..., bool], *targets: int) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if write(*args, **kwargs):
                for i in targets:
                    guard(args[i])
            return real(*args, **kwargs)

        return call

    always = lambda *a, **k: True  # noqa: E731
    opens_for_writing = lambda path, flags=0, *a, **k: bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))  # noqa: E731
    mode_writes = lambda path, mode="r", *a, **k: any(c in mode for c in "wax+")  # noqa: E731
    monkeypatch.setattr(os, "mkdir", wrap(os.mkdir, always, 0))
    monkeypatch.setattr(os, "open", wrap(os.open, opens_for_writing, 0))
    monkeypatch.setattr(os, "replace", wrap(os.replace, always, 1))
    monkeypatch.setattr(os, "rename", wrap(os.rename, always, 1))
    monkeypatch.setattr(builtins, "open", wrap(builtins.open, mode_writes, 0))


# ---- report ---------------------------------------------------------------------------------


def junit_not_xml(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return report(file_with(root, "j.xml", "metric,seed_image\npiqe,alpha\n"), "--out", root / "out")


def junit_empty(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return report(file_with(root, "j.xml", ""), "--out", root / "out")


def junit_missing(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return report(root / "nope.xml", "--out", root / "out")


def junit_of_other_tests(root: Path, mp: pytest.MonkeyPatch) -> Act:
    xml = junit(root / "j.xml", '<testcase classname="t" name="test_other" />')
    return report(xml, "--out", root / "out")


def junit_html(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return report(file_with(root, "j.xml", "<html><body>hi</body></html>"), "--out", root / "out")


def junit_oversize(root: Path, mp: pytest.MonkeyPatch) -> Act:
    xml = junit(root / "j.xml", *(case("piqe", f"s{i}", 5, delta="-1.0") for i in range(200)))
    return report(xml, "--out", root / "out", "--max-input-mb", "0.01")


def junit_huge_attribute(root: Path, mp: pytest.MonkeyPatch) -> Act:
    xml = junit(root / "j.xml", case("piqe", "alpha", 5, delta="-1.0", note="x" * (MAX_ATTRIBUTE + 1)))
    return report(xml, "--out", root / "out")


def junit_bad_delta(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return report(junit(root / "j.xml", case("piqe", "alpha", 5, delta="big")), "--out", root / "out")


def junit_bad_ssim(root: Path, mp: pytest.MonkeyPatch) -> Act:
    """The oracle's SSIM is read for report's case table: one run's value is no number."""
    bad = case("piqe", "alpha", 5, delta="-1.0", psnr="30 31", ssim="0.8 big")
    return report(junit(root / "j.xml", bad), "--out", root / "out")


def junit_bad_invariance_change(root: Path, mp: pytest.MonkeyPatch) -> Act:
    props = {"banana_record": "invariance/2", "metric": "piqe", "invariance": "shift", "change": "big"}
    body = "".join(f'<property name="{k}" value="{v}" />' for k, v in props.items())
    testcase = (
        f'<testcase name="test_score_is_invariant[piqe-shift]"><properties>{body}</properties></testcase>'
    )
    return report(junit(root / "j.xml", testcase), "--out", root / "out")


def junit_nan_delta(root: Path, mp: pytest.MonkeyPatch) -> Act:
    """Not an error: the failure stays a failure, its Δ written as nan."""
    xml = junit(
        root / "j.xml", case("piqe", "alpha", 5, "<failure message='AssertionError: m' />", delta="nan")
    )
    return report(xml, "--out", root / "out")


def rerun_alone(root: Path, mp: pytest.MonkeyPatch) -> Act:
    """The JUnit file of a `--lf` rerun, merged alone: it ran the miss and left out the pass."""
    ran, passed = (f"banana_tests.test_degradation::test_detects_degradation[piqe-{s}-step5]" for s in "ab")
    plan = {"planned": ran, "narrowed_by": "--lf", "left_out": passed}
    props = "".join(f'<property name="{k}" value="{v}" />' for k, v in plan.items())
    miss = case("piqe", "a", 5, "<failure message='AssertionError: m' />", delta="1.0")
    suite = f'<testsuite name="pytest" timestamp="2026-01-01T10:00:00+00:00"><properties>{props}</properties>'
    return report(
        file_with(root, "j.xml", f"<testsuites>{suite}{miss}</testsuite></testsuites>"), "--out", root / "out"
    )


def report_into_read_only_folder(root: Path, mp: pytest.MonkeyPatch) -> Act:
    xml = good_junit(root)
    (root / "out").mkdir()
    file_with(root, "out/matrix.csv", "an older report\n")
    read_only(mp, root / "out")
    return report(xml, "--out", root / "out")


def report_fails_while_rendering(root: Path, mp: pytest.MonkeyPatch) -> Act:
    """A disk that fills up halfway through the figures: the old report stays whole."""
    from banana_tests.reports.page import figures

    def full(*args: object) -> list[Path]:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(root / "out" / "gaps_step5.png"))

    xml = good_junit(root)
    (root / "out").mkdir()
    file_with(root, "out/matrix.csv", "an older report\n")
    mp.setattr(figures, "render_figures", full)
    return report(xml, "--out", root / "out")


def report_out_is_a_file(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return report(good_junit(root), "--out", file_with(root, "out", "a file"))


def baseline_into_read_only_folder(root: Path, mp: pytest.MonkeyPatch) -> Act:
    xml = good_junit(root)
    (root / "baselines").mkdir()
    read_only(mp, root / "baselines")
    return report(xml, "--out", root / "out", "--write-baseline", root / "baselines" / "b.json")


def baseline_beside_the_report(root: Path, mp: pytest.MonkeyPatch) -> Act:
    """Not an error: the baseline goes elsewhere, and "wrote N files" counted it among the report's."""
    (root / "baselines").mkdir()
    return report(good_junit(root), "--out", root / "out", "--write-baseline", root / "baselines" / "b.json")


# Seed image names a trend figure's file name cannot carry as they are: 300 characters killed the
# report (File name too long); `a/b` and `a_b`, or `a.b` and `a.c`, wrote one file for two.
ALIKE_SEEDS = ("a/b", "a_b", "a.b", "a.c", "ünï", ".hidden")
LONG_SEEDS = ("s" * 300, "alpha")
SERIES = "[[1,60.0,59.0,61.0],[5,50.0,49.0,51.0],[10,40.0,39.0,41.0]]"


def trend_seeds(seeds: tuple[str, ...]) -> Callable[[Path, pytest.MonkeyPatch], Act]:
    return lambda root, mp: report_of_trends(root, seeds)


def report_of_trends(root: Path, seeds: tuple[str, ...]) -> Act:
    cases = [
        case(
            "piqe",
            seed,
            0,
            name=f"test_trend_detects_degradation[piqe-{seed}]",
            kind="trend",
            reference_step="1",
            spearman="-1.0",
            first_detection_step="5",
            trend_steps="1,5,10",
            trend_series=SERIES,
        )
        for seed in seeds
    ]
    return report(
        junit(root / "j.xml", case("piqe", "alpha", 5, delta="-1.0"), *cases), "--out", root / "out"
    )


def trend_figures(seeds: tuple[str, ...]) -> Callable[[Path], bool]:
    return lambda root: one_figure_each(root, seeds)


def one_figure_each(root: Path, seeds: tuple[str, ...]) -> bool:
    """One PNG and one SVG per seed image, names within 255 bytes, each figure on the page once
    with its seed image's real name."""
    trend_files = sorted((root / "out").glob("trend_*"))
    page = (root / "out/report.html").read_text()
    assert len(trend_files) == 2 * len(seeds)
    assert all(len(p.name.encode()) <= 255 and not p.name.startswith(".") for p in trend_files)
    for png in (p for p in trend_files if p.suffix == ".png"):
        assert page.count(f"{png.name} (SVG beside it)") == 1
    return all(f"<figcaption>{escape(seed)}: trend_" in page for seed in seeds)


REPORT_FILES = frozenset(
    {f"out/{name}" for name in ("matrix.csv", "summary.md", "report.html")}
    | {f"out/{stem}.{ext}" for stem in ("gaps_step5", "failure_counts") for ext in ("png", "svg")}
)


# ---- baselines under pytest --baseline ------------------------------------------------------


def gate(path: Path) -> Act:
    def act() -> int:
        BaselineGate(path, strict=False)
        return 0

    return act


def baseline_not_json(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return gate(file_with(root, "b.json", '{"format": "banana-tests-baseline/2", "failures": [}'))


def baseline_not_utf8(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return gate(file_with(root, "b.json", b'{"format": "\xff\xfe"}'))


def baseline_missing(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return gate(root / "b.json")


def baseline_a_fifo(root: Path, mp: pytest.MonkeyPatch) -> Act:
    os.mkfifo(root / "b.json")  # read, it would block the run for ever
    return gate(root / "b.json")


def baseline_a_device(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return gate(Path("/dev/zero"))  # read, it would fill the memory


def junit_a_fifo(root: Path, mp: pytest.MonkeyPatch) -> Act:
    os.mkfifo(root / "j.xml")
    return report(root / "j.xml", "--out", root / "out")


def baseline_unknown_top_key(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return gate(file_with(root, "b.json", json.dumps({"format": "banana-tests-baseline/2", "failure": []})))


def baseline_unknown_entry_key(root: Path, mp: pytest.MonkeyPatch) -> Act:
    entry = {"metric": "piqe", "seed_image": "a", "step": 5, "runs": 2}
    return gate(
        file_with(root, "b.json", json.dumps({"format": "banana-tests-baseline/2", "failures": [entry]}))
    )


def baseline_invariance_entry_without_check(root: Path, mp: pytest.MonkeyPatch) -> Act:
    entry = {"kind": "invariance", "metric": "piqe", "invariance": "shift"}
    return gate(
        file_with(root, "b.json", json.dumps({"format": "banana-tests-baseline/2", "failures": [entry]}))
    )


def baseline_wrong_format(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return gate(file_with(root, "b.json", json.dumps({"format": "banana-tests-baseline/9", "failures": []})))


def baseline_failures_not_a_list(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return gate(file_with(root, "b.json", json.dumps({"format": "banana-tests-baseline/2", "failures": {}})))


# ---- generate -------------------------------------------------------------------------------


def seeds(root: Path) -> Path:
    folder = root / "seeds"
    folder.mkdir()
    noisy_image("alpha", 0, 0, (40, 56)).save(folder / "alpha.png")
    return folder


def generate(root: Path, *extra: str, steps: int = 3) -> Act:
    argv = ["generate", "--editor", "emulate", "--seed-images", str(root / "seeds"),
            "--out", str(root / "set"), "--runs", "1", "--steps", str(steps),
            "--option", "reframe.long_side=48", *extra]  # fmt: skip
    return lambda: main(argv)


def made_set(root: Path) -> Path:
    seeds(root)
    assert generate(root)() == 0
    return root / "set"


def step_file(root: Path, step: int) -> Path:
    return root / "set" / f"images/alpha/run0/step{step:03d}.png"


def clean_generate(root: Path, mp: pytest.MonkeyPatch) -> Act:
    seeds(root)
    return generate(root)


def set_without_its_last_image(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    step_file(root, 3).unlink()
    return generate(root)


def set_without_a_middle_image(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    step_file(root, 2).unlink()
    return generate(root)


def set_with_a_changed_last_image(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    noisy_image("other", 0, 0, (10, 10)).save(step_file(root, 3))
    return generate(root)


def empty_metadata_from_a_failed_first_attempt(root: Path, mp: pytest.MonkeyPatch) -> Act:
    """The first attempt wrote its settings (here another prompt), then failed before any step."""
    seeds(root)
    mp.setattr("banana_tests.editors.offline_editors.EmulateEditor.edit", lambda self, request: 1 / 0)
    assert generate(root, "--prompt", "mirror")() == 1
    mp.undo()
    assert (root / "set" / "metadata.jsonl").read_bytes() == b""
    return generate(root)


def malformed_metadata_line(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    with (root / "set" / "metadata.jsonl").open("a") as f:
        f.write('{"seed_image": "alpha", "run": 0}\n')
    return generate(root)


def settings_not_json(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    file_with(root, "set/generate.json", "{ broken")
    return generate(root)


def other_settings(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    return generate(root, steps=5)


def seed_image_missing(root: Path, mp: pytest.MonkeyPatch) -> Act:
    argv = [
        "generate",
        "--editor",
        "jpeg",
        "--seed-images",
        str(root / "nope.png"),
        "--out",
        str(root / "set"),
    ]
    return lambda: main(argv)


def generate_into_read_only_folder(root: Path, mp: pytest.MonkeyPatch) -> Act:
    seeds(root)
    (root / "set").mkdir()
    read_only(mp, root / "set")
    return generate(root)


def diffusers_model(root: Path, *options: str) -> Act:
    """A model folder holding only its `model_index.json`: options are checked before weights load."""
    needs("diffusers")
    seeds(root)
    (root / "kontext").mkdir()
    file_with(root, "kontext/model_index.json", json.dumps({"_class_name": "FluxKontextPipeline"}))
    argv = ["generate", "--editor", "diffusers", "--model", str(root / "kontext"), "--device", "cpu",
            "--seed-images", str(root / "seeds"), "--out", str(root / "set"), *options]  # fmt: skip
    return lambda: main(argv)


def diffusers_option_misspelt(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return diffusers_model(root, "--option", "num_inference_step=2")


def diffusers_option_of_the_wrong_type(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return diffusers_model(root, "--option", "guidance_scale=abc")


def emulate_option_not_a_bool_or_number(root: Path, mp: pytest.MonkeyPatch) -> Act:
    seeds(root)
    return generate(root, "--option", "reframe.long_side=big")


def endpoint_for_an_offline_editor(root: Path, mp: pytest.MonkeyPatch) -> Act:
    seeds(root)
    return generate(root, "--endpoint", "http://127.0.0.1:9")


# ---- judge ----------------------------------------------------------------------------------


def judge(root: Path, out: str = "set/j.jsonl") -> Act:
    return lambda: main(["judge", str(root / "set"), "--judge", "keywords", "--out", str(root / out)])


def judgments_line_not_a_judgment(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    file_with(root, "set/j.jsonl", '{"seed_image": "alpha", "run": 0}\n')
    return judge(root)


def judgments_of_another_judge(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    row = {"seed_image": "alpha", "run": 0, "step": 1, "verdict": "silent", "answer": "NO",
           "judge": "gemini", "model": "gemini-2.5-flash", "prompt": "0123abcd"}  # fmt: skip
    file_with(root, "set/j.jsonl", json.dumps(row) + "\n")
    return judge(root)


def judgments_with_a_torn_last_line(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    assert judge(root)() == 0
    with (root / "set/j.jsonl").open("ab") as f:
        f.write(b'{"seed_image": "alp')
    return judge(root)


def judgments_without_a_final_newline(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    assert judge(root)() == 0
    data = (root / "set/j.jsonl").read_bytes()
    (root / "set/j.jsonl").write_bytes(data.removesuffix(b"\n"))
    return judge(root)


def judged(runs: int, tail: bytes = b"") -> bytes:
    """`runs` judgments of alpha, each run acknowledging at step 1, no newline after the last."""
    rows = [{"seed_image": "alpha", "run": r, "step": 1, "verdict": "acknowledges", "answer": "YES",
             "judge": "keywords", "model": "keywords", "prompt": "x"} for r in range(runs)]  # fmt: skip
    return b"\n".join(json.dumps(r).encode() for r in rows) + tail


def report_judgments(data: bytes) -> Callable[[Path, pytest.MonkeyPatch], Act]:
    """`report --judgments` on a file holding `data`, the report written beside `root`."""

    def arrange(root: Path, mp: pytest.MonkeyPatch) -> Act:
        file_with(root, "j.jsonl", data)
        return report("--paper-only", "--out", root.parent / "out", "--judgments", root / "j.jsonl")

    return arrange


def judgments_out_a_fifo(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    os.mkfifo(root / "set/j.jsonl")
    return judge(root)


def report_judgments_a_fifo(root: Path, mp: pytest.MonkeyPatch) -> Act:
    os.mkfifo(root / "j.jsonl")
    return report("--paper-only", "--out", root.parent / "out", "--judgments", root / "j.jsonl")


def judge_a_folder_without_a_set(root: Path, mp: pytest.MonkeyPatch) -> Act:
    seeds(root)
    return lambda: main(["judge", str(root / "seeds"), "--judge", "keywords"])


def openai_judge_without_a_base_url(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    return lambda: main(["judge", str(root / "set"), "--judge", "openai", "--model", "m"])


def gemini_judge_without_a_key(root: Path, mp: pytest.MonkeyPatch) -> Act:
    needs("google-genai", "google.genai")  # else the missing extra (bad_inputs/test_missing_extras.py)
    made_set(root)
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        mp.delenv(name, raising=False)
    return lambda: main(["judge", str(root / "set"), "--judge", "gemini"])


def judge_a_set_of_several_variants(root: Path, mp: pytest.MonkeyPatch) -> Act:
    made_set(root)
    meta = root / "set" / "metadata.jsonl"
    rows = [json.loads(line) for line in meta.read_text().splitlines()]
    meta.write_text("".join(json.dumps({**r, "variant": "mirror", "run": 9}) + "\n" for r in rows), "utf-8")
    with meta.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return judge(root)


def report_with_missing_judgments(root: Path, mp: pytest.MonkeyPatch) -> Act:
    return report("--paper-only", "--out", root / "out", "--judgments", root / "nope.jsonl")


def cli_in(root: Path, mp: pytest.MonkeyPatch, *args: str) -> Act:
    """A command run from `root`, so a URL taken for a folder would be made there; an argparse
    usage error as its exit code."""
    mp.chdir(root)

    def act() -> int:
        try:
            return main(list(args))
        except SystemExit as exc:
            return int(exc.code or 0)

    return act


def url_rows() -> list[Row]:
    """Every path option that takes a local file or folder refuses a URL, naming the option."""
    url = "s3://bucket/y"
    argparse_error = r"argument {}: 's3://bucket/y' is a URL; a local path is needed"
    suite_error = r"{}=s3://bucket/y: a URL is not supported"
    commands = [
        ("cache merge --into", ["cache", "merge", "a", f"--into={url}"], argparse_error.format("--into")),
        ("cache merge source", ["cache", "merge", url, "--into=c"], argparse_error.format("CACHE")),
        ("report --out", ["report", "j.xml", f"--out={url}"], argparse_error.format("--out")),
        ("report junit", ["report", url, "--out=o"], argparse_error.format("JUNIT_XML")),
        (
            "report --write-baseline",
            ["report", "--paper-only", "--out=o", f"--write-baseline={url}"],
            argparse_error.format("--write-baseline"),
        ),
        (
            "report --judgments",
            ["report", "--paper-only", "--out=o", f"--judgments={url}"],
            argparse_error.format("--judgments"),
        ),
        (
            "generate --out",
            ["generate", "--editor=jpeg", "--seed-images", "s.png", f"--out={url}"],
            argparse_error.format("--out"),
        ),
        (
            "generate --seed-images",
            ["generate", "--editor=jpeg", "--seed-images", url, "--out=g"],
            argparse_error.format("--seed-images"),
        ),
        ("judge set", ["judge", url, "--judge=keywords"], argparse_error.format("SET")),
        ("judge --out", ["judge", "set", "--judge=keywords", f"--out={url}"], argparse_error.format("--out")),
        ("fixtures refresh --out", ["fixtures", "refresh", f"--out={url}"], argparse_error.format("--out")),
        (
            "fixtures refresh --recipe",
            ["fixtures", "refresh", f"--recipe={url}"],
            argparse_error.format("--recipe"),
        ),
        ("metrics --weights-dir", ["metrics", f"--weights-dir={url}"], suite_error.format("--weights-dir")),
        ("score --cache-dir", ["score", f"--cache-dir={url}"], suite_error.format("--cache-dir")),
        ("score --dataset-cache", ["score", f"--dataset-cache={url}"], suite_error.format("--dataset-cache")),
        ("score --dataset", ["score", f"--dataset={url}"], suite_error.format("--dataset")),
        ("plan --weights-dir", ["plan", f"--weights-dir={url}"], suite_error.format("--weights-dir")),
    ]
    return [
        Row(f"{name}: a URL", lambda root, mp, args=args: cli_in(root, mp, *args), 2, says)
        for name, args, says in commands
    ]


ROWS = [
    *url_rows(),
    Row("junit not XML", junit_not_xml, 2, r"{root}/j\.xml: not a readable JUnit XML file"),
    Row("junit empty", junit_empty, 2, r"{root}/j\.xml: not a readable JUnit XML file \(no element found"),
    Row("junit missing", junit_missing, 2, r"{root}/nope\.xml: no such file \(a run writes none"),
    Row(
        "junit of other tests",
        junit_of_other_tests,
        2,
        r"{root}/j\.xml: JUnit XML without banana-tests cases",
    ),
    Row("junit html", junit_html, 2, r"{root}/j\.xml: not JUnit XML \(root element <html>"),
    Row(
        "junit oversize",
        junit_oversize,
        2,
        r"{root}/j\.xml: .* MiB is over the 0\.01 MiB limit .*--max-input-mb",
    ),
    Row(
        "junit huge attribute",
        junit_huge_attribute,
        2,
        r"{root}/j\.xml: attribute 'value' of <property> 'note'",
    ),
    Row(
        "junit bad delta",
        junit_bad_delta,
        2,
        r"{root}/j\.xml: testcase '.*piqe-alpha-step5.*': a delta record with a malformed figure: .*'big'",
    ),
    Row(
        "junit bad oracle ssim",
        junit_bad_ssim,
        2,
        r"{root}/j\.xml: testcase '.*piqe-alpha-step5.*': a delta record with a malformed figure: .*'big'",
    ),
    Row(
        "junit bad invariance change",
        junit_bad_invariance_change,
        2,
        r"{root}/j\.xml: testcase '.*piqe-shift.*': the invariance record's 'change' is not a number: 'big'",
    ),
    Row(
        "junit nan delta (accepted, still failed)",
        junit_nan_delta,
        0,
        r"alpha\s+1/1\ntotal\s+1/1\nwrote 7 files",
        creates=REPORT_FILES,
        check=lambda root: "piqe,alpha,5,nan,failed," in (root / "out/matrix.csv").read_text(),
    ),
    Row(
        "report with the baseline written elsewhere",
        baseline_beside_the_report,
        0,
        r"wrote 7 files to {root}/out\nwrote the baseline to {root}/baselines/b\.json\n",
        creates=REPORT_FILES | {"baselines/b.json"},
    ),
    *(
        Row(
            f"report of trend seeds with {kind} names",
            trend_seeds(seeds),
            0,
            rf"wrote {7 + 2 * len(seeds)} files to {{root}}/out\n",
            creates=REPORT_FILES | {f"out/{figure_stem(s)}.{ext}" for s in seeds for ext in ("png", "svg")},
            check=trend_figures(seeds),
        )
        for kind, seeds in (("alike or unsafe", ALIKE_SEEDS), ("300-character", LONG_SEEDS))
    ),
    Row(
        "report of a --lf rerun alone: partial, never complete",
        rerun_alone,
        3,
        r"partial: 1 case\(s\) left out by --lf are in none of the files:\n"
        r"  banana_tests\.test_degradation::test_detects_degradation\[piqe-b-step5\]\n",
        creates=REPORT_FILES,
        check=lambda root: (
            "partial, narrowed by --lf: 1 of 2 cases known" in (root / "out/report.html").read_text()
        ),
    ),
    Row(
        "report into read-only folder",
        report_into_read_only_folder,
        1,
        r"cannot write the report: .*Read-only.*{root}/out",
    ),
    Row(
        "report fails while rendering",
        report_fails_while_rendering,
        1,
        r"cannot write the report: .*No space left",
    ),
    Row("report out is a file", report_out_is_a_file, 1, r"cannot write the report: .*{root}/out"),
    Row("baseline into read-only folder", baseline_into_read_only_folder, 1, r"Read-only.*{root}/baselines"),
    Row(
        "baseline not JSON",
        baseline_not_json,
        pytest.UsageError,
        r"--baseline: baseline {root}/b\.json: Expecting value",
    ),
    Row(
        "baseline not UTF-8", baseline_not_utf8, pytest.UsageError, r"baseline {root}/b\.json: 'utf-8' codec"
    ),
    Row(
        "baseline a FIFO",
        baseline_a_fifo,
        pytest.UsageError,
        r"baseline {root}/b\.json: not a regular file but a FIFO \(named pipe\)",
    ),
    Row(
        "baseline /dev/zero",
        baseline_a_device,
        pytest.UsageError,
        r"baseline /dev/zero: not a regular file but a character device",
    ),
    Row(
        "junit a FIFO",
        junit_a_fifo,
        2,
        r"{root}/j\.xml: cannot read this file \(not a regular file but a FIFO",
    ),
    Row("baseline missing", baseline_missing, pytest.UsageError, r"baseline {root}/b\.json: .*No such file"),
    Row(
        "baseline unknown top key",
        baseline_unknown_top_key,
        pytest.UsageError,
        r"{root}/b\.json: unknown key\(s\) 'failure'",
    ),
    Row(
        "baseline unknown entry key",
        baseline_unknown_entry_key,
        pytest.UsageError,
        r"{root}/b\.json: failure entry 0 .* unknown key\(s\) 'runs'",
    ),
    Row(
        "baseline invariance entry without check",
        baseline_invariance_entry_without_check,
        pytest.UsageError,
        r"{root}/b\.json: failure entry 0 .* unknown key\(s\) 'invariance'",
    ),
    Row(
        "baseline wrong format",
        baseline_wrong_format,
        pytest.UsageError,
        r"{root}/b\.json: not a banana-tests-baseline/2",
    ),
    Row(
        "baseline failures not a list",
        baseline_failures_not_a_list,
        pytest.UsageError,
        r"'failures' is not a list",
    ),
    Row(
        "generate: a clean run leaves the set and nothing else (no .generate.lock)",
        clean_generate,
        0,
        r"3 step\(s\) made \(3 request\(s\)\); 3/3 in {root}/set",
        creates=frozenset(
            {"set/generate.json", "set/metadata.jsonl"}
            | {f"set/images/alpha/run0/step00{s}.png" for s in (1, 2, 3)}
        ),
    ),
    Row(
        "generate: last image deleted",
        set_without_its_last_image,
        0,
        r"metadata\.jsonl: 1 recorded image\(s\) missing at the end of their runs; making them again",
        rewrites=frozenset({"set/metadata.jsonl"}),
        creates=frozenset({"set/images/alpha/run0/step003.png"}),
    ),
    Row(
        "generate: middle image deleted",
        set_without_a_middle_image,
        1,
        r"{root}/set/metadata\.jsonl: images/alpha/run0/step002\.png \(alpha run 0 step 2\) is missing,"
        r" but later.*delete the run's later images \(images/alpha/run0/step003\.png\)",
    ),
    Row(
        "generate: last image changed",
        set_with_a_changed_last_image,
        1,
        r"images/alpha/run0/step003\.png \(alpha run 0 step 3\) changed since it was recorded",
    ),
    Row(
        "generate: empty metadata.jsonl after a failed first attempt",
        empty_metadata_from_a_failed_first_attempt,
        0,
        r"{root}/set: no step was made with the settings in generate\.json",
        rewrites=frozenset({"set/metadata.jsonl", "set/generate.json"}),
        creates=frozenset({f"set/images/alpha/run0/step00{s}.png" for s in (1, 2, 3)}),
    ),
    Row(
        "generate: malformed metadata line",
        malformed_metadata_line,
        1,
        r"{root}/set/metadata\.jsonl:4: not a generate record",
    ),
    Row("generate: settings not JSON", settings_not_json, 1, r"{root}/set/generate\.json: not JSON"),
    Row(
        "generate: other settings",
        other_settings,
        1,
        r"{root}/set was generated with other settings.*steps: folder has 3",
    ),
    Row("generate: seed image missing", seed_image_missing, 1, r"{root}/nope\.png: no such file or folder"),
    Row(
        "generate: read-only output folder",
        generate_into_read_only_folder,
        1,
        r"Read-only file system: '{root}/set/",
    ),
    Row(
        "generate: diffusers option misspelt",
        diffusers_option_misspelt,
        1,
        r"FluxKontextPipeline takes no option 'num_inference_step' \(did you mean num_inference_steps\?\)",
    ),
    Row(
        "generate: diffusers option of the wrong type",
        diffusers_option_of_the_wrong_type,
        1,
        r"FluxKontextPipeline: option guidance_scale='abc' is not a float",
    ),
    Row(
        "generate: editor option of the wrong type",
        emulate_option_not_a_bool_or_number,
        1,
        r"editor 'emulate': option reframe.long_side='big' is not a int",
    ),
    Row(
        "generate: --endpoint for an editor without a service",
        endpoint_for_an_offline_editor,
        1,
        r"editor 'emulate' does not take --endpoint",
    ),
    Row("judge: bad line", judgments_line_not_a_judgment, 1, r"{root}/set/j\.jsonl:1: not a judgment"),
    Row(
        "judge: judgments of another judge",
        judgments_of_another_judge,
        1,
        r"{root}/set/j\.jsonl holds judgments by gemini gemini-2\.5-flash .*choose a new --out file",
    ),
    Row(
        "judge: torn last judgment",
        judgments_with_a_torn_last_line,
        0,
        r"0 step\(s\) judged now \(0 request\(s\)\), 3 before",
        rewrites=frozenset({"set/j.jsonl"}),
    ),
    Row(
        "judge: last judgment without its newline",
        judgments_without_a_final_newline,
        0,
        r"0 step\(s\) judged now \(0 request\(s\)\), 3 before",
        rewrites=frozenset({"set/j.jsonl"}),
        check=lambda root: (root / "set/j.jsonl").read_bytes().count(b"\n") == 3,
    ),
    Row(
        "report: last judgment without its newline",
        report_judgments(judged(3)),
        0,
        r"\| alpha \| 1\.0 ± 0\.0 \| 3 of 3 \|",
    ),
    Row(
        "report: torn last judgment",
        report_judgments(judged(3, b'\n{"seed_image": "alp')),
        0,
        r"\| alpha \| 1\.0 ± 0\.0 \| 3 of 3 \|",
    ),
    Row(
        "judge: --out a FIFO",
        judgments_out_a_fifo,
        1,
        r"{root}/set/j\.jsonl: not a regular file but a FIFO \(named pipe\); choose another --out",
    ),
    Row(
        "report: judgments a FIFO",
        report_judgments_a_fifo,
        2,
        r"{root}/j\.jsonl: not a regular file but a FIFO",
    ),
    Row("judge: not a trajectory set", judge_a_folder_without_a_set, 1, r"{root}/seeds: no metadata\.jsonl"),
    Row(
        "judge: openai without --base-url",
        openai_judge_without_a_base_url,
        1,
        r"the openai judge needs --base-url \(e\.g\. http://localhost:8000/v1\) and --model",
    ),
    Row("judge: gemini without a key", gemini_judge_without_a_key, 1, r"needs an API key in GEMINI_API_KEY"),
    Row(
        "judge: a set of several variants",
        judge_a_set_of_several_variants,
        1,
        r"{root}/set holds several variants \(mirror, replicate\); choose one with --variant",
    ),
    Row(
        "report: judgments file missing",
        report_with_missing_judgments,
        2,
        r"{root}/nope\.jsonl: no such judgments file",
    ),
]


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# The diffusers rows import diffusers and transformers (~30 s here): the slow tier.
HEAVY = (diffusers_option_misspelt, diffusers_option_of_the_wrong_type)


@pytest.mark.parametrize(
    "row", [pytest.param(r, id=r.id, marks=[pytest.mark.slow] if r.arrange in HEAVY else []) for r in ROWS]
)
def test_bad_input(
    row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    act = row.arrange(root, monkeypatch)
    before = tree(root)
    capsys.readouterr()
    if isinstance(row.code, int):
        assert act() == row.code
        captured = capsys.readouterr()
        message = captured.err if row.code else captured.out
    else:
        with pytest.raises(row.code) as info:
            act()
        message = str(info.value)
    monkeypatch.undo()
    if row.code:
        assert "Traceback" not in message
    assert re.search(row.says.replace("{root}", re.escape(str(root))), message, re.S), message
    after = tree(root)
    assert set(before) <= set(after), "a user file was deleted"
    assert set(after) - set(before) == row.creates, "output left behind, or not made"
    assert {k: after[k] for k in before if k not in row.rewrites} == {
        k: v for k, v in before.items() if k not in row.rewrites
    }, "a user file changed"
    assert not [p for p in root.rglob("*") if ".partial-" in p.name or p.name.endswith(".tmp")]
    assert row.check(root)
