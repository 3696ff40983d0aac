"""One training run on one machine with Keras on JAX or torch: data → devices → distribution → model → fit → files.

The same data, model code, callbacks, metrics and artifacts as the TensorFlow route (trainer.train), and the same
stream of global batches (per-replica batch × replicas, stateless per-epoch permutations of the seed) from a numpy
input pipeline (trainer.batches) instead of tf.data: nothing on this route imports TensorFlow, so it runs where
TensorFlow is not installed (a SavedModel export is then skipped, and metrics.json says so). What differs is how
the devices are used:

- jax: `keras.distribution.DataParallel` over every selected device (set before the model is built, so its
  variables are replicated and every batch is sharded across the devices); one device needs no distribution.
- torch: one device; Keras 3.15 distributes only on JAX and TensorFlow.

There is no CPU template here: the model that trains is the one saved (its variables are plain backend arrays).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from trainer import data, pipeline
from trainer.backend_devices import jax_devices, torch_device
from trainer.backends import ONE_DEVICE_REASON
from trainer.cluster import Cluster
from trainer.config import TrainConfig
from trainer.errors import TrainerError
from trainer.models import MODELS
from mlsubmit_runtime.storage import Location

DATA_PARALLEL = "data_parallel"  # keras.distribution.DataParallel (JAX)


@contextmanager
def tensorflow_unprobed() -> Iterator[None]:
    """Keep Keras from importing TensorFlow on this route where it is installed but not imported yet.

    Keras 3 probes for TensorFlow on every backend (`set_random_seed` seeds tf.random for tf.data; saving checks for
    tf.TensorShape): the probe imports it, which costs seconds, prints TensorFlow's C++ start-up lines and loads its
    CUDA libraries beside JAX's or torch's, for a run that feeds no TensorFlow object to Keras. Inside the block
    Keras's lazy `tensorflow` handle answers "not available" to those probes; code that really uses TensorFlow
    (the jax2tf SavedModel export) still imports it. A Keras without that handle is left as it is.
    """
    import sys

    try:
        from keras.src.utils import module_utils

        lazy = module_utils.tensorflow
    except (ImportError, AttributeError):
        lazy = None
    if lazy is None or "tensorflow" in sys.modules or getattr(lazy, "_available", False) is not None:
        yield
        return
    lazy._available = False
    try:
        yield
    finally:
        if lazy._available is False:
            lazy._available = None


def distribute(keras, backend: str, found) -> tuple[str, str]:
    """Set this backend's distribution over `found` devices; returns (strategy name, how it distributes, in words)."""
    if backend == "jax" and found.count >= 2:
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=list(found.names)))
        return DATA_PARALLEL, (f"keras.distribution.DataParallel over {found.count} devices "
                               f"({', '.join(found.names)})")
    if backend == "jax":
        keras.distribution.set_distribution(None)  # the distribution is process-wide: none from an earlier run
        return "default", f"one device ({found.names[0]})"
    return "default", f"one device ({found.names[0]}): {ONE_DEVICE_REASON}"


def run_on_backend(config: TrainConfig, cluster: Cluster | None = None, started: float | None = None):
    """Train with Keras on config.backend (jax or torch) on this machine and write the artifacts."""
    started = started or time.perf_counter()
    cluster = cluster or Cluster()
    arrays = data.load(config.data, validation_split=config.validation_split, seed=config.seed)  # fails early
    pipeline.resolve_augment(config.augment, MODELS[config.model].augment, arrays.input_shape)  # before Keras
    job_dir = Location(config.job_dir)
    job_dir.check_writable()
    found = (jax_devices if config.backend == "jax" else torch_device)(config.gpu_count, config.emulate_devices)

    import keras

    if keras.backend.backend() != config.backend:
        raise TrainerError(f"Keras was imported with the {keras.backend.backend()} backend before the trainer could "
                           f"choose {config.backend}; run `python -m trainer.task --backend {config.backend}` in a "
                           "fresh process")
    with tensorflow_unprobed():
        return _train(keras, config, cluster, started, arrays, job_dir, found)


def _train(keras, config: TrainConfig, cluster: Cluster, started: float, arrays, job_dir: Location, found):
    keras.utils.set_random_seed(config.seed)
    keras.mixed_precision.set_global_policy(config.precision)
    strategy_name, distribution = distribute(keras, config.backend, found)
    replicas = found.count

    from trainer.model_check import build_checked
    from trainer.train import compile_model, fit

    model = build_checked(keras, config.backend, config.model, arrays.input_shape, arrays.num_classes)
    compile_model(keras, model, config)
    pipes, recorder, timer, logs = fit(keras, model, config, arrays, job_dir, replicas)

    from trainer.outcome import describe, evaluate_splits, write_artifacts
    from trainer.train import RunResult

    evaluation = evaluate_splits(model, arrays, pipes.global_batch, whole_batches=strategy_name == DATA_PARALLEL)
    metrics = describe(config, arrays, template=model, evaluation=evaluation, recorder=recorder, timer=timer,
                       replicas=replicas, found=found, strategy_name=strategy_name, cluster=cluster,
                       global_batch=pipes.global_batch,
                       learning_rate=float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)), keras=keras,
                       distribution=distribution)
    metrics.update(precision=config.precision, jit_compile=bool(model.jit_compile),
                   input_wait_fraction=timer.input_wait_fraction)
    manifest, reload_check = write_artifacts(config, job_dir, logs, model, recorder.history, metrics, started,
                                             arrays.x_test[: pipes.global_batch])
    return RunResult(config, metrics, job_dir.uri, manifest, model, reload_check)
