"""`train --local` runs the replicas on the software of the job's image: an environment built from the image's table
entry (real TensorFlow releases from the package index, built once per image in the session's images dir), the
trainer's requirements installed on top as the cloud does, and the user's TF_USE_LEGACY_KERAS passed through.

Heavy: each image environment downloads and installs a TensorFlow release (about 1-2.5 minutes cold on 2 cores);
later runs reuse it. Set MLSUBMIT_TEST_IMAGES to a directory to keep them between sessions.
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

pytest_plugins = ["support.training_emulator"]
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
KERAS2 = ROOT / "tests" / "support" / "keras2_trainer" / "kerastwo"


def _train(package: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "mlsubmit", "train", "--local", "--package-path", str(package),
                           *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_COLOR": "1", "MLSUBMIT_IMAGE_ENV": "1", **env})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _metrics(job_dir: Path) -> dict:
    (found,) = job_dir.rglob("metrics.json")
    return json.loads(found.read_text())


def test_bundled_trainer_on_the_default_public_image_and_keras2_on_the_217_image_install_cleanly(tmp_path,
                                                                                                images_home):
    # no image named: the default, the public TensorFlow 2.21 image the package runs on as a custom container
    done = _train(ROOT / "trainer", "--job-dir", "bundled", "--", "--dry-run", cwd=tmp_path)
    assert "installed on image tensorflow/tensorflow:2.21.0: Python 3.11" in done.stdout, done.stdout[-2000:]
    assert "tensorflow 2.21.0" in done.stdout and "retired" not in done.stdout and "warning" not in done.stdout
    assert _metrics(tmp_path / "bundled")["tensorflow_version"] == "2.21.0"
    assert "trainer-0.1.0.tar.gz (sha256 " in done.stdout and " after mlsubmit_runtime-" in done.stdout
    venv = Path(re.search(r"\(venv (/\S+)\)$", done.stdout, re.M).group(1)) / "bin" / "python"
    assert venv.is_relative_to(images_home / "tensorflow_tensorflow_2.21.0" / "jobs")
    checked = subprocess.run([str(venv), "-m", "pip", "check"], capture_output=True, text=True)
    assert checked.returncode == 0 and "No broken requirements found" in checked.stdout, checked.stdout

    # the image's Python 3.10 has no PYTHONSAFEPATH: the replicas still run in the user's working directory, so a
    # relative --data means what it means to the user (the Quickstart's `jobs/digits.npz`), and a `trainer/` folder
    # there (this checkout's, here a decoy) never shadows the installed package
    from tests.support.trainer_run import digits_npz

    (tmp_path / "data").mkdir()
    digits_npz(tmp_path / "data" / "digits.npz")
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "__init__.py").write_text("raise SystemExit('the working tree shadowed the package')\n")
    done = _train(ROOT / "trainer", "--job-dir", "relative", "--runtime-version", "2.17", "--", "--data",
                  "data/digits.npz", "--model", "dense", "--epochs", "1", "--steps-per-epoch", "2", cwd=tmp_path)
    assert "installed on image tf-cpu.2-17.py310: Python 3.10" in done.stdout or "no Python 3.10" in done.stdout
    assert "tensorboard 2.17.1" in done.stdout and "end of availability was 2026-07-11" in done.stdout  # said, run
    assert _metrics(tmp_path / "relative")["tensorflow_version"] == "2.17.1"

    # a legacy-era trainer (--job-dir required) on 2.17, which legacy AI Platform never offered: on Vertex AI the
    # flag is one of the program's arguments
    done = _train(KERAS2, "--python-module", "kerastwo.task", "--runtime-version", "2.17", "--",
                  "--job-dir", str(tmp_path / "two"), cwd=tmp_path, TF_USE_LEGACY_KERAS="1")
    assert "kerastwo: tensorflow 2.17.1, tf.keras 2.17.0" in done.stdout
    assert _metrics(tmp_path / "two")["tensorflow_version"] == "2.17.1"


def test_a_keras2_feature_column_trainer_runs_on_the_28_image(tmp_path):
    """tf.keras 2 without TF_USE_LEGACY_KERAS, on a Keras 2 image's own environment (tf-cpu.2-8.py310, which the
    keras2 predict and replaced-numpy tests build too: the 2.15 image's, 1.2 GB, is no longer built for this alone)."""
    done = _train(KERAS2, "--python-module", "kerastwo.task", "--runtime-version", "2.8", "--",
                  "--job-dir", str(tmp_path / "job"), cwd=tmp_path)
    assert "installed on image tf-cpu.2-8.py310" in done.stdout
    metrics = _metrics(tmp_path / "job")
    assert metrics["tensorflow_version"] == "2.8.4" and metrics["keras_version"].startswith("2.8.")


