"""Which producer feeds the JAX and torch routes: the trainer's numpy stream made three ways, in one run.

- `when asked`: every batch made on Keras's own thread when it asks for it (the trainer before issue #42);
- `keras workers`: Keras' `PyDataset(workers=N)`, its thread pool (OrderedEnqueuer), which it stops and restarts,
  draining its queue, at every epoch;
- `trainer threads`: trainer.prefetch, N threads making the next 2N batches across epochs, counting the wait.

Each is measured alone (images/s iterating the stream with no model) and feeding `model.fit` (images/s, first
epoch left out), on the backend KERAS_BACKEND names; the stream is the same batch for batch in all three (checked).

    KERAS_BACKEND=jax python benchmarks/input_pipeline.py [--model cifar10_vgg] [--samples 2048] [--batch-size 128]
        [--epochs 3] [--workers 2] [--quick]
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

SHAPES = {"cifar10_vgg": "32x32x3", "mnist_cnn": "28x28x1"}


def feeds(keras, arrays, batch: int, workers: int):
    """name → a fresh endless training stream of the trainer's batches, made that way."""
    from trainer.batches import TrainBatches

    def stream(threads: int):
        return TrainBatches(arrays, global_batch=batch, seed=42, augment=True, workers=threads)

    class KerasWorkers(keras.utils.PyDataset):
        def __init__(self):
            super().__init__(workers=workers, use_multiprocessing=False, max_queue_size=2 * workers)
            self.stream = stream(0)

        num_batches = property(lambda self: None)

        def __getitem__(self, index):
            return self.stream.batch(index)

        def close(self):
            pass

    return {"when asked": lambda: stream(0), "keras workers": KerasWorkers, "trainer threads": lambda: stream(workers)}


def alone(make, steps: int) -> float:
    """Images/s of the stream iterated in order with no model (Keras's enqueuer through its own adapter)."""
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    feed = make()
    adapter = PyDatasetAdapter(feed)
    adapter.on_epoch_begin()
    iterator = adapter.get_numpy_iterator()
    next(iterator)
    started = time.perf_counter()
    for _ in range(steps):
        x, _ = next(iterator)
    seconds = time.perf_counter() - started
    adapter.on_epoch_end()
    feed.close()
    return steps * len(x) / seconds


def training(keras, make, arrays, model_name: str, batch: int, epochs: int, steps: int) -> float:
    from trainer.backend_train import tensorflow_unprobed
    from trainer.callbacks import EpochTimer
    from trainer.models import build_model

    with tensorflow_unprobed():  # Keras's seeding would import TensorFlow where it is installed: not used here
        keras.utils.set_random_seed(42)
    model = build_model(keras, model_name, arrays.input_shape, arrays.num_classes)
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    timer, feed = EpochTimer(steps * batch), make()
    try:
        model.fit(feed, epochs=epochs, steps_per_epoch=steps, verbose=0, callbacks=[timer])
    finally:
        feed.close()
    return timer.samples_per_second


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=tuple(SHAPES), default="cifar10_vgg")
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    p.add_argument("--quick", action="store_true",
                   help="mnist_cnn, 64 samples, batch 32 (2 steps), 2 epochs: that it runs")
    args = p.parse_args()
    if args.quick:
        args.model, args.samples, args.batch_size, args.epochs = "mnist_cnn", 64, 32, 2
    import keras
    import numpy as np

    from trainer.data import load

    arrays = load(f"synthetic:{SHAPES[args.model]}:10:{args.samples}", validation_split=0.0, seed=42)
    steps = len(arrays.x_train) // args.batch_size
    made = feeds(keras, arrays, args.batch_size, args.workers)
    firsts = [make()[3][0] for make in made.values()]
    assert all(np.array_equal(firsts[0], other) for other in firsts[1:]), "the three feeds differ"
    print(f"backend {keras.backend.backend()}, {os.cpu_count()} cores, {args.model}, {args.samples} samples, "
          f"batch {args.batch_size}, {args.epochs} epochs (first left out), {args.workers} workers")
    rows = []
    for name, make in made.items():
        row = {"feed": name, "alone": alone(make, 2 * steps),
               "training": training(keras, make, arrays, args.model, args.batch_size, args.epochs, steps)}
        rows.append(row)
        print(f"{name:16} alone {row['alone']:10,.0f} images/s   training {row['training']:9,.0f} images/s",
              flush=True)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
