"""Keras 3 jobs on JAX and torch need no TensorFlow (#21): the bundled trainer in a venv where it is NOT installed.

The venv holds what a PyTorch image or a JAX GPU machine would (keras, jax CPU, torch 2.13.0 CPU, h5py, matplotlib,
tensorboard, google-cloud-storage) and no TensorFlow; it is built once and kept by the hash of its requirements under
the suite's image cache ($MLSUBMIT_TEST_IMAGES, default ~/.cache/mlsubmit/test-images), like the image environments.
Every run asserts that `tensorflow` never entered sys.modules; the artifacts are then loaded here, under Keras's
TensorFlow backend, with the metrics the run recorded. The numpy input pipeline's own contract (stateless epochs,
the same global batches) is tested in-process.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
from support.without_frameworks import VARIABLE as WITHOUT

from tests.support.trainer_run import ROOT, digits_npz, read_json
from tests.support.trainer_run import loads_under_tensorflow_with_the_recorded_test_metrics as _loads_under_tf
from tests.support.trainer_run import manifest_lists_exactly_the_files as _manifest_lists_exactly_the_files

# What the trainer needs on JAX and torch, without TensorFlow (torch pinned: its CPU wheel is a local file; an
# unpinned torch would pull the CUDA build).
REQUIREMENTS = ("keras==3.15.1", "jax==0.10.2", "jaxlib==0.10.2", "torch==2.13.0", "h5py>=3.10", "matplotlib>=3.8",
                "tensorboard>=2.16", "google-cloud-storage>=2.16", "numpy>=1.26")

# Runs `python -m trainer.task …` as users do, then says whether TensorFlow was imported (in the venv without it
# nothing may try; where it is installed, nothing on the torch route imports it either).
RUN = r"""
import runpy, sys
sys.argv = ["trainer.task", *sys.argv[1:]]
try:
    runpy.run_module("trainer.task", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    code = exit.code
else:
    code = 0
print("tensorflow imported:", "tensorflow" in sys.modules, file=sys.stderr)
sys.exit(code)
"""


@pytest.fixture(scope="module")
def no_tf_python(images_home) -> str:
    """The Python of a venv with Keras, JAX and torch and no TensorFlow, built once per requirement set."""
    key = hashlib.sha256(json.dumps([sys.version_info[:2], REQUIREMENTS]).encode()).hexdigest()[:16]
    home = Path(images_home) / f"no-tensorflow-{key}"
    python = home / "bin" / "python"
    with open(Path(images_home) / f".no-tensorflow-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / ".complete").exists():  # built in place under the lock; an interrupted build is redone
            shutil.rmtree(home, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(home)], check=True, timeout=120)
            # --no-compile: pip would byte-compile all ~11,000 modules (as long as the install itself, measured);
            # Python compiles the few the runs import, once, into the kept venv
            done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-compile", *REQUIREMENTS],
                                  capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stderr[-3000:]
            (home / ".complete").write_text("\n".join(REQUIREMENTS) + "\n")
    probe = "import importlib.util as u; print(u.find_spec('tensorflow'), u.find_spec('keras') is not None)"
    assert subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                          timeout=60).stdout.split() == ["None", "True"]  # Keras, and no TensorFlow at all
    return str(python)


def _bytecode(python: str) -> dict:
    """The venv without TensorFlow is installed uncompiled (--no-compile): its runs byte-compile what they import
    once, into a cache in the kept venv (PYTHONPYCACHEPREFIX), even where PYTHONDONTWRITEBYTECODE is set, as on this
    project's machines, where each run compiled Keras, JAX and torch from source again: `import keras` on torch
    15.8 -> 5.2 CPU-s, on JAX 7.9 -> 3.6 (measured 2026-12-07). The test venv's modules are compiled (pip did)."""
    if python == sys.executable:
        return {}
    return {"PYTHONPYCACHEPREFIX": str(Path(python).parents[1] / "pycache")}


def _run(python: str, *args: str, env: dict | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    cached = _bytecode(python)
    full = {k: v for k, v in os.environ.items() if not k.startswith(("KERAS_", "XLA_", "JAX_", "PYTHONPATH"))
            and not (cached and k == "PYTHONDONTWRITEBYTECODE")}
    full.update({"PYTHONPATH": str(ROOT), **cached, **(env or {})})
    return subprocess.run([python, "-c", RUN, *args], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=300)


def _no_tensorflow(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stderr.rstrip().endswith("tensorflow imported: False"), done.stderr[-2000:]


def _saved_model_skipped(metrics: dict) -> None:
    assert metrics["formats"] == ["model.keras", "model.h5"]
    assert set(metrics["formats_skipped"]) == {"saved_model"}
    assert metrics["tensorflow_version"] is None


@pytest.mark.slow
def test_jax_dry_run_and_a_two_epoch_data_parallel_run_without_tensorflow(no_tf_python, tmp_path):
    job = tmp_path / "dry"
    done = _run(no_tf_python, "--backend", "jax", "--dry-run", "--job-dir", str(job))
    _no_tensorflow(done)
    assert "mlsubmit trainer dry run finished" in done.stdout and "reload check model.keras" in done.stdout
    assert "not saved    saved_model: a SavedModel export needs TensorFlow, which is not installed" in done.stdout
    metrics = read_json(job / "metrics.json")
    _saved_model_skipped(metrics)
    listed = _manifest_lists_exactly_the_files(job)
    assert {"model/model.keras", "model/model.h5", "metrics.json", "history.json", "history.png"} <= listed
    assert any(p.startswith("logs/train/events.out.tfevents.") for p in listed)  # TensorBoard, without TF

    # the examples' multi-backend recipe's default model (tests/test_backends_job.py runs the recipe on dense)
    npz = digits_npz(tmp_path / "digits.npz")
    job = tmp_path / "two"
    done = _run(no_tf_python, "--backend", "jax", "--job-dir", str(job), "--data", str(npz), "--epochs", "2",
                "--steps-per-epoch", "3", "--batch-size", "16", "--model", "mnist_convnet",
                env={"MLSUBMIT_EMULATE_DEVICES": "2"})
    _no_tensorflow(done)
    metrics = read_json(job / "metrics.json")
    assert (metrics["backend"], metrics["strategy"], metrics["replicas"], metrics["global_batch"]) == (
        "jax", "data_parallel", 2, 32)
    assert (metrics["backend_version"], metrics["keras_backend"], metrics["model"]) == (
        _pinned("jax"), "jax", "mnist_convnet")
    assert metrics["distribution"] == "keras.distribution.DataParallel over 2 devices (cpu:0, cpu:1)"
    assert metrics["devices"] == ["cpu:0", "cpu:1"]
    for key in ("test_loss", "test_accuracy", "validation_loss", "samples_per_second", "wall_seconds"):
        assert metrics[key] is not None
    assert "backend      jax " in done.stdout and "DataParallel over 2 devices" in done.stdout
    assert metrics["epochs_run"] == 2 and len(read_json(job / "history.json")["loss"]) == 2
    _saved_model_skipped(metrics)
    _manifest_lists_exactly_the_files(job)
    _scalars_readable(job / "logs", epochs=2)
    _loads_under_tf(job, npz, metrics)  # trained without TensorFlow, served with it


@pytest.mark.slow
def test_torch_trains_without_tensorflow_into_a_gs_job_dir(no_tf_python, gcs, tmp_path):
    """torch on a machine without TensorFlow, data from and artifacts to gs:// through google-cloud-storage
    (fake-gcs-server); the local stand-ins of both are gone when the trainer exits."""
    emulator, bucket = gcs
    from mlsubmit.emulator.gcs_emulator import storage_client

    npz = digits_npz(tmp_path / "digits.npz")
    storage_client().bucket(bucket).blob("data/digits.npz").upload_from_filename(str(npz))
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    done = _run(no_tf_python, "--backend", "torch", "--job-dir", f"gs://{bucket}/runs/torch", "--data",
                f"gs://{bucket}/data/digits.npz", "--epochs", "1", "--steps-per-epoch", "3", "--batch-size", "16",
                env={**emulator.env(), "TMPDIR": str(temporary)})
    _no_tensorflow(done)
    assert [p.name for p in temporary.iterdir() if p.name.startswith("mlsubmit")] == []  # torch keeps its cache
    blobs = {b.name[len("runs/torch/"):]: b for b in storage_client().list_blobs(bucket, prefix="runs/torch/")}
    manifest = json.loads(blobs["MANIFEST.json"].download_as_bytes())
    assert {f["path"] for f in manifest["files"]} <= set(blobs)
    assert {"model/model.keras", "model/model.h5", "metrics.json"} <= set(blobs)
    metrics = json.loads(blobs["metrics.json"].download_as_bytes())
    assert (metrics["backend"], metrics["replicas"], metrics["tensorflow_version"]) == ("torch", 1, None)
    assert "torch" in metrics["formats_skipped"]["saved_model"]  # torch's own reason comes first


@pytest.mark.slow
def test_where_tensorflow_is_installed_the_torch_route_still_never_imports_it(tmp_path):
    """Keras 3 probes for TensorFlow on every backend (seeding, saving) and would import it where it is installed:
    seconds, its C++ start-up lines, its CUDA libraries beside torch's. The trainer keeps those probes from it.

    The run: the recipe's default model on torch chosen by KERAS_BACKEND, on one device though two are offered, and
    the format torch cannot write is named. The machine: TensorFlow and torch, not the test venv's JAX, scikit-learn,
    pandas and SciPy, which Keras would import at start-up (1.7 CPU-s: tests/support/without_frameworks.py)."""
    job, npz = tmp_path / "job", digits_npz(tmp_path / "digits.npz")
    done = _run(sys.executable, "--job-dir", str(job), "--data", str(npz), "--epochs", "1", "--steps-per-epoch", "3",
                "--batch-size", "16", "--model", "mnist_convnet",
                env={"KERAS_BACKEND": "torch", "MLSUBMIT_EMULATE_DEVICES": "2",
                     WITHOUT: "jax,jaxlib,sklearn,pandas,scipy,googleapiclient"})
    _no_tensorflow(done)
    assert "absl::InitializeLog" not in done.stderr and "cudart_stub" not in done.stderr
    metrics = read_json(job / "metrics.json")
    assert metrics["tensorflow_version"]  # installed here, never imported
    assert (metrics["backend"], metrics["backend_version"], metrics["model"]) == ("torch", version("torch"),
                                                                                 "mnist_convnet")
    assert metrics["replicas"] == 1 and metrics["global_batch"] == 16 and metrics["devices"] == ["cpu"]
    assert metrics["distribution"] == "one device (cpu): Keras 3.15 distributes only on JAX and TensorFlow"
    assert set(metrics["formats_skipped"]) == {"saved_model"} and "torch" in metrics["formats_skipped"]["saved_model"]
    assert metrics["formats"] == ["model.keras", "model.h5"] and "not saved    saved_model: " in done.stdout
    listed = _manifest_lists_exactly_the_files(job)
    assert "model/model.keras" in listed and not any(p.startswith("model/saved_model") for p in listed)
    _loads_under_tf(job, npz, metrics)


def _pinned(package: str) -> str:
    """The version REQUIREMENTS pins `package` to in the venv without TensorFlow."""
    return next(r.split("==")[1] for r in REQUIREMENTS if r.startswith(f"{package}=="))


def _scalars_readable(logs: Path, epochs: int) -> None:
    """The event files TensorBoard reads: every epoch's loss, for training and validation."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for split in ("train", "validation"):
        events = EventAccumulator(str(logs / split))
        events.Reload()
        assert [s.step for s in events.Scalars("epoch_loss")] == list(range(epochs)), split


# -- the numpy input pipeline (in-process, no venv) ------------------------------------------------------------


def _arrays(n: int = 50, shape=(4, 4, 1)):
    from trainer.data import prepare

    rng = np.random.default_rng(0)
    raw = {"x_train": rng.integers(0, 255, (n, *shape), dtype=np.uint8), "y_train": np.arange(n) % 3,
           "x_test": rng.integers(0, 255, (5, *shape), dtype=np.uint8), "y_test": np.arange(5) % 3}
    return prepare(raw, source="test", validation_split=0.2, seed=1)


def test_the_numpy_stream_is_stateless_per_epoch_and_the_same_for_every_replica_count():
    from trainer import pipeline
    from trainer.batches import epoch_order

    arrays = _arrays()  # 40 training samples
    one = pipeline.build(arrays, per_replica_batch=16, replicas=1, seed=7, augment=False, backend="jax")
    two = pipeline.build(arrays, per_replica_batch=8, replicas=2, seed=7, augment=False, backend="jax")
    assert (one.global_batch, one.steps_per_epoch) == (two.global_batch, two.steps_per_epoch) == (16, 2)
    for i in range(6):  # three data epochs of two whole batches (8 samples of each epoch left out)
        (x1, y1), (x2, y2) = one.train[i], two.train[i]
        assert np.array_equal(x1, x2) and np.array_equal(y1, y2) and len(x1) == 16
    first, second = epoch_order(7, 0, 40, 16), epoch_order(7, 1, 40, 16)
    assert len(first) == 32 and len(set(first)) == 32 and not np.array_equal(first, second)
    assert np.array_equal(first, epoch_order(7, 0, 40, 16))  # a pure function of (seed, epoch)
    assert np.array_equal(one.train[0][0], arrays.x_train[first[:16]])
    resumed = pipeline.build(arrays, per_replica_batch=16, replicas=1, seed=7, augment=False, initial_epoch=1,
                             backend="torch")
    assert np.array_equal(resumed.train[0][0], one.train[2][0])  # a resumed run continues with the next epoch
    assert len(one.val) == 1 and one.val[0][0].shape[0] == 10  # 10 validation samples, one batch


def test_the_numpy_augmentation_flips_and_crops_like_the_recipes_and_is_reproducible():
    from trainer.batches import augment_batch

    x = np.arange(2 * 6 * 6 * 3, dtype=np.float32).reshape(2, 6, 6, 3) + 1
    out = augment_batch(x, seed=3, index=5)
    assert out.shape == x.shape and np.array_equal(out, augment_batch(x, seed=3, index=5))
    assert not np.array_equal(out, augment_batch(x, seed=3, index=6))
    for image, source in zip(out, x):  # each image is a window of the padded (maybe flipped) source
        padded = [np.pad(s, ((4, 4), (4, 4), (0, 0))) for s in (source, source[:, ::-1])]
        assert any(np.array_equal(image, p[r:r + 6, c:c + 6]) for p in padded for r in range(9) for c in range(9))


def test_batches_made_ahead_by_threads_are_the_stream_made_in_order_and_the_wait_is_counted():
    """The prefetching path (threads making batches ahead of the step) gives batch for batch what making each
    batch when asked gives, across epoch boundaries, after a jump (a new iterator) and after a resume; a resumed
    run draws the augmentation of the batches it had not trained on."""
    from trainer import pipeline

    arrays = _arrays(90, shape=(6, 6, 3))  # 72 training samples: 4 batches of 16 an epoch
    build = dict(per_replica_batch=16, replicas=1, seed=7, augment=True, backend="jax")
    ahead, asked = pipeline.build(arrays, **build, workers=2), pipeline.build(arrays, **build, workers=0)
    try:
        assert ahead.train.prefetcher is not None and asked.train.prefetcher is None
        for i in [*range(10), 3, 4, 11]:  # in order over two epoch boundaries, then from elsewhere
            (x1, y1), (x2, y2) = ahead.train[i], asked.train[i]
            assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
        assert len(ahead.train.prefetcher._ahead) == ahead.train.prefetcher._depth == 4  # bounded: 4 in flight
        assert ahead.input_waited >= 0.0 and asked.input_waited == 0.0
        resumed = pipeline.build(arrays, **build, workers=2, initial_epoch=1)
        try:
            assert all(np.array_equal(resumed.train[i][0], asked.train[4 + i][0]) for i in range(5))
        finally:
            resumed.close()
    finally:
        ahead.close()
    assert not [t for t in ahead.train.prefetcher._pool._threads if t.is_alive()]  # closed: its threads ended


def test_augmentation_needs_images_and_the_workers_what_the_host_has():
    from trainer.config import parse_config, usable_cores
    from trainer.errors import TrainerError
    from trainer.pipeline import resolve_augment, resolve_workers

    assert resolve_augment("auto", True, (32, 32, 3)) and not resolve_augment("auto", False, (32, 32, 3))
    assert resolve_augment("on", False, (8, 8, 1)) and not resolve_augment("off", True, (8, 8, 1))
    assert not resolve_augment("auto", True, (64,))
    with pytest.raises(TrainerError, match=r"--augment: received 'on' for data of shape \(64,\), but the flip"):
        resolve_augment("on", False, (64,))
    assert (resolve_workers(None, 2), resolve_workers(None, 16), resolve_workers(3, 16)) == (2, 4, 3)
    cores = usable_cores()
    assert parse_config(["--job-dir", "/x", "--input-workers", str(cores)], env={}).input_workers == cores
    with pytest.raises(TrainerError, match=rf"--input-workers: received '{cores + 1}'; expected auto or a whole "
                                           rf"number from 1 to {cores} \(the CPU cores"):
        parse_config(["--job-dir", "/x", "--input-workers", str(cores + 1)], env={})
