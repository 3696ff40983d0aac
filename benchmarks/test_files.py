"""Wall time of test files as they are here beside the same files at a baseline git ref, in one run, interleaved.

A test-speed change is measured against its baseline on the same machine at the same time: the baseline's
versions of the files (`git show REF:PATH`) are copied next to them as tests/test_zz_baseline_*.py and each
variant runs in its own `pytest -n 0` process, baseline and current one after the other (then the other way round), `--repeats` times. Both
run against this checkout's product code, so only the tests differ. The load average is printed with each run:
on a shared machine, compare only figures taken in the same run.

    python benchmarks/test_files.py tests/test_cost_preemption.py [more files] [--base main] [--repeats 1] [--current-first]
                                    [-- extra pytest arguments, e.g. -k preempted]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import tempfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def baseline_copies(files: list[str], ref: str) -> list[Path]:
    """Each file's content at `ref`, written beside it under a name pytest collects; a file new since `ref` has none."""
    copies = []
    for name in files:
        shown = subprocess.run(["git", "show", f"{ref}:{name}"], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode != 0:
            continue
        copy = ROOT / Path(name).parent / f"test_zz_baseline_{Path(name).name.removeprefix('test_')}"
        copy.write_text(shown.stdout)
        copies.append(copy)
    return copies


def timed_pytest(files: list[str], extra: list[str]) -> tuple[float, str, str]:
    """(wall seconds, pytest's last line, the load average when it started) of one `pytest -n 0` run."""
    load = "%.1f %.1f %.1f" % os.getloadavg()
    started = time.monotonic()
    # a session of its own: run from inside a test session, the inner one would take the outer one's processes
    # (this script among them) for its own leftovers (tests/support/leftovers.py) and stop them
    env = {k: v for k, v in os.environ.items() if k not in ("MLSUBMIT_TEST_SESSION", "PYTEST_XDIST_WORKER")}
    with tempfile.TemporaryDirectory(prefix="bench-test-files-") as scratch:  # its tmp_path folders, removed after
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                               "--basetemp", str(Path(scratch) / "pytest"), *files, *extra],
                              cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.monotonic() - started
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    return wall, last, load


def main(argv: list[str]) -> int:
    own, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="test files, relative to the checkout's root")
    parser.add_argument("--base", default="main", help="the git ref whose versions are the baseline")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each; the order alternates run by run")
    parser.add_argument("--current-first", action="store_true", help="start with the current files")
    parser.add_argument("--quick", action="store_true", help="one run of each: that the benchmark runs")
    args = parser.parse_args(own)
    if args.quick:
        args.repeats = 1
    copies = baseline_copies(args.files, args.base)
    print(f"{platform.node()}: {os.cpu_count()} cores; baseline {args.base}; pytest -n 0 {' '.join(extra)}",
          flush=True)
    walls: dict[str, list[float]] = {"baseline": [], "current": []}
    try:
        variants = [("baseline", [str(c.relative_to(ROOT)) for c in copies]), ("current", args.files)]
        for repeat in range(args.repeats):
            for variant, files in variants[::-1] if (repeat % 2 == 0) == args.current_first else variants:
                wall, last, load = timed_pytest(files, extra)
                walls[variant].append(wall)
                print(f"{variant:9} {wall:7.1f} s  (load {load})  {last}", flush=True)
    finally:
        for copy in copies:
            copy.unlink(missing_ok=True)
    base, current = statistics.median(walls["baseline"]), statistics.median(walls["current"])
    print(f"median: baseline {base:.1f} s, current {current:.1f} s, current/baseline {current / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
