"""PredictRequest: what `mlsubmit predict` was asked to do, frozen and validated before any work starts.

Pure and light (no numpy, no TensorFlow): the command builds it from its flags, so every mistake that can be
seen without opening a file is reported before a model is downloaded or TensorFlow is imported.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.errors import UsageError, did_you_mean, invalid_value
from mlsubmit.extras import require
from mlsubmit.jobspec.keras_backends import DEFAULT as DEFAULT_BACKEND
from mlsubmit.predict.backend import check_installed, parse_backend

WEIGHT_MODES = ("accuracy", "equal")
OUTPUT_FORMATS = (".csv", ".npz", ".json")
MODEL_SUFFIXES = (".keras", ".h5")
MAX_AUTO_BATCH = 1024  # rows; beyond this, bigger batches stop paying on CPU (and cost memory)
AUTO_BATCH_BYTES = 32 << 20  # float32 input per batch when --batch-size is auto
# What a user types as a number: ASCII digits only (float() would also take "٣", "1_0", "nan" and "inf")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class WeightSpec:
    """How members are weighted: `accuracy` (from each metrics.json), `equal`, or `explicit` values."""

    mode: str
    values: tuple[float, ...] = ()

    def __str__(self) -> str:
        return ",".join(f"{v:g}" for v in self.values) if self.mode == "explicit" else self.mode


@dataclass(frozen=True)
class PredictRequest:
    models: tuple[str, ...]
    inputs: tuple[str, ...]  # one .npz/.npy, or image files and globs
    input_key: str | None = None
    weights: WeightSpec = WeightSpec("accuracy")
    output: Path | None = None
    labels: str | None = None
    batch_size: int | None = None  # None: auto_batch_size()
    unsafe: bool = False
    cache_dir: Path | None = None  # None: default_cache_dir()
    backend: str = DEFAULT_BACKEND  # the Keras backend to predict under, whatever each model was trained under


def auto_batch_size(sample_shape: tuple) -> int:
    """Up to MAX_AUTO_BATCH rows, and no more than AUTO_BATCH_BYTES of float32 input (large images: fewer rows)."""
    row_bytes = 4 * math.prod(d or 1 for d in sample_shape)
    return max(1, min(MAX_AUTO_BATCH, AUTO_BATCH_BYTES // row_bytes))


def default_cache_dir() -> Path:
    """`$MLSUBMIT_HOME/cache`, default `~/.mlsubmit/cache`."""
    home = os.environ.get("MLSUBMIT_HOME") or str(Path.home() / ".mlsubmit")
    return Path(home).expanduser() / "cache"


def check_weight_values(values: tuple[float, ...], count: int, field: str = "--weights",
                        received: str | None = None) -> None:
    """Explicit weights: one per model, finite, none negative, not all zero. `received`: the text as typed."""
    shown = received if received is not None else ",".join(f"{v:g}" for v in values)
    if len(values) != count:
        raise invalid_value(field, shown, f"{count} weight{'s' if count != 1 else ''}, one per model "
                            f"(got {len(values)})", hint="give one comma-separated weight per MODEL, in order")
    bad = [i for i, v in enumerate(values) if not math.isfinite(v) or v < 0]
    if bad:
        word = received.split(",")[bad[0]].strip() if received is not None else f"{values[bad[0]]:g}"
        raise invalid_value(field, shown, f"finite weights ≥ 0; {word} is not",
                            hint="use 0 to leave a model out")
    if not any(values):
        raise invalid_value(field, shown, "at least one weight > 0 (they are all zero)",
                            hint="or use --weights equal")


def parse_weights(text: str, count: int) -> WeightSpec:
    """`accuracy`, `equal` or `w1,w2,…` (one per model) → WeightSpec."""
    word = text.strip().lower()
    if word in WEIGHT_MODES:
        return WeightSpec(word)
    allowed = "accuracy, equal, or one comma-separated number per model such as 0.5,0.3,0.2"
    parts = [part.strip() for part in word.split(",")]
    if not all(_DECIMAL.fullmatch(part) for part in parts):
        raise invalid_value("--weights", text, allowed, hint=did_you_mean(word, WEIGHT_MODES))
    values = tuple(float(part) for part in parts)
    check_weight_values(values, count, received=text)
    return WeightSpec("explicit", values)


def _check_model_argument(model: str) -> None:
    if model.startswith("gs://"):
        if not model[5:].split("/", 1)[0]:
            raise invalid_value("MODEL", model, "gs://BUCKET/JOB_DIR or gs://BUCKET/path/model.keras")
        return
    path = Path(model)
    if not path.exists():
        raise invalid_value("MODEL", model, "an existing job dir (local or gs://) or a .keras/.h5 file",
                            hint="check the path")
    if path.is_file() and path.suffix not in MODEL_SUFFIXES:
        raise invalid_value("MODEL", model, "a job dir written by the trainer, or a .keras or .h5 model file")


def _check_output(output: Path, inputs: tuple[str, ...]) -> None:
    if output.suffix.lower() not in OUTPUT_FORMATS:
        raise invalid_value("--output", str(output), "a file ending in " + ", ".join(OUTPUT_FORMATS),
                            hint="the extension picks the format")
    if not output.parent.is_dir():
        raise invalid_value("--output", str(output), "a file in an existing directory",
                            hint=f"create {output.parent} first")
    if output.is_dir():
        raise invalid_value("--output", str(output), "a file name, not a directory")
    if any(Path(path).resolve() == output.resolve() for path in inputs):
        raise invalid_value("--output", str(output), "a file other than the --input file")


def make_request(models: list[str] | tuple[str, ...], inputs: list[str] | tuple[str, ...] | str, *,
                 input_key: str | None = None, weights: str = "accuracy", output: str | Path | None = None,
                 labels: str | None = None,
                 batch_size: int | str | None = None, unsafe: bool = False,
                 cache_dir: str | Path | None = None, backend: str | None = None) -> PredictRequest:
    """Validate the flags of `mlsubmit predict` and build the request.

    `backend` None means $KERAS_BACKEND, else tensorflow; it must be installed (checked without importing it).

    Raises:
        UsageError: one line naming the flag, the value received and what is allowed.
    """
    models = tuple(models)
    if not models:
        raise UsageError("missing MODEL: pass at least one job dir (local or gs://) or .keras/.h5 file")
    for model in models:
        _check_model_argument(model)
    inputs = (inputs,) if isinstance(inputs, str) else tuple(inputs)
    if not inputs or not all(inputs):
        raise UsageError("missing --input: pass a .npz, a .npy, or image files/globs")
    if batch_size is not None and str(batch_size) != "auto":
        received = str(batch_size)
        batch_size = int(received) if re.fullmatch(r"[0-9]{1,9}", received.strip()) else 0
        if batch_size < 1:
            raise invalid_value("--batch-size", received, "auto or a whole number ≥ 1 (rows per batch)")
    else:
        batch_size = None
    out = Path(output) if output else None
    if out is not None:
        _check_output(out, inputs)
    backend = parse_backend(backend)
    check_installed(backend)
    require("predict", purpose="mlsubmit predict",  # the confusion-matrix PNG needs matplotlib, nothing else does
            modules=("numpy", "h5py") + (("matplotlib",) if out is not None and labels else ()))
    return PredictRequest(models=models, inputs=inputs, input_key=input_key,
                          weights=parse_weights(weights, len(models)), output=out, labels=labels or None,
                          batch_size=batch_size, unsafe=unsafe, cache_dir=Path(cache_dir) if cache_dir else None,
                          backend=backend)
