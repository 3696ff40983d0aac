"""Wall time from `mlsubmit train --local` to the first training step, for 1, 2 and 3 replicas, in one run beside
one plain `python -m trainer.task` (the baseline: no packaging, no venv, no runner, one process).

The first training step is taken as done when the chief prints its first epoch line (`1/1 - …`) of a one-step
epoch without validation; both sides train the same model on the same data. `mlsubmit train --local` is measured
twice for one replica — cold (a fresh $MLSUBMIT_HOME: the sdist is built and installed into a new venv) and warm
(the venv is reused) — and warm for 2 and 3 replicas (chief + 1 or 2 workers: MultiWorkerMirroredStrategy).

    python benchmarks/local_startup.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
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
                        help="one repeat, one replica (the plain run, a cold and a warm venv): that it runs")
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    with tempfile.TemporaryDirectory(prefix="mlsubmit-bench-") as tmp:  # its venvs and job dirs: gone at the end
        rows = measure(Path(tmp), args.repeats, args.quick)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"median of {args.repeats} run(s)")
    print_medians(rows, "python -m trainer.task (1 process)", "first step", digits=1)


def measure(work: Path, repeats: int, quick: bool) -> dict[str, list[tuple[float, float]]]:
    env = {**os.environ, "NO_COLOR": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    plain = [sys.executable, "-m", "trainer.task", *TRAINER_ARGS]

    def local(replicas: int, home: Path) -> list[str]:
        workers = ["--workers", str(replicas - 1)] if replicas > 1 else []
        return [sys.executable, "-m", "mlsubmit", "train", "--local", "--package-path", str(ROOT / "trainer"),
                *workers, "--job-dir", str(work / f"job-{replicas}-{time.monotonic_ns()}"), "--", *TRAINER_ARGS]

    rows: dict[str, list[tuple[float, float]]] = {}
    for repeat in range(repeats):
        home = work / f"home-{repeat}"  # cold: a fresh venv each repeat
        runs = [("python -m trainer.task (1 process)", plain + ["--job-dir", str(work / f"plain-{repeat}")], ROOT),
                ("train --local, 1 replica, cold venv", local(1, home), work),
                ("train --local, 1 replica, warm venv", local(1, home), work),
                ("train --local, 2 replicas (chief + 1 worker)", local(2, home), work),
                ("train --local, 3 replicas (chief + 2 workers)", local(3, home), work)]
        if quick:
            runs = runs[:3]
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
