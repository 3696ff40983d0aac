"""Trainers written by other people, for images that are gone, through `package`, `train --local`, the emulator
(created with the real gcloud CLI from the config mlsubmit writes): each is checked and run on the image the one
decision names (mlsubmit.images.choose), and says which.

Heavy: the default image's environment (TensorFlow 2.21 + TensorBoard, built once in the session's images dir), and
pip resolving against the package index for older images' Pythons.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest_plugins = ["support.training_emulator"]
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
TRAINERS = ROOT / "tests" / "fixtures" / "trainers"
PREBUILT = "us-docker.pkg.dev/vertex-ai/training/"


def _mlsubmit(*args: str, cwd: Path, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlsubmit", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1", **env})


def _copy(name: str, tmp_path: Path) -> Path:
    shutil.copytree(TRAINERS / name, tmp_path / name)
    return tmp_path / name / "trainer"


def test_a_vertex_trainer_with_the_tensorboard_callback_runs_unmodified_on_the_default_image(tmp_path, images_home):
    """Written for a prebuilt TensorFlow image (which carried TensorBoard) and requiring `tensorflow`: on the public
    TensorFlow 2.21 image, which carries no TensorBoard, it runs because mlsubmit adds it, and its requirement is met
    by the image's own TensorFlow (no second one in the job's environment)."""
    package = _copy("keras3_tensorboard", tmp_path)
    done = _mlsubmit("train", "--local", "--package-path", str(package), "--job-dir", "out", cwd=tmp_path,
                     MLSUBMIT_IMAGE_ENV="1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "image: tensorflow/tensorflow:2.21.0 (tensorflow 2.21, Python 3.11; a custom container that pip-installs " \
           "tensorboard~=2.21.0 and the package)" in done.stdout, done.stdout
    assert "note: tensorflow/tensorflow:2.21.0 + tensorboard~=2.21.0: TensorFlow 2.21 no longer installs TensorBoard" \
        in done.stdout
    found = re.search(r"keras3_tensorboard: tensorflow 2\.21\.0, keras 3\.\S+, tensorboard 2\.21\.\d+, (\d+) event "
                      r"files", done.stdout)
    assert found and int(found.group(1)) >= 1, done.stdout[-3000:]
    metrics = json.loads(next((tmp_path / "out").rglob("metrics.json")).read_text())
    assert metrics["tensorflow"] == "2.21.0" and metrics["events"] >= 1
    # one TensorFlow: the job's venv holds the package, not a second TensorFlow
    from mlsubmit.images.job_envs import TENSORFLOW_NAMES, installed

    venv = Path(re.search(r"\(venv (/\S+)\)$", done.stdout, re.M).group(1))
    assert venv.is_relative_to(images_home / "tensorflow_tensorflow_2.21.0" / "jobs")
    own = next(venv.glob("lib/python*/site-packages"))
    assert not (own / "tensorflow").exists() and installed(own, TENSORFLOW_NAMES) is None  # (aliases: metadata only)
    size = sum(path.stat().st_size for path in venv.rglob("*") if path.is_file())
    assert size < 30 * 2 ** 20, f"the job's venv holds {size:,} bytes"
    checked = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "check"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
def test_the_config_mlsubmit_writes_runs_in_the_emulator_through_gcloud_on_the_same_image(
        gcs_emulator, tmp_path, image_training_emulator):
    package = _copy("keras3_tensorboard", tmp_path)
    bucket = f"tb-{os.getpid()}"
    gcs_emulator.create_bucket(bucket)
    staged = _mlsubmit("package", "--package-path", str(package), "--skip-preflight", "--stage",
                       f"gs://{bucket}/pkgs", "--output", "json", cwd=tmp_path,
                       STORAGE_EMULATOR_HOST=gcs_emulator.endpoint)
    assert staged.returncode == 0, staged.stderr
    said = json.loads(staged.stdout)
    assert said["image"]["uri"] == "tensorflow/tensorflow:2.21.0" and said["image"]["how"] == "container"
    # TensorFlow's own GCS filesystem cannot reach an emulator: the logs and the model go to the replica's folder
    config = _mlsubmit("config", "--package-uris", said["uri"], "-o", str(tmp_path / "job.yaml"), "--",
                       "--output_dir", "out", "--log_dir", "logs", cwd=tmp_path)
    assert config.returncode == 0, config.stderr
    pool = yaml.safe_load((tmp_path / "job.yaml").read_text())["workerPoolSpecs"][0]
    assert pool["containerSpec"]["imageUri"] == "tensorflow/tensorflow:2.21.0"
    emulator = image_training_emulator
    env = {**os.environ, "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM": emulator.endpoint + "/",
           "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true", "CLOUDSDK_CORE_PROJECT": "tb-project",
           "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}
    done = subprocess.run(["gcloud", "ai", "custom-jobs", "create", "--region", "us-central1", "--display-name",
                           "tb", "--config", str(tmp_path / "job.yaml"), "--format=value(name)"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    name = done.stdout.strip()
    job = emulator.wait(emulator.vertex_jobs().get(name=name).execute, timeout=500)
    lines = [e["textPayload"] for e in emulator.log_lines(name.rsplit("/", 1)[-1], "tb-project")]
    assert job["state"] == "JOB_STATE_SUCCEEDED", "\n".join(lines[-30:])
    assert any("tensorflow/tensorflow:2.21.0 + tensorboard~=2.21.0" in line for line in lines), lines
    # the container command ran as sent (it installs TensorBoard and the package), on the image's environment
    assert any(re.match(r"Each replica runs the container command as sent, on image tensorflow/tensorflow:2\.21\.0: "
                        r"Python 3\.11\.\d+, tensorflow 2\.21\.0 \(its CPU build, tensorflow-cpu\), .*tensorboard 2\.21",
                        line) for line in lines), lines
    assert any(re.search(r"keras3_tensorboard: tensorflow 2\.21\.0, .*tensorboard 2\.21", line) for line in lines)


def test_package_checks_a_legacy_trainer_on_its_own_runtime_and_names_the_image(tmp_path):
    package = _copy("census_tfkeras28", tmp_path)
    # on the default image (Python 3.11, numpy 2): its pins cannot be installed, one line naming the image
    default = _mlsubmit("package", "--package-path", str(package), "--skip-preflight", "--dist-dir", "dist",
                        cwd=tmp_path)
    assert default.returncode == 2 and default.stderr.count("\n") == 1, default.stderr
    assert "numpy==1.21.6" in default.stderr and "tensorflow/tensorflow:2.21.0" in default.stderr
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())
    # on legacy AI Platform's runtime 2.8 (Python 3.7), as its job would run
    legacy = _mlsubmit("package", "--package-path", str(package), "--skip-preflight", "--api", "legacy",
                       "--runtime-version", "2.8", "--dist-dir", "dist", cwd=tmp_path)
    assert legacy.returncode == 0, legacy.stderr
    assert "image     tf-cpu.2-8 (tensorflow 2.8, Python 3.7; legacy AI Platform's runtime)" in legacy.stdout
    assert re.search(r"checked   image tf-cpu\.2-8 \(Python 3\.7\): resolved by pip with tensorflow-cpu 2\.8\.\d+",
                     legacy.stdout), legacy.stdout
    assert "no longer served" not in legacy.stdout + legacy.stderr  # the legacy service has no Vertex lifecycle


def test_package_checks_a_pytorch_trainer_on_the_pytorch_image_it_names(tmp_path):
    image = f"{PREBUILT}pytorch-gpu.2-4.py310:latest"
    done = _mlsubmit("package", "--package-path", str(TRAINERS / "torch_pandas" / "trainer"), "--skip-preflight",
                     "--executor-image", image, "--dist-dir", str(tmp_path / "dist"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"image     {image} (pytorch 2.4, Python 3.10; a Vertex AI prebuilt image (pythonPackageSpec))" \
        in done.stdout
    assert re.search(r"resolved by pip with torch 2\.4\.\d+", done.stdout), done.stdout
    assert "No module named 'torch'" not in done.stderr


@pytest.mark.parametrize("name, code, said", [
    # model.py's `import hypertune` is found: the default image carries what tf-cpu.2-17 (which it replaces) listed
    ("hypertune_in_model", 0, ["requirements installed: cloudml-hypertune==0.1.0.dev6; trainer.task found",
                               "their module-level imports found: argparse, hypertune; not run"]),
    ("multi_gpu_2018", 2, ["trainer/model.py line 5: keras.utils.multi_gpu_model is not in tensorflow 2.21.0, "
                           "which tensorflow/tensorflow:2.21.0 carries: tensorflow 2.4 removed it; "
                           "tf.distribute.MirroredStrategy replaces it (release notes: "]),
])
def test_the_preflight_checks_every_module_of_the_package(tmp_path, name, code, said):
    package = _copy(name, tmp_path)
    done = _mlsubmit("package", "--package-path", str(package), "--dist-dir", "dist", cwd=tmp_path,
                     MLSUBMIT_IMAGE_ENV="1")
    assert done.returncode == code, done.stdout + done.stderr
    if code:
        assert done.stderr.count("\n") == 1, done.stderr
    assert all(part in (done.stderr if code else done.stdout) for part in said), done.stdout + done.stderr


HYPERTUNE = "from the image's listed packages: cloudml-hypertune 0.1.0.dev6 (trainer/model.py, line 2 imports hypertune)"


@pytest.mark.parametrize("image", ["--runtime-version=2.17", "default"])
def test_a_trainer_importing_hypertune_in_its_model_runs_on_its_image_and_on_the_replacement(tmp_path, image):
    """Written for tf-cpu.2-17 (which carried cloudml-hypertune), never declaring it: runs there and on the public
    TensorFlow 2.21 image that replaces it, hypertune installed in the job's requirements layer (the image's own
    environment is not rebuilt), and says so. Its report reaches the file the tuning service reads."""
    package = _copy("hypertune_in_model", tmp_path)
    metrics = tmp_path / "hypertune.metrics"
    flags = [] if image == "default" else [image]
    done = _mlsubmit("train", "--local", "--package-path", str(package), *flags, "--env",
                     f"CLOUD_ML_HP_METRIC_FILE={metrics}", cwd=tmp_path, MLSUBMIT_IMAGE_ENV="1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert HYPERTUNE in done.stdout, done.stdout[-3000:]
    name = "tf-cpu.2-17.py310" if flags else "tensorflow_tensorflow_2.21.0"
    venv = Path(re.search(r"\(venv (/\S+)\)$", done.stdout, re.M).group(1))
    assert venv.parent.parent.name == name
    reports = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert reports[-1]["loss"] == "0.125" and reports[-1]["global_step"] == "2", reports


def test_a_trainer_importing_pandas_it_never_declared_runs_on_the_default_image(tmp_path):
    """The prebuilt TensorFlow images carried pandas (tf-cpu.2-17: pandas 2.2.3): so does the default image's job."""
    package = _copy("pandas_undeclared", tmp_path)
    done = _mlsubmit("train", "--local", "--package-path", str(package), cwd=tmp_path, MLSUBMIT_IMAGE_ENV="1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "from the image's listed packages: pandas 2.2.3 (trainer/task.py, line 4 imports pandas)" in done.stdout
    assert "pandas_undeclared: pandas 2.2.3, 2 rows, sum 10" in done.stdout, done.stdout[-3000:]


def test_an_api_the_images_scikit_learn_removed_is_named_before_anything_is_uploaded(tmp_path, gcs):
    """Written for runtime 1.15 (scikit-learn 0.20.4): `from sklearn.externals import joblib`, which scikit-learn
    0.23 removed, is read from the source (not imported) and judged against the scikit-learn the image carries."""
    gcs_emulator, bucket = gcs
    package = _copy("sklearn_joblib", tmp_path)
    done = _mlsubmit("package", "--package-path", str(package), "--executor-image",
                     f"{PREBUILT}sklearn-cpu.1-6:latest", "--stage", f"gs://{bucket}/pkgs", "--dist-dir", "dist",
                     cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: trainer/task.py line 5: sklearn.externals.joblib is not in scikit-learn "
                                  "1.6.1, which sklearn-cpu.1-6 carries: "
                                  "scikit-learn 0.23 removed it; import joblib replaces it"), done.stderr
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())
    import urllib.request

    with urllib.request.urlopen(f"{gcs_emulator.endpoint}/storage/v1/b/{bucket}/o", timeout=10) as listed:
        assert json.loads(listed.read()).get("items", []) == []  # nothing uploaded


