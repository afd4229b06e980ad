"""Score a trajectory set on a Ray cluster, merge the caches, print the verdict pass to run.

One Ray task per (seed image, kind of metric): the classical metrics ask for a CPU each, the
vision-language ones (cost `vlm`) for a GPU. Each task scores with `banana_tests.api.score`
into a cache of its own on its node and returns the folder's files; the driver writes them beside
each other and merges them with `banana-tests cache merge`'s code. It imports only
`banana_tests.api` and Ray. The data set must be
readable from every node (a shared folder or `hf:<repo_id>`). See docs/cluster.md.

    python examples/ray/ray_score.py --dataset=runs/ --metric=brisque,niqe,qalign --out=work/
    pytest --pyargs banana_tests --dataset=runs/ --metric=brisque,niqe,qalign --cache-dir=work/merged

`--address=auto` joins a running cluster; without it Ray starts a local one (`--num-cpus`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

import ray

from banana_tests.api import (
    Backend,
    Cost,
    Device,
    MetricRequest,
    ScoreRequest,
    merge_caches,
    resolve_metric,
    score,
    scoring_settings,
    seed_images,
)


@ray.remote
def score_task(
    dataset: str, metrics: list[str], seed_image: str, device: Device
) -> tuple[list[str], bool, dict[str, bytes]]:
    """One seed image's scores of `metrics`, into a cache of this task's own: (summary lines,
    whether complete, the cache folder's files: its scores and what each metric loads)."""
    with tempfile.TemporaryDirectory() as folder:
        request = ScoreRequest(
            dataset, metrics, seed_images=[seed_image], cache_dir=Path(folder), device=device
        )
        summary = score(request)
        files = {f.name: f.read_bytes() for f in Path(folder).iterdir() if f.is_file()}
        return summary.lines(), summary.complete, files


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", required=True, help="readable from every node")
    p.add_argument("--metric", default="brisque,niqe,piqe")
    p.add_argument("--out", type=Path, required=True, help="where the task caches and the merged one go")
    p.add_argument("--address", default=None, help="a running cluster (auto); default: start a local one")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local cluster")
    args = p.parse_args(argv)

    dataset = str(Path(args.dataset).resolve()) if Path(args.dataset).exists() else args.dataset
    settings = scoring_settings(ScoreRequest(dataset, args.metric))
    kinds = metrics_by_kind(settings.metrics, settings.weights_dir)

    ray.init(address=args.address, num_cpus=args.num_cpus)
    tasks = {}
    for seed_image in seed_images(settings):
        for kind, metrics in kinds.items():
            if metrics:
                resources = {"num_gpus": 1} if kind == "gpu" else {"num_cpus": 1}
                device = Device.CUDA if kind == "gpu" else Device.CPU
                task = score_task.options(**resources).remote(dataset, metrics, seed_image, device)
                tasks[f"{seed_image}-{kind}"] = task
    complete = True
    caches = []
    for name, task in tasks.items():
        lines, done, files = ray.get(task)
        complete &= done
        print(f"{name}: " + "; ".join(lines))
        folder = args.out / "tasks" / name
        folder.mkdir(parents=True, exist_ok=True)
        for file_name, data in files.items():
            (folder / file_name).write_bytes(data)
        caches.append(folder)
    merged = merge_caches(caches, args.out / "merged")
    print(f"{merged.added} scores merged into {merged.into}")
    verdicts = ["pytest", "--pyargs", "banana_tests", f"--dataset={dataset}", f"--metric={args.metric}"]
    print("verdict pass:", shlex.join([*verdicts, f"--cache-dir={merged.into}"]))
    return 0 if complete else 1


def metrics_by_kind(requests: tuple[MetricRequest, ...], mirror: Path | None) -> dict[str, list[str]]:
    """The metrics asked for (the settings' parsed `--metric`), for GPU tasks (the VLMs) and for
    CPU tasks; a `module:callable` stays as given, for the task to resolve again."""
    kinds: dict[str, list[str]] = {"cpu": [], "gpu": []}
    for request in requests:
        for spec in resolve_metric((request,), mirror):
            name = request.text if spec.backend is Backend.CUSTOM else spec.name
            kinds["gpu" if spec.cost is Cost.VLM else "cpu"].append(name)
    return {kind: list(dict.fromkeys(names)) for kind, names in kinds.items()}


if __name__ == "__main__":
    sys.exit(main())
