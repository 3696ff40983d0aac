"""Time from `mlsubmit train --target <engine>` to the first training step, beside `train --local` of the same job.

The same job each time: the bundled trainer as chief + N workers on synthetic data (1 epoch, 3 steps). Each target
runs once untimed first (its venv built, the engine's first-use costs paid), then `--repeats` timed runs. Measured
from starting the command to the chief's strategy line (printed right before its first step: every replica has
joined the cluster by then), and to the end of the job. The clusters are real ones on 127.0.0.1 started here the
way the tests start them (tests/support/engine_clusters.py) and stopped at the end.

    python benchmarks/engines.py [--engines dask,ray,spark] [--workers 1] [--repeats 2]

Prints a table: seconds to the first step and to the end, the ratio to --local, and what the engine adds per
replica ((engine - local) / replicas).

`--quick` (the suite's): Dask only, one run each, no warm-up, and the job is tests/support/tiny_package.py's tinypkg,
which trains nothing: its chief's first line (printed as it starts) is taken as the first step, so what the engine
adds to a job shows without four TensorFlow starts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import engine_clusters  # noqa: E402  (the repository's own helpers)


@dataclass(frozen=True)
class Job:
    """What every target runs: a package, its module and arguments, and the chief's line taken as its first step."""
    package: Path
    module: str
    args: tuple[str, ...]
    first_step: str


# the bundled trainer; its chief's strategy line is printed as fit() begins, once every replica has joined
TRAINER = Job(ROOT / "trainer", "trainer.task", ("--data", "synthetic:8x8x1:4:256", "--epochs", "1", "--batch-size",
                                                 "16", "--steps-per-epoch", "3"), "replica(s) in sync")


def tiny_job(into: Path) -> Job:
    """--quick's job: the tests' tinypkg (no TensorFlow, nothing trained), its first line printed as it starts."""
    from tests.support.tiny_package import make_project

    return Job(make_project(into), "tinypkg.task", ("--job-dir", "job"), "training into")


def run_once(target: list[str], workers: int, cwd: Path, env: dict[str, str], job: Job) -> tuple[float, float]:
    """(seconds to the chief's first step, seconds to the end) of one job."""
    argv = [sys.executable, "-m", "mlsubmit", "train", *target, "--package-path", str(job.package), "--module-name",
            job.module, "--workers", str(workers), "--job-dir", str(cwd / f"job-{time.time_ns()}"), "--", *job.args]
    started = time.monotonic()
    first = None
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail = []
    for line in process.stdout:
        tail = (tail + [line])[-30:]
        if first is None and line.startswith("[chief-0]") and job.first_step in line:
            first = time.monotonic() - started
    if process.wait() != 0 or first is None:
        raise RuntimeError(f"{' '.join(target)} failed:\n{''.join(tail)}")
    return first, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="dask,ray,spark")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help="dask only (one worker a replica), one run each, no warm-up (first-use costs "
                             "included), tinypkg for the trainer: that it runs")
    args = parser.parse_args()
    if args.quick:
        args.engines, args.repeats = "dask", 1
    replicas = args.workers + 1
    results: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="mlsubmit-bench-engines-") as tmp:
        tmp_path = Path(tmp)
        env = {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": str(tmp_path / "home"), "TF_CPP_MIN_LOG_LEVEL": "2"}
        job = tiny_job(tmp_path / "tinypkg") if args.quick else TRAINER
        plans: list[tuple[str, list[str], dict[str, str], object]] = [("local", ["--local"], {}, None)]
        clusters = []
        try:
            for engine in [e for e in args.engines.split(",") if e]:
                (tmp_path / engine).mkdir()
                # quick (Dask only): a worker for each replica and none idle, the fewest processes that run the job
                size = {"workers": replicas} if args.quick else {}
                cluster = getattr(engine_clusters, f"{engine}_cluster")(tmp_path / engine, tmp_path / engine / "home",
                                                                        **size)
                clusters.append(cluster)
                plans.append((engine, ["--target", cluster.target], cluster.env, cluster))
            for name, target, extra, _ in plans:
                (tmp_path / name / "runs").mkdir(parents=True, exist_ok=True)
                try:
                    if not args.quick:  # warm: venv, first use
                        run_once(target, args.workers, tmp_path / name / "runs", {**env, **extra}, job)
                    runs = [run_once(target, args.workers, tmp_path / name / "runs", {**env, **extra}, job)
                            for _ in range(args.repeats)]
                except RuntimeError as err:  # one engine's failure is reported, the others still measured
                    print(f"{name}: not measured: {str(err)[:400]}", flush=True)
                    continue
                results[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
                print(f"{name}: {results[name][0]:.1f} s to the first step, {results[name][1]:.1f} s in all",
                      flush=True)
        finally:
            for cluster in clusters:
                cluster.stop()
    local_first, local_total = results["local"]
    warmed = "no warm-up: first use included" if args.quick else "after one warm-up run each"
    trained = (f"; {job.module}, which trains nothing: first step = its chief's first line" if args.quick else "")
    print(f"\nchief + {args.workers} worker(s), medians of {args.repeats} ({warmed}){trained}")
    print(f"{'target':<8} {'first step s':>13} {'× local':>8} {'added/replica s':>16} {'job s':>8} {'× local':>8}")
    for name, (first, total) in results.items():
        print(f"{name:<8} {first:>13.1f} {first / local_first:>8.2f} {(first - local_first) / replicas:>16.1f} "
              f"{total:>8.1f} {total / local_total:>8.2f}")


if __name__ == "__main__":
    main()
