"""Plain Keras 3 `model.fit` images/s on the JAX backend, for the trainer's own model factories, on one device.

A reference figure for the GPU rows of the README while the lent GPU machine cannot run TensorFlow (its image has
JAX and CUDA 13, no TensorFlow; TensorFlow 2.21 and its CUDA 12 libraries are ~3.3 GB of wheels). It is NOT the
TensorFlow trainer: same Keras model code (trainer/models.py), same synthetic data shapes, another backend.

    KERAS_BACKEND=jax python benchmarks/keras_jax_gpu.py [--samples 16384] [--epochs 4] [--batch-size 256]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "jax")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = {"mnist_cnn": (28, 28, 1), "cifar10_vgg": (32, 32, 3)}
QUICK = {"dense": SHAPES["mnist_cnn"]}  # --quick's: the trainer's small MLP (a convnet's tracing would be most of it)


def images_per_second(keras, model_name: str, shape, samples: int, batch: int, epochs: int, precision: str) -> float:
    import numpy as np

    from trainer.backend_train import tensorflow_unprobed
    from trainer.models import build_model

    rng = np.random.default_rng(42)
    x = rng.uniform(0, 1, size=(samples, *shape)).astype("float32")
    y = rng.integers(0, 10, size=samples)
    with tensorflow_unprobed():  # Keras's seeding would import TensorFlow where it is installed: not used here
        keras.utils.set_random_seed(42)
    keras.mixed_precision.set_global_policy(precision)
    model = build_model(keras, model_name, shape, 10)
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    times: list[float] = []

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):  # the loss is read back at the epoch's end: the device is done
            times.append(time.perf_counter() - self.t)

    model.fit(x, y, batch_size=batch, epochs=epochs, verbose=0, callbacks=[Timer()])
    timed = times[1:]
    return (samples // batch) * batch * len(timed) / sum(timed)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=16384)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--precision", default="float32,mixed_bfloat16,mixed_float16")
    p.add_argument("--json", default=None,
                   help="where the results go (default keras_jax_gpu.json; none with --quick unless given)")
    p.add_argument("--quick", action="store_true",
                   help="the dense model only, 8 samples, batch 4, 2 epochs, float32: that it runs (any device)")
    args = p.parse_args()
    if args.json is None and not args.quick:
        args.json = "keras_jax_gpu.json"
    if args.quick:
        args.samples, args.epochs, args.batch_size, args.precision = 8, 2, 4, "float32"  # 2 small steps an epoch
    import jax
    import keras

    device = jax.devices()[0]
    rows = []
    for model_name, shape in (QUICK if args.quick else SHAPES).items():
        for precision in args.precision.split(","):
            ips = images_per_second(keras, model_name, shape, args.samples, args.batch_size, args.epochs, precision)
            rows.append({"model": model_name, "precision": precision, "images_per_second": round(ips, 1)})
            print(f"{model_name:12} {precision:15} {ips:12,.0f} images/s", flush=True)
    result = {"device": getattr(device, "device_kind", str(device)), "platform": device.platform,
              "keras": keras.__version__, "jax": jax.__version__, "backend": keras.backend.backend(),
              "samples": args.samples, "batch_size": args.batch_size, "epochs": args.epochs, "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