SKLEARN = ROOT / "tests" / "fixtures" / "trainers" / "sklearn_iris"


def test_a_scikit_learn_trainer_runs_on_the_software_of_its_sklearn_image(tmp_path):
    """Not mlsubmit's own scikit-learn: the image's 1.6.1 with its numpy 1.26.4, on its Python 3.10; its xgboost
    2.1.3 as the CPU build of that version (xgboost-cpu: no CUDA kernels, no NCCL)."""
    image = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"
    done = _train(SKLEARN / "iris_trainer", "--executor-image-uri", image, "--python-module", "iris_trainer.task",
                  "--job-dir", "job", "--", "--model-dir", "model", cwd=tmp_path)
    assert "installed on image sklearn-cpu.1-6: Python 3.10" in done.stdout, done.stdout
    assert "scikit-learn 1.6.1, xgboost 2.1.3 (its CPU build, xgboost-cpu), numpy 1.26.4" in done.stdout
    assert "iris_trainer: scikit-learn 1.6.1, numpy 1.26.4, Python 3.10, accuracy 0.9" in done.stdout, done.stdout


TORCH = ROOT / "tests" / "fixtures" / "trainers" / "torch_pandas"


def test_a_pytorch_trainer_runs_on_the_software_of_its_pytorch_image(tmp_path, images_home):
    """Not mlsubmit's own Python 3.11 and newest packages: the image's torch 2.4 on its Python 3.10 with a numpy 1,
    and the trainer's own requirement (pandas) resolved for that Python (a pandas 2; pandas 3 needs Python 3.11)."""
    image = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"
    done = _train(TORCH / "trainer", "--executor-image-uri", image, "--python-module", "trainer.task",
                  "--job-dir", "job", cwd=tmp_path)
    assert "installed on image pytorch-gpu.2-4.py310: Python 3.10" in done.stdout, done.stdout[-3000:]
    assert "note: pytorch-gpu.2-4.py310 is a GPU image; here its torch runs on the CPU" in done.stdout
    assert "mlsubmit's own environment" not in done.stdout + done.stderr
    metrics = _metrics(tmp_path / "job")
    assert metrics["python"] == "3.10" and metrics["torch_version"].startswith("2.4."), metrics
    assert metrics["numpy_version"].startswith("1.") and metrics["pandas_version"].startswith("2."), metrics
    assert metrics["last_loss"] < 1e-3 < metrics["first_loss"], metrics
    # the trainer ran in the job's venv on the image's environment: its torch.from_numpy on a pandas frame (torch
    # 2.4 with the numpy 1 it was built against) is what `import torch, numpy` there would show
    venv = Path(re.search(r"\(venv (/\S+)\)$", done.stdout, re.M).group(1)) / "bin" / "python"
    assert venv.is_relative_to(images_home / "pytorch-gpu.2-4.py310" / "jobs")


