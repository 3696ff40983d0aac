"""Training in a cluster, the way the cloud runs it: each process reads its role from TF_CONFIG / CLUSTER_SPEC.

- chief + workers → MultiWorkerMirroredStrategy: every replica runs `fit` on its share of each global batch (the
  dataset is auto-sharded by DATA), gradients are all-reduced, and all replicas end with identical weights;
- parameter servers present → ParameterServerStrategy: the chief is the coordinator that runs `fit` and sends
  steps to the workers asynchronously, variables live on the parameter servers; workers and parameter servers
  only serve (trainer.ps_server);
- evaluator → trainer.evaluator, on checkpoints the chief writes to <job-dir>/evaluation/ (only when the job has
  evaluators), and a TRAINING_DONE marker there once `fit` returns.

Everything here runs on tf_keras (task.py sets TF_USE_LEGACY_KERAS=1 before TensorFlow is imported): Keras 3's
`fit` fails with MultiWorkerMirroredStrategy on ≥ 2 workers and does not support ParameterServerStrategy. The
model comes from the same code as on one machine, and the chief saves a Keras 3 copy of it (trainer.keras3_copy),
so the job directory looks exactly like a one-machine job's, with the cluster's shape in metrics.json.

Only the chief writes the job directory. The other workers resume from a copy of the chief's backup and keep
everything they write (their backup and the `workertemp_N` copies tf_keras makes of each save, checkpoints,
TensorBoard logs, history) in a private temporary directory outside the job dir, removed at the end — so a
chief that finishes first never deletes a directory a worker is still saving into.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from trainer import artifacts, data, devices, pipeline, strategy
from trainer.cluster import Cluster
from trainer.config import TrainConfig
from mlsubmit_runtime.storage import Location

EVALUATION_DIR = "evaluation"  # the evaluators' checkpoints, below the job dir
DONE_MARKER = "TRAINING_DONE"


def run_in_cluster(config: TrainConfig, cluster: Cluster, started: float):
    """Play this process's role. Returns the chief's RunResult; None for every other role."""
    strategy.choose(cluster, 1)  # shapes no strategy can serve fail here, before TensorFlow loads
    os.environ["TF_CONFIG"] = json.dumps(cluster.tf_config())  # `master` rewritten: TensorFlow 2 rejects it
    if cluster.task_type == "evaluator":
        from trainer.evaluator import run_evaluator

        run_evaluator(config, cluster)
        return None
    if cluster.count("ps") and cluster.task_type in ("worker", "ps"):
        from trainer.ps_server import serve

        devices.setup(config.gpu_count, config.emulate_devices)
        serve(cluster)
        return None
    return _train(config, cluster, started)


def quiet(tf) -> None:
    """Silence TensorFlow's Python-side chatter that says nothing to act on (retracing notes, tf.data options)."""
    import warnings

    tf.get_logger().setLevel("ERROR")
    warnings.filterwarnings("ignore", message="To make it possible to preserve tf.data options")


def weights_digest(weights) -> str:
    """sha256 over every weight array: equal digests mean bit-identical models."""
    import numpy as np

    digest = hashlib.sha256()
    for array in weights:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _build_strategy(tf, choice, cluster: Cluster, found):
    if choice.name not in (strategy.MULTI_WORKER, strategy.PARAMETER_SERVER):
        return strategy.build(choice, found.names)  # a chief alone with its evaluators
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({k: list(v) for k, v in cluster.spec.items()}), task_type=cluster.task_type,
        task_id=cluster.task_index, rpc_layer="grpc",
        num_accelerators={"GPU": sum(name.startswith("/gpu") for name in found.names)})
    if choice.name == strategy.MULTI_WORKER:
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    return tf.distribute.ParameterServerStrategy(resolver)


