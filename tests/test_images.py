"""The prebuilt-image table: real names, lookups by runtime + Python version, the nearest version named when
none exists, and what `mlsubmit config` makes of it."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from mlsubmit.images import catalog as images

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
    # every prebuilt TensorFlow training image has reached its end of availability (2026-07-11): the nearest that
    # still runs is the public tensorflow/tensorflow image mlsubmit runs the package on (a custom container)
    ("2.10", "cpu", None, "no prebuilt TensorFlow 2.10 CPU training image; nearest that Vertex AI still runs: "
                          "--runtime-version 2.21"),
    ("1.14", "cpu", None, "no prebuilt TensorFlow 1.14 CPU training image; nearest that Vertex AI still runs: "
                          "--runtime-version 2.21"),
    ("2.0", "gpu", None, "TensorFlow 2.0 GPU training image; nearest that Vertex AI still runs: --runtime-version 2.21"),
    ("2.17", "tpu", None, "TensorFlow 2.17 TPU training image; Vertex AI serves no prebuilt TensorFlow TPU"),
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
        assert image.python in ("3.7", "3.8", "3.10", "3.11" if image.carrier else "-") and image.pins, image.name
    carrier = images.tensorflow_image("2.21")  # tensorflow 2.21.0's own Requires-Dist; no tensorboard any more
    assert (carrier.uri, carrier.python, carrier.pin("keras"), carrier.pin("protobuf"), carrier.pin("tensorboard")) == \
        ("tensorflow/tensorflow:2.21.0", "3.11", ">=3.12.0", ">=6.31.1,<8.0.0", None)
    for version in ("2.8", "2.9", "2.11"):  # their metadata says numpy>=1.20 only; numpy 2 breaks them
        assert images.tensorflow_image(version).pin("numpy") == ">=1.20,<1.24"
    assert images.runtime_of("us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest") is None


def test_vertex_documents_use_the_table():
    spec = build_spec(SpecDraft(runtime_version="2.8", python_version="3.7"))
    assert requests.vertex_job_spec(spec)["workerPoolSpecs"][0]["pythonPackageSpec"]["executorImageUri"] == \
        "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-8:latest"
    legacy = requests.legacy_training_input(spec)
    assert (legacy["runtimeVersion"], legacy["pythonVersion"]) == ("2.8", "3.7")
    with pytest.raises(UsageError) as raised:
        requests.vertex_job_spec(build_spec(SpecDraft(runtime_version="2.10")))
    assert raised.value.hint == "nearest that Vertex AI still runs: --runtime-version 2.21"
    # the legacy API had runtime 2.10; only the Vertex image is missing
    assert requests.legacy_training_input(build_spec(SpecDraft(runtime_version="2.10")))["runtimeVersion"] == "2.10"


def test_config_refuses_images_that_do_not_exist_in_one_line():
    runner = CliRunner()
    made_up = runner.invoke(app, ["config", "--executor-image",
                                  "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-10.py310:latest"])
    assert made_up.exit_code == 2 and made_up.stdout == ""
    assert made_up.stderr.count("\n") == 1 and "still runs: --runtime-version 2.21" in made_up.stderr
    old = runner.invoke(app, ["config", "--runtime-version", "2.0"])
    assert old.exit_code == 2 and old.stderr.count("\n") == 1 and "TensorFlow 2.0 CPU" in old.stderr
    # an image that exists but is retired: refused when a flag names it, as `train` refuses it
    gpu = runner.invoke(app, ["config", "--runtime-version", "2.11", "--python-version", "3.7", "--gpus", "1"])
    assert gpu.exit_code == 2 and gpu.stdout == "" and gpu.stderr.count("\n") == 1
    assert gpu.stderr.startswith("error: tf-gpu.2-11 is no longer served by Vertex AI: its end of availability was "
                                 "2024-11-15") and "--runtime-version 2.21" in gpu.stderr
    served = runner.invoke(app, ["config", "--executor-image",
                                 "us-docker.pkg.dev/vertex-ai/training/xgboost-cpu.2-1:latest"])
    assert served.exit_code == 0 and yaml.safe_load(served.stdout)["workerPoolSpecs"][0]["pythonPackageSpec"][
        "executorImageUri"] == "us-docker.pkg.dev/vertex-ai/training/xgboost-cpu.2-1:latest"


def test_a_migrated_file_with_a_retired_runtime_moves_to_a_served_image_and_says_python_cannot_be_kept(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text("trainingInput:\n  scaleTier: BASIC\n  runtimeVersion: '2.11'\n  pythonVersion: '3.7'\n"
                   "  pythonModule: trainer.task\n  packageUris: [gs://bkt/t-1.tar.gz]\n")
    done = CliRunner().invoke(app, ["config", "--config", str(old), "--format", "vertex"])
    assert done.exit_code == 0, done.stderr
    pool = yaml.safe_load(done.stdout)["workerPoolSpecs"][0]
    assert pool["containerSpec"]["imageUri"] == "tensorflow/tensorflow:2.21.0" and "pythonPackageSpec" not in pool
    assert done.stderr.splitlines()[:2] == [
        "warning: the file's image tf-cpu.2-11 is no longer served by Vertex AI (end of availability 2024-11-15): "
        "written for tensorflow/tensorflow:2.21.0 (tensorflow 2.21, Python 3.11) instead",
        "warning: Python 3.7 cannot be kept: no image Vertex AI still runs has tensorflow on Python 3.7; check the "
        "trainer on Python 3.11 first (mlsubmit train --local --runtime-version 2.21)"]
    legacy = CliRunner().invoke(app, ["config", "--config", str(old), "--format", "legacy"])  # kept as it was
    assert legacy.exit_code == 0 and legacy.stderr.count("warning") == 1 and "shut down on 2025-01-31" in legacy.stderr
    assert yaml.safe_load(legacy.stdout)["trainingInput"]["runtimeVersion"] == "2.11"


def test_a_python_version_must_be_the_executor_images():
    image = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11:latest"
    with pytest.raises(UsageError, match="received '3.10'; the executor image .* carries Python 3.7"):
        build_spec(SpecDraft(executor_image=image, python_version="3.10"))
    assert build_spec(SpecDraft(executor_image=image, python_version="3.7")).python_version == "3.7"
    with pytest.raises(UsageError, match="fixes its own Python"):
        build_spec(SpecDraft(executor_image="gcr.io/p/own:1", python_version="3.7"))


def _pip_report(image: images.Image, requirements: list[str], constraints: list[str]) -> tuple[dict | None, str]:
    """pip's choice (name -> metadata) for `requirements` alone (`--no-deps`, metadata only) for the image's Python,
    held to `constraints`, or None and pip's last error line."""
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from mlsubmit.images.envs import foreign_python_args

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "c.txt").write_text("\n".join(constraints) + "\n")
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--no-deps",
                               *foreign_python_args(image, tmp), "--report", f"{tmp}/r.json", "--timeout", "30",
                               "-c", f"{tmp}/c.txt", *requirements], capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0 and any(w in done.stderr for w in ("NewConnectionError", "Max retries exceeded")):
            pytest.skip("the package index cannot be reached")
        if done.returncode != 0:
            return None, ([line for line in done.stderr.splitlines() if line.startswith("ERROR")] or [""])[-1]
        from packaging.utils import canonicalize_name

        return {canonicalize_name(item["metadata"]["name"]): item["metadata"]
                for item in json.loads(Path(tmp, "r.json").read_text())["install"]}, ""


