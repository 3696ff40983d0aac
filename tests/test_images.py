"""The prebuilt-image table: real names, lookups by runtime + Python version, the nearest version named when
none exists, and what `mlsubmit config` makes of it."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from mlsubmit.jobspec import images

from mlsubmit.jobspec import requests
from mlsubmit.cli import app
from mlsubmit.errors import UsageError
from mlsubmit.jobspec.spec_input import SpecDraft, build_spec


@pytest.mark.parametrize("version, kind, python, name", [
    ("2.17", "cpu", None, "tf-cpu.2-17.py310"),
    ("2.15", "gpu", None, "tf-gpu.2-15.py310"),
    ("2.11", "gpu", "3.7", "tf-gpu.2-11"),  # the older spelling is a real image too
    ("2.11", "cpu", None, "tf-cpu.2-11.py310"),  # without a Python version: the newest Python
    ("2.6", "cpu", None, "tf-cpu.2-6"),
    ("1.15", "gpu", "3.7", "tf-gpu.1-15"),
    ("2.15", "tpu", None, "tf-tpu.2-15.cp310"),
    ("2.12", "tpu", None, "tf-tpu.2-12"),
])
def test_runtime_and_python_versions_map_to_real_images(version, kind, python, name):
    image = images.tensorflow_image(version, kind, python=python)
    assert image.uri == f"us-docker.pkg.dev/vertex-ai/training/{name}:latest"
    assert images.find(image.uri) == image
    assert images.find(image.uri.replace("us-docker", "europe-docker")) == image


@pytest.mark.parametrize("version, kind, python, message", [
    ("2.10", "cpu", None, "no prebuilt TensorFlow 2.10 CPU training image; nearest with an image: "
                          "--runtime-version 2.9 or --runtime-version 2.11"),
    ("1.14", "cpu", None, "nearest with an image: --runtime-version 1.15"),
    ("2.0", "gpu", None, "--runtime-version 1.15 or --runtime-version 2.1"),
    ("2.17", "tpu", None, "TensorFlow 2.17 TPU training image; nearest with an image: --runtime-version 2.15"),
    ("1.15", "cpu", "2.7", "received '2.7'; the TensorFlow 1.15 CPU image has Python 3.7; use --python-version 3.7"),
])
def test_a_version_without_an_image_names_the_nearest(version, kind, python, message):
    with pytest.raises(UsageError) as raised:
        images.tensorflow_image(version, kind, python=python)
    assert message in raised.value.one_line() and "\n" not in raised.value.one_line()


def test_pins_come_from_the_frameworks_own_requirements():
    image = images.tensorflow_image("2.17")
    assert (image.python, image.pin("tensorboard"), image.pin("keras"), image.pin("tf-keras")) == \
        ("3.10", ">=2.17,<2.18", ">=3.2.0", "==2.17.*")
    assert "<5.0.0dev" in image.pin("protobuf") and image.pin("numpy") == ">=1.23.5,<2.0.0"
    assert images.tensorflow_image("2.15").pin("keras") == ">=2.15.0,<2.16"  # Keras 2 up to TF 2.15
    assert images.tensorflow_image("2.11", python="3.7").pin("protobuf") == ">=3.9.2,<3.20"
    assert images.find("us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest").pin("scikit-learn") == "==1.6.1"
    for image in images.IMAGES:  # every entry names its Python and its framework's own package
        assert image.python in ("3.7", "3.8", "3.10") and image.pins, image.name
    assert images.runtime_of("us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest") is None


def test_vertex_documents_use_the_table():
    spec = build_spec(SpecDraft(runtime_version="2.8", python_version="3.7"))
    assert requests.vertex_job_spec(spec)["workerPoolSpecs"][0]["pythonPackageSpec"]["executorImageUri"] == \
        "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-8:latest"
    legacy = requests.legacy_training_input(spec)
    assert (legacy["runtimeVersion"], legacy["pythonVersion"]) == ("2.8", "3.7")
    with pytest.raises(UsageError) as raised:
        requests.vertex_job_spec(build_spec(SpecDraft(runtime_version="2.10")))
    assert raised.value.hint == "nearest with an image: --runtime-version 2.9 or --runtime-version 2.11"
    # the legacy API had runtime 2.10; only the Vertex image is missing
    assert requests.legacy_training_input(build_spec(SpecDraft(runtime_version="2.10")))["runtimeVersion"] == "2.10"


def test_config_refuses_images_that_do_not_exist_in_one_line():
    runner = CliRunner()
    made_up = runner.invoke(app, ["config", "--executor-image",
                                  "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-10.py310:latest"])
    assert made_up.exit_code == 2 and made_up.stdout == ""
    assert made_up.stderr.count("\n") == 1 and "nearest with an image: --runtime-version 2.9" in made_up.stderr
    old = runner.invoke(app, ["config", "--runtime-version", "2.0"])
    assert old.exit_code == 2 and old.stderr.count("\n") == 1 and "--runtime-version 2.1" in old.stderr
    gpu = runner.invoke(app, ["config", "--runtime-version", "2.11", "--python-version", "3.7", "--gpus", "1"])
    assert gpu.exit_code == 0
    assert yaml.safe_load(gpu.stdout)["workerPoolSpecs"][0]["pythonPackageSpec"]["executorImageUri"] == \
        "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-11:latest"


def test_a_python_version_must_be_the_executor_images():
    image = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11:latest"
    with pytest.raises(UsageError, match="received '3.10'; the executor image .* carries Python 3.7"):
        build_spec(SpecDraft(executor_image=image, python_version="3.10"))
    assert build_spec(SpecDraft(executor_image=image, python_version="3.7")).python_version == "3.7"
    with pytest.raises(UsageError, match="fixes its own Python"):
        build_spec(SpecDraft(executor_image="gcr.io/p/own:1", python_version="3.7"))
