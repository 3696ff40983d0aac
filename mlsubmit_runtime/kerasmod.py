"""Which Keras a trainer uses: Keras 3 (`keras`) normally, `tf_keras` when TF_USE_LEGACY_KERAS=1.

Cluster jobs (multi-worker and parameter-server training) run on `tf_keras`, because Keras 3's `fit` fails with
MultiWorkerMirroredStrategy on ≥ 2 workers and does not support ParameterServerStrategy (see README). The model
code is the same for both: it only uses APIs the two share.
"""

from __future__ import annotations

import os


def legacy_keras_requested() -> bool:
    return os.environ.get("TF_USE_LEGACY_KERAS", "").strip().lower() in {"1", "true", "yes"}


def get_keras():
    """Return the Keras module in use (import TensorFlow's environment first so the choice is honoured)."""
    if legacy_keras_requested():
        import tf_keras

        return tf_keras
    import keras

    return keras