def _resolves(image: images.Image, cache: "Path") -> tuple[bool, str]:
    """Whether the image's framework release and its pins agree: first the framework's own requirements (its wheel
    metadata), then each pinned package (numpy, protobuf, keras, ml-dtypes, ...) within both its pin and the
    framework's requirement on it, for the image's Python. Metadata only, `--no-deps`: no backtracking through
    every dependency, so the whole table costs about a minute cold. Kept by content hash under `cache`."""
    import hashlib
    import json
    from pathlib import Path

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from mlsubmit.images.check import image_requirements
    from mlsubmit.images.envs import _applies

    wanted = image_requirements(image)
    pins = [f"{package}{pin}" for package, pin in image.pins]
    key = hashlib.sha256(json.dumps(["no-deps", image.python, wanted, pins]).encode()).hexdigest()[:24]
    kept = Path(cache) / "table-resolves" / f"{key}.json"
    if kept.exists():
        return tuple(json.loads(kept.read_text()))
    framework, why = _pip_report(image, wanted, pins)
    answer = (False, f"the framework with its pins: {why}")
    if framework is not None:
        needs = [r for item in framework.values() for r in (_applies(x, image.python)
                                                            for x in item.get("requires_dist", [])) if r]
        carried = set(framework) | ({"tensorflow"} if "tensorflow-cpu" in framework else set())
        pinned = {canonicalize_name(package) for package, _ in image.pins} - carried
        asked = [f"{package}{pin}" for package, pin in image.pins if canonicalize_name(package) in pinned]
        by_framework = [r for r in needs if canonicalize_name(Requirement(r).name) in pinned]
        chosen, why = _pip_report(image, asked, by_framework) if asked else ({}, "")
        answer = (chosen is not None, why and f"a pin against the framework's requirements ({by_framework}): {why}")
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps(answer))
    return answer


