"""TensorBoard logs without TensorFlow: every epoch's metrics as scalars, for the JAX and torch routes.

Keras's TensorBoard callback writes through `tf.summary`, so it needs TensorFlow. Here the same per-epoch scalars
(`epoch_loss`, `epoch_accuracy`, … under logs/train, `epoch_val_*` metrics as `epoch_*` under logs/validation, as
Keras names them) are written as TensorBoard event files with the `tensorboard` package alone (its protobufs and
record writer, which TensorBoard and torch.utils.tensorboard use), which never imports TensorFlow.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from mlsubmit_runtime.kerasmod import get_keras

TENSORBOARD_MISSING = ("TensorBoard logs need the tensorboard package (or TensorFlow), neither is installed here; "
                       "`pip install tensorboard` to get them")


def available() -> bool:
    """Whether the tensorboard package is importable (the event writer needs nothing else)."""
    import importlib.util

    return importlib.util.find_spec("tensorboard") is not None


class _EventFile:
    """One append-only TensorBoard event file (TFRecord framing, CRC-checked) in `directory`."""

    def __init__(self, directory: Path):
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        directory.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}.v2"
        self._file = open(directory / name, "wb")  # noqa: SIM115 - closed by close()
        self._writer = RecordWriter(self._file)
        self._event = event_pb2.Event
        self._write(self._event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, event) -> None:
        self._writer.write(event.SerializeToString())
        self._file.flush()

    def scalars(self, step: int, values: dict[str, float]) -> None:
        from tensorboard.compat.proto import summary_pb2

        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)
                                             for tag, value in sorted(values.items())])
        self._write(self._event(wall_time=time.time(), step=step, summary=summary))

    def close(self) -> None:
        self._file.close()


class EpochScalars(get_keras().callbacks.Callback):
    """Per-epoch training and validation metrics as TensorBoard scalars under `log_dir` (train/, validation/)."""

    def __init__(self, log_dir: str | os.PathLike):
        super().__init__()
        self.log_dir = Path(log_dir)
        self._files: dict[str, _EventFile] = {}

    def _file(self, split: str) -> _EventFile:
        if split not in self._files:
            self._files[split] = _EventFile(self.log_dir / split)
        return self._files[split]

    def on_epoch_end(self, epoch, logs=None):
        train, val = {}, {}
        for key, value in (logs or {}).items():
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            (val if key.startswith("val_") else train)[f"epoch_{key.removeprefix('val_')}"] = number
        for split, values in (("train", train), ("validation", val)):
            if values:
                self._file(split).scalars(epoch, values)

    def on_train_end(self, logs=None):
        for events in self._files.values():
            events.close()
        self._files.clear()
