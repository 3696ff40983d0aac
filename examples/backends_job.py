#!/usr/bin/env python3
"""The multi-backend recipe with Keras 3: one model trained under TensorFlow, JAX and PyTorch, then ensembled.

It writes scikit-learn's 8×8 handwritten digits in the keras.datasets .npz format (as examples/digits_job.py does),
then trains the bundled trainer once per Keras backend, each job on this machine into its own job dir under one
parent, and prints the side-by-side table (backend, accuracy, loss, samples/s, wall time):

    mlsubmit train --local --backends tensorflow,jax,torch --job-dir JOBS -- --data DIGITS.npz --model MODEL …

then combines the three models, each loaded under the predicting process's backend (TensorFlow unless
--predict-backend says otherwise), weighted by their validation accuracy, and scores every member and the ensemble
on the held-out test images:

    mlsubmit predict JOBS/tensorflow JOBS/jax JOBS/torch --input DIGITS.npz --labels y_test

JAX and PyTorch come with `pip install 'mlsubmit[jax,torch]'` (the test extra installs both). Exits with the first
non-zero exit code of the two commands, else 0.

    python examples/backends_job.py [--job-dir jobs/backends] [--model mnist_convnet] [--epochs 10]
                                    [--backends tensorflow,jax,torch] [--predict-backend tensorflow]
                                    [-- more trainer flags]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from digits_job import ROOT, write_digits_npz  # this folder is on sys.path when the script runs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-dir", default="jobs/backends", help="the parent of the backends' job dirs")
    parser.add_argument("--model", default="mnist_convnet", help="the trainer's --model (default mnist_convnet)")
    parser.add_argument("--epochs", default="10")
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--predict-backend", default="tensorflow", help="the backend predict loads every member in")
    own, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser.parse_args(own)
    parent = args.job_dir.rstrip("/")
    data = write_digits_npz(Path(parent).parent / "digits.npz")
    trained = _mlsubmit(["train", "--local", "--backends", args.backends, "--package-path", str(ROOT / "trainer"),
                         "--job-dir", parent, "--", "--data", str(data), "--model", args.model, "--epochs",
                         args.epochs, "--batch-size", "32", "--learning-rate", "0.003", *extra])
    members = [f"{parent}/{name.strip()}" for name in args.backends.split(",") if name.strip()]
    ready = [member for member in members if (Path(member) / "MANIFEST.json").exists()]
    if not ready:
        return trained
    predicted = _mlsubmit(["predict", *ready, "--backend", args.predict_backend, "--input", str(data), "--labels",
                           "y_test", "--output", f"{parent}-predictions.csv"])
    return trained or predicted


def _mlsubmit(command: list[str]) -> int:
    print("$ mlsubmit", " ".join(command), flush=True)
    return subprocess.call([sys.executable, "-m", "mlsubmit", *command])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
