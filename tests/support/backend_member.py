"""Train a tiny Keras 3 model under whichever KERAS_BACKEND this process runs with, as a published job dir.

    KERAS_BACKEND=jax python tests/support/backend_member.py DATA.npz OUT_ROOT SEED NAME [CUSTOM_NAME]

Writes OUT_ROOT/NAME/ (model/model.keras, metrics.json with backend, backend_version and test_accuracy,
MANIFEST.json last through mlsubmit_runtime.artifacts.publish_dir, as trainers do) and, outside the job dir,
OUT_ROOT/NAME.npy: the model's own predictions on DATA.npz's x_test, made in this backend. CUSTOM_NAME, when given, is a second job dir
whose model holds a layer class defined (and registered) only in this script, which another process cannot rebuild
(one process for both: each start of a backend costs seconds). The class is registered when that model is built, not
when this module is imported: a process that imports it to train a plain member (the suite's own, for the TensorFlow
member) does not learn the layer.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if os.environ.get("KERAS_BACKEND") in ("jax", "torch"):
    # A JAX or PyTorch job's machine need not have TensorFlow, and this proves the job dir is written without it
    # (Keras would otherwise import it to save: seconds of a small machine's time).
    sys.modules["tensorflow"] = None

import keras  # noqa: E402 (after the line above)
import numpy as np  # noqa: E402

from mlsubmit_runtime.artifacts import publish_dir, write_json  # noqa: E402


class Doubling(keras.layers.Layer):
    """Exists only in this script: what a user's own training code registers and `mlsubmit predict` never sees."""

    def call(self, x):
        return x * 2.0


def doubling() -> Doubling:
    """A Doubling layer, its class registered with Keras (as training code registers its layers) first."""
    keras.saving.register_keras_serializable(package="training_script")(Doubling)
    return Doubling()


def tiny_model(classes: int, custom_layer: bool) -> keras.Model:
    """Conv2D and Dense, small enough to fit in a few steps."""
    layers = [keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3, activation="relu"), keras.layers.Flatten()]
    if custom_layer:
        layers.append(doubling())
    layers += [keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(classes, activation="softmax")]
    return keras.Sequential(layers)


def backend_version() -> str:
    name = keras.backend.backend()
    module = __import__(name)
    return str(module.__version__)


def train_and_publish(x_train, y_train, x_test, y_test, out_root: str, name: str, custom_layer: bool) -> None:
    model = tiny_model(int(y_train.max()) + 1, custom_layer)
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.fit(x_train, y_train, batch_size=16, epochs=3, verbose=0)
    predictions = np.asarray(model.predict(x_test, verbose=0))
    accuracy = float((predictions.argmax(axis=1) == y_test).mean())

    staging = Path(out_root) / f".{name}.staging"
    (staging / "model").mkdir(parents=True)
    model.save(staging / "model" / "model.keras")
    write_json(staging / "metrics.json", {"backend": keras.backend.backend(), "backend_version": backend_version(),
                                          "keras_version": keras.__version__, "test_accuracy": accuracy})
    publish_dir(staging, str(Path(out_root) / name))
    np.save(Path(out_root) / f"{name}.npy", predictions)


def main(data: str, out_root: str, seed: str, name: str, custom_name: str | None = None) -> None:
    keras.utils.set_random_seed(int(seed))
    with np.load(data) as arrays:
        split = [arrays[k] for k in ("x_train", "y_train", "x_test", "y_test")]
    train_and_publish(*split, out_root, name, custom_layer=False)
    if custom_name:
        train_and_publish(*split, out_root, custom_name, custom_layer=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
