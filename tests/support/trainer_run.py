"""Run the trainer as users run it (`python -m trainer.task …`) in a subprocess, and read its artifacts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

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
