"""One decision for every path: which image a pool runs and how (mlsubmit.images.choose), and the refusals the
services would make, from config, train, the Kubernetes manifests, the emulator and the real gcloud CLI.

Offline but for the emulator; nothing here builds an image environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml
from typer.testing import CliRunner

from mlsubmit.cli import app
from mlsubmit.images import carried, catalog, choose
from mlsubmit.jobspec import discovery, requests
from mlsubmit.jobspec.spec import JobSpec, Pool

pytest_plugins = ["support.training_emulator", "support.submit_cli"]
PREBUILT = "us-docker.pkg.dev/vertex-ai/training/"
GPU = Pool("chief", "n1-standard-8", 1, "NVIDIA_TESLA_T4", 1)

# (spec, what each path must agree on: Vertex AI pool 0's image URI and kind of pool)
SPECS = {
    "default": (JobSpec(), "tensorflow/tensorflow:2.21.0", "containerSpec"),
    "default GPU": (JobSpec(tier="CUSTOM", chief=GPU), "tensorflow/tensorflow:2.21.0-gpu", "containerSpec"),
    "runtime 2.21": (JobSpec(runtime_version="2.21"), "tensorflow/tensorflow:2.21.0", "containerSpec"),
    "Google's cache of the public image": (JobSpec(executor_image="mirror.gcr.io/tensorflow/tensorflow:2.21.0"),
                                           "mirror.gcr.io/tensorflow/tensorflow:2.21.0", "containerSpec"),
    "a user's own image": (JobSpec(executor_image="gcr.io/my-proj/my-image:1"), "gcr.io/my-proj/my-image:1",
                           "containerSpec"),
    "an old public image": (JobSpec(executor_image="tensorflow/tensorflow:1.14.0"), "tensorflow/tensorflow:1.14.0",
                            "containerSpec"),
    "a served prebuilt image": (JobSpec(executor_image=f"{PREBUILT}sklearn-cpu.1-6:latest"),
                                f"{PREBUILT}sklearn-cpu.1-6:latest", "pythonPackageSpec"),
    "a TPU pool with a named image": (JobSpec(tier="BASIC_TPU", executor_image="us-docker.pkg.dev/me/tpu/tf:2.18"),
                                      "us-docker.pkg.dev/me/tpu/tf:2.18", "containerSpec"),
}


@pytest.mark.parametrize("name", SPECS)
def test_every_path_gets_the_image_of_a_pool_from_the_one_decision(name):
    spec, uri, kind = SPECS[name]
    spec = spec.replace(package_uris=("gs://bkt/trainer-0.1.tar.gz",))
    decided = choose.choose(spec)
    assert decided.uri == uri
    pool = requests.vertex_job_spec(spec)["workerPoolSpecs"][0]
    assert kind in pool
    written = pool["containerSpec"]["imageUri"] if kind == "containerSpec" else \
        pool["pythonPackageSpec"]["executorImageUri"]
    assert written == uri
    # what a config reads back, what a tuning trial or the emulator edits, runs the same program
    program = carried.program(pool)
    assert program["executorImageUri"] == uri and program["packageUris"] == ["gs://bkt/trainer-0.1.tar.gz"]
    assert carried.added(pool.get("containerSpec") or {}) == [r for r, _ in decided.adds]
    # the Kubernetes pods run the same image
    from mlsubmit.kube.manifests import _image

    assert _image(spec) == uri
    # every body validates against the discovery document gcloud and the client libraries use
    assert discovery.validate("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob",
                              requests.vertex_custom_job(spec.replace(job_name="j"))) == []


def test_the_public_image_gets_what_the_prebuilt_images_carried_and_says_why():
    decided = choose.choose(JobSpec())
    assert decided.adds == (("tensorboard~=2.21.0", catalog.TENSORBOARD_WHY),)
    assert "PR #110709" in catalog.TENSORBOARD_WHY
    script = requests.vertex_job_spec(JobSpec(package_uris=("gs://bkt/t.tar.gz",)))["workerPoolSpecs"][0][
        "containerSpec"]["command"][2]
    assert script.index("'tensorboard~=2.21.0'") < script.index("/gcs/bkt/t.tar.gz")  # before the package, as in the
    # images it replaces
    assert choose.choose(JobSpec(executor_image="gcr.io/my-proj/my-image:1")).adds == ()  # a user's image: as it is
    assert choose.choose(JobSpec(executor_image=f"{PREBUILT}sklearn-cpu.1-6:latest")).adds == ()


def _config(*args):
    return CliRunner().invoke(app, ["config", *args])


def test_a_tpu_pool_never_gets_a_retired_image_silently(tmp_path):
    for args in (["--tier", "BASIC_TPU"], ["--tier", "BASIC_TPU", "--runtime-version", "2.15"]):
        done = _config(*args)
        assert done.exit_code == 2 and done.stdout == "" and done.stderr.count("\n") == 1, (args, done.stderr)
        assert done.stderr.startswith("error: tf-tpu.2-15.cp310 is no longer served by Vertex AI: its end of "
                                      "availability was 2025-10-23"), done.stderr
        assert "--executor-image URI" in done.stderr and "tf-cpu" not in done.stderr
    named = _config("--tier", "BASIC_TPU", "--executor-image", "us-docker.pkg.dev/me/tpu/tf:2.18")
    assert named.exit_code == 0, named.stderr
    pool = yaml.safe_load(named.stdout)["workerPoolSpecs"][0]
    assert pool["machineSpec"]["acceleratorType"] == "TPU_V2" and pool["containerSpec"]["imageUri"].endswith("2.18")
    # a legacy TPU file converted: its image is kept, with a warning that the service would refuse it
    legacy = tmp_path / "tpu.yaml"
    legacy.write_text("trainingInput:\n  scaleTier: BASIC_TPU\n  runtimeVersion: '2.12'\n  pythonVersion: '3.8'\n"
                      "  region: us-central1\n  pythonModule: trainer.task\n")
    converted = _config("--config", str(legacy))
    assert converted.exit_code == 0, converted.stderr
    assert "tf-tpu.2-12" in converted.stdout
    assert "warning: tf-tpu.2-12 is no longer served by Vertex AI" in converted.stderr
    assert "the job would be refused" in converted.stderr


@pytest.mark.parametrize("args, said", [
    (["--format", "legacy", "--runtime-version", "2.11", "--python-version", "3.5"],
     "error: invalid value for --python-version: received '3.5'; legacy AI Platform ran runtime 2.11 with Python "
     "3.7; use --python-version 3.7"),
    (["--format", "legacy", "--runtime-version", "2.21"],
     "error: invalid value for --runtime-version: received '2.21'; legacy AI Platform offered runtime versions up "
     "to 2.11"),
])
def test_legacy_pairs_the_service_never_offered_are_one_line(args, said):
    done = _config(*args)
    assert done.exit_code == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(said), done.stderr


def test_legacy_runtime_1x_files_still_convert_to_legacy_and_move_to_a_served_image_on_vertex(tmp_path):
    done = _config("--format", "legacy", "--runtime-version", "1.15")
    assert done.exit_code == 0, done.stderr
    training = yaml.safe_load(done.stdout)["trainingInput"]
    assert (training["runtimeVersion"], training["pythonVersion"]) == ("1.15", "3.7")
    assert discovery.validate("ml.v1", "GoogleCloudMlV1__Job", yaml.safe_load(done.stdout)) == []
    old = tmp_path / "gpu114.yaml"  # runtime 1.14 never had a Vertex AI image
    old.write_text("trainingInput:\n  scaleTier: BASIC_GPU\n  runtimeVersion: '1.14'\n  pythonVersion: '3.5'\n"
                   "  region: us-central1\n  pythonModule: trainer.task\n")
    legacy = _config("--config", str(old), "--format", "legacy")
    assert legacy.exit_code == 0, legacy.stderr
    training = yaml.safe_load(legacy.stdout)["trainingInput"]
    assert (training["runtimeVersion"], training["pythonVersion"]) == ("1.14", "3.5")
    vertex = _config("--config", str(old))
    assert vertex.exit_code == 0, vertex.stderr
    assert yaml.safe_load(vertex.stdout)["workerPoolSpecs"][0]["containerSpec"]["imageUri"] == \
        "tensorflow/tensorflow:2.21.0-gpu"
    assert "warning: the file's runtime 1.14 has no Vertex AI image: written for tensorflow/tensorflow:2.21.0-gpu" \
        in vertex.stderr and "warning: Python 3.5 cannot be kept" in vertex.stderr


def test_a_non_prebuilt_executor_image_is_a_custom_container_that_installs_the_package():
    done = _config("--executor-image", "gcr.io/my-proj/my-image:1", "--package-uris", "gs://bkt/trainer-0.1.tar.gz")
    assert done.exit_code == 0, done.stderr
    pool = yaml.safe_load(done.stdout)["workerPoolSpecs"][0]
    assert "pythonPackageSpec" not in pool and pool["containerSpec"]["imageUri"] == "gcr.io/my-proj/my-image:1"
    assert "python -m pip install --no-cache-dir --disable-pip-version-check /gcs/bkt/trainer-0.1.tar.gz" in \
        pool["containerSpec"]["command"][2]


# -- the emulator refuses what Vertex AI and ml.v1 refuse ---------------------------------------------------------
def _vertex_body(uri: str, image: str) -> dict:
    return {"displayName": "image-check", "jobSpec": {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
        "pythonPackageSpec": {"executorImageUri": image, "packageUris": [uri], "pythonModule": "trainer.task"}}]}}


@pytest.mark.parametrize("image, said", [
    (f"{PREBUILT}tf-cpu.2-8.py310:latest", "its end of availability was 2024-09-01"),
    (f"{PREBUILT}tf-cpu.2-17.py310:latest", "its end of availability was 2026-07-11"),
    ("gcr.io/my-proj/my-image:1", "is not a Vertex AI prebuilt training container image"),
    ("tensorflow/tensorflow:2.21.0", "is not a Vertex AI prebuilt training container image"),
])
def test_the_emulator_refuses_a_package_on_an_image_vertex_ai_would_not_run(training_emulator, image, said):
    from googleapiclient.errors import HttpError

    jobs = training_emulator.vertex_jobs()
    with pytest.raises(HttpError) as raised:
        jobs.create(parent="projects/p/locations/us-central1", body=_vertex_body("gs://bkt/t.tar.gz", image)).execute()
    assert raised.value.resp.status == 400
    error = json.loads(raised.value.content)["error"]
    assert error["status"] == "INVALID_ARGUMENT" and said in error["message"], error
    assert "workerPoolSpecs[0].pythonPackageSpec.executorImageUri" in error["message"]
    names = [job["displayName"] for job in jobs.list(parent="projects/p/locations/us-central1").execute()
             .get("customJobs", [])]
    assert "image-check" not in names  # nothing was made


def test_the_emulator_refuses_a_legacy_runtime_and_python_pair_ml_v1_ruled_out(training_emulator):
    from googleapiclient.errors import HttpError

    body = {"jobId": "pair_check", "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": "2.11", "pythonVersion": "3.5",
        "pythonModule": "trainer.task", "packageUris": ["gs://bkt/t.tar.gz"]}}
    with pytest.raises(HttpError) as raised:
        training_emulator.legacy_jobs().create(parent="projects/p", body=body).execute()
    error = json.loads(raised.value.content)["error"]
    assert raised.value.resp.status == 400 and "trainingInput.pythonVersion" in error["message"], error
    assert "ran runtime 2.11 with Python 3.7" in error["message"]


def _gcloud(endpoint: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM": endpoint + "/",
           "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true", "CLOUDSDK_CORE_PROJECT": "p",
           "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}
    return subprocess.run(["gcloud", *args], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
@pytest.mark.parametrize("image", [f"{PREBUILT}tf-cpu.2-8.py310:latest", f"{PREBUILT}tf-cpu.2-17.py310:latest",
                                   f"{PREBUILT}tf-cpu.2-4:latest", "gcr.io/my-proj/my-image:1"])
def test_gcloud_custom_jobs_create_with_a_retired_or_non_prebuilt_executor_image_is_refused(training_emulator,
                                                                                          tmp_path, image):
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump({"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
        "pythonPackageSpec": {"executorImageUri": image, "packageUris": ["gs://bkt/t.tar.gz"],
                              "pythonModule": "trainer.task"}}]}))
    done = _gcloud(training_emulator.endpoint, tmp_path, "ai", "custom-jobs", "create", "--region", "us-central1",
                   "--display-name", "gcloud-image", "--config", str(config))
    assert done.returncode != 0, done.stdout
    assert "INVALID_ARGUMENT" in done.stderr or "Invalid value" in done.stderr, done.stderr
    assert "executorImageUri" in done.stderr, done.stderr


def test_skip_preflight_skips_the_install_check_only(cloud, tmp_path):
    from support.tiny_package import make_project

    package = make_project(tmp_path / "proj")
    run = cloud.run("train", "--package-path", str(package), "--python-module", "tinypkg.task",
                    "--runtime-version", "2.17", "--skip-preflight")
    assert run.code == 2 and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("error: tf-cpu.2-17.py310 is no longer served by Vertex AI"), run.stderr
    assert cloud.objects() == [] and cloud.vertex_jobs() == []


def test_images_is_one_home_that_imports_nothing_of_mlsubmit_but_errors_home_and_two_leaves():
    """One direction only: every path asks mlsubmit.images; it asks nothing back (no import circle through it)."""
    import ast
    from pathlib import Path

    import mlsubmit.images

    # and two leaf utilities that themselves import nothing of mlsubmit but errors: the cache's locks and stamps
    # (an environment is never pruned under a running job), and child processes that die with their parent
    # (and the marks of what mlsubmit made, which only mlsubmit removes)
    leaves = {"mlsubmit.cache.entries", "mlsubmit.cache.ownership", "mlsubmit.local.children"}
    allowed = {"mlsubmit.errors", "mlsubmit.home", *leaves}
    root = Path(mlsubmit.images.__file__).parents[1]

    def imported(node) -> list[str]:
        """What an import statement names: `from mlsubmit.cache import ownership` names mlsubmit.cache.ownership."""
        if isinstance(node, ast.ImportFrom) and node.module:
            return [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in allowed else node.module
                    for a in node.names]
        return [a.name for a in node.names] if isinstance(node, ast.Import) else []

    for leaf in leaves:
        for node in ast.walk(ast.parse((root / (leaf.split(".", 1)[1].replace(".", "/") + ".py")).read_text())):
            for name in imported(node):
                if name.startswith("mlsubmit"):
                    assert name in {"mlsubmit.errors", *leaves}, f"{leaf} imports {name}"
    for path in Path(mlsubmit.images.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            for name in imported(node):
                if name.startswith("mlsubmit") and not name.startswith("mlsubmit.images"):
                    assert name in allowed, f"{path.name} imports {name}"
    # and the old homes are gone: nothing decides an image outside it
    root = Path(mlsubmit.images.__file__).parents[1]
    for gone in ("jobspec/images.py", "jobspec/image_check.py", "jobspec/carried.py", "local/image_env.py",
                 "local/interpreters.py"):
        assert not (root / gone).exists()


def test_kubernetes_pods_run_the_chosen_image_and_install_what_it_adds():
    from mlsubmit.kube.manifests import KubeJob, launcher_specs

    job = KubeJob(name="tb", request_id="r1", packages=("gs://bkt/t.tar.gz",))
    default = launcher_specs(JobSpec(), job)["chief"]
    assert default["requirements"] == ["tensorboard~=2.21.0"]  # as the Vertex AI container's command installs it
    own = launcher_specs(JobSpec(executor_image="gcr.io/my-proj/my-image:1"), job)["chief"]
    assert "requirements" not in own


def test_the_launcher_installs_the_requirements_before_the_packages(tmp_path):
    """A stock venv on this machine: the requirement is installed (from what the node's pip sees) with the package."""
    from mlsubmit.launcher import replica
    from support.tiny_package import make_project

    from mlsubmit.packaging import build_sdist

    sdist = build_sdist(make_project(tmp_path / "proj"), dist_dir=tmp_path / "dist")
    said = []
    python = replica.installed_python([str(sdist.path)], str(tmp_path / "cache"), said.append,
                                      ["tensorboard~=2.21.0"])
    done = subprocess.run([python, "-c", "import tensorboard, tinypkg; print(tensorboard.__version__)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("2.21."), done.stderr
    again = replica.installed_python([str(sdist.path)], str(tmp_path / "cache"), said.append, [])
    assert again != python  # the requirements are part of what names the venv


def test_a_dry_run_says_each_pools_image_and_refuses_what_the_submission_would(tmp_path):
    from support.tiny_package import make_project

    package = make_project(tmp_path / "proj")
    flags = ["train", "--dry-run", "--project", "p", "--region", "us-central1", "--staging-bucket", "gs://bkt",
             "--package-path", str(package), "--python-module", "tinypkg.task"]
    shown = CliRunner().invoke(app, [*flags, "--tier", "CUSTOM", "--gpus", "1", "--ps", "1"])
    assert shown.exit_code == 0, shown.stderr
    assert "image (chief): tensorflow/tensorflow:2.21.0-gpu (tensorflow 2.21, Python 3.11; a custom container that " \
           "pip-installs tensorboard~=2.21.0 and the package)" in shown.stdout
    assert "image (ps): tensorflow/tensorflow:2.21.0 (" in shown.stdout
    refused = CliRunner().invoke(app, [*flags, "--runtime-version", "2.17"])
    assert refused.exit_code == 2 and refused.stdout == "" and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("error: tf-cpu.2-17.py310 is no longer served by Vertex AI")
