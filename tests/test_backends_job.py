"""The multi-backend recipe end to end (examples/backends_job.py, what the README's backends table came from): the
bundled trainer on the digits under TensorFlow, JAX and PyTorch — three local jobs through `mlsubmit train --local
--backends` — then `mlsubmit predict` ensembles the three under TensorFlow with each member's accuracy.

The recipe runs once, on the smallest model (dense) for one epoch (0.84 test accuracy under TensorFlow, over the 0.6
asserted): what it asserts (three jobs, the table, the ensemble) depends on neither the architecture nor the epochs. The recipe's default model, mnist_convnet, trains on JAX and on torch and loads under
TensorFlow in tests/test_trainer_without_tensorflow.py."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys

import pytest

from tests.support.trainer_run import ROOT, read_json
from tests.test_trainer_training import _manifest_ok

BACKENDS = ("tensorflow", "jax", "torch")


@pytest.mark.slow
def test_one_model_on_three_backends_then_their_accuracy_weighted_ensemble(tmp_path):
    model = "dense"
    parent = tmp_path / "jobs" / "backends"
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "backends_job.py"), "--job-dir", str(parent),
                          "--model", model, "--epochs", "1"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=400, env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"})
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-3000:]

    accuracy = {}
    for backend in BACKENDS:
        job = parent / backend
        metrics = read_json(job / "metrics.json")
        _manifest_ok(job, skipped=tuple(metrics["formats_skipped"]))
        assert (metrics["backend"], metrics["model"]) == (backend, model), metrics
        assert metrics["keras_backend"] == backend  # what Keras really ran, not only what was asked
        assert metrics["test_accuracy"] > 0.6, metrics
        accuracy[backend] = metrics["test_accuracy"]
        # the side-by-side table: backend, state, accuracy, loss, samples/s, wall time
        row = re.search(rf"^{backend} +SUCCEEDED +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+) s$", run.stdout, re.M)
        assert row, run.stdout[-3000:]
        assert float(row.group(1)) == pytest.approx(metrics["test_accuracy"], abs=5e-5)
    assert list(read_json(parent / "torch" / "metrics.json")["formats_skipped"]) == ["saved_model"]
    assert not (parent / "torch" / "model" / "saved_model").exists()
    assert read_json(parent / "jax" / "metrics.json")["formats_skipped"] == {}

    # predict: every member loaded under TensorFlow, each one's accuracy beside the ensemble's
    assert "predicted under tensorflow" in run.stdout
    for backend in BACKENDS:
        shown = re.search(rf"{re.escape(str(parent / backend))} .*{backend} \S+ .* ([\d.]+)%", run.stdout)
        assert shown, run.stdout[-3000:]
        assert float(shown.group(1)) == pytest.approx(100 * accuracy[backend], abs=0.006)  # the trainer's figure
    with open(f"{parent}-predictions.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 360
    ensemble = sum(row["predicted"] == row["label"] for row in rows) / len(rows)
    assert re.search(r"^│ ensemble .* {:.2f}% │$".format(100 * ensemble), run.stdout, re.M), run.stdout[-2000:]
    assert ensemble >= min(accuracy.values())
