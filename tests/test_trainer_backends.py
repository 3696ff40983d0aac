"""The bundled trainer on each Keras backend: real JAX and torch training in subprocesses, real Keras in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.support.trainer_run import ROOT, digits_npz, read_json, run_trainer
from trainer.backends import BACKENDS, environment, resolve
from trainer.errors import TrainerError

TRAIN_ARGS = ("--epochs", "1", "--steps-per-epoch", "3", "--batch-size", "16", "--patience", "1")


def _train(tmp_path, *args: str, env: dict | None = None):
    job, npz = tmp_path / "job", digits_npz(tmp_path / "digits.npz")
    result = run_trainer("--job-dir", str(job), "--data", str(npz), *TRAIN_ARGS, *args, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return job, npz, result, read_json(job / "metrics.json")


def _manifest_lists_exactly_the_files(job) -> set[str]:
    listed = {entry["path"] for entry in read_json(job / "MANIFEST.json")["files"]}
    on_disk = {p.relative_to(job).as_posix() for p in job.rglob("*") if p.is_file() and p.name != "MANIFEST.json"}
    on_disk = {p for p in on_disk if not p.startswith("backup/")}
    assert listed == on_disk
    return listed


def _loads_under_tensorflow_with_the_recorded_test_metrics(job, npz, metrics) -> None:
    """model.keras (safe mode) in this process, on Keras's TensorFlow backend: same test loss and accuracy."""
    import keras

    assert keras.backend.backend() == "tensorflow"
    with np.load(npz) as data:
        x, y = data["x_test"].astype("float32")[..., None] / 255.0, data["y_test"]
    model = keras.models.load_model(str(job / "model" / "model.keras"), safe_mode=True, compile=False)
    p = model.predict(x, verbose=0)
    loss = float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y], 1e-7, 1.0))))
    assert abs(loss - metrics["test_loss"]) < 1e-4
    assert float(np.mean(p.argmax(1) == y)) == pytest.approx(metrics["test_accuracy"])


@pytest.mark.slow
def test_jax_trains_data_parallel_over_two_emulated_devices(tmp_path):
    # the examples' multi-backend recipe's default model (tests/test_backends_job.py runs the recipe on dense)
    job, npz, result, metrics = _train(tmp_path, "--backend", "jax", "--model", "mnist_convnet",
                                       env={"MLSUBMIT_EMULATE_DEVICES": "2"})
    from importlib.metadata import version

    assert (metrics["backend"], metrics["backend_version"], metrics["keras_backend"]) == ("jax", version("jax"), "jax")
    assert metrics["strategy"] == "data_parallel" and metrics["replicas"] == 2
    assert metrics["model"] == "mnist_convnet"
    assert metrics["distribution"] == "keras.distribution.DataParallel over 2 devices (cpu:0, cpu:1)"
    assert metrics["global_batch"] == 32 and metrics["devices"] == ["cpu:0", "cpu:1"]
    assert metrics["formats"] == ["model.keras", "model.h5", "saved_model"] and metrics["formats_skipped"] == {}
    for key in ("test_loss", "test_accuracy", "validation_loss", "samples_per_second", "wall_seconds"):
        assert metrics[key] is not None
    assert "backend      jax " in result.stdout and "DataParallel over 2 devices" in result.stdout
    listed = _manifest_lists_exactly_the_files(job)
    assert {"model/model.keras", "model/model.h5", "model/saved_model/saved_model.pb", "metrics.json"} <= listed
    _loads_under_tensorflow_with_the_recorded_test_metrics(job, npz, metrics)


