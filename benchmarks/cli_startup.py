"""Start-up cost of the light commands: median wall time and peak RSS over N runs, beside `python -c pass`.

    python benchmarks/cli_startup.py [--runs 15]

Goal (issue 3): `mlsubmit --help` and `mlsubmit config --tier CUSTOM --gpus 4` each <= 250 ms and
<= 80 MB on the 2-core machine. Each run is a fresh interpreter with bytecode caching on (as users have it); the commands are
interleaved so that background load hits them alike. Also checks that neither loads TensorFlow or a Google client library.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

PY = sys.executable
CASES = {
    "python -c pass (baseline)": [PY, "-c", "pass"],
    "mlsubmit --help": [PY, "-m", "mlsubmit", "--help"],
    "mlsubmit config --tier CUSTOM --gpus 4": [PY, "-m", "mlsubmit", "config", "--tier", "CUSTOM", "--gpus", "4"],
}
GOAL_MS, GOAL_MB = 250, 80
# Measure what a user gets: cached bytecode (a developer shell may set PYTHONDONTWRITEBYTECODE).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
HEAVY = ("tensorflow", "googleapiclient", "google.cloud")


def run_once(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one run; raises if the command fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited with {proc.returncode}: {proc.stderr.read().decode()}")
    proc.stderr.close()
    return wall, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def heavy_modules(cmd: list[str]) -> list[str]:
    """Heavy modules that `cmd` imports (runs it once more under a sys.modules probe)."""
    probe = ("import runpy, sys, atexit\n"
             "def report():\n"
             f"    heavy = sorted({{m.split('.')[0] + ('.cloud' if m.startswith('google.cloud') else '') "
             f"for m in sys.modules if m.startswith({HEAVY!r})}})\n"
             "    sys.__stderr__.write('HEAVY=' + ','.join(heavy) + '\\n')\n"
             "atexit.register(report)\n"
             "sys.argv = ['mlsubmit'] + sys.argv[1:]\n"
             "runpy.run_module('mlsubmit', run_name='__main__')\n")
    out = subprocess.run([PY, "-c", probe, *cmd[3:]], capture_output=True, text=True, env=ENV)
    line = next((x for x in out.stderr.splitlines() if x.startswith("HEAVY=")), "HEAVY=")
    return [m for m in line[len("HEAVY="):].split(",") if m]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="one run each: that the benchmark runs (the suite)")
    options = parser.parse_args()
    runs = 1 if options.quick else options.runs
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
    for name, cmd in CASES.items():  # warm the file cache and .pyc files
        run_once(cmd)
    for _ in range(runs):
        for name, cmd in CASES.items():
            samples[name].append(run_once(cmd))
    print(f"{runs} runs each, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, Python "
          f"{sys.version.split()[0]}")
    base_ms = statistics.median(w for w, _ in samples[next(iter(CASES))]) * 1000
    print(f"{'command':42} {'median ms':>9} {'min ms':>7} {'x base':>7} {'peak MB':>8}  goal")
    for name, values in samples.items():
        median_ms = statistics.median(w for w, _ in values) * 1000
        minimum_ms = min(w for w, _ in values) * 1000
        peak = max(m for _, m in values)
        verdict = "" if name.startswith("python") else \
            ("ok" if median_ms <= GOAL_MS and peak <= GOAL_MB else f"over ({GOAL_MS} ms, {GOAL_MB} MB)")
        print(f"{name:42} {median_ms:9.0f} {minimum_ms:7.0f} {median_ms / base_ms:7.1f} {peak:8.1f}  {verdict}")
    for name, cmd in list(CASES.items())[1:]:
        heavy = heavy_modules(cmd)
        print(f"heavy imports in {name!r}: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
