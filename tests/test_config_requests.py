"""Request documents: exact bodies, Vertex pool layout, migration both ways, and schema validation of
everything mlsubmit can generate across the machine table."""

from __future__ import annotations

import pytest

from mlsubmit.images import catalog as images

from mlsubmit.jobspec import machines

from mlsubmit.jobspec import drafts, requests
from mlsubmit.jobspec.discovery import schemas, validate
from mlsubmit.errors import UsageError
from mlsubmit.jobspec.spec import JobSpec, Pool
from mlsubmit.jobspec.spec_input import RoleDraft, SpecDraft, build_spec

IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-{}.2-17.py310:latest"


@pytest.fixture
def cluster() -> JobSpec:
    return build_spec(SpecDraft(chief=RoleDraft(machine_type="n1-standard-8", accelerator_count="2"),
                                worker=RoleDraft(count="2"), ps=RoleDraft(count="1"), job_name="census_1",
                                labels=(("team", "ml"),), args=("--epochs", "3"), job_dir="gs://bkt/census",
                                max_runtime="2h", package_uris=("gs://bkt/trainer-0.1.0.tar.gz",)))


def test_vertex_custom_job_body(cluster):
    """No TensorFlow prebuilt training image is served any more: by default the package runs on the public
    tensorflow/tensorflow image as a custom container that installs it from /gcs/ and runs the module with exactly the
    user's arguments, after TensorBoard (which TensorFlow 2.21 no longer installs and the prebuilt images carried)."""
    script = ("set -e; python -m pip install --no-cache-dir --disable-pip-version-check 'tensorboard~=2.21.0'; "
              "python -m pip install --no-cache-dir --disable-pip-version-check /gcs/bkt/trainer-0.1.0.tar.gz; "
              'exec python -m trainer.task "$@"')
    container = {"command": ["sh", "-c", script, "python-package"], "args": ["--epochs", "3"]}
    gpu_machine = {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 2}
    assert requests.vertex_custom_job(cluster) == {
        "displayName": "census_1", "labels": {"team": "ml"},
        "jobSpec": {"workerPoolSpecs": [
            {"machineSpec": gpu_machine, "replicaCount": "1",
             "containerSpec": {"imageUri": "tensorflow/tensorflow:2.21.0-gpu", **container}},
            {"machineSpec": gpu_machine, "replicaCount": "2",
             "containerSpec": {"imageUri": "tensorflow/tensorflow:2.21.0-gpu", **container}},
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
             "containerSpec": {"imageUri": "tensorflow/tensorflow:2.21.0", **container}}],
            "baseOutputDirectory": {"outputUriPrefix": "gs://bkt/census"}, "scheduling": {"timeout": "7200s"}}}


def test_a_served_prebuilt_image_keeps_the_python_package_spec_and_a_carrier_body_reads_back(cluster):
    sklearn = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"
    pools = requests.vertex_custom_job(cluster.replace(executor_image=sklearn))["jobSpec"]["workerPoolSpecs"]
    assert [pool["pythonPackageSpec"]["executorImageUri"] for pool in pools] == [sklearn] * 3
    assert pools[0]["pythonPackageSpec"]["packageUris"] == ["gs://bkt/trainer-0.1.0.tar.gz"]
    draft, notes = drafts.draft_from_vertex(requests.vertex_custom_job(cluster))
    back = build_spec(draft)
    assert (back.package_uris, back.args, back.python_module) == (cluster.package_uris, cluster.args, "trainer.task")
    assert requests.vertex_custom_job(back.replace(job_name="census_1", labels=cluster.labels)) == \
        requests.vertex_custom_job(cluster)
    assert not any("containerSpec" in note for note in notes)


def test_env_goes_to_every_vertex_pool_round_trips_and_is_refused_for_legacy(cluster):
    with_env = cluster.replace(env=(("LOG_LEVEL", "debug"), ("SEED", "1")))
    pools = requests.vertex_custom_job(with_env)["jobSpec"]["workerPoolSpecs"]
    assert all(p["containerSpec"]["env"] == [{"name": "LOG_LEVEL", "value": "debug"}, {"name": "SEED", "value": "1"}]
               for p in pools)
    draft, notes = drafts.draft_from_vertex(requests.vertex_custom_job(with_env))
    assert build_spec(draft).env == with_env.env and not any("env" in note for note in notes)
    with pytest.raises(UsageError, match="legacy job sets no environment variables") as error:
        requests.legacy_job(with_env)
    assert len(error.value.one_line().splitlines()) == 1


