"""Build the chosen model and prove this backend can save it, before the first training step.

A model that a backend cannot build (a layer only one backend has) or cannot save (an object the Keras format
cannot serialise there) is bad input: one line, exit code 2, before any training, never a traceback after an hour.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from trainer.errors import TrainerError
from trainer.models import build_model


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def build_checked(keras, backend: str, name: str, input_shape, num_classes: int, factory=build_model):
    """`factory(keras, name, input_shape, num_classes)`, saved once to a scratch model.keras. Raises TrainerError
    naming the model and backend when either step fails."""
    fix = "choose another --model, or another --backend"
    try:
        model = factory(keras, name, input_shape, num_classes)
    except TrainerError:
        raise
    except Exception as err:  # noqa: BLE001 - any failure to build is the user's choice of model × backend
        raise TrainerError(f"model {name!r} cannot be built on the {backend} backend ({_first_line(err)}); "
                           f"{fix}") from None
    with tempfile.TemporaryDirectory(prefix="mlsubmit-model-check-") as scratch:
        try:
            model.save(str(Path(scratch) / "model.keras"))
        except Exception as err:  # noqa: BLE001
            raise TrainerError(f"model {name!r} cannot be saved on the {backend} backend ({_first_line(err)}); "
                               f"{fix}") from None
    return model
