"""Feature and label preprocessing of the keras.datasets `.npz` format, shared by the bundled trainer and
`mlsubmit predict` so the two can never drift apart: uint8 images are scaled to [0, 1], other real numbers become
float32, (n, H, W) gains a channel axis; labels may be integers or one-hot. numpy only.
"""

from __future__ import annotations

import numpy as np

from mlsubmit_runtime.errors import InputError


def features(x: np.ndarray, key: str) -> np.ndarray:
    if x.dtype == np.uint8:
        x = x.astype(np.float32) / 255.0
    elif np.issubdtype(x.dtype, np.number) and not np.issubdtype(x.dtype, np.complexfloating):
        x = x.astype(np.float32)
    else:
        raise InputError(f"invalid {key}: dtype {x.dtype}; expected uint8 images or a real number array")
    if x.ndim == 3:  # (n, H, W) grey images: add the channel axis
        x = x[..., np.newaxis]
    if x.ndim < 2:
        raise InputError(f"invalid {key}: shape {x.shape}; expected (samples, features…)")
    return x


def labels(y: np.ndarray, key: str) -> np.ndarray:
    if y.ndim == 2 and y.shape[1] > 1:  # one-hot
        if not np.all((y == 0) | (y == 1)) or not np.all(y.sum(axis=1) == 1):
            raise InputError(f"invalid {key}: a 2-D label array must be one-hot (one 1 per row)")
        return y.argmax(axis=1).astype(np.int64)
    y = y.reshape(-1) if y.ndim == 2 else y
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.number):
        raise InputError(f"invalid {key}: shape {y.shape}, dtype {y.dtype}; expected integer class labels (n,) "
                           "or one-hot (n, classes)")
    if not np.all(np.equal(np.mod(y, 1), 0)):
        raise InputError(f"invalid {key}: labels must be whole numbers; found e.g. {y[np.mod(y, 1) != 0][0]!r}")
    if y.size and y.min() < 0:
        raise InputError(f"invalid {key}: labels out of range; found {int(y.min())}, expected 0 … classes-1")
    return y.astype(np.int64)