def test_legacy_job_body(cluster):
    assert requests.legacy_job(cluster) == {"jobId": "census_1", "labels": {"team": "ml"}, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-8",
        "masterConfig": {"acceleratorConfig": {"count": "2", "type": "NVIDIA_TESLA_T4"}},
        "workerCount": "2", "workerType": "n1-standard-8",
        "workerConfig": {"acceleratorConfig": {"count": "2", "type": "NVIDIA_TESLA_T4"}},
        "parameterServerCount": "1", "parameterServerType": "n1-standard-4",
        "region": "us-central1", "runtimeVersion": "2.11", "pythonVersion": "3.7", "pythonModule": "trainer.task",
        "args": ["--epochs", "3"], "jobDir": "gs://bkt/census", "packageUris": ["gs://bkt/trainer-0.1.0.tar.gz"],
        "scheduling": {"maxRunningTime": "7200s"}}}


def test_skipped_pools_are_empty_and_trailing_ones_left_out():
    evaluators_only = JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-4"),
                              evaluator=Pool("evaluator", "n1-standard-4", 1))
    pools = requests.vertex_job_spec(evaluators_only)["workerPoolSpecs"]
    assert [bool(p) for p in pools] == [True, False, False, True]
    assert len(requests.vertex_job_spec(JobSpec())["workerPoolSpecs"]) == 1


def test_bodies_need_a_name():
    with pytest.raises(UsageError, match="--job-name"):
        requests.vertex_custom_job(JobSpec())
    with pytest.raises(UsageError, match="--job-name"):
        requests.legacy_job(JobSpec())


def test_tpu_becomes_pool_0_on_vertex():
    document, notes = requests.config_document(build_spec(SpecDraft(tier="BASIC_TPU")), "vertex")
    assert document["workerPoolSpecs"][0]["machineSpec"] == {"machineType": "cloud-tpu", "acceleratorType": "TPU_V2",
                                                             "acceleratorCount": 8}
    assert len(document["workerPoolSpecs"]) == 1
    assert notes[0] == "chief: Vertex AI runs the program on the TPU VM (pool 0); the chief's n1-standard-4 is dropped"
    assert notes[1].startswith("this file names no package, and Vertex AI refuses a pythonPackageSpec without one")
    assert document["workerPoolSpecs"][0]["pythonPackageSpec"]["executorImageUri"] == \
        "us-docker.pkg.dev/vertex-ai/training/tf-tpu.2-15.cp310:latest"


def test_legacy_to_vertex_says_what_could_not_be_mapped():
    legacy = {"jobId": "census_1", "labels": {"team": "ml"}, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "complex_model_m_gpu", "workerType": "complex_model_m_gpu",
        "workerCount": "2", "parameterServerType": "large_model", "parameterServerCount": "1",
        "masterConfig": {"tpuTfVersion": "2.11"}, "region": "us-central1", "runtimeVersion": "2.11",
        "pythonVersion": "3.7", "pythonModule": "trainer.task", "jobDir": "gs://bkt/census",
        "scheduling": {"maxRunningTime": "7200s", "maxWaitTime": "60s"}, "hyperparameters": {"maxTrials": 4}}}
    draft, unmapped = drafts.draft_from_legacy(legacy)
    assert unmapped == [
        "trainingInput.masterConfig.tpuTfVersion: Vertex AI picks the TPU software from the executor image; "
        "not mapped",
        "trainingInput.hyperparameters: hyperparameter tuning is not part of a JobSpec (mlsubmit config writes it as "
        "a HyperparameterTuningJob); not mapped",
        "trainingInput.scheduling.maxWaitTime: has no place in a JobSpec; not mapped"]
    spec = build_spec(draft)
    document, notes = requests.config_document(spec, "vertex")
    assert [(p["machineSpec"], p["replicaCount"]) for p in document["workerPoolSpecs"]] == [
        ({"machineType": "n1-standard-16", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 4}, "1"),
        ({"machineType": "n1-standard-16", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 4}, "2"),
        ({"machineType": "n1-highmem-8"}, "1")]
    assert notes[0] == ("chief: legacy machine type complex_model_m_gpu becomes n1-standard-16 + 4 NVIDIA_TESLA_T4 "
                        "on Vertex AI (NVIDIA_TESLA_K80 reached end of support on Vertex AI)")
    assert document["workerPoolSpecs"][0]["pythonPackageSpec"]["executorImageUri"] == \
        "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-11:latest"  # pythonVersion 3.7: the Python 3.7 image
    assert requests.legacy_config(spec)["trainingInput"]["masterType"] == "complex_model_m_gpu"