def test_every_entry_of_the_table_is_satisfiable_with_its_own_pins(images_home):
    """Each image's framework release, its pins (numpy, protobuf, keras, ml-dtypes, ...) and its Python agree on
    the package index: no entry asks its environment for a numpy (or protobuf, ...) its framework refuses."""
    from concurrent.futures import ThreadPoolExecutor

    distinct = {(i.python, i.pins, i.framework, i.accelerator == "cpu"): i for i in images.IMAGES}
    with ThreadPoolExecutor(6) as pool:
        answers = dict(zip(distinct.values(), pool.map(lambda i: _resolves(i, images_home), distinct.values())))
    failed = {image.name: why for image, (ok, why) in answers.items() if not ok}
    assert not failed, failed


def test_every_image_knows_its_lifecycle_and_a_retired_one_names_the_way_out():
    from datetime import date

    gone = images.find("us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-11:latest")
    assert (gone.end_of_availability, images.available(gone, date(2024, 11, 14))) == ("2024-11-15", True)
    assert not images.available(gone, date(2024, 11, 15))
    for image in images.IMAGES:  # a date or a reason, for every entry
        assert image.lifecycle_source and (image.end_of_availability or image.framework != "tensorflow"
                                           or image.carrier), image.name
    newest = images.tensorflow_image("2.17")
    assert images.available(newest, date(2026, 7, 10)) and not images.available(newest, date(2026, 11, 25))
    # while a TensorFlow image was still served, a retired one pointed at the nearest of them
    earlier = images.retired(images.tensorflow_image("2.12"), date(2026, 1, 1))
    assert earlier.one_line() == (
        "tf-cpu.2-12.py310 is no longer served by Vertex AI: its end of availability was 2025-06-30 (by Google's "
        "'Supported frameworks' table); use us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest "
        "(tensorflow 2.15, Python 3.10): --runtime-version 2.15 or --executor-image "
        "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest")
    # today none is: the way out is the public image mlsubmit runs the package on as a custom container
    now = images.retired(newest, date(2026, 11, 25))
    assert "end of availability was 2026-07-11" in now.one_line() and now.hint == (
        "use tensorflow/tensorflow:2.21.0 (tensorflow 2.21, Python 3.11; mlsubmit runs your package on it as a custom "
        "container): --runtime-version 2.21 or --executor-image tensorflow/tensorflow:2.21.0")
    assert images.available(images.tensorflow_image("2.21", "gpu")) and images.DEFAULT_TENSORFLOW == "2.21"
    assert images.retired(images.find("us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest")) is None


def test_a_made_up_spelling_is_never_corrected_to_a_retired_image():
    with pytest.raises(UsageError) as raised:
        build_spec(SpecDraft(executor_image="us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py39:latest"))
    assert "tf-cpu.2-11" not in (raised.value.hint or "") and "tensorflow/tensorflow:2.21.0" in raised.value.hint


def test_an_image_environment_installs_the_cpu_build_of_its_framework_where_the_index_has_one():
    """Nothing here runs CUDA: the image's `tensorflow` (or `xgboost`) is installed as the CPU build of the same
    version (tensorflow-cpu, xgboost-cpu), and what requires the image's name (tf-keras requires `tensorflow`) is
    installed after the CPU build stands in under that name. Where the index has no CPU build at the image's version
    (xgboost 1.6.2), the image's own distribution is installed."""
    from mlsubmit.images.envs import Carried, _install_steps, cpu_builds

    default = images.find("tensorflow/tensorflow:2.21.0")
    carried = (Carried("tensorflow", "2.21.0", ("keras>=3.12.0",)),)
    first, then = _install_steps(default, carried)
    assert first[0] == "tensorflow-cpu==2.21.0" and "tensorboard~=2.21.0" in first and then == []
    assert cpu_builds(carried) == {"tensorflow-cpu": "tensorflow"}

    legacy = images.tensorflow_image("2.17")
    carried = (Carried("tensorflow-cpu", "2.17.1", ()), Carried("tf-keras", "2.17.0", ("tensorflow<2.18,>=2.17",)))
    first, then = _install_steps(legacy, carried)
    assert first[0] == "tensorflow-cpu==2.17.1" and then == ["tf-keras==2.17.0"] and cpu_builds(carried) == {}

    sklearn = images.find("us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest")
    assert _install_steps(sklearn, (Carried("xgboost", "2.1.3", ("nvidia-nccl-cu12",)),))[0][0] == "xgboost-cpu==2.1.3"
    old = images.find("us-docker.pkg.dev/vertex-ai/training/xgboost-cpu.1-6:latest")
    assert _install_steps(old, (Carried("xgboost", "1.6.2", ()),))[0][0] == "xgboost==1.6.2"
    assert cpu_builds((Carried("tensorflow", "2.0.4", ()),)) == {}  # TensorFlow 2.0's `tensorflow` is CPU-only
