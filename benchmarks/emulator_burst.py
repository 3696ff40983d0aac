"""A burst of clients against the training-service emulator: 200 connections at once, each `GET …/customJobs?
pageSize=1`, timed until the last answer, beside the same emulator with last round's way of telling each peer's
owner (every row of /proc/net/tcp read per connection) and with that and socketserver's listen backlog of 5 (main
at 9d9e396, where 4–89 of 200 clients went unanswered within 60 s).

    python benchmarks/emulator_burst.py [--clients 200] [--runs 3] [--deadline 60]

Everything is real: `mlsubmit emulator` as a subprocess beside a fake-gcs-server, the clients raw HTTP/1.1 over
asyncio in this process. The baselines are the same emulator with `mlsubmit.emulator.peers.owner` pointed at the
kept `owner_from_table` (and `EmulatorServer.request_queue_size` at 5) before it starts.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.burst import burst  # noqa: E402
from support.training_emulator import start_emulator_command, stop_emulator_command  # noqa: E402

from mlsubmit.emulator.gcs_emulator import GcsEmulator  # noqa: E402

PATH = "/v1/projects/bench-project/locations/us-central1/customJobs?pageSize=1"
START = ("import runpy, sys\n"
         "from mlsubmit.emulator import peers, server\n"
         "{patch}\n"
         "sys.argv = ['mlsubmit', *sys.argv[1:]]\n"
         "runpy.run_module('mlsubmit', run_name='__main__')\n")
VARIANTS = {  # name -> what is changed before the emulator starts
    "this version (sock_diag, backlog 1024)": "",
    "whole /proc/net/tcp per connection": "peers.owner = peers.owner_from_table",
    "main 9d9e396 (whole table, backlog 5)": "peers.owner = peers.owner_from_table\n"
                                              "server.EmulatorServer.request_queue_size = 5",
}


def run_variant(patch: str, gcs: str, tmp: Path, clients: int, runs: int, deadline: float) -> list:
    home = tmp / f"home-{abs(hash(patch))}"
    home.mkdir()
    argv = [sys.executable, "-c", START.format(patch=patch), "emulator", "--port", "0", "--quiet",
            "--gcs-endpoint", gcs]
    process, said = start_emulator_command(argv, home, env={**os.environ, "MLSUBMIT_HOME": str(home)})
    try:
        endpoint = next(word for word in said.split() if word.startswith("http://127.0.0.1:"))
        burst(endpoint, PATH, 5, deadline)  # a first request warms the routes
        return [burst(endpoint, PATH, clients, deadline) for _ in range(runs)]
    finally:
        stop_emulator_command(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds a client waits for its answer")
    parser.add_argument("--quick", action="store_true", help="50 clients, 1 run, no backlog-5 baseline (the suite)")
    args = parser.parse_args()
    variants = dict(VARIANTS)
    if args.quick:
        args.clients, args.runs, args.deadline = 50, 1, 20.0
        variants.popitem()  # its dropped connections wait out SYN retries: a minute
    print(f"# {args.clients} concurrent GET customJobs?pageSize=1, {args.runs} run(s) each, deadline "
          f"{args.deadline:.0f} s; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}")
    print("| emulator | answered (worst run) | slowest answer, median (worst) |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, GcsEmulator() as gcs:
        for name, patch in variants.items():
            bursts = run_variant(patch, gcs.endpoint, Path(tmp), args.clients, args.runs, args.deadline)
            answered = min(b.answered for b in bursts)
            slowest = [b.slowest for b in bursts]
            print(f"| {name} | {answered}/{args.clients} | {statistics.median(slowest):.2f} s "
                  f"({max(slowest):.2f} s) |", flush=True)


if __name__ == "__main__":
    main()
