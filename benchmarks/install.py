#!/usr/bin/env python3
"""`pip install mlsubmit` beside `pip install google-cloud-aiplatform` (the Vertex AI SDK), in one run.

Each install goes into a fresh `python3 -m venv` with the pip that venv gives (not upgraded, as users have it), from
the same pip cache: every package is installed once, untimed, to warm the cache, then each is timed in a new venv in
turn, so both sides meet the same cache state. Reported: the venv's size on disk, the install's wall time, and their
ratios to the SDK's; then `mlsubmit --help`'s median wall time in the core's venv.

    .venv/bin/python benchmarks/install.py [--python python3.11] [--rounds 1] [--with-tensorflow] [--wheel WHEEL]

Goals (issue #37): the core at most 1.0x the SDK's size and time; `mlsubmit --help` at most 150 ms.
`--quick` (the suite's) installs the core alone, untimed warm-up skipped, without byte-compiling it (pip's
`--no-compile`: a third of the install's CPU, and nothing is compared with it), and checks the script runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDK = "google-cloud-aiplatform"
GOAL_RATIO, GOAL_HELP_MS = 1.0, 150


def _run(argv: list, timeout: float = 1800) -> None:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise SystemExit(f"{' '.join(map(str, argv))} exited {done.returncode}: {done.stderr[-2000:]}")


def size_of(folder: Path) -> int:
    """Bytes of the files under `folder` (what `du --apparent-size` counts), links not followed."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def install(python: str, requirement: str, where: Path, *options: str) -> tuple[float, int, Path]:
    """(seconds, bytes) of `pip install [options] requirement` into a fresh venv at `where`, with the pip the venv
    gives."""
    _run([python, "-m", "venv", where])
    start = time.perf_counter()
    _run([where / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", "-q", *options,
          requirement])
    return time.perf_counter() - start, size_of(where), where


def help_ms(venv: Path, runs: int = 7) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([venv / "bin" / "mlsubmit", "--help"], capture_output=True, env=env)  # compile the bytecode
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([venv / "bin" / "mlsubmit", "--help"], capture_output=True, env=env, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=shutil.which("python3") or sys.executable,
                        help="the interpreter whose `-m venv` makes each venv (default: python3 on PATH)")
    parser.add_argument("--rounds", type=int, default=1, help="timed installs of each, medians reported")
    parser.add_argument("--with-tensorflow", action="store_true", help="also time mlsubmit[tensorflow]")
    parser.add_argument("--quick", action="store_true", help="the core alone, once: that the benchmark runs")
    parser.add_argument("--wheel", default=None,
                        help="mlsubmit's wheel, already built from this checkout (default: built here with pip wheel)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-install-"))
    try:
        if args.wheel is None:
            _run([sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "-q", "--no-deps", "-w",
                  work / "dist", ROOT])
        wheel = args.wheel or str(next((work / "dist").glob("mlsubmit-*.whl")))
        cases = {"mlsubmit (core)": wheel}
        if not args.quick:
            cases[SDK] = SDK
            if args.with_tensorflow:
                cases["mlsubmit[tensorflow]"] = f"{wheel}[tensorflow]"
            for name, requirement in cases.items():  # warm pip's cache for every side alike
                install(args.python, requirement, work / "warm")
                shutil.rmtree(work / "warm")
        results: dict[str, list[tuple[float, int]]] = {name: [] for name in cases}
        core_venv = None
        for round_ in range(1 if args.quick else args.rounds):
            for index, (name, requirement) in enumerate(cases.items()):
                seconds, size, venv = install(args.python, requirement, work / f"venv-{round_}-{index}",
                                              *(["--no-compile"] if args.quick else []))
                results[name].append((seconds, size))
                if index == 0 and core_venv is None:
                    core_venv = venv
                else:
                    shutil.rmtree(venv)
        pip = subprocess.run([core_venv / "bin" / "python", "-m", "pip", "--version"], capture_output=True,
                             text=True).stdout.split()[:2]
        print(f"python {args.python}, {' '.join(pip)}, {'quick (no bytecode compiled): ' if args.quick else ''}"
              f"{args.rounds if not args.quick else 1} timed round(s) after a warm-up of pip's cache")
        print("| pip install … into a fresh venv | venv size | time | size / SDK's | time / SDK's |")
        print("| --- | --- | --- | --- | --- |")
        sdk = results.get(SDK)
        for name, runs in results.items():
            seconds = statistics.median(r[0] for r in runs)
            size = statistics.median(r[1] for r in runs)
            ratio = (f"{size / statistics.median(r[1] for r in sdk):.2f}x | "
                     f"{seconds / statistics.median(r[0] for r in sdk):.2f}x") if sdk else "- | -"
            print(f"| `{name}` | {size / 1e6:,.0f} MB | {seconds:.1f} s | {ratio} |")
        median_help = help_ms(core_venv, runs=3 if args.quick else 9)
        print(f"mlsubmit --help in the core's venv: {median_help:.0f} ms median (goal <= {GOAL_HELP_MS} ms)")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
