"""Mixed precision and XLA flags of the trainer, and the GPU scaling benchmark's arithmetic and report."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from tests.support.trainer_run import ROOT, read_json, run_trainer
from tests.test_trainer_training import _manifest_ok
from trainer.config import parse_config, resolve_jit_compile
from trainer.errors import TrainerError


def _benchmark():
    spec = importlib.util.spec_from_file_location("gpu_scaling", ROOT / "benchmarks" / "gpu_scaling.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_precision_and_jit_flags_are_strict():
    config = parse_config(["--job-dir", "/tmp/x", "--precision", "mixed_float16", "--jit-compile", "on"], env={})
    assert (config.precision, config.jit_compile) == ("mixed_float16", "on")
    assert (parse_config(["--job-dir", "/tmp/x"], env={}).precision, "auto") == ("float32", "auto")
    with pytest.raises(TrainerError, match=r"--precision: received 'fp16'; expected one of float32, mixed_float16"):
        parse_config(["--job-dir", "/tmp/x", "--precision", "fp16"], env={})
    with pytest.raises(TrainerError, match=r"--jit-compile: received 'yes'; expected one of auto, on, off"):
        parse_config(["--job-dir", "/tmp/x", "--jit-compile", "yes"], env={})


@pytest.mark.parametrize("devices", [["--gpus", "2"], ["--emulate-devices", "4"]])
def test_xla_with_several_replicas_is_refused_before_training(devices):
    with pytest.raises(TrainerError, match=r"--jit-compile: received 'on' with [24] replicas.*keras-team/keras#19005"):
        parse_config(["--job-dir", "/tmp/x", "--jit-compile", "on", *devices], env={})
    parse_config(["--job-dir", "/tmp/x", "--jit-compile", "on", "--gpus", "1", "--emulate-devices", "4"], env={})


def test_xla_auto_is_on_for_one_gpu_as_plain_keras_and_keras_default_elsewhere():
    assert resolve_jit_compile("auto", "GPU", 1) == "on"
    assert resolve_jit_compile("auto", "GPU", 2) == "auto"  # Keras: off under MirroredStrategy
    assert resolve_jit_compile("auto", "CPU", 1) == "auto"  # Keras: off on CPU-only machines
    assert resolve_jit_compile("off", "GPU", 1) == "off"


@pytest.mark.slow
def test_mixed_bfloat16_with_xla_trains_and_the_saved_model_reloads(tmp_path):
    """Also the dry run's own test: it saves every format, reloads them and summarises (one TensorFlow start)."""
    result = run_trainer("--dry-run", "--job-dir", str(tmp_path / "job"), "--precision", "mixed_bfloat16",
                         "--jit-compile", "on")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "reload check model.keras max |Δ| 0.0e+00, model.h5 max |Δ| 0.0e+00" in result.stdout
    assert "strategy     default" in result.stdout
    _manifest_ok(tmp_path / "job")
    metrics = read_json(tmp_path / "job" / "metrics.json")
    assert (metrics["precision"], metrics["jit_compile"]) == ("mixed_bfloat16", True)
    import zipfile

    with zipfile.ZipFile(tmp_path / "job" / "model" / "model.keras") as saved:
        config = json.loads(saved.read("config.json"))
    policies = [layer["config"]["dtype"]["config"]["name"] for layer in config["config"]["layers"]
                if layer["class_name"] != "InputLayer"]
    assert policies[:-1] == ["mixed_bfloat16"] * (len(policies) - 1) and policies[-1] == "float32"


def test_device_ladder_doubles_up_to_what_the_machine_has():
    ladder = _benchmark().ladder
    assert ladder(1) == [1]
    assert ladder(4) == [1, 2, 4]
    assert ladder(6) == [1, 2, 4, 6]
    assert ladder(8, limit=3) == [1, 2, 3]


