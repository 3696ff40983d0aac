"""Callbacks of the trainer's own: history that survives a preemption, backup sync to gs://, throughput."""

from __future__ import annotations

import json
import time
from pathlib import Path

from mlsubmit_runtime.kerasmod import get_keras
from mlsubmit_runtime.storage import Location

HISTORY_PARTIAL = "history.partial.json"


def make_callbacks(keras, *, backup: Location, logs: Location, patience: int, samples_per_epoch: int,
                   with_validation: bool, input_waited=None):
    """The trainer's callback list, in the order they must run at each epoch's end. `input_waited`: a function
    giving the seconds the training loop has waited for input so far (trainer.pipeline), where it is known."""
    recorder = HistoryRecorder(backup.local / HISTORY_PARTIAL)
    timer = EpochTimer(samples_per_epoch, input_waited)
    monitor = "val_loss" if with_validation else "loss"
    callbacks = [
        timer,  # first: throughput counts the training steps, not the backup and log I/O that follows
        TuningMetrics(),
        recorder,  # before the backup: its partial history is part of the backup written next
        keras.callbacks.EarlyStopping(monitor=monitor, patience=patience, restore_best_weights=True),
        _async_safe(keras.callbacks.BackupAndRestore(backup_dir=str(backup.local))),
        SyncLocation(backup, every_epoch=True, clear_at_end=True, snapshot=True),
        *_tensorboard(keras, logs),
        SyncLocation(logs, every_epoch=True),
    ]
    return callbacks, recorder, timer


def _async_safe(backup):
    """BackupAndRestore saves once an epoch (save_freq "epoch"), yet defines on_train_batch_end; Keras then turns
    every step's logs into Python floats, which waits for the device after each step. On JAX and torch that lost the
    asynchronous dispatch that lets the next batch be prepared while the GPU runs the last one (measured on an H200:
    the trainer ran mnist_cnn at 0.65x plain Keras). Its batch hook does nothing at this save_freq, so it is safe."""
    backup.async_safe = backup.save_freq == "epoch"
    return backup


def _tensorboard(keras, logs: Location) -> list:
    """Keras's TensorBoard callback on TensorFlow; elsewhere the same epoch scalars without TensorFlow
    (trainer.event_log), or none where the tensorboard package is missing (metrics.json says so)."""
    if keras.backend.backend() == "tensorflow":
        return [keras.callbacks.TensorBoard(log_dir=str(logs.local), write_graph=False, profile_batch=0)]
    from trainer import event_log

    return [event_log.EpochScalars(logs.local)] if event_log.available() else []


_Callback = get_keras().callbacks.Callback  # Keras 3 or tf_keras, whichever this process trains with


class TuningMetrics(_Callback):
    """Every epoch's metrics reported through cloudml-hypertune (mlsubmit_runtime.hypertune), each under its Keras
    name (`val_accuracy`, `val_loss`, `accuracy`, `loss`), so a tuning job's metric tag can name any of them."""

    def on_epoch_end(self, epoch, logs=None):
        from mlsubmit_runtime.hypertune import report_metric

        for name, value in sorted((logs or {}).items()):
            try:
                report_metric(name, float(value), step=epoch + 1)
            except (TypeError, ValueError):  # a metric that is no number (none of Keras's own)
                continue


class HistoryRecorder(_Callback):
    """Per-epoch history, kept beside the backup so a resumed run reports every epoch, not only its own."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path
        self.history: dict[str, list[float]] = {}
        self.resumed_from_epoch = 0

    def on_train_begin(self, logs=None):
        if self.path.exists():
            self.history = json.loads(self.path.read_text())
            self.resumed_from_epoch = len(self.history.get("loss", []))

    def on_epoch_end(self, epoch, logs=None):
        for key, value in (logs or {}).items():
            if key == "learning_rate":
                continue
            values = self.history.setdefault(key, [])
            del values[epoch:]  # a redone epoch replaces what an interrupted run recorded
            values.append(float(value))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.history))

    @property
    def epochs(self) -> int:
        return len(self.history.get("loss", []))


class SyncLocation(_Callback):
    """Publish a Location (backup, TensorBoard logs) to gs:// after every epoch so a preempted job can resume."""

    def __init__(self, location: Location, every_epoch: bool = True, clear_at_end: bool = False,
                 snapshot: bool = False):
        super().__init__()
        self.location, self.every_epoch, self.clear_at_end = location, every_epoch, clear_at_end
        self.snapshot = snapshot  # whole or not at all: a backup's weights and epoch must come from the same epoch

    def on_epoch_end(self, epoch, logs=None):
        if self.every_epoch and self.location.local.exists():
            if self.snapshot:
                self.location.push_snapshot()
            else:
                self.location.push()

    def on_train_end(self, logs=None):
        if self.clear_at_end:
            self.location.clear_remote()
        elif self.location.local.exists():
            self.location.push()


class EpochTimer(_Callback):
    """Training throughput in samples per second, and the share of it spent waiting for input where that is known;
    the first epoch (graph tracing) is left out when there are more."""

    def __init__(self, samples_per_epoch: int, input_waited=None):
        super().__init__()
        self.samples_per_epoch = samples_per_epoch
        self.durations: list[float] = []
        self.waits: list[float] = []
        self._start = self._waited = 0.0
        self._input_waited = input_waited

    def on_epoch_begin(self, epoch, logs=None):
        self._waited = self._input_waited() if self._input_waited else 0.0
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.durations.append(time.perf_counter() - self._start)
        if self._input_waited:
            self.waits.append(self._input_waited() - self._waited)

    @property
    def input_wait_fraction(self) -> float | None:
        """Of the timed epochs' time, the share the training loop waited for a batch; None where not measured."""
        if not self.waits:
            return None
        timed, waits = (self.durations[1:], self.waits[1:]) if len(self.waits) > 1 else (self.durations, self.waits)
        return round(sum(waits) / sum(timed), 4) if sum(timed) > 0 else None

    @property
    def samples_per_second(self) -> float:
        timed = self.durations[1:] if len(self.durations) > 1 else self.durations
        return self.samples_per_epoch * len(timed) / sum(timed) if timed and sum(timed) > 0 else 0.0
