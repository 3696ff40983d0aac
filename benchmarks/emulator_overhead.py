"""What the training-service emulator adds to a job: a trivial job run through it beside the same program run
directly from the same venv, the one-off install of a new package, and request latency.

    python benchmarks/emulator_overhead.py [--jobs 10] [--requests 200]

Everything is real: a fake-gcs-server, `mlsubmit emulator` as a subprocess, the package built and staged with
mlsubmit's packaging, jobs submitted with google-api-python-client (static discovery documents).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.tiny_package import make_project  # noqa: E402
from support.training_emulator import TASK_PY, TrainingEmulator, stage_package  # noqa: E402

from mlsubmit.emulator.gcs_emulator import GcsEmulator  # noqa: E402
from mlsubmit.jobspec.requests import vertex_custom_job  # noqa: E402
from mlsubmit.jobspec.spec import JobSpec, Pool  # noqa: E402

PARENT = "projects/bench-project/locations/us-central1"


def job_python(home: Path) -> Path:
    """The python of the environment the emulator installed the job's package into (an image's job environment,
    or an isolated venv): the newest whose site-packages hold tinypkg. Job environments live under $MLSUBMIT_IMAGES
    when it is set (a shared cache of image environments), else under the emulator's home."""
    found = list(home.rglob("tinypkg-*.dist-info"))
    if os.environ.get("MLSUBMIT_IMAGES"):
        found += Path(os.environ["MLSUBMIT_IMAGES"]).glob("*/jobs/*/lib/python*/site-packages/tinypkg-*.dist-info")
    for installed in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True):
        root = next(parent for parent in installed.parents if (parent / "bin" / "python").exists())
        return root / "bin" / "python"
    raise SystemExit(f"no environment under {home} holds the benchmark's package")


def job_seconds(emulator: TrainingEmulator, uri: str) -> tuple[float, str]:
    """Wall seconds from create to SUCCEEDED as a client sees it (polling every 20 ms), and the job name."""
    body = vertex_custom_job(JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-4"), job_name="bench",
                                     package_uris=(uri,), python_module="tinypkg.task", args=("--lines", "0")))
    jobs = emulator.vertex_jobs()
    started = time.perf_counter()
    name = jobs.create(parent=PARENT, body=body).execute()["name"]
    while (state := jobs.get(name=name).execute()["state"]) not in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"):
        time.sleep(0.02)
    if state != "JOB_STATE_SUCCEEDED":
        raise SystemExit(f"the benchmark job failed: {jobs.get(name=name).execute()['error']}")
    return time.perf_counter() - started, name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="1 job, 20 requests: that it runs (the suite)")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.requests = 1, 20
    with tempfile.TemporaryDirectory() as tmp, GcsEmulator() as gcs:
        gcs.create_bucket("bench")
        uri = stage_package(make_project(Path(tmp) / "proj", task=TASK_PY), gcs.endpoint, "bench")
        with TrainingEmulator(gcs_endpoint=gcs.endpoint, home=Path(tmp) / "home", extra_args=("--quiet",)) as emu:
            first, _ = job_seconds(emu, uri)  # fetches the package and builds the venv
            through = [job_seconds(emu, uri)[0] for _ in range(args.jobs)]
            python = job_python(Path(tmp) / "home")
            env = {**os.environ, "TF_CONFIG": "{}", "PYTHONSAFEPATH": "1"}
            direct = []
            for _ in range(args.jobs):
                started = time.perf_counter()
                subprocess.run([str(python), "-m", "tinypkg.task", "--lines", "0"], env=env, check=True,
                               stdout=subprocess.DEVNULL, cwd=tmp)
                direct.append(time.perf_counter() - started)
            jobs = emu.vertex_jobs()
            name = jobs.list(parent=PARENT, pageSize=1).execute()["customJobs"][0]["name"]
            started = time.perf_counter()
            for _ in range(args.requests):
                jobs.get(name=name).execute()
            get_ms = (time.perf_counter() - started) / args.requests * 1000
    ours, base = statistics.median(through), statistics.median(direct)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"trivial job, create -> SUCCEEDED through the emulator (median of {args.jobs}): {ours * 1000:.0f} ms")
    print(f"the same program run directly from the same venv (median of {args.jobs}):   {base * 1000:.0f} ms")
    print(f"emulator overhead per job: {(ours - base) * 1000:.0f} ms (ratio {ours / base:.1f}x)")
    print(f"first job of a new package (fetch + offline venv install): {first:.1f} s")
    print(f"customJobs.get round trip (google-api-python-client, mean of {args.requests}): {get_ms:.1f} ms")


if __name__ == "__main__":
    main()
