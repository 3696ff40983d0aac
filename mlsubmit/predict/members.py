"""Load each member's Keras model (safe mode unless --unsafe) and check the members agree with each other.

Every member loads in this process's Keras backend (`--backend`, mlsubmit.predict.backend), whichever backend trained
it: a .keras file holds the architecture and the weights, not backend code. What does not carry across is a layer
this process cannot rebuild (mlsubmit.predict.layers): that is one error naming the member, the layer, the backend
it was trained under, the one predicting, and the fix.

Keras safe mode refuses a `Lambda` layer whose function is Python bytecode stored in the file: loading it would
run that code, which can do anything. `--unsafe` lifts this for models from a source the user trusts.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlsubmit.errors import UsageError
from mlsubmit.jobspec.keras_backends import DEFAULT as DEFAULT_BACKEND
from mlsubmit.jobspec.keras_backends import BACKENDS as BACKEND_NAMES
from mlsubmit.predict.archive import check_archive
from mlsubmit.predict.backend import activate, keras_major, keras_version, tensorflow_import_failed
from mlsubmit.predict.layers import has_lambda, saved_keras_version, stranded_layer
from mlsubmit.predict.rebuild import LAMBDA_FIX, OTHER_FIX, prediction_failed, root_cause, signature
from mlsubmit.predict.sources import ModelSource


@dataclass(frozen=True)
class Member:
    source: ModelSource
    model: object
    input_shape: tuple  # one sample; None where the model accepts any size
    num_classes: int

    def predict(self, x: np.ndarray) -> np.ndarray:
        # The compiled predict step without model.predict()'s per-call tf.data pipeline: 2-3× faster per batch
        try:
            return np.asarray(self.model.predict_on_batch(x))
        except Exception as exc:  # the model's own code (a Lambda's, a layer's op) fails on real data
            raise prediction_failed(self.source.name, self.model, len(x), exc) from None


def _keras(backend: str):
    """The Keras found here: Keras 3 under `backend`, which this process takes for good on the first import
    (KERAS_BACKEND), or Keras 2 (tf.keras), which runs on TensorFlow only."""
    from mlsubmit_runtime.heap import loading_frameworks  # their millions of objects out of the collector's way

    activate(backend)
    if backend != "tensorflow":
        with loading_frameworks():
            import keras

        return keras
    if "tensorflow" in sys.modules:
        from mlsubmit_runtime.kerasmod import get_keras

        return get_keras()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow is imported: quiet C++ start-up logs
    from mlsubmit.chatter import quiet_native_startup

    with quiet_native_startup(), warnings.catch_warnings(), loading_frameworks():  # C++ logs before the variable
        # takes effect. TensorFlow 2.8-2.1x imports googleapiclient where it is installed (mlsubmit's core brings
        # it): on Python 3.10 google.api_core then warns about its own support of that Python, nothing predict uses
        # or can act on
        warnings.filterwarnings("ignore", "You are using a non-supported Python version", FutureWarning)
        try:
            import tensorflow as tf
        except Exception as exc:  # installed (check_installed found it) but broken: a pin another install lifted
            raise tensorflow_import_failed(exc) from None
        from mlsubmit_runtime.kerasmod import get_keras

        keras = get_keras()
        tf.config.list_physical_devices()
    return keras


def _quiet_retracing(backend: str) -> None:
    """The last batch is usually smaller: one expected retrace per member, which TensorFlow would warn about."""
    if backend == "tensorflow":
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")


def _is_safe_mode_refusal(exc: Exception) -> bool:
    text = str(exc)
    return "safe_mode" in text or "unsafe_deserialization" in text


def _not_carried_across(source: ModelSource, backend: str, exc: Exception) -> UsageError | None:
    """The error for a model that loads nowhere but where it was trained: a layer this process cannot rebuild."""
    layer = stranded_layer(source.model_file, exc)
    if layer is None:
        return None
    trained = f"trained under {source.backend}" if source.backend else "its training backend not recorded"
    where = f"{source.kind} {source.name} ({trained}) does not load under {backend}"
    if layer.custom:
        return UsageError(f"{where}: layer {layer.shown} is a class of the training code, registered there and not "
                          "saved in the file, so no backend can rebuild it without that code",
                          hint="register the layer: import the code that defines it (@keras.saving."
                          "register_keras_serializable) and call mlsubmit.predict.run.predict from Python, or build "
                          "the model from Keras's own layers")
    if layer.class_name == "Lambda":  # its stored code fails wherever it loads: no other backend is the fix
        return UsageError(f"{where}: layer {layer.shown} cannot be rebuilt: its stored code fails "
                          f"({root_cause(exc)})", hint=LAMBDA_FIX)
    reason = (str(exc).splitlines() or [""])[-1].split("Exception encountered: ")[-1][:160]
    other = source.backend if source.backend in BACKEND_NAMES and source.backend != backend else None
    return UsageError(f"{where}: layer {layer.shown} cannot be rebuilt here ({reason})",
                      hint=f"predict with --backend {other}, the backend it was trained under" if other else OTHER_FIX)


def _lambda_refused(source: ModelSource) -> UsageError:
    return UsageError(f"model {source.name} contains a Lambda layer: loading it runs Python code stored in the file, "
                      "which can do anything (arbitrary code execution), so Keras safe mode refuses it",
                      hint="pass --unsafe only if you trust where this model came from")


def _newer_keras(source: ModelSource) -> str | None:
    """The version of the Keras that saved the file, where its major version is newer than the one found here."""
    saved = saved_keras_version(source.model_file)
    return saved if saved and saved.split(".")[0].isdigit() and int(saved.split(".")[0]) > keras_major() else None


def _legacy_cannot_load(source: ModelSource, error: str) -> UsageError:
    """A file the Keras 2 found here cannot load: most often one Keras 3 wrote, which says so inside."""
    saved = _newer_keras(source)
    what = f"{source.name} was saved by Keras {saved}, whose files" if saved else f"{source.name}, which"
    return UsageError(f"invalid value for MODEL: {what} Keras {keras_version()} (found here) cannot load ({error})",
                      hint="predict in a venv of its own with Keras 3: pipx install 'mlsubmit[tensorflow]'"
                      + ("" if saved else ", or with the Keras version the model was saved with"))


def load_member(source: ModelSource, unsafe: bool = False, backend: str = DEFAULT_BACKEND) -> Member:
    """Load one model file, in this process's Keras backend, and read its input shape and class count.

    Args:
        source: the verified model file (and, for a job dir, its metrics: the backend it was trained under).
        unsafe: load outside Keras safe mode (Lambda layers run the code stored in the file).
        backend: the backend to predict under; Keras must not be imported yet under another one.

    Raises:
        UsageError: a Lambda layer without --unsafe, a layer that does not carry across into `backend` (naming it),
            a file Keras cannot load, or a model that does not output one probability per class.
    """
    check_archive(source.model_file, source.name)  # before TensorFlow loads: bounded, whole (not "File not found")
    legacy = keras_major() < 3  # Keras 2 (TensorFlow 2.15 and older) has no safe mode for .h5: checked here
    if legacy and not unsafe and has_lambda(source.model_file):
        raise _lambda_refused(source)
    keras = _keras(backend)
    _quiet_retracing(backend)
    try:
        safe = {} if legacy else {"safe_mode": not unsafe}
        model = keras.models.load_model(str(source.model_file), compile=False, **safe)
    except Exception as exc:  # Keras raises ValueError, TypeError, OSError… for files it cannot load
        if not unsafe and _is_safe_mode_refusal(exc):
            raise _lambda_refused(source) from None
        error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
        if legacy and _newer_keras(source):
            raise _legacy_cannot_load(source, error) from None
        stranded = _not_carried_across(source, backend, exc)
        if stranded is not None:
            raise stranded from None
        if legacy:
            raise _legacy_cannot_load(source, error) from None
        raise UsageError(f"invalid value for MODEL: cannot load {source.name} as a Keras model ({error})") from None
    inputs, outputs = signature(source.name, model, keras)
    if len(inputs) != 1 or len(outputs) != 1 or len(outputs[0]) != 2 or (outputs[0][-1] or 0) < 2:
        raise UsageError(f"invalid value for MODEL: {source.name} has {len(inputs)} input(s) and outputs of shape "
                         f"{outputs}; expected one input and one (batch, classes) output of class probabilities")
    return Member(source, model, tuple(inputs[0][1:]), int(outputs[0][-1]))


def check_agreement(members: Sequence[Member]) -> tuple[tuple, int]:
    """The input shape and class count every member shares.

    Raises:
        UsageError: two members differ in input shape or in number of classes.
    """
    first = members[0]
    for other in members[1:]:
        if other.input_shape != first.input_shape:
            raise UsageError(f"models disagree on the input shape: {first.source.name} takes {first.input_shape}, "
                             f"{other.source.name} takes {other.input_shape}",
                             hint="ensemble models trained on the same data")
        if other.num_classes != first.num_classes:
            raise UsageError(f"models disagree on the number of classes: {first.source.name} predicts "
                             f"{first.num_classes}, {other.source.name} predicts {other.num_classes}",
                             hint="ensemble models trained on the same data")
    return first.input_shape, first.num_classes


def load_members(sources: Sequence[ModelSource], unsafe: bool = False,
                 backend: str = DEFAULT_BACKEND) -> tuple[list[Member], tuple, int]:
    members = [load_member(s, unsafe, backend) for s in sources]
    shape, classes = check_agreement(members)
    return members, shape, classes


def check_probabilities(member: Member, probabilities: np.ndarray) -> None:
    """Members must output probabilities (softmax): the weighted mean of logits would not be one."""
    if not np.all(np.isfinite(probabilities)) or probabilities.min() < -1e-6 or \
            not np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-3):
        raise UsageError(f"model {member.source.name} does not output class probabilities (rows must be ≥ 0 and sum "
                         "to 1; a last layer without softmax gives logits)",
                         hint="add a softmax activation to the last layer and save the model again")
