"""One trial of a tuning study, as the services run it: its environment and how its metric is read back.

Shared by the emulator (Vertex AI and legacy studies) and `mlsubmit train --local` with a tuning spec:

- `trial_env(env, trial_id, metric_file)`: CLOUD_ML_TRIAL_ID, CLOUD_ML_HP_METRIC_FILE and `task.trial` in
  TF_CONFIG (what tf.estimator and the legacy samples read to give each trial its own output directory);
- `read_metric(path, tag)`: the last report of `tag` in a cloudml-hypertune metrics file (one JSON line per
  report: `{"<tag>": "0.93", "global_step": "100", …}`), as the service reads it;
- `read_summary_metric(directory, tag)`: the last value of a TensorFlow summary `tag` in the event files under a
  directory, as legacy AI Platform also read it (only when TensorFlow or TensorBoard can be imported; imported
  lazily, never at start-up).

Example:
    >>> env = trial_env({"TF_CONFIG": '{"task": {"type": "chief", "index": 0}}'}, "3", "/tmp/t3/output.metrics")
    >>> json.loads(env["TF_CONFIG"])["task"]["trial"]
    '3'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def with_trial(env: dict[str, str]) -> dict[str, str]:
    """`env` with `task.trial` in TF_CONFIG when CLOUD_ML_TRIAL_ID says the process is a trial (else unchanged)."""
    trial = env.get("CLOUD_ML_TRIAL_ID")
    if not trial or not env.get("TF_CONFIG"):
        return env
    try:
        config = json.loads(env["TF_CONFIG"])
    except ValueError:
        return env
    if not isinstance(config, dict):
        return env
    config["task"] = {**(config.get("task") or {}), "trial": trial}
    return {**env, "TF_CONFIG": json.dumps(config)}


def trial_env(env: dict[str, str], trial_id: str, metric_file: str | Path) -> dict[str, str]:
    """The environment of one replica of a trial (see the module docstring)."""
    return with_trial({**env, "CLOUD_ML_TRIAL_ID": str(trial_id), "CLOUD_ML_HP_METRIC_FILE": str(metric_file)})


def read_metric(path: str | Path, metric: str) -> tuple[float | None, int]:
    """(value, step) of the last line of a cloudml-hypertune metrics file that carries `metric`; (None, 0) if none."""
    value, step = None, 0
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None, 0
    for line in lines:
        try:
            entry = json.loads(line)
            value, step = float(entry[metric]), int(float(entry.get("global_step") or 0))
        except (ValueError, KeyError, TypeError):
            continue
    return value, step


def read_summary_metric(directory: str | Path, tag: str) -> tuple[float | None, int]:
    """(value, step) of the last (highest step) scalar summary `tag` in the event files under `directory`.

    `directory` may be gs:// (its event files are downloaded first). (None, 0) when there is none, or when
    TensorBoard cannot be imported here."""
    if str(directory).startswith("gs://"):
        import tempfile

        with tempfile.TemporaryDirectory(prefix="mlsubmit-events-") as local:
            return read_summary_metric(_download_events(str(directory), Path(local)), tag)
    files = sorted(Path(directory).rglob("events.out.tfevents.*")) if Path(directory).is_dir() else []
    if not files:
        return None, 0
    best: tuple[int, float] | None = None
    for path in files:
        for step, value in _scalars(path, tag):
            if best is None or step >= best[0]:
                best = (step, value)
    return (None, 0) if best is None else (best[1], best[0])


def _download_events(directory: str, local: Path) -> Path:
    """The event files under gs://`directory` copied into `local` (nothing when the bucket cannot be read)."""
    from mlsubmit.emulator.gcs_emulator import storage_client
    from mlsubmit.cloud.storage import split_gcs

    try:
        bucket, prefix = split_gcs(directory.rstrip("/") + "/")
        for index, blob in enumerate(storage_client().list_blobs(bucket, prefix=prefix)):
            if "events.out.tfevents." in blob.name.rsplit("/", 1)[-1]:
                (local / str(index)).mkdir()
                blob.download_to_filename(str(local / str(index) / blob.name.rsplit("/", 1)[-1]))
    except Exception:  # a trial's metric is best effort: no event files read is no metric
        pass
    return local


def _scalars(path: Path, tag: str) -> list[tuple[int, float]]:
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    except ImportError:
        return []
    found = []
    try:
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.tag != tag:
                    continue
                number = _number(value)
                if number is not None:
                    found.append((int(event.step), number))
    except Exception:  # a truncated or foreign event file: what was read so far counts
        pass
    return found


def _number(value: Any) -> float | None:
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor"):
        try:
            from tensorboard.util import tensor_util

            return float(tensor_util.make_ndarray(value.tensor).item())
        except Exception:
            return None
    return None
