#!/usr/bin/env python3
"""The README's main job: a two-replica local cluster trains on real data, then `mlsubmit predict` scores the model.

It writes scikit-learn's 8×8 handwritten digits (1,797 images, 10 classes) in the keras.datasets .npz format,
then runs the job the way Vertex AI would — the trainer's sdist installed into an isolated venv, a chief and one
worker on 127.0.0.1 training synchronously (MultiWorkerMirroredStrategy) — with

    mlsubmit train --local --workers 1 --job-dir JOB_DIR -- --data DIGITS.npz --model dense …

The artifacts land in JOB_DIR (default jobs/digits): model/model.keras, model.h5, saved_model/, metrics.json,
history.json, history.png, MANIFEST.json. Then the downstream step reads that job dir as any consumer would
(manifest verified, safe-mode load) and scores the held-out test images:

    mlsubmit predict JOB_DIR --input DIGITS.npz --labels y_test --output JOB_DIR-predictions.csv

It exits with the first non-zero exit code of the two, else 0.

    python examples/digits_job.py [--job-dir jobs/digits] [--epochs 20] [-- more trainer flags]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]  # the project: its trainer/ package is what gets installed


def write_digits_npz(path: Path) -> Path:
    """scikit-learn's digits as uint8 images (n, 8, 8) with a fixed, seeded 80/20 train/test split."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images * (255.0 / 16.0)).round().astype(np.uint8)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    cut = int(len(x) * 0.8)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, x_train=x[:cut], y_train=y[:cut], x_test=x[cut:], y_test=y[cut:])
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-dir", default="jobs/digits", help="where the artifacts go (default: jobs/digits)")
    parser.add_argument("--epochs", default="20")
    own, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser.parse_args(own)
    data = write_digits_npz(Path(args.job_dir).parent / "digits.npz")
    command = ["train", "--local", "--workers", "1", "--package-path", str(ROOT / "trainer"), "--job-dir",
               args.job_dir, "--", "--data", str(data), "--model", "dense", "--epochs", args.epochs, "--batch-size",
               "32", "--learning-rate", "0.003", *extra]
    trained = _mlsubmit(command)
    if trained != 0:
        return trained
    job_dir = args.job_dir.rstrip("/")
    return _mlsubmit(["predict", job_dir, "--input", str(data), "--labels", "y_test", "--output",
                      f"{job_dir}-predictions.csv"])


def _mlsubmit(command: list[str]) -> int:
    print("$ mlsubmit", " ".join(command), flush=True)
    return subprocess.call([sys.executable, "-m", "mlsubmit", *command])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
