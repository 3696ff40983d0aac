"""#32 inputs that gave a traceback, left something behind or taught one thing per run: each is one line now, and
nothing is uploaded, written or left in a temporary folder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app

pytest_plugins = ["support.training_emulator", "support.submit_cli"]
ROOT = Path(__file__).resolve().parent.parent


def _mlsubmit(*args: str, env: dict, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlsubmit", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd or ROOT)


def _bare_env(tmp_path: Path) -> dict:
    """No project, region or bucket from anywhere: no MLSUBMIT_*/CLOUDSDK_* variables, an empty gcloud config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLSUBMIT_", "CLOUDSDK_"))}
    return {**env, "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "NO_COLOR": "1",
            "MLSUBMIT_HOME": str(tmp_path / "home")}


def test_a_dry_run_without_project_region_and_bucket_names_all_three_in_one_line(tmp_path):
    done = _mlsubmit("train", "--package-path", "trainer", "--dry-run", env=_bare_env(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: no project, region or staging bucket set for the cloud job; pass --project PROJECT, --region REGION, "
        "--staging-bucket gs://BUCKET, or export MLSUBMIT_PROJECT=PROJECT, MLSUBMIT_REGION=REGION, "
        "MLSUBMIT_STAGING_BUCKET=gs://BUCKET"]
    with_dir = _mlsubmit("train", "--package-path", "trainer", "--dry-run", "--job-dir", "gs://my-bucket/run",
                         env=_bare_env(tmp_path))  # a gs:// job dir stands in for the bucket
    assert with_dir.stderr.splitlines()[-1].startswith("error: no project or region set for the cloud job")


@pytest.mark.parametrize("verb", ["describe", "cancel", "logs", "wait"])
def test_an_unknown_job_named_by_its_resource_name_is_one_line(verb, cloud):
    name = f"projects/{cloud.project}/locations/us-central1/customJobs/1234567890123456789"
    done = cloud.run("jobs", verb, name)
    assert done.code == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: no Vertex AI custom job {name!r} in projects/{cloud.project}/"
                                        "locations/us-central1; see `mlsubmit jobs list --api vertex`; for a job on "
                                        "the other API add --api legacy"]


def test_train_against_an_endpoint_that_does_not_answer_uploads_nothing(cloud, task_project):
    with socket.socket() as taken:  # a port of 127.0.0.1 that nothing serves
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
    done = cloud.run("train", "--package-path", task_project, "--python-module", "tinypkg.task", "--skip-preflight",
                     "--job-name", "nowhere", "--endpoint", f"http://127.0.0.1:{port}", MLSUBMIT_RETRY_DEADLINE="2")
    assert done.code == 2, done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"error: cannot list Vertex AI custom jobs: no answer from "
                                                   f"http://127.0.0.1:{port} within ")
    assert "package" not in done.stderr and cloud.objects() == []  # nothing staged


def test_the_emulator_skips_a_job_record_without_its_times_and_leaves_no_temp_folder_on_a_busy_port(
        tmp_path, gcs_emulator):
    from support.training_emulator import TrainingEmulator

    data = tmp_path / "data"
    (data / "jobs").mkdir(parents=True)
    (data / "jobs" / "x.json").write_text(json.dumps({
        "name": "projects/p/locations/us-central1/customJobs/1", "api": "vertex", "job_id": "1", "project": "p",
        "body": {}, "state": "SUCCEEDED"}))
    with TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=tmp_path / "home", data_dir=data) as emulator:
        said = emulator.stderr_path.read_text()
        assert "warning: skipped a damaged file in --data-dir: " in said and "x.json: expected an RFC 3339 " \
            "timestamp" in said, said
        port = int(emulator.endpoint.rsplit(":", 1)[1])
        scratch = tmp_path / "tmp"
        scratch.mkdir()
        busy = _mlsubmit("emulator", "--port", str(port), "--gcs-endpoint", gcs_emulator.endpoint,
                         env={**os.environ, "TMPDIR": str(scratch), "NO_COLOR": "1"})
        assert busy.returncode == 2 and busy.stderr.splitlines()[-1].startswith(
            f"error: invalid value for --port: received {port}; expected a free port of 127.0.0.1"), busy.stderr
        assert list(scratch.iterdir()) == []  # no empty work folder left behind


def test_a_manifest_nested_fifty_thousand_deep_is_one_line(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "MANIFEST.json").write_text("[" * 50_000 + "]" * 50_000)
    import numpy as np

    np.savez(tmp_path / "x.npz", x_test=np.zeros((2, 4), dtype="float32"))
    result = CliRunner().invoke(app, ["predict", str(job), "-i", str(tmp_path / "x.npz")])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"error: job dir {job} is corrupt: MANIFEST.json cannot be read (nested too "
                                          "deeply to be a manifest); a file changed after training; re-run training "
                                          "or restore the file"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another user")
def test_the_emulator_serves_only_its_own_user(cloud):
    """It runs every job it accepts as the user who started it: another local account (nobody) is refused, before
    anything is read, with Google's error JSON."""
    port = int(cloud.emulator.endpoint.rsplit(":", 1)[1])
    client = ("import socket\n"
              f"s = socket.create_connection(('127.0.0.1', {port}))\n"
              "s.sendall(b'POST /v1/projects/p/locations/us-central1/customJobs HTTP/1.1\\r\\nHost: x\\r\\n"
              "Content-Type: application/json\\r\\nContent-Length: 2\\r\\n\\r\\n{}')\n"
              "print(s.recv(65536).decode())\n")

    def nobody() -> None:
        os.setgid(65534)
        os.setuid(65534)

    python = next(p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p))
    done = subprocess.run([python, "-I", "-S", "-c", client], preexec_fn=nobody, capture_output=True, text=True,
                          timeout=30)
    assert done.stdout.startswith("HTTP/1.1 403 Forbidden"), done
    assert '"status": "PERMISSION_DENIED"' in done.stdout and "serves only the user who started it" in done.stdout
    assert cloud.vertex_jobs() == []  # and as the emulator's own user, it answers