def _inputs(tf, keras, arrays, config: TrainConfig, choice, replicas: int):
    """(pipelines, train input, validation input, validation steps) for this strategy."""
    build = dict(per_replica_batch=config.batch_size, replicas=replicas, seed=config.seed,
                 augment=_augment(config, arrays.input_shape), steps_per_epoch=config.steps_per_epoch,
                 workers=config.input_workers)
    pipes = pipeline.build(arrays, **build)
    if choice.name == strategy.PARAMETER_SERVER:
        # Each worker builds the pipeline and takes every n-th global batch of the same seeded order; evaluation
        # runs `validation_steps` batches of a repeated validation set on whichever workers are free.
        def per_worker(context):
            return pipeline.build(arrays, **build).train.repeat().shard(context.num_input_pipelines,
                                                                        context.input_pipeline_id)

        creator = keras.utils.experimental.DatasetCreator(per_worker)
        if pipes.val is None:
            return pipes, creator, None, None
        usable = len(arrays.x_val) - len(arrays.x_val) % replicas
        return pipes, creator, pipes.val.repeat(), -(-usable // pipes.global_batch)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    val = pipes.val.with_options(options) if pipes.val is not None else None
    return pipes, pipes.train.repeat().with_options(options), val, None


def _augment(config: TrainConfig, input_shape) -> bool:
    from trainer.models import MODELS

    return pipeline.resolve_augment(config.augment, MODELS[config.model].augment, input_shape)


def _places(config: TrainConfig, job_dir: Location, cluster: Cluster, private: Path):
    """(backup, logs, evaluation checkpoints or None) for this replica.

    Only the chief's are in the job dir. A non-chief resumes from a copy of the chief's backup and writes
    everything (its backup, the `workertemp_N` copies tf_keras makes of each save, logs, checkpoints) under
    `private`, outside the job dir: in the cloud every replica has its own disk, but replicas on one machine share
    a local job dir, where the chief removes `backup/` at the end while a worker may still be saving into it.
    """
    from trainer.train import locations

    backup, logs = locations(config, job_dir)
    evaluation = job_dir.child(EVALUATION_DIR) if cluster.evaluators else None
    if cluster.is_chief:
        return backup, logs, evaluation
    own_backup = private / "backup"
    if backup.remote:
        own_backup_location = Location(backup.uri, own_backup)  # pulled before training, never pushed
    else:
        if backup.local.is_dir():  # the chief's last backup, to resume in step with it
            shutil.copytree(backup.local, own_backup, ignore=shutil.ignore_patterns("workertemp_*"),
                            dirs_exist_ok=True)
        own_backup_location = Location(str(own_backup))
    own_evaluation = Location(str(private / EVALUATION_DIR)) if evaluation is not None else None
    return own_backup_location, Location(str(private / "logs")), own_evaluation


def _callbacks(keras, cluster: Cluster, *, backup, logs, evaluation, config, private: Path, samples: int,
               with_validation: bool):
    from trainer.callbacks import HISTORY_PARTIAL, SyncLocation, make_callbacks

    callbacks, recorder, timer = make_callbacks(keras, backup=backup, logs=logs, patience=config.patience,
                                                samples_per_epoch=samples, with_validation=with_validation)
    if evaluation is not None:
        # Weights only, TensorFlow checkpoint format: ckpt-0001.index/.data-*, and a `checkpoint` index file.
        callbacks.append(keras.callbacks.ModelCheckpoint(str(evaluation.local / "ckpt-{epoch:04d}"),
                                                         save_weights_only=True))
        callbacks.append(SyncLocation(evaluation))
    if not cluster.is_chief:
        callbacks = [c for c in callbacks if not isinstance(c, SyncLocation)]  # only the chief publishes
        recorder.path = private / HISTORY_PARTIAL
    return callbacks, recorder, timer


def _reset_evaluation(evaluation: Location) -> None:
    shutil.rmtree(evaluation.local, ignore_errors=True)
    evaluation.clear_remote()
    evaluation.local.mkdir(parents=True, exist_ok=True)


def mark_done(evaluation: Location, epochs: int) -> None:
    """Tell the evaluators training has ended (they finish the checkpoints left and exit)."""
    artifacts.write_json(evaluation.local / DONE_MARKER, {"job_id": os.environ.get("CLOUD_ML_JOB_ID", ""),
                                                         "epochs": epochs, "time": time.time()})
    evaluation.push(DONE_MARKER)


def _train(config: TrainConfig, cluster: Cluster, started: float):
    arrays = data.load(config.data, validation_split=config.validation_split, seed=config.seed)  # fails early
    _augment(config, arrays.input_shape)  # a bad --augment, before TensorFlow is imported
    job_dir = Location(config.job_dir)
    if cluster.is_chief:
        job_dir.check_writable()
    found = devices.setup(config.gpu_count, config.emulate_devices)
    choice = strategy.choose(cluster, found.count)

    import tensorflow as tf

    from mlsubmit_runtime.kerasmod import get_keras
    from trainer.models import build_model
    from trainer.train import compile_model

    quiet(tf)
    keras = get_keras()
    keras.utils.set_random_seed(config.seed)
    dist = _build_strategy(tf, choice, cluster, found)
    name = f"{cluster.task_type}-{cluster.task_index}"
    print(f"{name}: {choice.reason}; {dist.num_replicas_in_sync} replica(s) in sync, tf_keras {keras.__version__}",
          flush=True)
    private = Path(tempfile.mkdtemp(prefix=f"mlsubmit-{name}-"))
    try:
        backup, logs, evaluation = _places(config, job_dir, cluster, private)
        if cluster.is_chief:
            job_dir.remove(artifacts.MANIFEST)  # from here on the job dir is visibly incomplete
            if evaluation is not None:
                _reset_evaluation(evaluation)
        backup.pull_snapshot()  # the last whole backup a preempted run pushed
        pipes, train_input, val_input, val_steps = _inputs(tf, keras, arrays, config, choice,
                                                           dist.num_replicas_in_sync)
        with dist.scope():
            model = build_model(keras, config.model, arrays.input_shape, arrays.num_classes)
            compile_model(keras, model, config)
        callbacks, recorder, timer = _callbacks(
            keras, cluster, backup=backup, logs=logs, evaluation=evaluation, config=config, private=private,
            samples=pipes.steps_per_epoch * pipes.global_batch, with_validation=val_input is not None)
        model.fit(train_input, validation_data=val_input, validation_steps=val_steps, epochs=config.epochs,
                  steps_per_epoch=pipes.steps_per_epoch, callbacks=callbacks,
                  verbose=1 if os.isatty(1) and not config.dry_run else 2)
        digest = weights_digest(model.get_weights())
        print(f"{name}: trained {recorder.epochs} epoch(s); weights sha256 {digest}", flush=True)
        if not cluster.is_chief:
            return None
        shutil.rmtree(backup.local, ignore_errors=True)  # a finished job has no backup, as with Keras 3
        if evaluation is not None:
            mark_done(evaluation, recorder.epochs)
        return _finish(config, cluster, started, arrays, job_dir, logs, model, pipes, recorder, timer, found,
                       choice, dist, keras, digest)
    finally:
        shutil.rmtree(private, ignore_errors=True)
        if not cluster.is_chief:
            job_dir.cleanup_local()  # a worker's local stand-in for a gs:// job dir


def _finish(config, cluster, started, arrays, job_dir, logs, model, pipes, recorder, timer, found, choice, dist,
            keras, digest):
    """The chief's artifacts: a Keras 3 copy of the trained model, exact metrics, files, manifest last."""
    import keras as keras3

    from trainer.keras3_copy import keras3_template
    from trainer.outcome import describe, evaluate_splits, write_artifacts
    from trainer.train import RunResult

    template = keras3_template(model, config, arrays)
    evaluation = evaluate_splits(template, arrays, pipes.global_batch)
    metrics = describe(config, arrays, template=template, evaluation=evaluation, recorder=recorder, timer=timer,
                       replicas=dist.num_replicas_in_sync, found=found, strategy_name=choice.name,
                       cluster=cluster, global_batch=pipes.global_batch,
                       learning_rate=float(keras.backend.get_value(model.optimizer.learning_rate)), keras=keras,
                       distribution=choice.reason)
    metrics.update({"weights_sha256": digest, "saved_with_keras": keras3.__version__})
    manifest, reload_check = write_artifacts(config, job_dir, logs, template, recorder.history, metrics, started,
                                             arrays.x_test[: pipes.global_batch], keras=keras3)
    return RunResult(config, metrics, job_dir.uri, manifest, template, reload_check)
