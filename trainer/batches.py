"""Arrays → Keras PyDatasets batched by the *global* batch: the input pipeline of the JAX and torch routes.

The same stream as the tf.data pipeline (trainer.pipeline) gives the TensorFlow route, without TensorFlow, so a
Keras 3 job on JAX or torch runs where TensorFlow is not installed (a PyTorch image, a JAX GPU machine):

- the training stream is a sequence of epochs; each epoch is a permutation of the training set drawn statelessly
  from (seed, epoch) (numpy's SeedSequence of the two), cut into whole global batches; a resumed run starts at the
  epoch it had not done, and 1 or N devices see the same global batches (DataParallel splits each across devices);
- models that ask for it get the random flip and 4-pixel-padded crop, drawn statelessly from (seed, batch index);
- the validation set is cut to a multiple of the replicas (every batch splits evenly across the devices).

The training PyDataset is endless and read in order by one worker (Keras keeps its iterator across epochs when
steps_per_epoch is set), so which batch comes next never depends on thread timing. JAX dispatches each step
asynchronously, so the next batch is gathered while the devices run the last one.
"""

from __future__ import annotations

import keras
import numpy as np

from trainer.data import Arrays

_AUGMENT_STREAM = 1  # keeps the augmentation's random stream apart from the epoch permutations


def epoch_order(seed: int, epoch: int, n_train: int, global_batch: int) -> np.ndarray:
    """The sample indices of one epoch, in order, cut to whole global batches: a pure function of its arguments."""
    order = np.random.default_rng([seed, epoch]).permutation(n_train)
    return order[: (n_train // global_batch) * global_batch]


def augment_batch(x: np.ndarray, seed: int, index: int) -> np.ndarray:
    """Random horizontal flip, then a random crop after 4-pixel zero padding, per image (x: N×H×W×C): one strided
    gather of the N windows, not a loop over images."""
    rng = np.random.default_rng([seed, _AUGMENT_STREAM, index])
    n, height, width, _ = x.shape
    flip = rng.random(n) < 0.5
    dy, dx = rng.integers(0, 9, size=n), rng.integers(0, 9, size=n)
    padded = np.pad(x, ((0, 0), (4, 4), (4, 4), (0, 0)))
    padded[flip] = padded[flip, :, ::-1]
    windows = np.lib.stride_tricks.sliding_window_view(padded, (height, width), axis=(1, 2))  # N×9×9×C×H×W
    return np.ascontiguousarray(windows[np.arange(n), dy, dx].transpose(0, 2, 3, 1))


class TrainBatches(keras.utils.PyDataset):
    """The endless training stream: batch i is batch i % steps of data epoch initial_epoch + i // steps."""

    def __init__(self, arrays: Arrays, *, global_batch: int, seed: int, augment: bool, initial_epoch: int = 0):
        super().__init__(workers=1, use_multiprocessing=False)
        self.x, self.y = arrays.x_train, arrays.y_train
        self.global_batch, self.seed, self.initial_epoch = global_batch, seed, initial_epoch
        self.augment = augment and self.x.ndim == 4
        self.steps = len(self.x) // global_batch
        self._epoch: tuple[int, np.ndarray] | None = None

    @property
    def num_batches(self):
        return None  # endless: fit's steps_per_epoch cuts it into Keras epochs

    def _order(self, epoch: int) -> np.ndarray:
        if self._epoch is None or self._epoch[0] != epoch:  # read in order: one epoch's permutation at a time
            self._epoch = (epoch, epoch_order(self.seed, epoch, len(self.x), self.global_batch))
        return self._epoch[1]

    def __getitem__(self, index: int):
        epoch, step = divmod(index, self.steps)
        idx = self._order(self.initial_epoch + epoch)[step * self.global_batch:(step + 1) * self.global_batch]
        x = self.x[idx]
        return (augment_batch(x, self.seed, index) if self.augment else x), self.y[idx]


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


def build(arrays: Arrays, *, global_batch: int, replicas: int, seed: int, augment: bool, initial_epoch: int):
    """(training stream, validation batches or None) for trainer.pipeline.build."""
    train = TrainBatches(arrays, global_batch=global_batch, seed=seed, augment=augment, initial_epoch=initial_epoch)
    usable = len(arrays.x_val) - len(arrays.x_val) % replicas
    val = EvalBatches(arrays.x_val[:usable], arrays.y_val[:usable], global_batch) if usable else None
    return train, val
