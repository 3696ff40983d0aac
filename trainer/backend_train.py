"""One training run on one machine with Keras on JAX or torch: data → devices → distribution → model → fit → files.

The same data, tf.data pipeline (global batch = per-replica batch × replicas, the same seed), model code,
callbacks, metrics and artifacts as the TensorFlow route (trainer.train); what differs is how the devices are used:

- jax: `keras.distribution.DataParallel` over every selected device (set before the model is built, so its
  variables are replicated and every batch is sharded across the devices); one device needs no distribution.
- torch: one device; Keras 3.15 distributes only on JAX and TensorFlow.

There is no CPU template here: the model that trains is the one saved (its variables are plain backend arrays).
"""

from __future__ import annotations

import time

from trainer import data
from trainer.backend_devices import jax_devices, torch_device
from trainer.backends import ONE_DEVICE_REASON
from trainer.cluster import Cluster
from trainer.config import TrainConfig
from trainer.errors import TrainerError
from mlsubmit_runtime.storage import Location

DATA_PARALLEL = "data_parallel"  # keras.distribution.DataParallel (JAX)


def _tensorflow_off_gpus() -> None:
    """TensorFlow only feeds data here: keep it off the GPUs (it would reserve their memory) before any TF op."""
    import tensorflow as tf

    try:
        tf.config.set_visible_devices([], "GPU")
    except (RuntimeError, ValueError):  # already initialised (an in-process caller): leave it
        pass
    tf.get_logger().setLevel("ERROR")


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
    _tensorflow_off_gpus()
    arrays = data.load(config.data, validation_split=config.validation_split, seed=config.seed)  # fails early
    job_dir = Location(config.job_dir)
    job_dir.check_writable()
    found = (jax_devices if config.backend == "jax" else torch_device)(config.gpu_count, config.emulate_devices)

    import keras

    if keras.backend.backend() != config.backend:
        raise TrainerError(f"Keras was imported with the {keras.backend.backend()} backend before the trainer could "
                           f"choose {config.backend}; run `python -m trainer.task --backend {config.backend}` in a "
                           "fresh process")
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
    metrics.update(precision=config.precision, jit_compile=bool(model.jit_compile))
    manifest, reload_check = write_artifacts(config, job_dir, logs, model, recorder.history, metrics, started,
                                             arrays.x_test[: pipes.global_batch])
    return RunResult(config, metrics, job_dir.uri, manifest, model, reload_check)
