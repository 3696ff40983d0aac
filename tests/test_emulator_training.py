"""The real trainer through the emulator: its sdist built with mlsubmit's packaging and staged to the GCS emulator,
one Vertex AI job and one legacy job submitted with google-api-python-client, both run to SUCCEEDED and leave
their artifacts, MANIFEST.json last, in the bucket."""

from __future__ import annotations

import json

import pytest
from support.training_emulator import ROOT, stage_packages

from mlsubmit.jobspec.requests import legacy_job, vertex_custom_job
from mlsubmit.jobspec.spec import JobSpec
from mlsubmit.images import carried

PROJECT = "train-project"
pytestmark = pytest.mark.slow

pytest_plugins = ["support.training_emulator"]  # fixtures: training_emulator, task_package, emulator_home


@pytest.fixture(scope="module")
def trainer_uris(gcs_emulator):
    """The bundled trainer's package URIs: mlsubmit-runtime's sdist, then the trainer's (it requires the runtime)."""
    gcs_emulator.create_bucket("emu-trainer")
    return stage_packages(ROOT / "trainer", gcs_emulator.endpoint, "emu-trainer")


def read_object(gcs_emulator, uri: str) -> bytes | None:
    import urllib.error
    import urllib.parse
    import urllib.request

    bucket, _, name = uri[len("gs://"):].partition("/")
    url = f"{gcs_emulator.endpoint}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read()
    except urllib.error.HTTPError:
        return None


def assert_artifacts(gcs_emulator, job_dir: str) -> None:
    """Every file MANIFEST.json lists is in the bucket with the size it lists."""
    manifest = json.loads(read_object(gcs_emulator, f"{job_dir}/MANIFEST.json"))
    listed = {entry["path"]: entry["size"] for entry in manifest["files"]}
    assert {"model/model.keras", "model/model.h5", "metrics.json", "history.json"} <= set(listed), manifest
    for path, size in listed.items():
        assert len(read_object(gcs_emulator, f"{job_dir}/{path}") or b"") == size, path


def test_a_vertex_and_a_legacy_trainer_job_succeed_and_write_artifacts(training_emulator, trainer_uris, gcs_emulator):
    vertex_dir, legacy_dir = "gs://emu-trainer/out/vertex", "gs://emu-trainer/out/legacy"
    body = vertex_custom_job(JobSpec(job_name="trainer-vertex", job_dir=vertex_dir, package_uris=trainer_uris,
                                     args=("--dry-run",)))
    # as Vertex AI users write it: no --job-dir; the trainer reads AIP_MODEL_DIR under baseOutputDirectory
    pool = body["jobSpec"]["workerPoolSpecs"][0]  # a pythonPackageSpec or the package on a public image
    carried.set_program(pool, {**carried.program(pool), "args": ["--dry-run"]})
    vertex = training_emulator.vertex_jobs()
    created = vertex.create(parent=f"projects/{PROJECT}/locations/us-central1", body=body).execute()
    legacy = training_emulator.legacy_jobs()
    legacy.create(parent=f"projects/{PROJECT}", body=legacy_job(JobSpec(
        job_name="trainer_legacy", job_dir=legacy_dir, package_uris=trainer_uris, args=("--dry-run",)))).execute()

    vertex_job = training_emulator.wait(vertex.get(name=created["name"]).execute, timeout=300)
    legacy_job_ = training_emulator.wait(legacy.get(name=f"projects/{PROJECT}/jobs/trainer_legacy").execute,
                                         timeout=300)
    assert vertex_job["state"] == "JOB_STATE_SUCCEEDED", vertex_job.get("error")
    assert legacy_job_["state"] == "SUCCEEDED", legacy_job_.get("errorMessage")
    assert_artifacts(gcs_emulator, vertex_dir)
    assert_artifacts(gcs_emulator, legacy_dir)
    chief_lines = [e["textPayload"] for e in training_emulator.log_lines("trainer_legacy", PROJECT,
                                                                        'resource.labels.task_name="master-replica-0"')]
    assert chief_lines and any(legacy_dir in line for line in chief_lines), chief_lines[-20:]
