"""`mlsubmit train` through the CLI against the training-service emulator and a real GCS emulator, with the
real trainer (`--dry-run`: synthetic data, two steps): a chief + worker cluster on Vertex AI and a job with 2 GPUs on
legacy AI Platform (2 emulated devices: the mirrored path) each run to SUCCEEDED, stream their replicas' lines and
leave artifacts with MANIFEST.json. These are the real trainer's runs through the emulator (its sdist built by
mlsubmit's packaging, staged to the GCS emulator, sent through google-api-python-client), three TensorFlow
processes in all; tests/test_emulator_jobs.py drives the emulator's API with a program that costs no TensorFlow, and
tests/test_submit_checks.py checks a Vertex AI GPU job's body (machine type and accelerators) without running it."""

from __future__ import annotations

import re

import pytest
from mlsubmit.images import carried

pytest_plugins = ["support.training_emulator", "support.submit_cli"]
pytestmark = pytest.mark.slow
TRAINER = "trainer"


def job_dir_of(stderr: str) -> str:
    match = re.search(r"artifacts: (gs://\S+?)/ \(MANIFEST\.json written last: complete\)", stderr)
    assert match, stderr[-3000:]
    return match.group(1)


def test_a_cluster_on_vertex_and_a_gpu_job_on_legacy_stream_logs_to_succeeded_with_artifacts(cloud):
    vertex = cloud.start("train", "--machine-type", "n1-standard-4", "--workers", "1", "--stream-logs",
                         "--package-path", TRAINER, "--", "--dry-run")
    vertex.wait_for("accepted")  # staged (after the pre-flight): the legacy job finds the package there
    # a legacy job is checked on its own runtime (2.11, Python 3.7), which cannot take this Keras 3 trainer
    legacy_args = ["train", "--gpus", "2", "--tier", "CUSTOM", "--stream-logs", "--api", "legacy", "--job-dir",
                   f"gs://{cloud.bucket}/legacy_out", "--package-path", TRAINER]
    refused = cloud.run(*legacy_args, "--", "--dry-run")
    assert refused.code == 2 and refused.stderr.splitlines()[-1].startswith("error: requirement "), refused.stderr
    assert "Python 3.7, which tf-gpu.2-11 runs" in refused.stderr
    legacy = cloud.start(*legacy_args, "--skip-preflight", "--", "--dry-run")  # the emulator runs it all the same
    on_vertex, on_legacy = vertex.finish(), legacy.finish()

    assert on_vertex.code == 0, on_vertex.stderr[-3000:]
    assert "workerpool0-0 | chief-0: 2 machines: synchronous multi-worker" in on_vertex.stdout
    assert "workerpool1-0 | worker-0: 2 machines: synchronous multi-worker" in on_vertex.stdout
    assert "workerpool0-0 | mlsubmit trainer dry run finished" in on_vertex.stdout
    assert "service       | Job completed successfully." in on_vertex.stdout
    assert re.search(r"job \d+ \(trainer_\d{8}_\d{6}_[0-9a-f]{6}\) accepted", on_vertex.stderr)
    assert "(uploaded, " in on_vertex.stderr and "SUCCEEDED" in on_vertex.stderr
    assert cloud.assert_artifacts(job_dir_of(on_vertex.stderr))["files"]

    assert on_legacy.code == 0, on_legacy.stderr[-3000:]
    assert "master-replica-0 | mlsubmit trainer dry run finished" in on_legacy.stdout
    assert "(already staged, 0 bytes sent)" in on_legacy.stderr  # one upload per content hash
    assert "image: tf-gpu.2-11 (tensorflow 2.11, Python 3.7; legacy AI Platform's runtime)" in refused.stderr
    cloud.assert_artifacts(job_dir_of(on_legacy.stderr))

    (created,) = cloud.vertex_jobs()
    assert created["state"] == "JOB_STATE_SUCCEEDED"
    pools = created["jobSpec"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == ["1", "1"]
    assert pools[0]["machineSpec"] == {"machineType": "n1-standard-4"}
    assert carried.program(pools[0])["args"] == ["--dry-run"]  # the trainer found its dir through AIP_MODEL_DIR
    assert [uri.rsplit("/", 1)[1] for uri in carried.program(pools[0])["packageUris"]] == [
        "mlsubmit_runtime-0.1.0.tar.gz", "trainer-0.1.0.tar.gz"]  # the runtime the trainer requires, beside it
    (legacy_job,) = cloud.legacy_jobs()
    assert legacy_job["trainingInput"]["masterConfig"]["acceleratorConfig"] == {"count": "2",
                                                                                "type": "NVIDIA_TESLA_T4"}
    assert legacy_job["state"] == "SUCCEEDED"
    assert legacy_job["trainingInput"]["jobDir"] == f"gs://{cloud.bucket}/legacy_out"  # given: passed as --job-dir
    assert job_dir_of(on_legacy.stderr) == f"gs://{cloud.bucket}/legacy_out"
