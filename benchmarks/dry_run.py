"""Wall time of `python -m trainer.task --dry-run` (TensorFlow import included), median of N fresh processes.

Baseline beside it: `python -c "import tensorflow"` — the part of the dry run no trainer can avoid.

    python benchmarks/dry_run.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="one repeat: that the benchmark runs (the suite)")
    args = p.parse_args()
    if args.quick:
        args.repeats = 1
    base, ours = [], []
    for _ in range(args.repeats):
        base.append(timed([sys.executable, "-c", "import tensorflow, keras"]))
        ours.append(timed([sys.executable, "-m", "trainer.task", "--dry-run"]))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"import tensorflow, keras: median {statistics.median(base):.1f} s  runs {[round(x, 1) for x in base]}")
    print(f"trainer --dry-run:        median {statistics.median(ours):.1f} s  runs {[round(x, 1) for x in ours]}")
    print(f"ratio: {statistics.median(ours) / statistics.median(base):.2f}× the bare import")


if __name__ == "__main__":
    main()
