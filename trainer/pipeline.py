"""Arrays → input pipelines batched by the *global* batch (per-replica batch × replicas): tf.data for the
TensorFlow route, numpy PyDatasets (trainer.batches, the same stream without TensorFlow) for JAX and torch.

The training stream is a sequence of epochs; each epoch is a permutation of the training set drawn with a
*stateless* RNG keyed by (seed, epoch), cut into whole global batches, gathered batch-wise (fast), augmented for
models that ask for it (random flip and a random crop after 4-pixel padding, as the CIFAR recipes do; drawn
statelessly from (seed, batch index)), made in parallel ahead of the step (tf.data's parallel map and prefetch;
trainer.prefetch's threads on JAX and torch), with a bounded number of batches in flight.
Stateless shuffling matters: a seeded `Dataset.shuffle` reshuffles differently once a
tf.distribute strategy clones the dataset, so 1 and 2 replicas would see different orders; here every replica
count sees the same global batches, and a resumed run continues with the epochs it had not done.
Under a strategy, Keras splits every global batch across the replicas.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.data import Arrays
from trainer.errors import TrainerError


MAX_AUTO_WORKERS = 4  # numpy threads on JAX and torch: enough to outrun an H200's CIFAR step (benchmarks/)


@dataclass(frozen=True)
class Pipelines:
    train: object  # tf.data.Dataset or keras.utils.PyDataset, endless: fit with steps_per_epoch
    val: object | None
    global_batch: int
    steps_per_epoch: int

    @property
    def input_waited(self) -> float | None:
        """Seconds the training loop waited for input so far (JAX and torch), None where tf.data hides it."""
        return getattr(self.train, "waited", None)

    def close(self) -> None:
        """End the threads that make batches ahead (JAX and torch); tf.data ends its own."""
        getattr(self.train, "close", lambda: None)()


def resolve_augment(choice: str, recipe: bool, input_shape) -> bool:
    """Whether the run augments: --augment auto follows the model's recipe; on needs HxWxC images (raises
    TrainerError before training otherwise)."""
    images = len(input_shape) == 3
    if choice == "on" and not images:
        raise TrainerError(f"invalid value for --augment: received 'on' for data of shape {tuple(input_shape)}, but "
                           "the flip and padded crop need HxWxC images; use --augment off or auto, or image data")
    return images and (choice == "on" or (choice == "auto" and recipe))


def resolve_workers(workers: int | None, cores: int) -> int:
    """Threads that make the numpy batches ahead of the step: --input-workers, else the cores (at most 4)."""
    return workers or max(1, min(cores, MAX_AUTO_WORKERS))


def _augment_batch(tf, shape, seed):
    """Random horizontal flip and a random crop after 4-pixel padding, per image, vectorised over the batch
    (one gather per axis instead of a `map_fn` over images: 2-2.6x the images/s on 2 CPU cores), drawn statelessly
    from (seed, batch index): the same draws whatever order the parallel map runs in, and after a resume."""
    height, width, channels = shape

    def augment(index, x, y):
        n = tf.shape(x)[0]
        batch_key = tf.stack([tf.constant(seed, tf.int64), index])
        keys = [tf.random.experimental.stateless_fold_in(batch_key, stream) for stream in (1, 2, 3)]
        flip = tf.random.stateless_uniform([n, 1, 1, 1], seed=keys[0]) < 0.5
        x = tf.where(flip, tf.reverse(x, axis=[2]), x)
        x = tf.pad(x, [[0, 0], [4, 4], [4, 4], [0, 0]])
        rows = tf.random.stateless_uniform([n, 1], keys[1], 0, 9, dtype=tf.int32) + tf.range(height)[None]
        cols = tf.random.stateless_uniform([n, 1], keys[2], 0, 9, dtype=tf.int32) + tf.range(width)[None]
        x = tf.gather(x, rows, axis=1, batch_dims=1)
        return tf.gather(x, cols, axis=2, batch_dims=1), y

    return augment


def build(arrays: Arrays, *, per_replica_batch: int, replicas: int, seed: int, augment: bool,
          steps_per_epoch: int | None = None, initial_epoch: int = 0, backend: str = "tensorflow",
          workers: int | None = None) -> Pipelines:
    """The job's pipelines: tf.data on the tensorflow backend, trainer.batches (no TensorFlow) on the others.

    `workers`: threads making batches ahead (None: tf.data's autotuning; on JAX and torch the usable cores, at
    most 4; 0 on JAX and torch: none, every batch made when Keras asks for it)."""
    global_batch = per_replica_batch * replicas
    n_train = len(arrays.x_train)
    if n_train < global_batch:
        raise TrainerError(f"too few training samples for one batch: {n_train} after the validation split, but the "
                           f"global batch is {global_batch} ({per_replica_batch} per replica × {replicas} replicas); "
                           "lower --batch-size or --validation-split, or use more data")
    full_steps = n_train // global_batch
    steps = min(full_steps, steps_per_epoch) if steps_per_epoch else full_steps
    augment = augment and len(arrays.input_shape) == 3
    if backend != "tensorflow":
        from trainer import batches
        from trainer.config import usable_cores

        threads = workers if workers == 0 else resolve_workers(workers, usable_cores())
        train, val = batches.build(arrays, global_batch=global_batch, replicas=replicas, seed=seed, augment=augment,
                                   initial_epoch=initial_epoch, workers=threads)
        return Pipelines(train, val, global_batch, steps)
    return _tf_data(arrays, global_batch, replicas, seed, augment, steps, initial_epoch, workers)


def _tf_data(arrays: Arrays, global_batch: int, replicas: int, seed: int, augment: bool, steps: int,
             initial_epoch: int, workers: int | None) -> Pipelines:
    import tensorflow as tf

    autotune = tf.data.AUTOTUNE
    parallel = workers or autotune
    n_train = len(arrays.x_train)
    full_steps = n_train // global_batch
    x_train, y_train = tf.constant(arrays.x_train), tf.constant(arrays.y_train)

    def epoch_batches(epoch):
        keys = tf.random.stateless_uniform([n_train], seed=tf.stack([tf.constant(seed, tf.int64), epoch]))
        order = tf.argsort(keys)[: full_steps * global_batch]
        return tf.data.Dataset.from_tensor_slices(order).batch(global_batch, drop_remainder=True)

    train = tf.data.Dataset.range(initial_epoch, 2**62).flat_map(epoch_batches)
    train = train.enumerate(start=initial_epoch * full_steps)  # the stream's batch index: a resume goes on with it
    transform = _augment_batch(tf, arrays.input_shape, seed) if augment else (lambda i, x, y: (x, y))
    train = train.map(lambda i, idx: transform(i, tf.gather(x_train, idx), tf.gather(y_train, idx)),
                      num_parallel_calls=parallel)
    train = train.prefetch(autotune)

    def eval_set(x, y):
        # Keras 3 `evaluate` under MirroredStrategy fails on a batch that does not split evenly across the
        # replicas (AddN shape mismatch), so the in-training validation set is cut to a multiple of them
        # (< replicas samples left out). Final metrics are computed from predictions on every sample.
        usable = len(x) - len(x) % replicas
        return tf.data.Dataset.from_tensor_slices((x[:usable], y[:usable])).batch(global_batch).prefetch(autotune)

    val = eval_set(arrays.x_val, arrays.y_val) if len(arrays.x_val) >= replicas else None
    return Pipelines(train, val, global_batch, steps)
