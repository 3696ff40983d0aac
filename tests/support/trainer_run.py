"""Run the trainer as users run it (`python -m trainer.task …`) in a subprocess, and read its artifacts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_trainer(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
    return subprocess.run([sys.executable, "-m", "trainer.task", *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def digits_npz(path: Path) -> Path:
    """scikit-learn's 8×8 digits in the keras.datasets npz format (uint8 images, fixed 80/20 split)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images * (255.0 / 16.0)).round().astype(np.uint8)  # (n, 8, 8): the channel axis is added
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    cut = int(len(x) * 0.8)
    np.savez(path, x_train=x[:cut], y_train=y[:cut], x_test=x[cut:], y_test=y[cut:])
    return path


def manifest_lists_exactly_the_files(job) -> set[str]:
    listed = {entry["path"] for entry in read_json(job / "MANIFEST.json")["files"]}
    on_disk = {p.relative_to(job).as_posix() for p in job.rglob("*") if p.is_file() and p.name != "MANIFEST.json"}
    on_disk = {p for p in on_disk if not p.startswith("backup/")}
    assert listed == on_disk
    return listed


def loads_under_tensorflow_with_the_recorded_test_metrics(job, npz, metrics, formats=("model.keras",),
                                                           tolerance: float = 1e-4) -> None:
    """Each of `formats` (model.keras in safe mode) in this process, on Keras's TensorFlow backend: the same test
    accuracy, and the test loss within `tolerance`."""
    import keras

    assert keras.backend.backend() == "tensorflow"
    with np.load(npz) as data:
        x, y = data["x_test"].astype("float32")[..., None] / 255.0, data["y_test"]
    for name in formats:
        safe = {"safe_mode": True} if name.endswith(".keras") else {}
        model = keras.models.load_model(str(job / "model" / name), compile=False, **safe)
        p = model.predict(x, verbose=0)
        loss = float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y], 1e-7, 1.0))))
        assert abs(loss - metrics["test_loss"]) < tolerance, name
        assert float(np.mean(p.argmax(1) == y)) == pytest.approx(metrics["test_accuracy"]), name
