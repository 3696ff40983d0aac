"""Predictions and accuracy-weighted ensembles from the trainer's job dirs (local or gs://) or model files.

    sources   MODEL arguments → verified local model files (MANIFEST.json, sha256, content-addressed cache)
    members   load the models (Keras safe mode unless --unsafe) in this process's backend, and check they agree
    layers    which layer keeps a model from loading in this backend (a custom class, an op it lacks)
    inputs    .npz / .npy / images → preprocessed batches (the trainer's preprocessing); labels
    ensemble  `combine(probabilities, weights)` = Σ wᵢ·pᵢ / Σ wᵢ, and the weights (accuracy, equal, explicit)
    outputs   CSV / .npz / JSON and the confusion-matrix PNG, written atomically
    run       one run, every check first, then batch by batch
    report    rich tables for the terminal

Importing this package is light: `combine` (numpy) is imported on first use, Keras and its backend (TensorFlow, JAX
or PyTorch: `mlsubmit.predict.backend`) when a model is loaded,
so `mlsubmit --help` can read the flag defaults from `request` without either.
"""

__all__ = ["combine"]


def __getattr__(name: str):
    if name == "combine":
        from mlsubmit.predict.ensemble import combine

        return combine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
