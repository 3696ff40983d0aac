"""The end of every training run, on one machine or in a cluster: exact metrics, metrics.json, artifacts, manifest.

Both routes finish the same way, so a cluster job's job directory looks exactly like a one-machine job's.
"""

from __future__ import annotations

import platform
import time

from trainer import artifacts
from trainer.cluster import Cluster
from trainer.config import TrainConfig
from trainer.data import Arrays
from mlsubmit_runtime.storage import Location


def evaluate_splits(model, arrays: Arrays, batch_size: int, whole_batches: bool = False) -> dict[str, dict[str, float]]:
    """Exact loss and accuracy on the test set (and the validation set when there is one)."""
    from trainer.train import evaluate

    evaluation = {"test": evaluate(model, arrays.x_test, arrays.y_test, batch_size, whole_batches)}
    if len(arrays.x_val):
        evaluation["validation"] = evaluate(model, arrays.x_val, arrays.y_val, batch_size, whole_batches)
    return evaluation


def describe(config: TrainConfig, arrays: Arrays, *, template, evaluation: dict, recorder, timer, replicas: int,
             found, strategy_name: str, cluster: Cluster, global_batch: int, learning_rate: float, keras,
             distribution: str | None = None) -> dict:
    """metrics.json's content (without wall_seconds and the saved formats, which come last).

    `distribution` says in words how the backend spread the training over the devices (default: the strategy).
    """
    from trainer.backends import installed_version, version

    backend = keras.backend.backend()  # tf_keras (the cluster route) answers "tensorflow" too
    return {
        "backend": backend,
        "backend_version": version(backend),
        "distribution": distribution or strategy_name,
        "model": config.model,
        "parameters": int(template.count_params()),
        "validation_loss": evaluation.get("validation", {}).get("loss"),
        "validation_accuracy": evaluation.get("validation", {}).get("accuracy"),
        "test_loss": evaluation["test"]["loss"],
        "test_accuracy": evaluation["test"]["accuracy"],
        "epochs_run": recorder.epochs,
        "resumed_from_epoch": recorder.resumed_from_epoch,
        "replicas": replicas,
        "devices": list(found.names),
        "device_kind": found.kind,
        "strategy": strategy_name,
        "cluster": cluster.shape(),
        "per_replica_batch": config.batch_size,
        "global_batch": global_batch,
        "optimizer": config.optimizer,
        "learning_rate": learning_rate,
        "seed": config.seed,
        "samples_per_second": round(timer.samples_per_second, 1),
        "keras_backend": keras.backend.backend(),
        "keras_version": keras.__version__,
        "tensorflow_version": installed_version("tensorflow"),  # None where it is not installed (JAX, torch)
        "python_version": platform.python_version(),
        "data": {"source": arrays.source, "fingerprint": arrays.fingerprint, "input_shape": list(arrays.input_shape),
                 "num_classes": arrays.num_classes, "train_samples": len(arrays.x_train),
                 "validation_samples": len(arrays.x_val), "test_samples": len(arrays.x_test)},
    }


def write_artifacts(config: TrainConfig, job_dir: Location, logs: Location, template, history: dict, metrics: dict,
                    started: float, sample, keras=None) -> tuple[dict, dict | None]:
    """Save the template, history and metrics, then publish with MANIFEST.json last. Returns (manifest, reload check).

    `sample` is a few inputs whose predictions a dry run compares before and after reloading the saved files with
    `keras` (default: the trainer's Keras; the cluster route's template is a Keras 3 model).
    """
    local = job_dir.local
    backend = metrics.get("backend", "tensorflow")
    written, skipped = artifacts.save_models(template, local / "model", backend)
    if backend != "tensorflow":
        from trainer import event_log

        if not event_log.available():
            skipped["logs"] = event_log.TENSORBOARD_MISSING
    metrics.update(formats=[path.name for path in written], formats_skipped=skipped)
    artifacts.write_json(local / "history.json", history)
    artifacts.plot_history(history, local / "history.png")
    metrics["wall_seconds"] = round(time.perf_counter() - started, 2)
    artifacts.write_json(local / "metrics.json", metrics)
    reload_check = None
    if config.dry_run:
        from trainer.verify import check_reload

        reload_check = check_reload(template, local / "model", sample, keras=keras,
                                    names=[path.name for path in written if path.is_file()])
    logs_under_job_dir = () if config.tensorboard_dir else ("logs",)
    if logs.remote and config.tensorboard_dir:
        logs.push()
    return artifacts.publish(job_dir, logs_under_job_dir), reload_check
