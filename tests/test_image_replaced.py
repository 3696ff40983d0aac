"""What ran is what is said, on every path: a job whose requirements replace a framework distribution of its image
(`numpy==1.22.4` beside tf-cpu.2-8.py310's numpy 1.23.5, `numpy==1.26.3` beside pytorch-gpu.2-4.py310's 1.26.4,
`tensorflow==2.8.0` over tf-cpu.2-8.py310's tensorflow-cpu 2.8.4) reports the versions it imports and says the
replacement in one wording (mlsubmit.images.imported.replaces) — `train --local`, the emulator's job log, the
pre-flight of `mlsubmit package` — and the replacing pins are a requirements layer of their own, so two requirement
lists that differ by one small package share it.

Heavy: the tf-cpu.2-8.py310 and pytorch-gpu.2-4.py310 environments (kept in the session's images dir, built by
test_image_env too), pip installing a numpy (18 MB) into a layer of each. No TensorFlow is installed for the
replacement of the image's TensorFlow (a 1.2 GB layer; issue #41 holds the suite's image environments to 8 GB): pip
resolves `tensorflow==2.8.0` from the index's metadata for the pre-flight, and what a job imports is read from a
layered environment of the distributions' records.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest_plugins = ["support.training_emulator"]
pytestmark = pytest.mark.slow

TASK = '''\
import numpy
try:
    import tensorflow as tf
except ImportError:  # a PyTorch image
    print("replaced:", "numpy", numpy.__version__)
else:
    print("replaced:", "tensorflow", tf.__version__, "numpy", numpy.__version__)
'''
TORCH_IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"


def _package(root: Path, *requires: str, task: str = TASK) -> Path:
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text(task)
    (root / "setup.py").write_text("from setuptools import find_packages, setup\n\n"
                                   f"setup(name='replacer', version='0.1', install_requires={list(requires)!r}, "
                                   "packages=find_packages())\n")
    return root / "trainer"


def _mlsubmit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "mlsubmit", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "NO_COLOR": "1", "MLSUBMIT_IMAGE_ENV": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _train(package: Path, cwd: Path, *image: str) -> subprocess.CompletedProcess:
    return _mlsubmit("train", "--local", "--package-path", str(package), *(image or ("--runtime-version", "2.8")),
                     "--python-module", "trainer.task", cwd=cwd)


def _layers(stdout: str) -> list[Path]:
    """The requirements environments the job's environment sees, in order."""
    venv = Path(re.search(r"\(venv (/\S+)\)$", stdout, re.M).group(1))
    bridge = next(venv.glob("lib/python*/site-packages/_mlsubmit_image.pth")).read_text()
    return [Path(site).parents[2] for site in re.findall(r"addsitedir\('([^']+)'\)", bridge)][:-1]


def test_a_numpy_pin_replaces_the_images_numpy_is_said_and_shared_by_a_list_one_line_longer(tmp_path, images_home):
    done = _train(_package(tmp_path / "a", "numpy==1.22.4"), tmp_path)
    assert re.search(r"installed on image tf-cpu\.2-8\.py310: Python 3\.10\.\d+, tensorflow-cpu 2\.8\.4, .*"
                     r"numpy 1\.22\.4 \(venv", done.stdout), done.stdout
    assert "note: requirement numpy==1.22.4 replaces the image's numpy 1.23.5 (as pip install does on the image)" \
        in done.stdout, done.stdout
    assert "replaced: tensorflow 2.8.4 numpy 1.22.4" in done.stdout
    (numpy_layer,) = _layers(done.stdout)
    # one line more: the numpy layer is shared, tabulate is a small layer above it (this job imports numpy alone:
    # what TensorFlow 2.8 does on the replaced numpy the first job showed, a second start of it shows nothing more)
    numpy_only = 'import numpy\nprint("replaced:", "numpy", numpy.__version__)\n'
    more = _train(_package(tmp_path / "b", "numpy==1.22.4", "tabulate", task=numpy_only), tmp_path)
    assert "note: requirement numpy==1.22.4 replaces the image's numpy 1.23.5" in more.stdout, more.stdout
    assert "replaced: numpy 1.22.4" in more.stdout
    small, shared = _layers(more.stdout)
    assert shared == numpy_layer and not list(small.glob("lib/python*/site-packages/numpy"))
    assert list(small.glob("lib/python*/site-packages/tabulate*"))


