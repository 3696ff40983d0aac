"""Trainer throughput vs the original recipes' plain script, in one run, on this machine.

Baseline: numpy arrays straight into `model.fit` (what the 2018 recipes did), same model, same data, same batch.
Ours: `python -m trainer.task` (tf.data pipeline, stateless shuffling, batch-wise gather, prefetch).
Both run as fresh processes; samples/s leave out the first epoch (tracing). Prints both and their ratio, per Keras
backend with --backends (KERAS_BACKEND set for both: the baseline is plain Keras on that backend).

    python benchmarks/trainer_throughput.py [--model mnist_convnet] [--samples 4096] [--epochs 4] [--repeats 2]
                                            [--backends tensorflow,jax,torch]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BASELINE = r"""
import json, sys, time, numpy as np, keras
from trainer.data import load
from trainer.models import build_model
model_name, spec, batch, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
a = load(spec, validation_split=0.0, seed=42)
keras.utils.set_random_seed(42)
model = build_model(keras, model_name, a.input_shape, a.num_classes)
model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
times = []
class T(keras.callbacks.Callback):
    def on_epoch_begin(self, e, logs=None): self.t = time.perf_counter()
    def on_epoch_end(self, e, logs=None): times.append(time.perf_counter() - self.t)
model.fit(a.x_train, a.y_train, batch_size=batch, epochs=epochs, verbose=0, callbacks=[T()])
n = (len(a.x_train) // batch) * batch
print(json.dumps({"samples_per_second": n * len(times[1:]) / sum(times[1:])}))
"""


def run(cmd: list[str], backend: str = "tensorflow") -> str:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": backend}
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return out.stdout


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mnist_convnet")
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--backends", default="tensorflow", help="comma-separated Keras backends, each measured in turn")
    p.add_argument("--quick", action="store_true",
                   help="the dense model, 32 samples, batch 16, 2 epochs, one repeat: that it runs")
    args = p.parse_args()
    if args.quick:
        # 2 small steps an epoch of the smallest model (a convnet's tracing was a third of each process's CPU): the
        # harness, not a measurement
        args.model, args.samples, args.batch_size, args.epochs, args.repeats = "dense", 32, 16, 2, 1
    spec = f"synthetic:28x28x1:10:{args.samples}"
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"model {args.model}, {args.samples} synthetic 28x28x1 samples, batch {args.batch_size}, "
          f"{args.epochs} epochs (first left out), median of {args.repeats}")
    for backend in [name.strip() for name in args.backends.split(",") if name.strip()]:
        ours, base = [], []
        for _ in range(args.repeats):
            out = run([sys.executable, "-c", BASELINE, args.model, spec, str(args.batch_size), str(args.epochs)],
                      backend)
            base.append(json.loads(out.strip().splitlines()[-1])["samples_per_second"])
            with tempfile.TemporaryDirectory() as job:
                run([sys.executable, "-m", "trainer.task", "--job-dir", job, "--model", args.model, "--data", spec,
                     "--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--validation-split", "0",
                     "--patience", "100"], backend)
                ours.append(json.loads(Path(job, "metrics.json").read_text())["samples_per_second"])
        b, o = statistics.median(base), statistics.median(ours)
        print(f"[{backend}] baseline (numpy arrays into model.fit): {b:,.0f} samples/s  runs: {[round(x) for x in base]}")
        print(f"[{backend}] mlsubmit trainer (tf.data pipeline):     {o:,.0f} samples/s  runs: {[round(x) for x in ours]}")
        print(f"[{backend}] ratio ours/baseline: {o / b:.2f}")


if __name__ == "__main__":
    main()
