"""Train a tiny feature-column model with tf.keras 2 and write the versions that ran to <job-dir>/metrics.json."""

import argparse
import importlib.metadata
import json
import os

import numpy as np
import tensorflow as tf


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    columns = [tf.feature_column.numeric_column("x"), tf.feature_column.numeric_column("y")]
    model = tf.keras.Sequential([tf.keras.layers.DenseFeatures(columns), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.RMSprop(learning_rate=0.01), loss="mse")
    rng = np.random.default_rng(0)
    features = {"x": rng.normal(size=(64, 1)).astype("float32"), "y": rng.normal(size=(64, 1)).astype("float32")}
    history = model.fit(features, features["x"] + features["y"], epochs=2, batch_size=16, verbose=0)
    legacy = os.environ.get("TF_USE_LEGACY_KERAS") == "1"  # TensorFlow 2.16+: tf.keras is then tf_keras
    keras_version = importlib.metadata.version("tf-keras" if legacy else "keras")
    metrics = {"tensorflow_version": tf.__version__, "keras_version": keras_version,
               "loss": float(history.history["loss"][-1])}
    if "://" not in args.job_dir:  # a local job dir (train --local); the emulator's is gs://
        os.makedirs(args.job_dir, exist_ok=True)
        with open(os.path.join(args.job_dir, "metrics.json"), "w") as out:
            json.dump(metrics, out)
    print(f"kerastwo: tensorflow {tf.__version__}, tf.keras {keras_version}, loss {metrics['loss']:.4f}")


if __name__ == "__main__":
    main()
