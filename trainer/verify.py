"""Reload the saved artifacts and check they predict exactly what the in-memory template predicts (dry runs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainer.errors import TrainerError


def check_reload(template, model_dir: Path, x: np.ndarray, atol: float = 1e-6, keras=None,
                 names: tuple[str, ...] | list[str] = ("model.keras", "model.h5")) -> dict[str, float]:
    """Load each of `names` (model.keras in safe mode, model.h5) with `keras` (default: the trainer's) and compare
    predictions."""
    from mlsubmit_runtime.kerasmod import get_keras

    keras = keras or get_keras()
    expected = template.predict(x, verbose=0)
    differences = {}
    for name in names:
        options = {"safe_mode": True} if name.endswith(".keras") else {}
        loaded = keras.models.load_model(str(model_dir / name), compile=False, **options)
        if getattr(template, "jit_compile", None) is not None:  # predict as the template does: XLA rounds differently
            loaded.jit_compile = template.jit_compile
        difference = float(np.max(np.abs(loaded.predict(x, verbose=0) - expected)))
        if difference > atol:
            raise TrainerError(f"reloaded {name} predicts differently from the trained model (max difference "
                               f"{difference:.3g} > {atol}); the artifact is not trustworthy")
        differences[name] = difference
    return differences
