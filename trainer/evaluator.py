"""The evaluator task: evaluates the chief's checkpoints as they appear, and exits when training has ended.

The chief of a job with evaluators writes the model's weights after every epoch to <job-dir>/evaluation/
(`ckpt-0001.index`, …, TensorFlow checkpoint format) and, once `fit` returns, a TRAINING_DONE marker. The
evaluator builds the same model (tf_keras, like the chief), loads each new checkpoint in epoch order, computes
exact loss and accuracy on the validation set (the test set when there is none), prints one line per checkpoint,
and keeps every result in <job-dir>/evaluation/evaluator-<index>.json. It exits 0 after the marker appears and
every checkpoint is evaluated. A marker of another job (CLOUD_ML_JOB_ID differs) is ignored.
"""

from __future__ import annotations

import json
import os
import re
import time

from trainer import artifacts, data
from trainer.cluster import Cluster
from trainer.config import TrainConfig
from mlsubmit_runtime.storage import Location

_CHECKPOINT = re.compile(r"^ckpt-(\d+)\.index$")


def pending_checkpoints(directory, done: set[int]) -> list[tuple[int, str]]:
    """(epoch, checkpoint prefix) of every complete checkpoint not evaluated yet, in epoch order."""
    found = []
    for entry in sorted(os.listdir(directory)) if os.path.isdir(directory) else ():
        match = _CHECKPOINT.match(entry)
        if match and int(match.group(1)) not in done:
            found.append((int(match.group(1)), os.path.join(directory, entry[: -len(".index")])))
    return found


def training_done(directory, job_id: str) -> bool:
    from trainer.cluster_train import DONE_MARKER

    try:
        marker = json.loads(open(os.path.join(directory, DONE_MARKER)).read())
    except (OSError, ValueError):
        return False
    return not job_id or not marker.get("job_id") or marker["job_id"] == job_id


def run_evaluator(config: TrainConfig, cluster: Cluster, poll_seconds: float | None = None) -> list[dict]:
    """Evaluate checkpoints until training is done. Returns one result per checkpoint."""
    from trainer.cluster_train import EVALUATION_DIR, quiet

    arrays = data.load(config.data, validation_split=config.validation_split, seed=config.seed)
    split, x, y = ("validation", arrays.x_val, arrays.y_val) if len(arrays.x_val) else \
        ("test", arrays.x_test, arrays.y_test)
    place = Location(config.job_dir).child(EVALUATION_DIR)
    poll_seconds = poll_seconds or (10.0 if place.remote else 0.5)
    name = f"evaluator-{cluster.task_index}"

    from mlsubmit_runtime.chatter import import_tensorflow

    tf = import_tensorflow()  # its C++ start-up lines hidden (mlsubmit_runtime.chatter)

    from mlsubmit_runtime.kerasmod import get_keras
    from trainer.models import build_model
    from trainer.train import evaluate

    quiet(tf)
    keras = get_keras()
    model = build_model(keras, config.model, arrays.input_shape, arrays.num_classes)
    print(f"{name}: watching {place.uri} for the chief's checkpoints; evaluates each on {len(y)} {split} samples",
          flush=True)
    job_id, results, done = os.environ.get("CLOUD_ML_JOB_ID", ""), [], set()
    while True:
        place.pull()
        finished = training_done(place.local, job_id)  # read before listing: no checkpoint comes after the marker
        for epoch, prefix in pending_checkpoints(place.local, done):
            model.load_weights(prefix).expect_partial()
            result = {"epoch": epoch, "checkpoint": os.path.basename(prefix), "split": split,
                      **evaluate(model, x, y, config.batch_size), "time": time.time()}
            print(f"{name}: epoch {epoch}: {split} loss {result['loss']:.4f}, accuracy {result['accuracy']:.4f}",
                  flush=True)
            results.append(result)
            done.add(epoch)
            artifacts.write_json(place.local / f"{name}.json", results)
            place.push(f"{name}.json")
        if finished:
            break
        time.sleep(poll_seconds)
    print(f"{name}: training has ended; evaluated {len(results)} checkpoint(s)", flush=True)
    place.cleanup_local()
    return results
