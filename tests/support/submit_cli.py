"""Running `mlsubmit train` (cloud) and `mlsubmit jobs …` as a user does — real `python -m mlsubmit` processes —
against the training-service emulator and the session's GCS emulator.

Fixtures (`pytest_plugins = ["support.training_emulator", "support.submit_cli"]`):
- `cloud` — per test: a fresh project (so job lists are the test's own), a fresh staging bucket, the
  environment that points the CLI at both emulators, and helpers to run the CLI and read what it made;
- `task_project` — per module: the package directory of tests/support/training_emulator.TASK_PY (a program
  that prints, sleeps or fails without TensorFlow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mlsubmit.local import children

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


@dataclass
class Streaming:
    """A CLI process whose output is collected line by line while it runs."""

    process: subprocess.Popen
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for stream, sink in ((self.process.stdout, self.out), (self.process.stderr, self.err)):
            threading.Thread(target=lambda s=stream, k=sink: [k.append(line) for line in s], daemon=True).start()

    def wait_for(self, text: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.out + self.err):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"never saw {text!r}; stdout: {''.join(self.out)[-3000:]}\n"
                                     f"stderr: {''.join(self.err)[-3000:]}")
            time.sleep(0.05)

    def finish(self, timeout: float = 300.0) -> Run:
        code = self.process.wait(timeout=timeout)
        time.sleep(0.1)  # the reader threads drain the pipes
        return Run(code, "".join(self.out), "".join(self.err))


class Cloud:
    """One test's project, bucket and environment on the emulators."""

    def __init__(self, emulator: Any, gcs_emulator: Any, bucket: str):
        self.emulator, self.gcs, self.bucket = emulator, gcs_emulator, bucket
        self.project = f"proj-{uuid.uuid4().hex[:8]}"
        self.env = {**os.environ, "MLSUBMIT_API_ENDPOINT": emulator.endpoint, "MLSUBMIT_PROJECT": self.project,
                    "MLSUBMIT_REGION": "us-central1", "MLSUBMIT_STAGING_BUCKET": f"gs://{bucket}",
                    "STORAGE_EMULATOR_HOST": gcs_emulator.endpoint, "MLSUBMIT_POLL_INTERVAL": "0.2",
                    "MLSUBMIT_RETRY_INITIAL_DELAY": "0.05", "MLSUBMIT_RETRY_DEADLINE": "10", "NO_COLOR": "1",
                    "PYTHONUNBUFFERED": "1"}

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "mlsubmit", *args]

    def run(self, *args: str, timeout: float = 300.0, **env: str) -> Run:
        done = children.run(self.command(*args), capture_output=True, text=True, timeout=timeout,
                            env={**self.env, **env}, cwd=ROOT)  # a timeout kills its whole process group
        return Run(done.returncode, done.stdout, done.stderr)

    def start(self, *args: str, **env: str) -> Streaming:
        return Streaming(subprocess.Popen(self.command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, env={**self.env, **env}, cwd=ROOT,
                                          **children.popen_kwargs(default_sigint=True)))  # tests send Ctrl-C

    def json(self, *args: str) -> Any:
        run = self.run(*args, "--output", "json")
        assert run.code == 0, run.stderr
        return json.loads(run.stdout)

    # -- what exists, seen through the APIs directly -----------------------------------------------------------
    def vertex_jobs(self) -> list[dict]:
        answer = self.emulator.vertex_jobs().list(parent=f"projects/{self.project}/locations/us-central1").execute()
        return answer.get("customJobs", [])

    def legacy_jobs(self) -> list[dict]:
        return self.emulator.legacy_jobs().list(parent=f"projects/{self.project}").execute().get("jobs", [])

    def object(self, uri: str) -> bytes | None:
        bucket, _, name = uri[len("gs://"):].partition("/")
        url = f"{self.gcs.endpoint}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.read()
        except urllib.error.HTTPError:
            return None

    def objects(self) -> list[str]:
        url = f"{self.gcs.endpoint}/storage/v1/b/{self.bucket}/o"
        with urllib.request.urlopen(url, timeout=10) as response:
            return [item["name"] for item in json.loads(response.read()).get("items", [])]

    def assert_artifacts(self, job_dir: str) -> dict:
        """MANIFEST.json is in the job dir and every file it lists is there with the listed size."""
        raw = self.object(f"{job_dir}/MANIFEST.json")
        assert raw is not None, f"no MANIFEST.json in {job_dir}: {self.objects()}"
        manifest = json.loads(raw)
        listed = {entry["path"]: entry["size"] for entry in manifest["files"]}
        assert {"model/model.keras", "model/model.h5", "metrics.json"} <= set(listed), manifest
        for path, size in listed.items():
            assert len(self.object(f"{job_dir}/{path}") or b"") == size, path
        return manifest


@pytest.fixture
def cloud(training_emulator, gcs):
    gcs_emulator, bucket = gcs
    return Cloud(training_emulator, gcs_emulator, bucket)


@pytest.fixture(scope="module")
def task_project(tmp_path_factory):
    from support.tiny_package import make_project
    from support.training_emulator import TASK_PY

    return str(make_project(tmp_path_factory.mktemp("task-project") / "proj", task=TASK_PY))
