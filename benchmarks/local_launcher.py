"""What the one replica launcher adds to each `train --local` replica: a job of N replicas of a tiny module (it
prints its TF_CONFIG task and exits) run by the local runner twice per repeat, interleaved in one run —
  direct:   the runner starts `python -m MODULE` itself with the service's variables (how `--local` started replicas
            before the launcher was shared)
  launcher: the runner starts `python -I -S replica.py` per replica, which sets the variables and starts the module
            (how `--local` starts them now) —
and reports the median wall time of the whole job, the ratio to direct, and the cost per replica.

    python benchmarks/local_launcher.py [--replicas 4] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mlsubmit.jobspec.spec import JobSpec, Pool  # noqa: E402
from mlsubmit.local import local_job, workdir  # noqa: E402
from mlsubmit.local.local_run import replicas_to_start  # noqa: E402
from mlsubmit.local.runner import Replica, Runner  # noqa: E402

MODULE = "import json, os\nprint(json.loads(os.environ['TF_CONFIG'])['task'], flush=True)\n"


def direct(job, python: str, dirs, env) -> list[Replica]:
    base = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONSAFEPATH": "1", **env}
    return [Replica(r.name, r.role, (python, "-m", job.module, *r.args), {**base, **r.env}, str(dirs[r.name].path))
            for r in job.replicas]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 replicas, one repeat: that it runs (the suite)")
    options = parser.parse_args()
    if options.quick:
        options.replicas, options.repeats = 2, 1
    with tempfile.TemporaryDirectory(prefix="launcher-bench-") as tmp:
        tmp = Path(tmp)
        (tmp / "pkg").mkdir()
        (tmp / "pkg" / "benchmod.py").write_text(MODULE)
        env = {"PYTHONPATH": str(tmp / "pkg")}
        spec = JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-4"),
                       worker=Pool("worker", "n1-standard-4", options.replicas - 1)).replace(python_module="benchmod")
        times: dict[str, list[float]] = {"direct": [], "launcher": []}
        for _ in range(options.repeats):
            for kind in ("direct", "launcher"):
                job = local_job.plan(spec, api="vertex", job_id="bench", job_dir=str(tmp / "job"),
                                     ports=local_job.reserve_ports(options.replicas), gpus_here=0)
                dirs = workdir.replica_dirs(tmp / kind, [r.name for r in job.replicas])
                replicas = direct(job, sys.executable, dirs, env) if kind == "direct" else \
                    replicas_to_start(job, Path(sys.executable), env, dirs)
                lines: list[str] = []
                started = time.perf_counter()
                outcome = Runner(replicas, sink=lines.append).run()
                times[kind].append(time.perf_counter() - started)
                assert outcome.state == "SUCCEEDED" and len(lines) == options.replicas, lines
    base, through = statistics.median(times["direct"]), statistics.median(times["launcher"])
    print(f"{options.replicas} replicas, {options.repeats} repeats each, interleaved; load {os.getloadavg()[0]:.1f}")
    print("| start | median job wall time | × direct | added per replica |")
    print("| --- | --- | --- | --- |")
    print(f"| python -m (direct) | {base:.3f} s | 1.00 | — |")
    print(f"| through replica.py | {through:.3f} s | {through / base:.2f} | "
          f"{(through - base) / options.replicas * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
