"""What a loaded Keras model takes and gives, or in one line why Keras could not rebuild that from its file.

`keras.models.load_model` can succeed and still hand back a model without inputs: a Sequential or subclassed model
saved before it was built records no input shape, and a Sequential model one of whose layers fails on the recorded
shape (typically a Lambda whose stored code needs a name of the training code) is left unbuilt by Keras without a
word. A built subclassed model has no `inputs` either, but records its input shape: its signature is traced from it.
And a model can load and then fail on its first batch (a Lambda given an `output_shape`, so never traced on load).
Each of these is one error naming the model, the layer where one is to blame, and the fix.
"""

from __future__ import annotations

from mlsubmit.errors import OperationFailed, UsageError

LAMBDA_FIX = ("a Lambda's stored code runs with Keras's own names only, not the training code's imports: write it "
               "with keras.ops (or replace it with a registered layer) and save the model again")
OTHER_FIX = "predict with the Keras version and backend it was saved with"


def root_cause(exc: BaseException) -> str:
    """The innermost exception Keras wrapped (its __cause__ or __context__), as 'Type: first line'."""
    seen = {id(exc)}
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    first = (str(exc).splitlines() or [""])[0].strip()[:160]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _recorded_input_shape(model) -> tuple | None:
    """The input shape (batch first) the file recorded for a model built when saved; None when it recorded none."""
    get = getattr(model, "get_build_config", None)  # Keras 3; Keras 2 models have no build config
    config = get() if callable(get) and getattr(model, "built", False) else None
    shape = config.get("input_shape") if isinstance(config, dict) else None
    if isinstance(shape, (list, tuple)) and all(d is None or isinstance(d, int) for d in shape):
        return tuple(shape)
    return None


def _never_built(name: str, model) -> UsageError:
    return UsageError(f"invalid value for MODEL: {name} holds a {type(model).__name__} model saved before it was "
                      "built: the file records no input shape, so Keras cannot rebuild its inputs",
                      hint="build the model before saving it: begin it with keras.Input(shape=…) (or call it once "
                      "on a batch), then save it again")


def _failed_layer(name: str, layer, shape: tuple, exc: Exception) -> UsageError:
    kind = type(layer).__name__
    return UsageError(f"invalid value for MODEL: Keras cannot rebuild {name}: layer {kind} ({layer.name!r}) fails "
                      f"on the input shape the model was saved with, {shape} ({root_cause(exc)})",
                      hint=LAMBDA_FIX if kind == "Lambda" else OTHER_FIX)


def _traced(name: str, model, keras, shape: tuple) -> list[tuple]:
    """The output shapes of `model` on a symbolic batch of `shape`, layer by layer for a Sequential model (to name
    the layer that fails)."""
    if not hasattr(keras, "KerasTensor"):  # Keras 2: no symbolic tensor to trace; it computes the shape itself
        try:
            return [tuple(model.compute_output_shape(shape))]
        except Exception as exc:
            raise _failed_layer(name, model, shape, exc) from None
    x = keras.KerasTensor(shape)
    for layer in model.layers if isinstance(model, keras.Sequential) else [model]:
        try:
            x = layer.compute_output_spec(x)
        except Exception as exc:  # whatever the layer's code raises: Keras wraps it (NotImplementedError, …)
            raise _failed_layer(name, layer, shape, exc) from None
    return [tuple(s.shape) for s in (x if isinstance(x, (list, tuple)) else [x])]


def signature(name: str, model, keras) -> tuple[list[tuple], list[tuple]]:
    """The shapes (batch first) of the model's inputs and of its outputs.

    Args:
        name: the model as the user named it, for messages.
        model: what keras.models.load_model returned.
        keras: the Keras module that loaded it.

    Raises:
        UsageError: the model records no input shape (saved before it was built), or a layer fails on the one it
            records.
    """
    inputs = outputs = None
    try:
        inputs, outputs = model.inputs, model.outputs
    except (AttributeError, ValueError):  # Keras 3: an unbuilt Sequential; a subclassed model has no such attribute
        pass
    if inputs and outputs:
        return [tuple(i.shape) for i in inputs], [tuple(o.shape) for o in outputs]
    shape = _recorded_input_shape(model)
    if shape is None:
        raise _never_built(name, model)
    return [shape], _traced(name, model, keras, shape)


def prediction_failed(name: str, model, rows: int, exc: Exception) -> UsageError | OperationFailed:
    """The error for a model that loaded but failed on a batch of `rows` rows."""
    cause = root_cause(exc)
    if "ResourceExhausted" in cause or "out of memory" in cause.lower():
        return OperationFailed(f"model {name} ran out of memory predicting a batch of {rows} rows ({cause})",
                               hint="pass a smaller --batch-size")
    has_lambda = any(type(layer).__name__ == "Lambda" for layer in getattr(model, "layers", ()))
    return UsageError(f"invalid value for MODEL: {name} loads but fails to predict ({cause})",
                      hint=LAMBDA_FIX if has_lambda else OTHER_FIX)