def test_a_replacement_is_said_the_same_by_train_local_the_emulator_and_the_preflight(gcs_emulator, tmp_path,
                                                                                      monkeypatch, images_home):
    """On an image Vertex AI still serves (the emulator refuses retired ones, as the service does)."""
    from support.training_emulator import TrainingEmulator, stage_package

    from mlsubmit.jobspec.requests import vertex_custom_job
    from mlsubmit.jobspec.spec import JobSpec, Pool

    note = "note: requirement numpy==1.26.3 replaces the image's numpy 1.26.4 (as pip install does on the image)"
    package = _package(tmp_path / "p", "numpy==1.26.3")
    local = _train(package, tmp_path, "--executor-image-uri", TORCH_IMAGE)
    assert note in local.stdout and "replaced: numpy 1.26.3" in local.stdout, local.stdout
    # the pre-flight: `mlsubmit package` checks against the same image and says the same note
    packaged = _mlsubmit("package", "--package-path", str(package), "--executor-image", TORCH_IMAGE,
                         "--skip-preflight", "--dist-dir", str(tmp_path / "dist"), cwd=tmp_path)
    assert note in packaged.stderr, packaged.stderr
    # the emulator: the job's log says it, after the versions the job imports
    bucket = f"replaced-{os.getpid()}"
    gcs_emulator.create_bucket(bucket)
    uri = stage_package(package, gcs_emulator.endpoint, bucket)
    body = vertex_custom_job(JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-4"), job_name="replaced",
                                     package_uris=(uri,), executor_image=TORCH_IMAGE, python_module="trainer.task"))
    monkeypatch.setenv("MLSUBMIT_IMAGE_ENV", "1")  # the emulator process's setting
    with TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=tmp_path / "emulator") as emulator:
        job, lines = emulator.run_vertex_job(body)
    assert job["state"] == "JOB_STATE_SUCCEEDED", lines[-20:]
    said = next(i for i, line in enumerate(lines) if re.match(
        r"Packages (already )?installed on image pytorch-gpu\.2-4\.py310: Python 3\.10\.\d+, torch 2\.4\.1, "
        r"numpy 1\.26\.3\.$", line))
    assert lines[said + 1] == note, lines
    assert any("replaced: numpy 1.26.3" in line for line in lines), lines


def test_a_tensorflow_pin_over_the_images_tensorflow_cpu_is_said_without_installing_it(tmp_path, images_home):
    """`tensorflow==2.8.0` on tf-cpu.2-8.py310 (tensorflow-cpu 2.8.4): the pre-flight names the replacement from pip's
    resolution (metadata only), and a job environment that imports the requirement's TensorFlow before the image's
    reports tensorflow 2.8.0, not tensorflow-cpu 2.8.4, with the same note."""
    from mlsubmit.images import catalog
    from mlsubmit.images.check import check
    from mlsubmit.images.job_envs import REQUIREMENTS

    image = catalog.tensorflow_image("2.8", "cpu")
    package = _package(tmp_path / "tf", "tensorflow==2.8.0")
    note = ("requirement tensorflow==2.8.0 replaces the image's tensorflow-cpu 2.8.4 (as pip install does on the "
            "image)")
    files, digest = [("trainer/task.py", package / "task.py")], uuid.uuid4().hex * 2  # never checked before
    checked = check(["tensorflow==2.8.0"], files, digest, image)
    assert checked.replaced == (note,), checked
    assert dict(checked.resolved)["tensorflow"] == "2.8.0" and not checked.cached
    again = check(["tensorflow==2.8.0"], files, digest, image)
    assert again.cached and again.replaced == (note,)  # a cached check says it too

    # a job's environment as mlsubmit.images.job_envs layers it: the job's venv, the replacing layer, the image's
    (tmp_path / "deps" / "x-env-1").mkdir(parents=True)
    (tmp_path / "deps" / "x-env-1" / REQUIREMENTS).write_text(json.dumps(["tensorflow==2.8.0"]))
    ran = _imported_from_records(tmp_path, ((tmp_path / "deps" / "x-env-1", "tensorflow", "2.8.0", "pip"),
                                            (tmp_path / "env-1", "tensorflow_cpu", "2.8.4", "pip"),
                                            (tmp_path / "env-1", "tensorflow", "2.8.4", "mlsubmit-alias")))
    assert re.fullmatch(r"Python 3\.\d+\.\d+, tensorflow 2\.8\.0", ran.line()), ran.line()
    assert ran.replaced() == [note]