def test_in_the_emulator_the_replacement_images_command_installs_hypertune_before_the_package(
        gcs_emulator, tmp_path, image_training_emulator):
    """`train` sends the public image a container command that installs cloudml-hypertune (the package imports it;
    the image it replaces carried it) before the package; the emulator runs that command as sent, and the job runs."""
    package = _copy("hypertune_in_model", tmp_path)
    bucket = f"ht-{os.getpid()}"
    gcs_emulator.create_bucket(bucket)
    metrics = tmp_path / "hypertune.metrics"
    emulator = image_training_emulator
    done = _mlsubmit("train", "--package-path", str(package), "--skip-preflight", "--job-name", "ht", "--env",
                     f"CLOUD_ML_HP_METRIC_FILE={metrics}", cwd=tmp_path, MLSUBMIT_API_ENDPOINT=emulator.endpoint,
                     STORAGE_EMULATOR_HOST=gcs_emulator.endpoint, MLSUBMIT_PROJECT="ht-project",
                     MLSUBMIT_REGION="us-central1", MLSUBMIT_STAGING_BUCKET=f"gs://{bucket}",
                     MLSUBMIT_POLL_INTERVAL="0.2", MLSUBMIT_IMAGE_ENV="1")
    (job,) = emulator.vertex_jobs().list(parent="projects/ht-project/locations/us-central1").execute()["customJobs"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    command = job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"][2]
    assert "'tensorboard~=2.21.0' cloudml-hypertune==0.1.0.dev6; " in command, command
    assert "Successfully installed cloudml-hypertune-0.1.0.dev6" in done.stdout, done.stdout[-3000:]
    assert json.loads(metrics.read_text().splitlines()[-1])["loss"] == "0.125"
