"""The training-service emulator as the tests use it: a real `python -m mlsubmit emulator` subprocess on a free
port of 127.0.0.1, next to the session's GCS emulator, and google-api-python-client built from its shipped
discovery documents against it.

    with TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=tmp / "home") as emulator:
        jobs = emulator.client("aiplatform", "v1").projects().locations().customJobs()
        emulator.arm_faults(status=503, count=2)

Fixtures for test modules (`pytest_plugins = ["support.training_emulator"]`): `emulator_home` (one
MLSUBMIT_HOME per session, so the venvs the emulator builds for a package are reused), `training_emulator` (one
emulator per module), `image_training_emulator` (one per module, its jobs on image environments) and `task_package`
(a staged package whose task costs no TensorFlow: TASK_PY).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from mlsubmit.local.children import popen_kwargs

ROOT = Path(__file__).resolve().parents[2]
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"}
_READY = re.compile(r"Training-service emulator on (http://127\.0\.0\.1:\d+)")


def build_client(api: str, version: str, endpoint: str):
    """A googleapiclient resource for `api` from its shipped discovery document, pointed at `endpoint`."""
    from google.auth.credentials import AnonymousCredentials
    from googleapiclient.discovery import build

    return build(api, version, static_discovery=True, credentials=AnonymousCredentials(),
                 client_options={"api_endpoint": endpoint})


class TrainingEmulator:
    """`mlsubmit emulator --port 0` in a subprocess; stdout/stderr go to files under `home`."""

    def __init__(self, *, gcs_endpoint: str, home: str | os.PathLike, data_dir: str | os.PathLike | None = None,
                 max_running: int = 2, extra_args: tuple[str, ...] = ()):
        self.gcs_endpoint, self.home = gcs_endpoint, Path(home)
        self.data_dir, self.max_running, self.extra_args = data_dir, max_running, extra_args
        self.process: subprocess.Popen | None = None
        self.endpoint = ""
        self._clients: dict[tuple[str, str], Any] = {}

    def start(self, timeout: float = 60.0) -> "TrainingEmulator":
        self.home.mkdir(parents=True, exist_ok=True)
        self.stdout_path = self.home / f"emulator-{time.monotonic_ns()}.out"
        self.stderr_path = self.stdout_path.with_suffix(".err")
        cmd = [sys.executable, "-m", "mlsubmit", "emulator", "--port", "0", "--gcs-endpoint", self.gcs_endpoint,
               "--max-running", str(self.max_running), *self.extra_args]
        if self.data_dir is not None:
            cmd += ["--data-dir", str(self.data_dir)]
        env = {**os.environ, "MLSUBMIT_HOME": str(self.home), "STORAGE_EMULATOR_HOST": self.gcs_endpoint,
               "TF_CPP_MIN_LOG_LEVEL": "3"}
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.process = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=self.home,
                                            **popen_kwargs())  # it dies with the test session, whatever happens
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = _READY.search(self.stdout_path.read_text())
            if match:
                self.endpoint = match.group(1)
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the emulator did not start: {self.stderr_path.read_text()[-2000:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        """Stop the emulator (SIGTERM: gracefully; SIGKILL: a crash) and return its exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        code, self.process = self.process.returncode, None
        return code

    def __enter__(self) -> "TrainingEmulator":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- talking to it ----------------------------------------------------------------------------------------
    def client(self, api: str, version: str):
        key = (api, version)
        if key not in self._clients:
            self._clients[key] = build_client(api, version, self.endpoint)
        return self._clients[key]

    def vertex_jobs(self):
        return self.client("aiplatform", "v1").projects().locations().customJobs()

    def legacy_jobs(self):
        return self.client("ml", "v1").projects().jobs()

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.endpoint}/emulator/v1/{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def arm_faults(self, **faults: Any) -> dict:
        """POST /emulator/v1/faults, e.g. arm_faults(status=503, count=2) or arm_faults(drop_create_response=1)."""
        return self.admin("POST", "faults", faults)

    def processes(self, job: str) -> list[dict]:
        return self.admin("GET", f"processes?job={urllib.request.quote(job, safe='')}")["processes"]

    def raw(self, method: str, path: str, data: bytes | None = None,
            content_type: str = "application/json") -> tuple[int, dict]:
        """Send bytes as they are (malformed bodies); returns (status, decoded JSON answer)."""
        request = urllib.request.Request(f"{self.endpoint}{path}", data=data, method=method,
                                         headers={"Content-Type": content_type, "Authorization": "Bearer secret-xyz"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def wait(self, get, states: set[str] = TERMINAL, timeout: float = 120.0) -> dict:
        """Poll `get()` (a request factory's execute) until the job's state is one of `states`."""
        deadline = time.monotonic() + timeout
        while True:
            job = get()
            if job["state"] in states:
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job still {job['state']} after {timeout:.0f} s: {job}")
            time.sleep(0.1)

    def run_vertex_job(self, body: dict, timeout: float = 500.0,
                       parent: str = "projects/p/locations/us-central1") -> tuple[dict, list[str]]:
        """Create a Vertex AI CustomJob and wait for its end: (the job, the text of its log lines, in order)."""
        job = self.vertex_jobs().create(parent=parent, body=body).execute()
        job = self.wait(self.vertex_jobs().get(name=job["name"]).execute, timeout=timeout)
        lines = self.log_lines(job["name"].rsplit("/", 1)[-1], parent.split("/")[1])
        return job, [entry.get("textPayload", "") for entry in lines]

    def log_lines(self, job_id: str, project: str, extra_filter: str = "", page_size: int = 1000) -> list[dict]:
        """Every log entry of a job, through entries.list with gcloud's filter, following page tokens."""
        entries = self.client("logging", "v2").entries()
        query = f'resource.type="ml_job" AND resource.labels.job_id="{job_id}"'
        body: dict[str, Any] = {"resourceNames": [f"projects/{project}"], "orderBy": "timestamp asc",
                                "filter": f"{query} AND {extra_filter}" if extra_filter else query,
                                "pageSize": page_size}
        found = []
        while True:
            page = entries.list(body=body).execute()
            found += page.get("entries", [])
            if not page.get("nextPageToken"):
                return found
            body["pageToken"] = page["nextPageToken"]


# A task module for jobs that cost no TensorFlow: it prints what the service gave it, then sleeps or fails.
TASK_PY = '''\
import argparse, json, os, sys, time

parser = argparse.ArgumentParser(prog="tinypkg.task")
parser.add_argument("--lines", type=int, default=3)
parser.add_argument("--sleep", type=float, default=0)
parser.add_argument("--fail", action="store_true")
parser.add_argument("--job-dir")
args = parser.parse_args()
task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
me = "%s-%s" % (task.get("type"), task.get("index"))
names = ("TF_CONFIG", "CLUSTER_SPEC", "AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR",
         "CLOUD_ML_JOB_ID", "STORAGE_EMULATOR_HOST", "GREETING", "MLSUBMIT_EMULATE_DEVICES")
print("ENV " + json.dumps({name: os.environ.get(name) for name in names}))
print("ARGV " + json.dumps(sys.argv[1:]))
for i in range(args.lines):
    print("line %d of %s" % (i, me))
sys.stdout.flush()
time.sleep(args.sleep)
if args.fail and task.get("type") in ("chief", "master"):
    raise RuntimeError("boom in " + me)
'''


def start_emulator_command(argv: list[str], cwd: Path, *, env: dict | None = None,
                           timeout: float = 60.0) -> tuple[subprocess.Popen, str]:
    """`argv` (a whole `mlsubmit emulator …` command line) started in the background as a user starts it, Ctrl-C
    stopping it, its stdout and stderr together in cwd/out.txt; (the process, what it printed) once it is ready (its
    last start-up line names Ctrl-C). The caller stops it; a start that fails or stalls is killed and raised."""
    out = cwd / "out.txt"
    with open(out, "w") as handle:
        process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                   **popen_kwargs(default_sigint=True))
    deadline = time.monotonic() + timeout
    while "Ctrl-C" not in out.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise AssertionError(f"the emulator did not start: {out.read_text()[-3000:]}")
        time.sleep(0.05)
    return process, out.read_text()


def stop_emulator_command(process: subprocess.Popen, timeout: float = 30.0) -> int:
    """Stop what `start_emulator_command` started as a user does (Ctrl-C), killing it if it does not end within
    `timeout`; its exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def stage_package(package_dir: Path, gcs_endpoint: str, bucket: str) -> str:
    """Build the sdist of `package_dir` with mlsubmit's packaging and stage it to gs://bucket; returns its URI."""
    return stage_packages(package_dir, gcs_endpoint, bucket)[-1]


def stage_packages(package_dir: Path, gcs_endpoint: str, bucket: str) -> tuple[str, ...]:
    """`stage_package`, with mlsubmit-runtime's sdist staged first when the package uses it (as `mlsubmit train`
    lists them in packageUris); returns the URIs in that order."""
    from mlsubmit.packaging import build_sdist, plan_sdist, stage
    from mlsubmit.packaging.runtime_dist import build_runtime, needs_runtime

    saved = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = gcs_endpoint
    try:
        dist = package_dir.parent / "dist"
        sdists = [build_runtime(dist)] if needs_runtime(plan_sdist(package_dir)) else []
        sdists.append(build_sdist(package_dir, dist_dir=dist))
        return tuple(stage(sdist, f"gs://{bucket}/staging").uri for sdist in sdists)
    finally:
        if saved is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = saved


@pytest.fixture(scope="session")
def emulator_home(tmp_path_factory):
    return tmp_path_factory.mktemp("emulator-home")


@pytest.fixture(scope="module")
def training_emulator(gcs_emulator, emulator_home):
    with TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=emulator_home) as emulator:
        yield emulator


@pytest.fixture(scope="module")
def image_training_emulator(gcs_emulator, images_home, tmp_path_factory):
    """One emulator per module whose jobs run on image environments (MLSUBMIT_IMAGE_ENV=1, the user's default), the
    suite's own (MLSUBMIT_IMAGES); a test that lists jobs uses a project of its own."""
    with pytest.MonkeyPatch.context() as patch:  # the emulator process's settings, read when it starts
        patch.setenv("MLSUBMIT_IMAGE_ENV", "1")
        patch.setenv("MLSUBMIT_IMAGES", str(images_home))
        with TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=tmp_path_factory.mktemp("emulator")) as emulator:
            yield emulator


@pytest.fixture(scope="module")
def task_package(gcs_emulator, tmp_path_factory):
    """(bucket, gs:// URI) of the staged TASK_PY package (tinypkg, module tinypkg.task)."""
    from support.tiny_package import make_project

    root = tmp_path_factory.mktemp("task-package")
    bucket = f"emu-{root.name.lower().replace('_', '-')[-20:]}"
    gcs_emulator.create_bucket(bucket)
    return bucket, stage_package(make_project(root / "proj", task=TASK_PY), gcs_emulator.endpoint, bucket)
