"""One training run on one machine: data → devices → strategy → template → fit → artifacts (manifest last).

Everything the user can get wrong (flags, data, devices, job dir) is checked before the first training step.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace

from trainer import artifacts, data, devices, pipeline, strategy
from trainer.cluster import Cluster
from trainer.config import TrainConfig, check_jit_compile, resolve_jit_compile
from trainer.models import MODELS, build_model
from mlsubmit_runtime.storage import Location

LOSS = "sparse_categorical_crossentropy"


@dataclass
class RunResult:
    config: TrainConfig
    metrics: dict
    job_dir: str
    manifest: dict | None
    template: object = field(repr=False, default=None)
    reload_check: dict | None = None


def make_optimizer(keras, name: str, learning_rate: float | None):
    cls = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD, "rmsprop": keras.optimizers.RMSprop}[name]
    return cls(learning_rate=learning_rate) if learning_rate else cls()


def compile_model(keras, model, config: TrainConfig) -> None:
    # "auto" passes nothing: Keras 3 then decides, and tf_keras (whose jit_compile is None or a bool) keeps its default
    xla = {} if config.jit_compile == "auto" else {"jit_compile": config.jit_compile == "on"}
    model.compile(optimizer=make_optimizer(keras, config.optimizer, config.learning_rate), loss=LOSS,
                  metrics=["accuracy"], **xla)


def evaluate(model, x, y, batch_size: int, whole_batches: bool = False) -> dict[str, float]:
    """Loss and accuracy over every sample, from predictions (exact; works for any split across replicas).

    `whole_batches`: pad the inputs to whole batches and drop the padding's predictions, for distributions that
    shard every batch evenly across devices (JAX's DataParallel cannot split a last batch of 5 over 2 devices).
    """
    import numpy as np

    if whole_batches and len(x) % batch_size:
        padding = np.repeat(x[-1:], batch_size - len(x) % batch_size, axis=0)
        probabilities = model.predict(np.concatenate([x, padding]), batch_size=batch_size, verbose=0)[: len(x)]
    else:
        probabilities = model.predict(x, batch_size=batch_size, verbose=0)
    picked = np.clip(probabilities[np.arange(len(y)), y], 1e-7, 1.0)
    return {"loss": float(-np.mean(np.log(picked))), "accuracy": float(np.mean(probabilities.argmax(axis=1) == y))}


def backed_up_epoch(backup: Location) -> int:
    """The number of epochs a preempted run finished (BackupAndRestore's metadata), 0 for a fresh run."""
    import json

    meta = backup.local / "training_metadata.json"
    try:
        return int(json.loads(meta.read_text())["epoch"]) if meta.exists() else 0
    except (ValueError, KeyError, OSError):
        return 0


def locations(config: TrainConfig, job_dir: Location) -> tuple[Location, Location]:
    backup = Location(config.checkpoint_dir) if config.checkpoint_dir else job_dir.child("backup")
    logs = Location(config.tensorboard_dir) if config.tensorboard_dir else job_dir.child("logs")
    return backup, logs


def fit(keras, model, config: TrainConfig, arrays, job_dir: Location, replicas: int, *, extra_callbacks=()):
    """Train a compiled `model` on the job's pipeline with the job's callbacks; every route (TensorFlow, JAX, torch)
    trains through here. Removes MANIFEST.json first (from then on the job dir is visibly incomplete) and resumes
    from the backup a preempted run left. Returns (pipes, recorder, timer, logs location)."""
    from trainer.callbacks import make_callbacks

    augment = pipeline.resolve_augment(config.augment, MODELS[config.model].augment,
                                       arrays.input_shape)  # before anything in the job dir changes
    job_dir.remove(artifacts.MANIFEST)
    backup, logs = locations(config, job_dir)
    backup.pull_snapshot()  # the last whole backup a preempted run pushed
    pipes = pipeline.build(arrays, per_replica_batch=config.batch_size, replicas=replicas, seed=config.seed,
                           augment=augment, steps_per_epoch=config.steps_per_epoch,
                           initial_epoch=backed_up_epoch(backup), backend=keras.backend.backend(),
                           workers=config.input_workers)
    waited = (lambda: pipes.input_waited) if pipes.input_waited is not None else None
    callbacks, recorder, timer = make_callbacks(
        keras, backup=backup, logs=logs, patience=config.patience,
        samples_per_epoch=pipes.steps_per_epoch * pipes.global_batch, with_validation=pipes.val is not None,
        input_waited=waited)
    callbacks.extend(extra_callbacks)
    verbose = 1 if os.isatty(1) and not config.dry_run else 2
    try:
        model.fit(pipes.train, validation_data=pipes.val, epochs=config.epochs, callbacks=callbacks, verbose=verbose,
                  steps_per_epoch=pipes.steps_per_epoch, shuffle=False)  # the pipeline shuffles (stateless, seeded)
    finally:
        pipes.close()
    return pipes, recorder, timer, logs


def run(config: TrainConfig, cluster: Cluster | None = None, started: float | None = None) -> RunResult:
    """Train on this machine (one process) and write the artifacts. Returns the metrics and where they went."""
    started = started or time.perf_counter()
    cluster = cluster or Cluster()
    arrays = data.load(config.data, validation_split=config.validation_split, seed=config.seed)  # fails early
    pipeline.resolve_augment(config.augment, MODELS[config.model].augment, arrays.input_shape)  # before TF
    job_dir = Location(config.job_dir)
    job_dir.check_writable()
    found = devices.setup(config.gpu_count, config.emulate_devices)
    choice = strategy.choose(cluster, found.count)
    check_jit_compile(config.jit_compile, found.count)  # with --gpus auto the count is known only now
    config = replace(config, jit_compile=resolve_jit_compile(config.jit_compile, found.kind, found.count))

    import tensorflow as tf

    from mlsubmit_runtime.kerasmod import get_keras
    from mlsubmit_runtime.multi_gpu import (build_template, copy_optimizer_state, copy_weights, replicate,
                                            sync_to_template)

    keras = get_keras()
    tf.get_logger().setLevel("ERROR")  # retracing notices for evaluation sets of another size are expected
    keras.utils.set_random_seed(config.seed)
    keras.mixed_precision.set_global_policy(config.precision)  # every run sets its own: the policy is process-wide
    dist = strategy.build(choice, found.names)
    replicas = dist.num_replicas_in_sync
    template = build_template(build_model, keras, config.model, arrays.input_shape, arrays.num_classes)
    parallel = replicate(template, dist)
    with dist.scope():
        compile_model(keras, parallel, config)
    pipes, recorder, timer, logs = fit(keras, parallel, config, arrays, job_dir, replicas,
                                       extra_callbacks=[sync_to_template(template)])

    from trainer.outcome import describe, evaluate_splits, write_artifacts

    evaluation = evaluate_splits(parallel, arrays, pipes.global_batch)
    copy_weights(parallel, template)
    compile_model(keras, template, config)
    copy_optimizer_state(parallel, template)

    learning_rate = float(keras.ops.convert_to_numpy(parallel.optimizer.learning_rate)) if hasattr(keras, "ops") \
        else float(tf.keras.backend.get_value(parallel.optimizer.learning_rate))
    metrics = describe(config, arrays, template=template, evaluation=evaluation, recorder=recorder, timer=timer,
                       replicas=replicas, found=found, strategy_name=choice.name, cluster=cluster,
                       global_batch=pipes.global_batch, learning_rate=learning_rate, keras=keras,
                       distribution=choice.reason)
    metrics.update(precision=config.precision, jit_compile=bool(parallel.jit_compile),
                   input_wait_fraction=timer.input_wait_fraction)
    manifest, reload_check = write_artifacts(config, job_dir, logs, template, recorder.history, metrics, started,
                                             arrays.x_test[: pipes.global_batch])
    return RunResult(config, metrics, job_dir.uri, manifest, template, reload_check)