def _imported_from_records(tmp_path: Path, records) -> object:
    """What a job's environment layered on the site directories of `records` ((environment, distribution, version,
    installer), the job's nearest first; each holding a `tensorflow` package) imports (mlsubmit.images.imported)."""
    from mlsubmit.images.imported import imported
    from mlsubmit.images.job_envs import see

    version = "python%d.%d" % sys.version_info[:2]
    job = tmp_path / "jobs" / "job"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(job)], check=True, timeout=120)
    sites = {}
    for root, name, release, installer in records:
        site = sites.setdefault(root, root / "lib" / version / "site-packages")
        (site / "tensorflow").mkdir(parents=True, exist_ok=True)
        record = site / f"{name}-{release}.dist-info"
        record.mkdir(exist_ok=True)  # (an image's environment shared by two jobs)
        (record / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {release}\n\n")
        (record / "INSTALLER").write_text(installer)
    see(next(job.glob("lib/python*/site-packages")), [str(site) for site in sites.values()])
    try:
        return imported(job / "bin" / "python")
    finally:
        shutil.rmtree(job)


def test_the_cpu_build_in_an_images_environment_is_said_under_the_images_name(tmp_path):
    """The public tensorflow/tensorflow image carries `tensorflow`; its environment holds the CPU build, tensorflow-cpu
    of the same version, in its place (mlsubmit.images.envs.cpu_builds, kept in the environment's image.json): what
    the job imports is said as the image's distribution, with one clause naming the build, and a requirement that
    replaces it names the image's distribution too."""
    from mlsubmit.images.envs import IMAGE_JSON
    from mlsubmit.images.job_envs import REQUIREMENTS

    image = tmp_path / "image" / "env-1"
    image.mkdir(parents=True)
    (image / IMAGE_JSON).write_text(json.dumps({"image": "tensorflow/tensorflow:2.21.0", "packages": [],
                                                "builds": {"tensorflow-cpu": "tensorflow"}}))
    records = ((image, "tensorflow_cpu", "2.21.0", "pip"), (image, "tensorflow", "2.21.0", "mlsubmit-alias"))
    ran = _imported_from_records(tmp_path / "image", records)
    assert re.fullmatch(r"Python 3\.\d+\.\d+, tensorflow 2\.21\.0 \(its CPU build, tensorflow-cpu\)", ran.line())
    assert ran.replaced() == []

    layer = tmp_path / "pinned" / "deps" / "x-env-1"
    layer.mkdir(parents=True)
    (layer / REQUIREMENTS).write_text(json.dumps(["tensorflow==2.20.0"]))
    ran = _imported_from_records(tmp_path / "pinned", ((layer, "tensorflow", "2.20.0", "pip"), *records))
    assert re.fullmatch(r"Python 3\.\d+\.\d+, tensorflow 2\.20\.0", ran.line()), ran.line()
    assert ran.replaced() == ["requirement tensorflow==2.20.0 replaces the image's tensorflow 2.21.0 (as pip install "
                              "does on the image)"]
