"""The command sent is the command run: the emulator runs a custom container's command as it was sent, on the image's
environment, so what mlsubmit (or anyone) writes into a containerSpec fails here when it would fail in the cloud.

A trainer that requires its own `--extra-packages` (tests/fixtures/trainers/requires_extra: helperpkg 0.3, on no
package index) runs through mlsubmit, which installs the extra before the trainer; the same job written by hand with
the trainer installed first, sent with the real gcloud CLI, fails with pip's own error, as it fails in the cloud.

Heavy: the default image's environment (TensorFlow 2.21, built once in the session's images dir).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

pytest_plugins = ["support.training_emulator"]
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "trainers" / "requires_extra"
PIP = "python -m pip install --no-cache-dir --disable-pip-version-check"


@pytest.fixture
def image_emulator(image_training_emulator, gcs_emulator):
    """The module's image-environment emulator (one start for the module's tests), with a project and a bucket of
    this test's; the CLI on image environments too."""
    from support.submit_cli import Cloud

    bucket = f"cmd-{uuid.uuid4().hex[:10]}"
    gcs_emulator.create_bucket(bucket)
    cloud = Cloud(image_training_emulator, gcs_emulator, bucket)
    cloud.env["MLSUBMIT_IMAGE_ENV"] = "1"
    return cloud


def _copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "requires_extra"))


def test_a_trainer_that_requires_its_own_extra_package_runs_in_the_emulator_via_mlsubmit(image_emulator, tmp_path):
    project = _copy(tmp_path)
    run = image_emulator.run("train", "--package-path", str(project / "trainer"), "--extra-packages",
                             str(project / "helper" / "helperpkg"), "--", "--steps", "2", timeout=900)
    assert run.code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "requires_extra: helperpkg 0.3, loss 0.25" in run.stdout
    (job,) = image_emulator.vertex_jobs()
    script = job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"][2]
    installs = [step.split()[-1] for step in script.split("; ") if step.startswith(PIP)]
    assert [Path(path).name for path in installs[-2:]] == ["helperpkg-0.3.tar.gz", "trainer-0.1.tar.gz"], script
    lines = [e["textPayload"] for e in image_emulator.emulator.log_lines(job["name"].rsplit("/", 1)[-1],
                                                                          image_emulator.project)]
    assert any(line.startswith("Each replica runs the container command as sent, on image tensorflow/tensorflow:"
                               "2.21.0: Python 3.11") for line in lines), lines


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
def test_a_command_that_installs_the_trainer_before_its_extra_fails_in_the_emulator_as_in_the_cloud(
        image_emulator, tmp_path):
    from support.training_emulator import stage_package

    project = _copy(tmp_path)
    cloud = image_emulator
    helper = stage_package(project / "helper" / "helperpkg", cloud.gcs.endpoint, cloud.bucket)
    trainer = stage_package(project / "trainer", cloud.gcs.endpoint, cloud.bucket)
    mounted = {uri: "/gcs/" + uri[len("gs://"):] for uri in (helper, trainer)}
    # written by hand, in the wrong order: the trainer first, whose requirement helperpkg==0.3 is on no index
    script = "; ".join(["set -e", f"{PIP} {shlex.quote(mounted[trainer])}", f"{PIP} {shlex.quote(mounted[helper])}",
                        'exec python -m trainer.task "$@"'])
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
            "containerSpec": {"imageUri": "tensorflow/tensorflow:2.21.0", "command": ["sh", "-c", script,
                                                                                      "python-package"],
                              "args": ["--steps", "2"]}}
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump({"workerPoolSpecs": [pool]}))
    endpoint = cloud.emulator.endpoint + "/"
    env = {**cloud.env, "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM": endpoint,
           "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING": endpoint, "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true",
           "CLOUDSDK_CORE_PROJECT": cloud.project, "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
           "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}
    done = subprocess.run(["gcloud", "ai", "custom-jobs", "create", "--region", "us-central1", "--display-name",
                           "wrong-order", "--config", str(config), "--format=value(name)"], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    name = done.stdout.strip()
    job = cloud.emulator.wait(cloud.emulator.vertex_jobs().get(name=name).execute, timeout=600)
    lines = [e["textPayload"] for e in cloud.emulator.log_lines(name.rsplit("/", 1)[-1], cloud.project)]
    assert job["state"] == "JOB_STATE_FAILED", "\n".join(lines[-30:])
    assert job["error"]["message"].startswith("The replica workerpool0-0 exited with a non-zero status of 1"), job
    assert any("No matching distribution found for helperpkg==0.3" in line for line in lines), "\n".join(lines[-30:])
    assert not any("requires_extra: helperpkg" in line for line in lines)
    # the body kept is the one sent, byte for byte
    sent = cloud.emulator.vertex_jobs().get(name=name).execute()["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert sent["command"][2] == script and json.dumps(sent["args"]) == '["--steps", "2"]'
