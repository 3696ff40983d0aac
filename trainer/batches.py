"""Arrays → Keras PyDatasets batched by the *global* batch: the input pipeline of the JAX and torch routes.

The same stream as the tf.data pipeline (trainer.pipeline) gives the TensorFlow route, without TensorFlow, so a
Keras 3 job on JAX or torch runs where TensorFlow is not installed (a PyTorch image, a JAX GPU machine):

- the training stream is a sequence of epochs; each epoch is a permutation of the training set drawn statelessly
  from (seed, epoch) (numpy's SeedSequence of the two), cut into whole global batches; a resumed run starts at the
  epoch it had not done, and 1 or N devices see the same global batches (DataParallel splits each across devices);
- models that ask for it get the random flip and 4-pixel-padded crop, drawn statelessly from (seed, batch index);
- the validation set is cut to a multiple of the replicas (every batch splits evenly across the devices).

The training PyDataset is endless and read in order (Keras keeps its iterator across epochs when steps_per_epoch is
set); every batch is a pure function of its index, made ahead of the step by a few threads (trainer.prefetch), so
which batch comes next never depends on thread timing and a resumed run draws the augmentation of the batches it had
not trained on.
"""

from __future__ import annotations

import threading

import keras
import numpy as np

from trainer.data import Arrays
from trainer.prefetch import Prefetcher

_AUGMENT_STREAM = 1  # keeps the augmentation's random stream apart from the epoch permutations


def epoch_order(seed: int, epoch: int, n_train: int, global_batch: int) -> np.ndarray:
    """The sample indices of one epoch, in order, cut to whole global batches: a pure function of its arguments."""
    order = np.random.default_rng([seed, epoch]).permutation(n_train)
    return order[: (n_train // global_batch) * global_batch]


def augment_batch(x: np.ndarray, seed: int, index: int) -> np.ndarray:
    """Random horizontal flip, then a random crop after 4-pixel zero padding, per image (x: N×H×W×C), drawn from
    (seed, index): one slice copy per image into a zeroed batch, never the padded batch itself (4× the images/s of
    a strided gather over a padded copy on 2 cores, and the same images)."""
    rng = np.random.default_rng([seed, _AUGMENT_STREAM, index])
    n, height, width, _ = x.shape
    flip = rng.random(n) < 0.5
    dy, dx = rng.integers(0, 9, size=n) - 4, rng.integers(0, 9, size=n) - 4  # window offset in the unpadded image
    out = np.zeros_like(x)
    for k in range(n):
        rows, cols = _overlap(int(dy[k]), height), _overlap(int(dx[k]), width)
        if rows and cols:
            source = x[k, :, ::-1] if flip[k] else x[k]
            out[k, rows[0], cols[0]] = source[rows[1], cols[1]]
    return out


def _overlap(offset: int, size: int) -> tuple[slice, slice] | None:
    """(into the window, from the image) along one axis for a window shifted by `offset`; None when they miss."""
    length = size - abs(offset)
    if length <= 0:
        return None
    return slice(max(0, -offset), max(0, -offset) + length), slice(max(0, offset), max(0, offset) + length)


class TrainBatches(keras.utils.PyDataset):
    """The endless training stream: batch i is batch i % steps of data epoch initial_epoch + i // steps, made ahead
    by `workers` threads (0: made when asked, on the caller's thread)."""

    def __init__(self, arrays: Arrays, *, global_batch: int, seed: int, augment: bool, initial_epoch: int = 0,
                 workers: int = 0):
        super().__init__(workers=1, use_multiprocessing=False)  # Keras asks in order; trainer.prefetch works ahead
        self.x, self.y = arrays.x_train, arrays.y_train
        self.global_batch, self.seed, self.initial_epoch = global_batch, seed, initial_epoch
        self.augment = augment and self.x.ndim == 4
        self.steps = len(self.x) // global_batch
        self._orders: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        self.prefetcher = Prefetcher(self.batch, workers=workers) if workers else None

    @property
    def num_batches(self):
        return None  # endless: fit's steps_per_epoch cuts it into Keras epochs

    def _order(self, epoch: int) -> np.ndarray:
        with self._lock:  # the producer threads share the permutations; two epochs are kept (one boundary)
            if epoch not in self._orders:
                self._orders = {e: o for e, o in self._orders.items() if e == epoch - 1}
                self._orders[epoch] = epoch_order(self.seed, epoch, len(self.x), self.global_batch)
            return self._orders[epoch]

    def batch(self, index: int):
        """Batch `index` of this run's stream (a pure function of the index)."""
        absolute = self.initial_epoch * self.steps + index  # the stream's own index: a resumed run goes on with it
        epoch, step = divmod(absolute, self.steps)
        idx = self._order(epoch)[step * self.global_batch:(step + 1) * self.global_batch]
        x = self.x[idx]
        return (augment_batch(x, self.seed, absolute) if self.augment else x), self.y[idx]

    def __getitem__(self, index: int):
        return self.prefetcher.get(index) if self.prefetcher else self.batch(index)

    @property
    def waited(self) -> float:
        """Seconds the training loop waited for a batch that was not made yet (0 without prefetching)."""
        return self.prefetcher.waited if self.prefetcher else 0.0

    def close(self) -> None:
        if self.prefetcher:
            self.prefetcher.close()


class EvalBatches(keras.utils.PyDataset):
    """Features (and labels) in order, by the global batch: the validation set."""

    def __init__(self, x: np.ndarray, y: np.ndarray, global_batch: int):
        super().__init__(workers=1, use_multiprocessing=False)
        self.x, self.y, self.global_batch = x, y, global_batch

    @property
    def num_batches(self) -> int:
        return -(-len(self.x) // self.global_batch)

    def __len__(self) -> int:
        return self.num_batches

    def __getitem__(self, index: int):
        window = slice(index * self.global_batch, (index + 1) * self.global_batch)
        return self.x[window], self.y[window]


def build(arrays: Arrays, *, global_batch: int, replicas: int, seed: int, augment: bool, initial_epoch: int,
          workers: int = 0):
    """(training stream, validation batches or None) for trainer.pipeline.build."""
    train = TrainBatches(arrays, global_batch=global_batch, seed=seed, augment=augment, initial_epoch=initial_epoch,
                         workers=workers)
    usable = len(arrays.x_val) - len(arrays.x_val) % replicas
    val = EvalBatches(arrays.x_val[:usable], arrays.y_val[:usable], global_batch) if usable else None
    return train, val