def test_vertex_round_trips_through_a_spec(cluster):
    document = requests.vertex_custom_job(cluster)
    draft, unmapped = drafts.draft_from_vertex(document)
    assert unmapped == []
    again = build_spec(draft)
    assert requests.vertex_custom_job(again) == document
    # the prebuilt image stands for its TensorFlow version; everything else is the same spec
    assert again.runtime_version == images.DEFAULT_TENSORFLOW
    assert again.replace(runtime_version=None) == cluster


def test_vertex_to_legacy_fails_where_legacy_has_no_such_gpu():
    spec = build_spec(drafts.draft_from_vertex({"workerPoolSpecs": [
        {"machineSpec": {"machineType": "a3-highgpu-8g", "acceleratorType": "NVIDIA_H100_80GB",
                         "acceleratorCount": 8}, "replicaCount": "1"}]})[0])
    with pytest.raises(UsageError, match="NVIDIA_H100_80GB .chief a3-highgpu-8g. is not available on legacy"):
        requests.config_document(spec, "legacy")


def test_the_table_agrees_with_the_discovery_enums():
    legacy_enum = schemas("ml.v1")["GoogleCloudMlV1__AcceleratorConfig"]["properties"]["type"]["enum"]
    vertex_enum = schemas("aiplatform.v1")["GoogleCloudAiplatformV1MachineSpec"]["properties"]["acceleratorType"]
    for name, accelerator in machines.ACCELERATORS.items():
        assert name in vertex_enum["enum"]
        assert (name in legacy_enum) == accelerator.legacy, name
    assert list(machines.TIERS) == schemas("ml.v1")["GoogleCloudMlV1__TrainingInput"]["properties"]["scaleTier"][
        "enum"]


def _table_specs():
    """One spec per (machine, accelerator, allowed count), per tier and per legacy machine type."""
    for tier in machines.TIERS:
        if tier != "CUSTOM":
            yield tier, SpecDraft(tier=tier)
    for machine in machines.MACHINES.values():
        if machine.family == "tpu":
            for accelerator in machine.accelerators:
                yield f"tpu-{machine.name}-{accelerator}", SpecDraft(
                    worker=RoleDraft(count=1, machine_type=machine.name, accelerator_type=accelerator),
                    region=machines.ACCELERATORS[accelerator].regions[0])
            continue
        if machine.is_legacy or not machine.accelerators:
            yield machine.name, SpecDraft(chief=RoleDraft(machine_type=machine.name), worker=RoleDraft(count=2))
            continue
        for accelerator, counts in machine.accelerators.items():
            region = machines.ACCELERATORS[accelerator].regions[0]
            for count in counts:
                yield f"{machine.name}-{count}x{accelerator}", SpecDraft(
                    chief=RoleDraft(machine_type=machine.name, accelerator_type=accelerator, accelerator_count=count),
                    ps=RoleDraft(count=1), region=region, job_name="j", labels=(("k", "v"),), job_dir="gs://bkt/j")


def test_every_generated_document_validates_against_the_discovery_schemas():
    checked = 0
    for name, draft in _table_specs():
        spec = build_spec(draft)
        body = requests.vertex_custom_job(spec.replace(job_name=spec.job_name or "j"))
        assert validate("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", body) == [], name
        if all(machines.ACCELERATORS[p.accelerator[0]].legacy for p in spec.pools.values() if p.accelerator):
            body = requests.legacy_job(spec.replace(job_name=spec.job_name or "j"))
            assert validate("ml.v1", "GoogleCloudMlV1__Job", body) == [], name
        checked += 1
    assert checked > 150
