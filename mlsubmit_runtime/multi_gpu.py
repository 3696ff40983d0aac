"""The template pattern of the 2018 multi-GPU recipe, on tf.distribute.

`keras.utils.multi_gpu_model(template, gpus)` (removed in TensorFlow 2.4) built the model once on the CPU, ran a
copy of it on every GPU with each batch split between them, and merged the outputs on the CPU; the parallel model
shared the template's layers, so saving the template saved the trained weights.

Here the same contract rests on MirroredStrategy: `replicate()` makes the strategy-scoped copy that trains
(its variables are mirrored on every device, updated in lock-step by an all-reduce of the gradients), and weights
flow back into the template — after every epoch and at the end of training — through `sync_to_template`. The
template stays a plain CPU model with no strategy or replica wrappers: it is the object to save.

For people porting 2018 code, `multi_gpu_model(template, gpus)` returns the parallel model; call `compile`/`fit` on
it and `save` on the template, exactly as before.
"""

from __future__ import annotations

from mlsubmit_runtime.kerasmod import get_keras


def build_template(factory, *args, **kwargs):
    """Build the model once on the CPU, outside any strategy: the template whose weights are saved."""
    import tensorflow as tf

    with tf.device("/cpu:0"):
        return factory(*args, **kwargs)


def replicate(template, strategy):
    """A copy of the template whose variables live under `strategy` (mirrored on each device), same weights."""
    keras = get_keras()
    with strategy.scope():
        parallel = keras.models.clone_model(template)
        parallel.set_weights(template.get_weights())
    return parallel


def copy_weights(source, target) -> None:
    """Copy trained weights into the template (reads each mirrored variable once, on the host)."""
    target.set_weights(source.get_weights())


def copy_optimizer_state(source, target) -> None:
    """Give the template the trained optimizer's state, so a saved model resumes training where it stopped."""
    try:
        target.optimizer.build(target.trainable_variables)
        for mine, theirs in zip(target.optimizer.variables, source.optimizer.variables):
            mine.assign(theirs.numpy() if hasattr(theirs, "numpy") else theirs)
    except (AttributeError, TypeError, ValueError):  # tf_keras optimizers without this API: weights are enough
        pass


def _sync_class():
    """The callback class, made on first use: Keras is chosen (and imported) when training starts, not on import."""
    global _SYNC
    if _SYNC is None:
        class SyncToTemplate(get_keras().callbacks.Callback):
            """Keeps the template's weights equal to the parallel model's after every epoch and at the end."""

            def __init__(self, template):
                super().__init__()
                self.template = template

            def on_epoch_end(self, epoch, logs=None):
                copy_weights(self.model, self.template)

            def on_train_end(self, logs=None):
                copy_weights(self.model, self.template)

        _SYNC = SyncToTemplate
    return _SYNC


_SYNC = None


def sync_to_template(template):
    """A Keras callback that copies the trained weights into `template` after every epoch and at the end."""
    return _sync_class()(template)


def multi_gpu_model(template, gpus: int, devices: list[str] | None = None):
    """Return a model that trains `template` data-parallel on `gpus` devices (the 2018 API, on MirroredStrategy).

    Args:
        template: a built Keras model (ideally built under `tf.device("/cpu:0")`, see `build_template`).
        gpus: how many devices to use; at least 2, as the original required.
        devices: device names to use instead of the first `gpus` GPUs (e.g. emulated CPU devices in tests).

    Returns:
        The parallel model. `compile` and `fit` it; after `fit` (and after every epoch) the template holds the
        trained weights, so `template.save(...)` saves them.

    Raises:
        ValueError: fewer than 2 devices requested, or fewer available than requested.

    Example:
        template = build_template(my_factory)
        parallel = multi_gpu_model(template, gpus=4)
        parallel.compile("sgd", "sparse_categorical_crossentropy")
        parallel.fit(x, y, batch_size=256)
        template.save("model.keras")
    """
    import tensorflow as tf

    if gpus < 2:
        raise ValueError(f"invalid value for gpus: received {gpus}; expected ≥ 2 (with one device, train the "
                         "template directly)")
    if devices is None:
        found = [d.name for d in tf.config.list_logical_devices("GPU")]
        if len(found) < gpus:
            raise ValueError(f"invalid value for gpus: received {gpus}, but {len(found)} GPU(s) are available")
        devices = found[:gpus]
    parallel = replicate(template, tf.distribute.MirroredStrategy(devices=list(devices)[:gpus]))
    original_fit = parallel.fit

    def fit(*args, callbacks=None, **kwargs):
        return original_fit(*args, callbacks=[*(callbacks or []), sync_to_template(template)], **kwargs)

    parallel.fit = fit
    return parallel