def test_an_emulator_job_on_a_pytorch_image_runs_its_torch_and_python(gcs_emulator, tmp_path, monkeypatch):
    """The same environment serves the emulator: a Vertex AI request naming the PyTorch image as its
    executorImageUri runs on torch 2.4 and Python 3.10, with the package's pandas resolved for that Python."""
    from support.training_emulator import TrainingEmulator, stage_package

    from mlsubmit.jobspec.requests import vertex_custom_job
    from mlsubmit.jobspec.spec import JobSpec, Pool

    shutil.copytree(TORCH, tmp_path / "project")
    bucket = f"torch-{os.getpid()}"
    gcs_emulator.create_bucket(bucket)
    uri = stage_package(tmp_path / "project" / "trainer", gcs_emulator.endpoint, bucket)
    image = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"
    body = vertex_custom_job(JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-4"), job_name="torch",
                                     package_uris=(uri,), executor_image=image, python_module="trainer.task",
                                     args=("--job-dir", "out", "--steps", "50")))
    assert body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["executorImageUri"] == image
    monkeypatch.setenv("MLSUBMIT_IMAGE_ENV", "1")  # the emulator process's setting
    with TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=tmp_path / "emulator") as emulator:
        job = emulator.vertex_jobs().create(parent="projects/p/locations/us-central1", body=body).execute()
        job = emulator.wait(emulator.vertex_jobs().get(name=job["name"]).execute, timeout=500)
        lines = [e["textPayload"] for e in emulator.log_lines(job["name"].rsplit("/", 1)[-1], "p")]
    assert job["state"] == "JOB_STATE_SUCCEEDED", lines[-20:]
    assert any(re.match(r"Packages (already )?installed on image pytorch-gpu.2-4.py310: Python 3.10.\d+, torch "
                        r"2\.4\.", line) for line in lines), lines
    assert any(re.search(r"torch_trainer: torch 2\.4\.\S+, pandas 2\.\S+, numpy 1\.\S+, Python 3\.10", line)
               for line in lines), "\n".join(lines)


