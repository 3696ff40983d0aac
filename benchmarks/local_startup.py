"""Wall time from `mlsubmit train --local` to the first training step, for 1, 2 and 3 replicas, in one run beside
one plain `python -m trainer.task` (the baseline: no packaging, no venv, no runner, one process).

The first training step is taken as done when the chief prints its first epoch line (`1/1 - …`) of a one-step
epoch without validation; both sides train the same model on the same data. `mlsubmit train --local` is measured
twice for one replica — a new package (a copy of trainer/ with one comment line added, as after an edit, in a fresh
$MLSUBMIT_HOME: its sdist is built and a new job environment made on the image's) and warm (the same package
again: its environment is reused) — and warm for 2 and 3 replicas (chief + 1 or 2 workers:
MultiWorkerMirroredStrategy). The image's own environment is built once, before any run is timed, where
$MLSUBMIT_IMAGES says (when unset, in the benchmark's temporary folder, removed at the end).

    python benchmarks/local_startup.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
TRAINER_ARGS = ["--data", "synthetic:28x28x1:10:1024", "--model", "dense", "--epochs", "1", "--steps-per-epoch", "1",
                "--validation-split", "0"]
FIRST_STEP = re.compile(r"^(\[chief-0\]\s+)?1/1 - ")


def seconds_to_first_step(cmd: list[str], cwd: Path, env: dict,
                          first_line: Callable[[str], object] = FIRST_STEP.match) -> tuple[float, float]:
    """(seconds to the first line `first_line` accepts — the first step —, seconds to the end) of one fresh
    process tree."""
    started = time.perf_counter()
    process = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = None
    tail = []
    for line in process.stdout:
        tail = (tail + [line])[-30:]
        if first is None and first_line(line):
            first = time.perf_counter() - started
    process.wait()
    if process.returncode != 0 or first is None:
        raise SystemExit(f"{' '.join(cmd[:6])}… failed (exit {process.returncode}):\n{''.join(tail)}")
    return first, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help="one repeat: the plain run and one replica of a new package: that it runs")
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    with tempfile.TemporaryDirectory(prefix="mlsubmit-bench-") as tmp:  # its venvs and job dirs: gone at the end
        rows = measure(Path(tmp), args.repeats, args.quick)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"median of {args.repeats} run(s)")
    print_medians(rows, "python -m trainer.task (1 process)", "first step", digits=1)


def edited_copy(package: Path, into: Path, beside: tuple[str, ...] = ()) -> Path:
    """A copy of `package` (with the project files `beside` it) whose __init__.py has one comment line more: a
    package mlsubmit has never run, as after an edit. Its sdist and job environment are new; the image's environment
    (and an environment for its requirements, once built) are reused."""
    project = into / "project"
    shutil.copytree(package, project / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in beside:
        shutil.copy2(package.parent / name, project / name)
    with open(project / package.name / "__init__.py", "a") as init:
        init.write(f"# edited {time.time_ns()}\n")
    return project / package.name


def measure(work: Path, repeats: int, quick: bool) -> dict[str, list[tuple[float, float]]]:
    # every home shares one place for image environments: $MLSUBMIT_IMAGES when set, else one in `work`
    env = {**os.environ, "NO_COLOR": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
           "MLSUBMIT_IMAGES": os.environ.get("MLSUBMIT_IMAGES") or str(work / "images")}
    plain = [sys.executable, "-m", "trainer.task", *TRAINER_ARGS]

    def local(replicas: int, home: Path, package: Path) -> list[str]:
        workers = ["--workers", str(replicas - 1)] if replicas > 1 else []
        return [sys.executable, "-m", "mlsubmit", "train", "--local", "--package-path", str(package),
                *workers, "--job-dir", str(work / f"job-{replicas}-{time.monotonic_ns()}"), "--", *TRAINER_ARGS]

    rows: dict[str, list[tuple[float, float]]] = {}
    if not quick:  # the image's environment, built (or found) before anything is timed
        warm_up = work / "warm-up"
        seconds_to_first_step(local(1, warm_up, ROOT / "trainer"), work, {**env, "MLSUBMIT_HOME": str(warm_up)})
    for repeat in range(repeats):
        home = work / f"home-{repeat}"  # a fresh home, and a package never run before, each repeat
        package = edited_copy(ROOT / "trainer", work / f"edit-{repeat}", beside=("setup.py",))
        runs = [("python -m trainer.task (1 process)", plain + ["--job-dir", str(work / f"plain-{repeat}")], ROOT),
                ("train --local, 1 replica, new package", local(1, home, package), work),
                ("train --local, 1 replica, warm venv", local(1, home, package), work),
                ("train --local, 2 replicas (chief + 1 worker)", local(2, home, package), work),
                ("train --local, 3 replicas (chief + 2 workers)", local(3, home, package), work)]
        if quick:  # one row beside its baseline: the fewest processes that show the harness works
            runs = runs[:2]
        for name, cmd, cwd in runs:
            rows.setdefault(name, []).append(seconds_to_first_step(cmd, cwd, {**env, "MLSUBMIT_HOME": str(home)}))
    return rows


def print_medians(rows: dict[str, list[tuple[float, float]]], baseline: str, first_label: str, digits: int) -> None:
    """One line per run kind: the median seconds to the first line, its ratio to `baseline`'s, the median whole run."""
    base = statistics.median(first for first, _ in rows[baseline])
    width = max(len(name) for name in rows)
    print(f"{'':{width}} {first_label:>11} {'ratio':>7} {'whole run':>10}")
    for name, values in rows.items():
        first = statistics.median(v[0] for v in values)
        total = statistics.median(v[1] for v in values)
        print(f"{name:{width}} {first:10.{digits}f}s {first / base:6.2f}x {total:9.{digits}f}s")


if __name__ == "__main__":
    main()