@pytest.mark.slow
def test_torch_trains_on_one_device_and_names_the_format_it_cannot_write(tmp_path):
    job, npz, result, metrics = _train(tmp_path, "--model", "mnist_convnet",
                                       env={"KERAS_BACKEND": "torch", "MLSUBMIT_EMULATE_DEVICES": "2"})
    import torch

    assert (metrics["backend"], metrics["backend_version"]) == ("torch", torch.__version__)
    assert metrics["replicas"] == 1 and metrics["global_batch"] == 16 and metrics["devices"] == ["cpu"]
    assert metrics["model"] == "mnist_convnet"
    assert metrics["distribution"] == "one device (cpu): Keras 3.15 distributes only on JAX and TensorFlow"
    assert metrics["formats"] == ["model.keras", "model.h5"]
    assert set(metrics["formats_skipped"]) == {"saved_model"} and "torch" in metrics["formats_skipped"]["saved_model"]
    assert "not saved    saved_model: " in result.stdout
    listed = _manifest_lists_exactly_the_files(job)
    assert "model/model.keras" in listed and not any(p.startswith("model/saved_model") for p in listed)
    _loads_under_tensorflow_with_the_recorded_test_metrics(job, npz, metrics)


SAME_WEIGHTS_SCRIPT = r"""
import os, sys
os.environ.update(KERAS_BACKEND="jax", XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
import numpy as np
from trainer.backend_train import run_on_backend
from trainer.config import parse_config
job, npz = sys.argv[1], sys.argv[2]
weights = []
for name, args in {"one": ["--gpus", "1", "--batch-size", "32"], "two": ["--batch-size", "16"]}.items():
    config = parse_config(["--backend", "jax", "--job-dir", f"{job}/{name}", "--data", npz, "--optimizer", "sgd",
                           "--epochs", "2", "--steps-per-epoch", "4", "--emulate-devices", "2", *args], env={})
    result = run_on_backend(config)
    assert (result.metrics["replicas"], result.metrics["global_batch"]) == ({"one": 1, "two": 2}[name], 32)
    weights.append([np.asarray(w) for w in result.template.get_weights()])
print(max(float(np.max(np.abs(a - b))) for a, b in zip(*weights)))
"""


