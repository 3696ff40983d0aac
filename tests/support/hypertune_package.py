"""A tiny tunable trainer for the tuning tests: numpy only (no TensorFlow, so a trial costs a fraction of a second),
reporting its metric through the real `cloudml-hypertune` package, as a user's trainer does.

`hptrainer.task --learning_rate=LR --steps=N --optimizer=sgd|momentum --job-dir DIR` fits y = 3x + 1 by gradient
descent and reports the final mean squared error as `mse` (MINIMIZE), then writes `DIR/trial.json` with its
arguments, TF_CONFIG's task and CLOUD_ML_TRIAL_ID (what the tests check). An unknown flag exits 2.
"""

from __future__ import annotations

from pathlib import Path

SETUP_PY = '''\
from setuptools import find_packages, setup

setup(name="hptrainer", version="0.1.0", packages=find_packages(),
      install_requires=["cloudml-hypertune", "numpy"])
'''

TASK_PY = '''\
import argparse, json, os

import hypertune
import numpy as np

parser = argparse.ArgumentParser(prog="hptrainer.task")
parser.add_argument("--learning_rate", type=float, required=True)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--optimizer", choices=["sgd", "momentum"], default="sgd")
parser.add_argument("--job-dir", default="")
args = parser.parse_args()

rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, 64)
y = 3 * x + 1 + rng.normal(0, 0.1, 64)
w = b = vw = vb = 0.0
tuner = hypertune.HyperTune()
for step in range(1, args.steps + 1):
    error = w * x + b - y
    gw, gb = 2 * float(np.mean(error * x)), 2 * float(np.mean(error))
    beta = 0.9 if args.optimizer == "momentum" else 0.0
    vw, vb = beta * vw + gw, beta * vb + gb
    w, b = w - args.learning_rate * vw, b - args.learning_rate * vb
    if step % 5 == 0 or step == args.steps:
        mse = float(np.mean((w * x + b - y) ** 2))
        tuner.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="mse", metric_value=mse,
                                                  global_step=step)
task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
print(f"trial {os.environ.get('CLOUD_ML_TRIAL_ID')}: lr {args.learning_rate} -> mse {mse:.6f} "
      f"(TF_CONFIG task {task.get('type')} trial {task.get('trial')})", flush=True)
job_dir = args.job_dir or os.environ.get("AIP_MODEL_DIR", "")
if job_dir and not job_dir.startswith("gs://"):
    os.makedirs(job_dir, exist_ok=True)
    with open(os.path.join(job_dir, "trial.json"), "w") as handle:
        json.dump({"args": vars(args), "task": json.loads(os.environ.get("TF_CONFIG") or "{}").get("task"),
                   "trial": os.environ.get("CLOUD_ML_TRIAL_ID"), "mse": mse}, handle)
'''


def expected_mse(learning_rate: float, steps: int = 20, optimizer: str = "sgd") -> float:
    """The metric the task reports, computed here the same way (the tests compare the trials' values to it)."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 64)
    y = 3 * x + 1 + rng.normal(0, 0.1, 64)
    w = b = vw = vb = 0.0
    for _ in range(steps):
        error = w * x + b - y
        gw, gb = 2 * float(np.mean(error * x)), 2 * float(np.mean(error))
        beta = 0.9 if optimizer == "momentum" else 0.0
        vw, vb = beta * vw + gw, beta * vb + gb
        w, b = w - learning_rate * vw, b - learning_rate * vb
    return float(np.mean((w * x + b - y) ** 2))


def make_hp_project(root: Path) -> Path:
    """Write the project under `root`; returns the package directory (`root/hptrainer`)."""
    package = root / "hptrainer"
    package.mkdir(parents=True, exist_ok=True)
    (root / "setup.py").write_text(SETUP_PY)
    (package / "__init__.py").write_text('"""hptrainer: a tiny tunable trainer."""\n')
    (package / "task.py").write_text(TASK_PY)
    return package