def test_efficiency_and_ratios_are_per_series_and_the_table_marks_a_starved_gpu():
    bench = _benchmark()
    series = {"model": "mnist_cnn", "precision": "float32", "xla": "off"}
    rows = bench.summarise([
        {**series, "n": 1, "global_batch": 64, "trainer": 1000.0, "keras": 800.0, "pipeline": 50000.0},
        {**series, "n": 2, "global_batch": 128, "trainer": 1800.0, "keras": 900.0, "pipeline": 2000.0,
         "keras_aug": 1500.0, "input_wait": 0.0312},
        {**series, "xla": "on", "n": 1, "global_batch": 64, "trainer": 3000.0, "keras": 3300.0, "pipeline": 50000.0},
        {**series, "xla": "on", "n": 2, "global_batch": 128, "keras": 4000.0, "pipeline": 60000.0, "error": "not run"},
    ])
    two = rows[1]
    assert (two["speedup"], two["efficiency"], two["vs_keras"]) == (1.8, 0.9, 2.0)
    assert two["input_bound"] is True and rows[0]["input_bound"] is False  # 2000 img/s fed for 1800 trained
    assert rows[2]["vs_keras"] == 0.909 and rows[3]["speedup"] is None
    table = bench.render(rows, "header").splitlines()
    assert table[0] == "header"
    assert table[3].split(" | ")[5:] == ["1,800", "900", "2.00×", "1.80×", "90%", "2,000", "1,500", "1.20×", "3.1%",
                                         "input-bound"]
    assert table[2].split(" | ")[-4:] == ["—", "—", "—", ""]  # no augmentation baseline, no wait measured
    assert table[5].endswith("| not run")


def test_augmentation_flips_and_crops_each_image_of_a_batch_on_its_own():
    import numpy as np
    import tensorflow as tf

    from trainer.pipeline import _augment_batch

    x = np.random.default_rng(0).uniform(size=(32, 6, 5, 2)).astype("float32")
    augment = _augment_batch(tf, (6, 5, 2), seed=3)
    out, _ = augment(tf.constant(7, tf.int64), tf.constant(x), tf.zeros(32))
    out = out.numpy()
    assert out.shape == x.shape
    again, _ = augment(tf.constant(7, tf.int64), tf.constant(x), tf.zeros(32))
    other, _ = augment(tf.constant(8, tf.int64), tf.constant(x), tf.zeros(32))
    assert np.array_equal(out, again.numpy()) and not np.array_equal(out, other.numpy())  # stateless per batch
    windows = []
    for image, augmented in zip(x, out):
        padded = np.pad(image, ((4, 4), (4, 4), (0, 0)))
        found = [(flip, dy, dx) for flip, p in ((False, padded), (True, padded[:, ::-1])) for dy in range(9)
                 for dx in range(9) if np.array_equal(augmented, p[dy:dy + 6, dx:dx + 5])]
        assert found, "an augmented image is not a flipped or unflipped crop of its own padded image"
        windows.append(found[0])
    assert len(set(windows)) > 8  # per image, not one window for the whole batch


def test_the_jax_and_torch_routes_measure_what_the_trainer_runs_and_need_no_tensorflow():
    bench = _benchmark()
    jax = bench.parse_args(["--backend", "jax", "--quick"])
    assert (jax.backend, jax.xla, jax.max_devices) == ("jax", ["auto"], 2)  # JAX compiles every step itself
    assert bench.parse_args([]).xla == ["off", "on"]
    assert bench.skip("jax", "auto", 2) is None and bench.skip("tensorflow", "off", 2) is None
    assert "MirroredStrategy" in bench.skip("tensorflow", "on", 2)
    assert "one device" in bench.skip("torch", "auto", 2) and bench.skip("torch", "auto", 1) is None
    for backend in ("jax", "torch"):  # what runs in the measured processes on these routes
        assert "tensorflow" not in bench.PROBES[backend]
    # the plain-Keras baseline imports no TensorFlow itself (its guard, trainer.backend_train.tensorflow_unprobed,
    # keeps Keras's probes from importing it on jax and torch)
    assert not re.search(r"^\s*import tensorflow\b", bench.BASELINE, re.M) and "backend=backend" in bench.BASELINE
    assert "with tensorflow_unprobed() if backend != \"tensorflow\"" in bench.BASELINE
