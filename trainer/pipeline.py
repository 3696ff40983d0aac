"""Arrays → tf.data pipelines batched by the *global* batch (per-replica batch × replicas).

Shuffle (seeded), batch, parallel augmentation for models that ask for it (random flip and a random crop after
4-pixel padding, as the CIFAR recipes do), prefetch. Under a tf.distribute strategy, Keras splits every global
batch across the replicas.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.data import Arrays
from trainer.errors import TrainerError


@dataclass(frozen=True)
class Pipelines:
    train: object  # tf.data.Dataset
    val: object | None
    test: object  # features only: for predictions on every test sample
    global_batch: int
    steps_per_epoch: int


def _augment_fn(tf, shape, seed):
    height, width = shape[0], shape[1]

    def augment(x, y):
        x = tf.image.random_flip_left_right(x, seed=seed)
        x = tf.image.resize_with_crop_or_pad(x, height + 8, width + 8)
        x = tf.image.random_crop(x, size=(height, width, shape[2]), seed=seed)
        return x, y

    return augment


def build(arrays: Arrays, *, per_replica_batch: int, replicas: int, seed: int, augment: bool,
          steps_per_epoch: int | None = None) -> Pipelines:
    import tensorflow as tf

    global_batch = per_replica_batch * replicas
    n_train = len(arrays.x_train)
    if n_train < global_batch:
        raise TrainerError(f"too few training samples for one batch: {n_train} after the validation split, but the "
                           f"global batch is {global_batch} ({per_replica_batch} per replica × {replicas} replicas); "
                           "lower --batch-size or --validation-split, or use more data")
    autotune = tf.data.AUTOTUNE
    train = tf.data.Dataset.from_tensor_slices((arrays.x_train, arrays.y_train))
    train = train.shuffle(n_train, seed=seed, reshuffle_each_iteration=True)
    if augment and len(arrays.input_shape) == 3:
        train = train.map(_augment_fn(tf, arrays.input_shape, seed), num_parallel_calls=autotune)
    steps = n_train // global_batch
    if steps_per_epoch:
        steps = min(steps, steps_per_epoch)
        train = train.repeat()
    train = train.batch(global_batch, drop_remainder=True).prefetch(autotune)
    if steps_per_epoch:
        train = train.take(steps)  # a finite dataset: BackupAndRestore and Keras count epochs over it

    def eval_set(x, y):
        # Keras 3 `evaluate` under MirroredStrategy fails on a batch that does not split evenly across the
        # replicas (AddN shape mismatch), so the in-training validation set is cut to a multiple of them
        # (< replicas samples left out). Final metrics are computed from predictions on every sample.
        usable = len(x) - len(x) % replicas
        return tf.data.Dataset.from_tensor_slices((x[:usable], y[:usable])).batch(global_batch).prefetch(autotune)

    val = eval_set(arrays.x_val, arrays.y_val) if len(arrays.x_val) >= replicas else None
    test = tf.data.Dataset.from_tensor_slices(arrays.x_test).batch(global_batch).prefetch(autotune)
    return Pipelines(train, val, test, global_batch, steps)
