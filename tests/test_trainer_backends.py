"""The bundled trainer on each Keras backend: real JAX and torch training in subprocesses, real Keras in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.support.trainer_run import ROOT, digits_npz, run_trainer
from trainer.backends import BACKENDS, environment, resolve
from trainer.errors import TrainerError

# The JAX data-parallel and torch one-device runs of the recipe's default model (mnist_convnet), their artifacts and
# their loading under TensorFlow: tests/test_trainer_without_tensorflow.py (JAX where TensorFlow is not installed,
# torch where it is).


# One JAX process for this module: the one- and two-device runs, then the callbacks probe (ASYNC_PROBE, below).
SAME_WEIGHTS_SCRIPT = r"""
import os, sys
os.environ.update(KERAS_BACKEND="jax", XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
sys.modules["tensorflow"] = None  # no SavedModel export (through TensorFlow): the weights are what is compared
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
print("MAXDIFF", max(float(np.max(np.abs(a - b))) for a, b in zip(*weights)))
"""


@pytest.fixture(scope="module")
def jax_process(tmp_path_factory) -> list[str]:
    """The output lines of this module's one JAX process (SAME_WEIGHTS_SCRIPT, then ASYNC_PROBE)."""
    root = tmp_path_factory.mktemp("jax")
    npz = digits_npz(root / "digits.npz")
    out = subprocess.run([sys.executable, "-c", SAME_WEIGHTS_SCRIPT + ASYNC_PROBE, str(root / "jobs"), str(npz)],
                         cwd=ROOT, capture_output=True, text=True, timeout=180,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()


@pytest.mark.slow
def test_jax_on_one_and_two_devices_sees_the_same_batches_and_ends_with_the_same_weights(jax_process):
    (max_diff,) = [float(line.split()[1]) for line in jax_process if line.startswith("MAXDIFF ")]
    assert max_diff < 1e-6


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
def test_the_trainers_callbacks_leave_keras_dispatching_steps_asynchronously(backend, request):
    """A callback with a batch hook makes Keras wait for the device after every step (it turns the step's logs into
    floats): on an H200 the JAX trainer ran at 0.65x plain Keras until BackupAndRestore's empty hook was marked safe."""
    if backend == "jax":  # the module's JAX process probes after its training (one JAX start)
        lines = request.getfixturevalue("jax_process")
    else:
        env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", ASYNC_PROBE], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        lines = done.stdout.strip().splitlines()
    assert json.loads(lines[-1]) == {"backend": backend, "async_train": True}
