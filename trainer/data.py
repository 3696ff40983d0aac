"""Data specs → validated numpy arrays: synthetic, .npz (local or gs://), or keras.datasets.

The .npz format is the keras.datasets file format: keys x_train, y_train, x_test, y_test. uint8 images are
scaled to [0, 1], a missing channel axis is added, labels may be integers or one-hot. A validation split is carved
from the training set with a seeded permutation. Every problem is a one-line TrainerError raised before training.
"""

from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlsubmit_runtime.errors import InputError
from mlsubmit_runtime.features import features, labels
from trainer.errors import TrainerError

NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
KERAS_DATASETS = {"mnist": "mnist.npz", "cifar10": "cifar-10-batches-py"}
_DATASET_HOST = ("storage.googleapis.com", 443)


@dataclass(frozen=True)
class Arrays:
    """Training, validation and test arrays, ready for the input pipeline."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    source: str
    fingerprint: str  # sha256 of the raw arrays as loaded

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


def parse_synthetic(spec: str) -> tuple[tuple[int, ...], int, int]:
    """`synthetic[:HxWxC[:CLASSES[:SAMPLES]]]` → (shape, classes, samples)."""
    parts = spec.split(":")
    try:
        shape = tuple(int(d) for d in parts[1].lower().split("x")) if len(parts) > 1 and parts[1] else (28, 28, 1)
        classes = int(parts[2]) if len(parts) > 2 else 10
        samples = int(parts[3]) if len(parts) > 3 else 1024
        if len(parts) > 4 or min(shape) < 1 or classes < 2 or samples < 1:
            raise ValueError
    except ValueError:
        raise TrainerError(f"invalid value for --data: received {spec!r}; expected synthetic[:HxWxC[:CLASSES"
                           "[:SAMPLES]]] such as synthetic:28x28x1:10:1024") from None
    return shape, classes, samples


def synthetic(spec: str, seed: int) -> dict[str, np.ndarray]:
    """Seeded, learnable data: each class is a random prototype plus noise (uint8, like real images)."""
    shape, classes, samples = parse_synthetic(spec)
    rng = np.random.default_rng(seed)
    prototypes = rng.uniform(0, 255, size=(classes, *shape))

    def draw(n):
        y = rng.integers(0, classes, size=n)
        x = prototypes[y] + rng.normal(0, 48, size=(n, *shape))
        return np.clip(x, 0, 255).astype(np.uint8), y.astype(np.int64)

    x_train, y_train = draw(samples)
    x_test, y_test = draw(max(samples // 4, 1))
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


def _read_npz(path: str) -> dict[str, np.ndarray]:
    if path.startswith("gs://"):
        from mlsubmit_runtime.storage import download_to_temp

        path = str(download_to_temp(path))
    if not Path(path).is_file():
        raise TrainerError(f"invalid value for --data: {path!r} does not exist or is not a file; expected a .npz "
                           "with x_train, y_train, x_test, y_test, or synthetic, mnist, cifar10")
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in NPZ_KEYS if k not in npz.files]
            if missing:
                raise TrainerError(f"invalid data file {path}: missing keys {', '.join(missing)}; found "
                                   f"{', '.join(npz.files) or 'none'}; expected {', '.join(NPZ_KEYS)}")
            return {k: npz[k] for k in NPZ_KEYS}
    except InputError:
        raise
    except Exception as exc:  # zipfile.BadZipFile, ValueError (pickled object arrays), OSError
        raise TrainerError(f"invalid data file {path}: cannot read it as .npz ({type(exc).__name__}: {exc})") from None


def _keras_dataset(name: str) -> dict[str, np.ndarray]:
    cache = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "datasets" / KERAS_DATASETS[name]
    if not cache.exists():
        try:  # fail within seconds where the machine has no internet, never hang in a download
            socket.create_connection(_DATASET_HOST, timeout=5).close()
        except OSError as exc:
            raise TrainerError(f"--data {name} needs a download from {_DATASET_HOST[0]}, which this machine cannot "
                               f"reach ({exc}); pass a .npz file (local or gs://) instead") from None
    from mlsubmit_runtime.kerasmod import get_keras, legacy_keras_requested

    if legacy_keras_requested() or os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
        from mlsubmit_runtime.chatter import import_tensorflow

        import_tensorflow()  # Keras on TensorFlow imports it: its C++ start-up lines hidden
    (x_train, y_train), (x_test, y_test) = getattr(get_keras().datasets, name).load_data()
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


def load_raw(spec: str, seed: int) -> dict[str, np.ndarray]:
    if spec.startswith("synthetic"):
        return synthetic(spec, seed)
    if spec in KERAS_DATASETS:
        return _keras_dataset(spec)
    if spec.endswith(".npz"):
        return _read_npz(spec)
    raise TrainerError(f"invalid value for --data: received {spec!r}; expected synthetic[:HxWxC[:CLASSES[:SAMPLES]]], "
                       "a path to a .npz (local or gs://), mnist or cifar10")


def fingerprint(raw: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for key in NPZ_KEYS:
        array = np.ascontiguousarray(raw[key])
        digest.update(f"{key}:{array.dtype.str}:{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def prepare(raw: dict[str, np.ndarray], *, source: str, validation_split: float, seed: int,
            num_classes: int | None = None) -> Arrays:
    """Validate and normalise raw arrays, and carve the validation split from the training set."""
    try:
        x_train, x_test = features(raw["x_train"], "x_train"), features(raw["x_test"], "x_test")
        y_train, y_test = labels(raw["y_train"], "y_train"), labels(raw["y_test"], "y_test")
    except InputError as err:  # the runtime's check, reported as the trainer's own
        raise TrainerError(str(err)) from None
    for x, y, name in ((x_train, y_train, "train"), (x_test, y_test, "test")):
        if len(x) != len(y):
            raise TrainerError(f"invalid data: x_{name} has {len(x)} samples but y_{name} has {len(y)}; they must match")
    if x_train.shape[1:] != x_test.shape[1:]:
        raise TrainerError(f"invalid data: x_train samples have shape {x_train.shape[1:]} but x_test samples "
                           f"{x_test.shape[1:]}; they must match")
    if len(x_test) == 0 or len(x_train) < 2:
        raise TrainerError(f"invalid data: {len(x_train)} training and {len(x_test)} test samples; need at least "
                           "2 training and 1 test sample")
    found = int(max(y_train.max(), y_test.max())) + 1
    classes = num_classes or max(found, 2)
    if found > classes:
        raise TrainerError(f"invalid data: labels out of range; found label {found - 1} with {classes} classes")
    order = np.random.default_rng(seed).permutation(len(x_train))
    n_val = int(round(len(x_train) * validation_split))
    val_idx, train_idx = order[:n_val], order[n_val:]
    return Arrays(x_train[train_idx], y_train[train_idx], x_train[val_idx], y_train[val_idx], x_test, y_test,
                  classes, source, fingerprint(raw))


def load(spec: str, *, validation_split: float, seed: int) -> Arrays:
    """Load the data named by `--data` and validate it."""
    return prepare(load_raw(spec, seed), source=spec, validation_split=validation_split, seed=seed)