@pytest.mark.slow
def test_jax_on_one_and_two_devices_sees_the_same_batches_and_ends_with_the_same_weights(tmp_path):
    npz = digits_npz(tmp_path / "digits.npz")
    out = subprocess.run([sys.executable, "-c", SAME_WEIGHTS_SCRIPT, str(tmp_path / "jobs"), str(npz)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert float(out.stdout.strip().splitlines()[-1]) < 1e-6


CLUSTER = json.dumps({"cluster": {"chief": ["localhost:1"], "worker": ["localhost:2"]},
                      "task": {"type": "chief", "index": 0}})


@pytest.mark.parametrize(("args", "env", "expected"), [
    (("--backend", "jaxx"), {}, "error: invalid value for --backend: received 'jaxx'; expected one of tensorflow, "
                               "jax, torch; did you mean 'jax'?"),
    ((), {"KERAS_BACKEND": "pytorch"}, "error: invalid value for KERAS_BACKEND: received 'pytorch'; expected one of "
                                       "tensorflow, jax, torch; did you mean 'torch'?"),
    (("--backend", "jax"), {"TF_CONFIG": CLUSTER}, "error: invalid value for --backend: received 'jax' in a cluster "
                                                   "job (chief×1, worker×1), but cluster training needs --backend "
                                                   "tensorflow (tf.distribute); train on one machine to use jax"),
    (("--backend", "torch", "--jit-compile", "on"), {}, "error: invalid value for --jit-compile: received 'on' with "
                                                        "--backend torch, but the trainer does not run torch.compile"),
])
def test_bad_backend_input_is_one_line_and_exit_2(tmp_path, args, env, expected):
    result = run_trainer("--job-dir", str(tmp_path / "job"), *args, env=env, timeout=60)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith(expected)
    assert not (tmp_path / "job").exists()


def test_a_backend_not_installed_names_what_to_install(tmp_path):
    # -S: no site-packages, so neither jax nor anything else is importable (the check runs before any import)
    result = subprocess.run([sys.executable, "-S", "-m", "trainer.task", "--backend", "jax", "--job-dir",
                             str(tmp_path / "job")], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert result.returncode == 2
    assert result.stderr == ("error: the jax backend needs the jax package, which is not installed; run "
                             "`pip install jax`\n")


def test_the_flag_wins_over_keras_backend_and_tensorflow_is_the_default():
    assert resolve("jax", {"KERAS_BACKEND": "torch"}) == "jax"
    assert resolve(None, {"KERAS_BACKEND": "torch"}) == "torch"
    assert resolve(None, {}) == resolve(None, {"KERAS_BACKEND": " "}) == "tensorflow"
    assert set(BACKENDS) == {"tensorflow", "jax", "torch"}


def test_jax_emulation_appends_to_xla_flags_and_pins_the_cpu():
    env = environment("jax", 4, None, {"XLA_FLAGS": "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=8"})
    assert env == {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                   "XLA_FLAGS": "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=4"}
    assert environment("jax", 0, None, {}) == {"KERAS_BACKEND": "jax"}
    assert environment("torch", 0, 0, {}) == {"KERAS_BACKEND": "torch", "CUDA_VISIBLE_DEVICES": ""}
    assert environment("tensorflow", 2, None, {}) == {"KERAS_BACKEND": "tensorflow"}


def test_torch_refuses_several_devices_with_the_usual_message_first():
    from trainer.backend_devices import torch_device

    with pytest.raises(TrainerError, match="received 2 with --backend torch, but torch trains on one device"):
        torch_device(2, 2)
    with pytest.raises(TrainerError, match="this machine has 2 emulated devices"):
        torch_device(3, 2)
    assert torch_device(None, 2).names == ("cpu",)


def test_a_model_that_cannot_be_built_or_saved_is_one_line_before_training():
    import keras

    from trainer.model_check import build_checked

    def unbuildable(keras, name, input_shape, num_classes):
        return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Dense(0)])

    with pytest.raises(TrainerError) as raised:
        build_checked(keras, "tensorflow", "dense", (4,), 2, factory=unbuildable)
    assert str(raised.value).startswith("model 'dense' cannot be built on the tensorflow backend (ValueError: ")
    assert "\n" not in str(raised.value)

    class Scaled(keras.layers.Layer):  # an __init__ argument and no get_config: the Keras format cannot save it
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def call(self, x):
            return x * self.scale

    def unsavable(keras, name, input_shape, num_classes):
        return keras.Sequential([keras.Input(shape=input_shape), Scaled(np.float32(2.0)), keras.layers.Dense(2)])

    with pytest.raises(TrainerError) as raised:
        build_checked(keras, "tensorflow", "dense", (4,), 2, factory=unsavable)
    assert str(raised.value).startswith("model 'dense' cannot be saved on the tensorflow backend (")
    assert "\n" not in str(raised.value)
    assert build_checked(keras, "tensorflow", "dense", (4,), 2).count_params() > 0


def test_xla_with_several_replicas_is_refused_only_where_keras_cannot_compile_it():
    from trainer.config import check_jit_compile

    check_jit_compile("on", 4, "jax")  # DataParallel steps are jitted on JAX
    with pytest.raises(TrainerError, match="cannot XLA-compile a MirroredStrategy step"):
        check_jit_compile("on", 4, "tensorflow")
    with pytest.raises(TrainerError, match="does not run torch.compile"):
        check_jit_compile("on", 1, "torch")
    check_jit_compile("off", 1, "torch")


ASYNC_PROBE = r"""
import json, pathlib, sys, tempfile
import keras
from mlsubmit_runtime.storage import Location
from trainer.callbacks import make_callbacks
with tempfile.TemporaryDirectory() as tmp:
    here = Location(tmp)
    callbacks, _, _ = make_callbacks(keras, backup=here.child("backup"), logs=here.child("logs"), patience=1,
                                     samples_per_epoch=64, with_validation=True)
    listed = keras.callbacks.CallbackList(callbacks, add_history=True, add_progbar=True, verbose=2, epochs=2,
                                          steps=4)
    print(json.dumps({"backend": keras.backend.backend(), "async_train": listed._async_train}))
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_trainers_callbacks_leave_keras_dispatching_steps_asynchronously(backend):
    """A callback with a batch hook makes Keras wait for the device after every step (it turns the step's logs into
    floats): on an H200 the JAX trainer ran at 0.65x plain Keras until BackupAndRestore's empty hook was marked safe."""
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", ASYNC_PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"backend": backend, "async_train": True}
