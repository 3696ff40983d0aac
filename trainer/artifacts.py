"""The job directory's artifacts, written by the chief only, MANIFEST.json last.

    model/model.keras        the template model (Keras format)
    model/model.h5           the same model as HDF5, as the original recipes saved it
    model/saved_model/       export for serving (not on torch: metrics.json's formats_skipped says why)
    metrics.json             final loss/accuracy on validation and test data, run facts
    history.json             per-epoch history
    history.png              training and validation curves
    MANIFEST.json            every file above with its size and sha256 — written last

An artifact directory without MANIFEST.json is incomplete: the manifest is removed before a run starts writing and
written (and uploaded) only after every other file is in place.
"""

from __future__ import annotations

from pathlib import Path

from mlsubmit_runtime.artifacts import MANIFEST, write_json
from mlsubmit_runtime.artifacts import publish as publish_files
from mlsubmit_runtime.storage import Location

__all__ = ["MANIFEST", "write_json", "save_models", "plot_history", "artifact_files", "publish"]

MODEL_FILES = ("model/model.keras", "model/model.h5", "model/saved_model")


def save_models(template, model_dir: Path, backend: str = "tensorflow") -> tuple[list[Path], dict[str, str]]:
    """Save the template as .keras, .h5 and a SavedModel export under model_dir (always a local path).

    Returns the paths written and {format: why it was skipped} for the formats `backend` cannot write
    (trainer.backends: torch cannot export a SavedModel, nor can any backend where TensorFlow is not installed).
    model.keras is written on every backend.
    """
    import logging
    import warnings

    from trainer.backends import cannot_export

    logging.getLogger("absl").setLevel(logging.ERROR)  # "HDF5 is legacy": the recipes' format, kept on purpose
    model_dir.mkdir(parents=True, exist_ok=True)
    keras_path, h5_path, export_path = (model_dir / "model.keras", model_dir / "model.h5", model_dir / "saved_model")
    template.save(str(keras_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        template.save(str(h5_path))
    reason = cannot_export(backend)
    if reason:
        return [keras_path, h5_path], {"saved_model": reason}
    if backend != "tensorflow":
        _tensorflow_for_export()
    if hasattr(template, "export"):
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):  # Keras prints the serving signature
            template.export(str(export_path))
    else:  # pragma: no cover - older Keras
        import tensorflow as tf

        tf.saved_model.save(template, str(export_path))
    return [keras_path, h5_path, export_path], {}


def _tensorflow_for_export() -> None:
    """The JAX route's export (jax2tf) is the one place it uses TensorFlow: import it with its start-up lines hidden
    and keep it off the GPUs, which JAX holds (TensorFlow would reserve their memory)."""
    from mlsubmit_runtime.chatter import import_tensorflow

    tf = import_tensorflow()
    try:
        tf.config.set_visible_devices([], "GPU")
    except (RuntimeError, ValueError):  # already initialised (an earlier run in this process): leave it
        pass
    tf.get_logger().setLevel("ERROR")


def plot_history(history: dict[str, list[float]], path: Path) -> None:
    """Training and validation curves (loss and accuracy) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in ("loss", "accuracy") if m in history]
    fig, axes = plt.subplots(1, max(len(metrics), 1), figsize=(5 * max(len(metrics), 1), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        epochs = range(1, len(history[metric]) + 1)
        ax.plot(epochs, history[metric], marker="o", label=f"training {metric}")
        if f"val_{metric}" in history:
            ax.plot(epochs, history[f"val_{metric}"], marker="o", label=f"validation {metric}")
        ax.set_xlabel("epoch")
        ax.set_title(metric)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def artifact_files(root: Path, extra_dirs: tuple[str, ...] = ()) -> list[Path]:
    """Every file the trainer wrote below root: model/, metrics, history, and `extra_dirs` (e.g. logs/)."""
    files = []
    for rel in ("model", "metrics.json", "history.json", "history.png", *extra_dirs):
        path = root / rel
        if path.is_dir():
            files.extend(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            files.append(path)
    return sorted(files)


def publish(job_dir: Location, extra_dirs: tuple[str, ...] = ()) -> dict:
    """Upload every artifact (if the job dir is remote), then write and upload MANIFEST.json last."""
    return publish_files(job_dir, artifact_files(job_dir.local, extra_dirs))
