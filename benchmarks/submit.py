#!/usr/bin/env python3
"""Time from invocation to an accepted job, against the training-service emulator: mlsubmit vs the usual script.

Baseline (what `gcloud ai-platform jobs submit training --package-path`, tensorflow/cloud and hand-written
scripts do on every submission), run as its own process like the CLI: `python setup.py sdist`, an upload of
the sdist under the job's own prefix with google-cloud-storage, googleapiclient built with its default
transport, `customJobs.create(...).execute(num_retries=3)`.
Ours: `mlsubmit train --async` (validate, content-addressed stage with the offline-install pre-flight the first
time only, create with a request id), and the Python API (`mlsubmit.cloud.submit`) for a sweep in one process.

Both submit the bundled trainer (26 files) to a `mlsubmit emulator` this script starts (with its own
fake-gcs-server); every accepted job is cancelled at once, untimed, so no training competes for the CPU.

    .venv/bin/python benchmarks/submit.py [--jobs 50] [--repeats 3]
    .venv/bin/python benchmarks/submit.py --quick        # the resubmission row, once: that it runs (the suite)

Every mlsubmit row runs with the caller's MLSUBMIT_HOME (its image environments, as a user's second submission
finds them), the CLI and the Python API alike; each submission is a new one (its own --request-id), so a re-run
never finds an earlier, cancelled job. The temporary folder (the emulator's home, the project copy) is removed.

Prints: first submission (nothing staged yet), resubmission of an unchanged package (median), N submissions
in a row (a sweep), each beside the baseline with the ratio, and the bytes each sends.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGION = "us-central1"


def baseline_once(bucket: str, project: str, endpoint: str, source: str) -> None:
    """One submission the usual way (runs in its own process: `submit.py --baseline-once …`)."""
    import hashlib

    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
    from googleapiclient.discovery import build

    job = f"baseline_{time.strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory() as dist:
        subprocess.run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", dist], cwd=source, check=True,
                       capture_output=True)
        (sdist,) = Path(dist).glob("*.tar.gz")
        digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
        client = storage.Client(project=project, credentials=AnonymousCredentials())
        name = f"{job}/{digest}/{sdist.name}"
        client.bucket(bucket).blob(name).upload_from_filename(str(sdist))
    jobs = build("aiplatform", "v1", static_discovery=True, credentials=AnonymousCredentials(),
                 client_options={"api_endpoint": endpoint}).projects().locations().customJobs()
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
            # a prebuilt image the service (and so the emulator) still accepts: every TensorFlow one is past its end
            # of availability; the job is cancelled at once, never run
            "pythonPackageSpec": {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
                                  "packageUris": [f"gs://{bucket}/{name}"], "pythonModule": "trainer.task",
                                  "args": ["--dry-run", f"--job-dir=gs://{bucket}/jobs/{job}"]}}
    body = {"displayName": job, "jobSpec": {"workerPoolSpecs": [pool],
                                            "baseOutputDirectory": {"outputUriPrefix": f"gs://{bucket}/jobs/{job}"}}}
    created = jobs.create(parent=f"projects/{project}/locations/{REGION}", body=body).execute(num_retries=3)
    print(created["name"].rsplit("/", 1)[-1])


class Bench:
    def __init__(self, work: Path):
        self.work = work
        self.source = work / "project"  # the trainer and its setup.py, as a user's project holds them
        shutil.copytree(ROOT / "trainer", self.source / "trainer", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(ROOT / "setup.py", self.source / "setup.py")
        self.process = subprocess.Popen([sys.executable, "-m", "mlsubmit", "emulator", "--port", "0", "--quiet",
                                         "--max-running", "1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, cwd=work, env={**os.environ, "MLSUBMIT_HOME": str(work / "home")})
        said = ""
        while "Cloud Storage:" not in said:
            said += self.process.stdout.readline()
        self.endpoint = re.search(r"emulator on (http://\S+)", said).group(1)
        self.gcs = re.search(r"Cloud Storage: (http://\S+)", said).group(1)
        self.project = "bench-project"  # a valid project id: the emulator refuses others, as Google does
        self.env = {**os.environ, "MLSUBMIT_API_ENDPOINT": self.endpoint, "STORAGE_EMULATOR_HOST": self.gcs,
                    "MLSUBMIT_PROJECT": self.project, "MLSUBMIT_REGION": REGION,
                    "CLOUDSDK_CONFIG": str(work / "gcloud"), "NO_COLOR": "1"}
        from mlsubmit.cloud.clients import Clients

        self.jobs = Clients(region=REGION, endpoint=self.endpoint).service("aiplatform").projects().locations() \
            .customJobs()

    def bucket(self) -> str:
        name = f"bench-{uuid.uuid4().hex[:10]}"
        request = urllib.request.Request(f"{self.gcs}/storage/v1/b?project={self.project}", method="POST",
                                         data=json.dumps({"name": name}).encode(),
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).close()
        return name

    def cancel(self, job_id: str) -> None:
        """Cancel an accepted job (untimed); one that already ended is left as it is."""
        from googleapiclient.errors import HttpError

        try:
            self.jobs.cancel(name=f"projects/{self.project}/locations/{REGION}/customJobs/{job_id}", body={}).execute()
        except HttpError as err:
            if err.resp.status != 400:  # 400 FAILED_PRECONDITION: it ended already
                raise

    def timed(self, command: list[str], **env: str) -> tuple[float, str, str]:
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env={**self.env, **env})
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"failed: {' '.join(command)}\n{done.stderr[-2000:]}")
        job_id = done.stdout.strip().splitlines()[-1]
        self.cancel(job_id)
        return seconds, job_id, done.stderr

    def ours(self, bucket: str, *extra: str) -> tuple[float, str]:
        seconds, _, said = self.timed([sys.executable, "-m", "mlsubmit", "train", "--async", "--package-path",
                                       str(self.source / "trainer"), "--staging-bucket", f"gs://{bucket}", *extra,
                                       "--request-id", uuid.uuid4().hex, "--", "--dry-run"])
        sent = re.search(r"^package \S+ \((uploaded, [\d,]+ bytes|already staged, 0 bytes sent)\)", said,
                         re.MULTILINE).group(1)  # the trainer's line, not mlsubmit_runtime's
        return seconds, sent

    def baseline(self, bucket: str) -> float:
        return self.timed([sys.executable, str(Path(__file__).resolve()), "--baseline-once", bucket, self.project,
                           self.endpoint, str(self.source)], STORAGE_EMULATOR_HOST=self.gcs)[0]

    def sweep_api(self, bucket: str, jobs: int) -> float:
        """N jobs from one process through the Python API: one client, the package staged once."""
        os.environ.update(STORAGE_EMULATOR_HOST=self.gcs, CLOUDSDK_CONFIG=str(self.work / "gcloud"))
        from mlsubmit.cloud import submit
        from mlsubmit.targets import target_for
        from mlsubmit.cloud.clients import Clients
        from mlsubmit.cloud.settings import resolve
        from mlsubmit.jobspec.spec import JobSpec

        started = time.perf_counter()
        settings = resolve(project=self.project, region=REGION, staging_bucket=f"gs://{bucket}",
                           endpoint=self.endpoint)
        service = target_for("vertex", Clients(region=REGION, endpoint=self.endpoint), project=self.project,
                              region=REGION)
        accepted = []
        for index in range(jobs):
            spec = JobSpec(region=REGION, args=("--dry-run", "--learning-rate", f"{0.001 * (index + 1):.3f}"))
            submission = submit.prepare(spec, api="vertex", settings=settings, package_path=self.source / "trainer",
                                        request_key=uuid.uuid4().hex)
            submit.stage(submission, check=index == 0)
            accepted.append(submit.submit(submission, service).job_id)
        seconds = time.perf_counter() - started
        for job_id in accepted:
            self.cancel(job_id)
        return seconds

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def machine() -> str:
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores ({model or 'unknown CPU'}), Python {platform.python_version()}"


def row(what: str, ours: float, baseline: float, note: str = "") -> None:
    ratio = baseline / ours if ours else float("nan")
    print(f"| {what} | {ours:.2f} s | {baseline:.2f} s | {ratio:.1f}× {'faster' if ratio >= 1 else 'slower'} | {note} |")


def resubmission(again: list[tuple[float, str]], base_again: list[float]) -> tuple[str, float, float, str]:
    return ("resubmission, unchanged package", statistics.median(s for s, _ in again), statistics.median(base_again),
            f"ours: {again[0][1]}; baseline uploads every time")


def quick_rows(bench: Bench) -> list[tuple[str, float, float, str]]:
    """The resubmission row beside its baseline with the fewest processes (--quick: that the harness runs)."""
    bucket = bench.bucket()
    bench.ours(bucket, "--skip-preflight")  # stages the package, untimed
    return [resubmission([bench.ours(bucket)], [bench.baseline(bucket)])]


def full_rows(bench: Bench, args, resubmissions: int) -> list[tuple[str, float, float, str]]:
    """Every row: (what, ours s, baseline s, note)."""
    warm = bench.bucket()  # untimed: pays for first imports and the emulator's first requests
    bench.ours(warm, "--skip-preflight")
    bench.baseline(warm)

    first = [bench.ours(bench.bucket()) for _ in range(args.repeats)]
    first_skip = [bench.ours(bench.bucket(), "--skip-preflight")[0] for _ in range(args.repeats)]
    base_first = [bench.baseline(bench.bucket()) for _ in range(args.repeats)]
    bucket = bench.bucket()
    bench.ours(bucket)
    again = [bench.ours(bucket) for _ in range(resubmissions)]
    base_again = [bench.baseline(bucket) for _ in range(resubmissions)]

    sweep_bucket, base_bucket = bench.bucket(), bench.bucket()
    started = time.perf_counter()
    sweep_sent = [bench.ours(sweep_bucket)[1] for _ in range(args.jobs)]
    sweep_cli = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(args.jobs):
        bench.baseline(base_bucket)
    sweep_base = time.perf_counter() - started
    sweep_api = bench.sweep_api(bench.bucket(), args.jobs)
    uploads = sum(1 for sent in sweep_sent if sent.startswith("uploaded"))
    return [("first submission (package not staged)", statistics.median(s for s, _ in first),
             statistics.median(base_first), f"ours includes the offline-install pre-flight; {first[0][1]}"),
            ("first submission, --skip-preflight", statistics.median(first_skip), statistics.median(base_first), ""),
            resubmission(again, base_again),
            (f"{args.jobs} submissions, one CLI process each", sweep_cli, sweep_base,
             f"ours uploaded the package {uploads} time(s), the baseline {args.jobs}"),
            (f"{args.jobs} submissions, Python API in one process", sweep_api, sweep_base,
             "one client, package staged once")]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--baseline-once":
        baseline_once(*sys.argv[2:6])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="the resubmission row alone, once, beside one baseline: that the benchmark runs")
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    resubmissions = args.repeats if args.quick else max(5, args.repeats)  # a cheap row: more samples, steadier
    sys.path.insert(0, str(ROOT))
    work = Path(tempfile.mkdtemp(prefix="bench-submit-"))
    bench = None
    try:
        bench = Bench(work)
        rows = quick_rows(bench) if args.quick else full_rows(bench, args, resubmissions)
    finally:
        if bench is not None:
            bench.stop()
        shutil.rmtree(work, ignore_errors=True)

    print(f"machine: {machine()}; emulator and fake-gcs-server on 127.0.0.1; medians of {args.repeats} "
          f"(resubmission: {resubmissions})")
    print("| to an accepted job | mlsubmit | baseline | ratio | notes |")
    print("| --- | --- | --- | --- | --- |")
    for what, ours, baseline, note in rows:
        row(what, ours, baseline, note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