def test_a_plain_python3_m_venv_install_with_its_pip_23_runs_on_the_image(tmp_path, images_home):
    """What a new user has: `python3 -m venv` (pip 23.2.1 from ensurepip) and `pip install` of mlsubmit's wheel (the
    session's build of this checkout). Its pip refuses `--python-version` without `--target`: the image's packages
    are still looked up and the job runs on the image's software, not mlsubmit's own."""
    import sysconfig

    from support.built_wheel import mlsubmit_wheel

    venv = tmp_path / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)], check=True,
                   timeout=300)
    python = venv / "bin" / "python"
    pip = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True).stdout
    if not pip.startswith("pip 23."):
        pytest.skip(f"this Python's ensurepip gives {pip.split(' from ')[0]}, not pip 23")
    found = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    deps = sysconfig.get_paths()["purelib"]  # mlsubmit's installed dependencies (and the .pth files there)
    Path(found, "00-deps.pth").write_text(f"import site; site.addsitedir({deps!r})\n")
    installed = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                                str(mlsubmit_wheel())], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    done = subprocess.run([str(python), "-m", "mlsubmit", "train", "--local", "--package-path",
                           str(SKLEARN / "iris_trainer"), "--executor-image-uri",
                           "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest", "--python-module",
                           "iris_trainer.task", "--", "--model-dir", "model"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "NO_COLOR": "1", "MLSUBMIT_IMAGE_ENV": "1",
                                                       "MLSUBMIT_IMAGES": str(images_home)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "could not be looked up" not in done.stdout + done.stderr
    assert "iris_trainer: scikit-learn 1.6.1, numpy 1.26.4, Python 3.10" in done.stdout, done.stdout


def test_the_legacy_115_runtime_environment_imports_tensorflow_and_says_its_versions(images_home):
    """TensorFlow 1.15 declares protobuf>=3.6.1 unbounded; protobuf 4 breaks its `import tensorflow` (a gcloud legacy
    1.15 job died there before the trainer's code). The table caps it; the environment runs the image's Python 3.7."""
    from mlsubmit.images import choose
    from mlsubmit.images.envs import image_python, versions_line
    from mlsubmit.jobspec.spec import JobSpec

    image = choose.job_image(JobSpec(runtime_version="1.15"), api="legacy")
    assert image.name == "tf-cpu.1-15" and image.python == "3.7"
    python, _ = image_python(image)
    done = subprocess.run([str(python), "-I", "-c", "import sys, tensorflow as tf, google.protobuf as pb; "
                           "print(tf.__version__, pb.__version__, sys.version_info[1])"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    tensorflow, protobuf, minor = done.stdout.split()
    assert tensorflow == "1.15.0" and protobuf.startswith("3.") and minor == "7"
    assert re.match(r"tf-cpu\.1-15: Python 3\.7\.\d+, tensorflow-cpu 1\.15\.0|tf-cpu\.1-15: Python 3\.7\.\d+, "
                    r"tensorflow 1\.15\.0", versions_line(image, python))


def test_the_default_images_tensorflow_is_its_cpu_build_standing_in_and_a_tf_keras_package_adds_no_second(
        tmp_path, images_home):
    """The public image carries `tensorflow` 2.21.0, whose wheel holds CUDA kernels nothing here runs: its environment
    holds the CPU build (tensorflow-cpu 2.21.0, the same code) under the image's name, so a package requiring
    `tensorflow>=2.21` and tf-keras (which requires `tensorflow`) gets no second TensorFlow, `pip check` is clean,
    `import tensorflow` works, and what is said names the image's distribution."""
    from mlsubmit.images import choose, envs, job_envs
    from mlsubmit.jobspec.spec import JobSpec
    from mlsubmit.packaging.sdist import plan_sdist, write_sdist

    image = choose.job_image(JobSpec())
    python, _ = envs.image_python(image)
    site = Path(envs.site_packages(python))
    assert job_envs.installed(site, job_envs.TENSORFLOW_NAMES)[:2] == ("tensorflow-cpu", "2.21.0")
    alias = site / "tensorflow-2.21.0.dist-info"
    assert (alias / "INSTALLER").read_text().strip() == "mlsubmit-alias" and not list(site.glob("nvidia*"))
    assert re.fullmatch(r"tensorflow/tensorflow:2\.21\.0: Python 3\.11\.\d+, tensorflow 2\.21\.0 \(its CPU build, "
                        r"tensorflow-cpu\), keras 3\.\S+, tensorboard 2\.21\.\d+, .*", envs.versions_line(image, python))

    project = tmp_path / "project"  # reproducible sdist: built once per image environment in the suite's images dir
    (project / "legacy").mkdir(parents=True)
    (project / "legacy" / "__init__.py").write_text("")
    (project / "setup.py").write_text("from setuptools import setup\nsetup(name='legacy', version='0.1', packages="
                                      "['legacy'], install_requires=['tensorflow>=2.21', 'tf-keras~=2.21.0'])\n")
    sdist = write_sdist(plan_sdist(project / "legacy"), tmp_path / "dist").path
    job, _ = job_envs.job_python(image, [sdist])
    for layer in map(Path, job_envs.layers(job.parent.parent)[:-1]):  # the job's and its requirements' own
        assert not (layer / "tensorflow").exists() and job_envs.installed(layer, job_envs.TENSORFLOW_NAMES) is None
    probe = ("import importlib.metadata as m, tensorflow as tf, tf_keras\n"
             "print(tf.__version__, tf_keras.__version__, tf.__file__, m.version('tensorflow'))")
    done = subprocess.run([str(job), "-I", "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    tensorflow, tf_keras, origin, named = done.stdout.split()[-4:]
    assert (tensorflow, named) == ("2.21.0", "2.21.0") and tf_keras.startswith("2.21.")
    assert Path(origin).is_relative_to(site)
    checked = subprocess.run([str(job), "-m", "pip", "check"], capture_output=True, text=True)
    assert checked.returncode == 0 and "No broken requirements found" in checked.stdout, checked.stdout
