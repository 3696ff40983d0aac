"""Legacy configs as people wrote them, through `mlsubmit config --config OLD.yaml`: each shape with its exact
output in both formats. Every input field lands in the output (document or its gcloud comment line) or is named
in a warning."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from mlsubmit.images import carried
from mlsubmit.jobspec import drafts
from mlsubmit.cli import app
from mlsubmit.jobspec.discovery import validate
from mlsubmit.jobspec.spec_input import build_spec

IMAGES = "us-docker.pkg.dev/vertex-ai/training/"
CONTAINER = """\
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-highmem-8
  masterConfig:
    imageUri: gcr.io/my-project/trainer:v3
    containerCommand: [python, -m, trainer.task]
    acceleratorConfig: {count: 1, type: NVIDIA_TESLA_V100}
    diskConfig: {bootDiskType: pd-ssd, bootDiskSizeGb: 200}
  workerType: n1-highmem-8
  workerCount: 2
  workerConfig:
    imageUri: gcr.io/my-project/worker:v3
  region: europe-west4
  network: projects/12345/global/networks/default
  args: [--epochs, "5"]
  pythonModule: trainer.task
"""
STANDARD_TPU = """\
trainingInput:
  scaleTier: CUSTOM
  masterType: standard_tpu
  runtimeVersion: "2.12"
  pythonVersion: "3.8"
  region: us-central1
  pythonModule: trainer.task
  packageUris: [gs://bkt/t.tar.gz]
"""
OLD_RUNTIME = """\
jobId: census_2019
labels: {owner: ana}
trainingInput:
  scaleTier: STANDARD_1
  runtimeVersion: "2.1"
  pythonVersion: "3.7"
  region: us-east1
  network: projects/12345/global/networks/vpc1
  parameterServerConfig:
    diskConfig: {bootDiskSizeGb: 500}
  pythonModule: trainer.task
  packageUris: [gs://bkt/trainer-0.1.tar.gz]
"""
PKG = {"packageUris": ["gs://bkt/trainer-0.1.tar.gz"], "pythonModule": "trainer.task"}
CARRIED = carried.container_spec("tensorflow/tensorflow:2.21.0", PKG["packageUris"], PKG["pythonModule"],
                                 adds=["tensorboard~=2.21.0"])

SHAPES = {
    "custom container, per-pool images, boot disk, network, region": (CONTAINER, {
        "vertex": ("# gcloud ai custom-jobs create --region europe-west4 --display-name NAME --config FILE", {
            "workerPoolSpecs": [
                {"machineSpec": {"machineType": "n1-highmem-8", "acceleratorType": "NVIDIA_TESLA_V100",
                                 "acceleratorCount": 1}, "replicaCount": "1",
                 "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 200},
                 "containerSpec": {"imageUri": "gcr.io/my-project/trainer:v3",
                                   "command": ["python", "-m", "trainer.task"], "args": ["--epochs", "5"]}},
                {"machineSpec": {"machineType": "n1-highmem-8"}, "replicaCount": "2",
                 "containerSpec": {"imageUri": "gcr.io/my-project/worker:v3", "args": ["--epochs", "5"]}}],
            "network": "projects/12345/global/networks/default"}),
        "legacy": ("# gcloud ai-platform jobs submit training JOB --config FILE", {"trainingInput": {
            "scaleTier": "CUSTOM", "masterType": "n1-highmem-8",
            "masterConfig": {"acceleratorConfig": {"count": "1", "type": "NVIDIA_TESLA_V100"},
                             "imageUri": "gcr.io/my-project/trainer:v3",
                             "containerCommand": ["python", "-m", "trainer.task"],
                             "diskConfig": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 200}},
            "workerCount": "2", "workerType": "n1-highmem-8",
            "workerConfig": {"imageUri": "gcr.io/my-project/worker:v3"},
            "region": "europe-west4", "args": ["--epochs", "5"],
            "network": "projects/12345/global/networks/default"}})},
        ["trainingInput.pythonModule: a custom container job runs its image (gcr.io/my-project/trainer:v3), not a "
         "Python package; not mapped"]),
    "standard_tpu master, TPU image for runtime 2.12 / Python 3.8": (STANDARD_TPU, {
        "vertex": ("# gcloud ai custom-jobs create --region us-central1 --display-name NAME --config FILE", {
            "workerPoolSpecs": [{"machineSpec": {"machineType": "cloud-tpu", "acceleratorType": "TPU_V2",
                                                 "acceleratorCount": 8}, "replicaCount": "1",
                                 "pythonPackageSpec": {"executorImageUri": IMAGES + "tf-tpu.2-12:latest",
                                                       "packageUris": ["gs://bkt/t.tar.gz"],
                                                       "pythonModule": "trainer.task"}}]}),
        "legacy": ("# gcloud ai-platform jobs submit training JOB --config FILE", {"trainingInput": {
            "scaleTier": "CUSTOM", "masterType": "standard", "workerCount": "1", "workerType": "cloud_tpu",
            "workerConfig": {"acceleratorConfig": {"count": "8", "type": "TPU_V2"}},
            "region": "us-central1", "runtimeVersion": "2.12", "pythonVersion": "3.8", "pythonModule": "trainer.task",
            "packageUris": ["gs://bkt/t.tar.gz"]}})},
        ["trainingInput.masterType: standard_tpu (a master with one Cloud TPU, from Cloud ML Engine's TPU beta) "
         "becomes masterType standard + one cloud_tpu worker with TPU_V2 x 8"]),
    "tier, old runtime 2.1 + Python 3.7, network, ps boot disk, job id, labels": (OLD_RUNTIME, {
        "vertex": ("# gcloud ai custom-jobs create --region us-east1 --display-name census_2019 --labels owner=ana "
                   "--config FILE", {
                       # runtime 2.1's image is retired: written for the public TensorFlow image (warnings say so)
                       "workerPoolSpecs": [
                           {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                            "containerSpec": CARRIED},
                           {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "4",
                            "containerSpec": CARRIED},
                           {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "3",
                            "diskSpec": {"bootDiskSizeGb": 500}, "containerSpec": CARRIED}],
                       "network": "projects/12345/global/networks/vpc1"}),
        "legacy": ("# gcloud ai-platform jobs submit training census_2019 --config FILE", {
            "labels": {"owner": "ana"}, "trainingInput": {
                "scaleTier": "STANDARD_1", "parameterServerConfig": {"diskConfig": {"bootDiskSizeGb": 500}},
                "region": "us-east1", "runtimeVersion": "2.1", "pythonVersion": "3.7", "pythonModule": "trainer.task",
                "packageUris": ["gs://bkt/trainer-0.1.tar.gz"], "network": "projects/12345/global/networks/vpc1"}})},
        []),
}
SCHEMAS = {"vertex": ("aiplatform.v1", "GoogleCloudAiplatformV1CustomJobSpec"),
           "legacy": ("ml.v1", "GoogleCloudMlV1__Job")}


@pytest.mark.parametrize("fmt", ["vertex", "legacy"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_real_config_shapes_convert_exactly(tmp_path, shape, fmt):
    text, outputs, warnings = SHAPES[shape]
    path = tmp_path / "old.yaml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["config", "--config", str(path), "--format", fmt])
    assert result.exit_code == 0, result.stderr
    comment, expected = outputs[fmt]
    assert result.stdout.splitlines()[0] == comment
    document = yaml.safe_load(result.stdout)
    assert document == expected
    assert validate(*SCHEMAS[fmt], document) == []
    shown = [line.removeprefix("warning: ") for line in result.stderr.splitlines()]
    assert [w for w in shown if w.startswith("trainingInput")] == warnings


def test_vertex_containers_come_back_from_a_vertex_config(tmp_path):
    draft, notes = drafts.draft_from_vertex(SHAPES["custom container, per-pool images, boot disk, network, "
                                                     "region"][1]["vertex"][1])
    assert notes == []
    spec = build_spec(draft)
    assert (spec.container_image, spec.container_command, spec.pool_images, spec.boot_disks, spec.network) == (
        "gcr.io/my-project/trainer:v3", ("python", "-m", "trainer.task"),
        (("worker", "gcr.io/my-project/worker:v3"),), (("chief", "pd-ssd", 200),),
        "projects/12345/global/networks/default")


@pytest.mark.parametrize("text, message", [
    ("trainingInput:\n  scaleTier: CUSTOM\n  workerCount: 2\n  region: us-central1\n",
     "scaleTier CUSTOM requires masterType (the legacy API refused such a job); received no masterType"),
    # runtime 1.14 was a legacy runtime: it converts (tests/test_images_decision.py); a version that never was is not
    ("trainingInput:\n  scaleTier: BASIC\n  runtimeVersion: '2.0'\n",
     "no prebuilt TensorFlow 2.0 CPU training image; nearest that Vertex AI still runs: "
     "trainingInput.runtimeVersion: 2.21"),
    ("trainingInput:\n  masterConfig: {imageUri: gcr.io/p/i}\n  runtimeVersion: '2.11'\n",
     "a custom container (gcr.io/p/i) fixes the software a job runs; received also --runtime-version 2.11"),
])
def test_configs_the_api_refused_are_one_line_exit_2(tmp_path, text, message):
    path = tmp_path / "old.yaml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["config", "--config", str(path)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr


def test_a_tpu_machine_name_is_answered_with_the_tpu_shape():
    result = CliRunner().invoke(app, ["config", "--machine-type", "standard_tpu"])
    assert result.exit_code == 2 and "standard_gpu" not in result.stderr
    assert "a TPU runs on one cloud-tpu worker: --worker-machine-type cloud-tpu --workers 1" in result.stderr


def test_train_refuses_a_container_job_instead_of_staging_an_unused_package(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(CONTAINER)
    result = CliRunner().invoke(app, ["train", "--local", "--config", str(path), "--job-dir", str(tmp_path / "j")])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "mlsubmit train runs a Python package, and this job names the custom container gcr.io/my-project/" \
           "trainer:v3" in result.stderr


TPU_FILE = """\
trainingInput:
  scaleTier: {tier}
{extra}  region: us-central1
  pythonModule: trainer.task
  packageUris: [gs://bkt/t.tar.gz]
"""
TPU_FILES = {  # Vertex AI serves no TensorFlow TPU image (tf-tpu.2-15.cp310 ended 2025-10-23): nothing runs in its place
    "runtime 1.14": TPU_FILE.format(tier="BASIC_TPU", extra="  runtimeVersion: '1.14'\n  pythonVersion: '3.5'\n"),
    "no image": TPU_FILE.format(tier="CUSTOM", extra="  masterType: n1-standard-4\n  workerType: cloud_tpu\n"
                                                     "  workerCount: 1\n"),
}


@pytest.mark.parametrize("name", list(TPU_FILES))
def test_a_tpu_file_with_no_image_vertex_serves_is_refused_and_its_gpu_way_out_is_accepted(tmp_path, name):
    path = tmp_path / "tpu.yaml"
    path.write_text(TPU_FILES[name])
    refused = CliRunner().invoke(app, ["config", "--config", str(path)])
    assert refused.exit_code == 2 and refused.stdout == "" and refused.stderr.count("\n") == 1, refused.stderr
    assert "Vertex AI serves no TensorFlow TPU training image any more (tf-tpu.2-15.cp310, the last, ended " \
           "2025-10-23)" in refused.stderr and "tf-tpu.2-15.cp310:latest" not in refused.stderr
    way_out = refused.stderr.rstrip().rsplit("train on one GPU instead (", 1)[1].removesuffix(")").split()
    followed = CliRunner().invoke(app, ["config", "--config", str(path), *way_out])
    assert followed.exit_code == 0, followed.stderr
    (pool,) = yaml.safe_load(followed.stdout)["workerPoolSpecs"]
    assert pool["machineSpec"] == {"machineType": "g2-standard-4", "acceleratorType": "NVIDIA_L4",
                                   "acceleratorCount": 1}
    # the other way out: an image of the user's that carries TensorFlow for Cloud TPU VMs
    named = CliRunner().invoke(app, ["config", "--config", str(path), "--executor-image", "gcr.io/p/tf-tpu:1"])
    assert named.exit_code == 0 and yaml.safe_load(named.stdout)["workerPoolSpecs"][0]["containerSpec"][
        "imageUri"] == "gcr.io/p/tf-tpu:1"


def test_the_tpu_way_out_is_accepted_from_flags_too():
    refused = CliRunner().invoke(app, ["config", "--tier", "BASIC_TPU"])
    assert refused.exit_code == 2 and "--tier CUSTOM --machine-type g2-standard-4 --gpus 1 --workers 0" in refused.stderr
    followed = CliRunner().invoke(app, ["config", "--tier", "BASIC_TPU", "--tier", "CUSTOM", "--machine-type",
                                        "g2-standard-4", "--gpus", "1", "--workers", "0"])
    assert followed.exit_code == 0, followed.stderr


def test_a_tpu_count_the_file_named_is_said_when_it_changes(tmp_path):
    path = tmp_path / "tpu.yaml"
    path.write_text(STANDARD_TPU.replace("  runtimeVersion", "  masterConfig:\n    acceleratorConfig: {type: TPU_V3, "
                                                             "count: 4}\n  runtimeVersion"))
    result = CliRunner().invoke(app, ["config", "--config", str(path), "--format", "legacy"])
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(result.stdout)["trainingInput"]["workerConfig"] == {
        "acceleratorConfig": {"count": "8", "type": "TPU_V3"}}
    assert ("warning: trainingInput.masterConfig.acceleratorConfig.count: 4 becomes 8: a cloud_tpu worker is one "
            "Cloud TPU of 8 cores, the only count both services take") in result.stderr.splitlines()


def test_the_estimate_of_a_converted_file_prices_the_pools_sent(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(STANDARD_TPU)  # a master standard + a TPU worker: Vertex AI runs pool 0 on the TPU VM alone
    tpu = CliRunner().invoke(app, ["config", "--config", str(path), "--executor-image", "gcr.io/p/tf-tpu:1"])
    assert tpu.exit_code == 0, tpu.stderr
    estimate = tpu.stderr.split("cost estimate (")[1].splitlines()
    assert estimate[1].startswith("  chief: 1 x (cloud-tpu ") and not any("n1-standard-4" in x for x in estimate)
    path.write_text("trainingInput:\n  scaleTier: CUSTOM\n  masterType: complex_model_m_gpu\n"
                    "  pythonModule: trainer.task\n  packageUris: [gs://bkt/t.tar.gz]\n")
    gpu = CliRunner().invoke(app, ["config", "--config", str(path)])  # 4 K80 become 4 T4 on n1-standard-16
    assert gpu.exit_code == 0, gpu.stderr
    assert "  chief: 1 x (n1-standard-16 $" in gpu.stderr and "4 x NVIDIA_TESLA_T4 $" in gpu.stderr
