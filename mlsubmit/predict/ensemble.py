"""Combining members' class probabilities, Σᵢ wᵢ·pᵢ / Σᵢ wᵢ, and where the weights come from.

`combine` is a plain function of arrays, usable from Python without the CLI:

    >>> import numpy as np
    >>> from mlsubmit.predict import combine
    >>> combine([np.array([[0.9, 0.1]]), np.array([[0.5, 0.5]])], [0.75, 0.25])
    array([[0.8, 0.2]])

With `--weights accuracy` each member's weight is its recorded accuracy from the trainer's metrics.json: the
validation accuracy when the run had a validation split, else the test accuracy (the report says which).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlsubmit.errors import UsageError
from mlsubmit.predict.request import WeightSpec, check_weight_values
from mlsubmit.predict.sources import ModelSource

ACCURACY_KEYS = (("validation_accuracy", "validation accuracy"), ("test_accuracy", "test accuracy"))


def combine(probabilities: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """Weighted mean of the members' class probabilities.

    Computes Σᵢ wᵢ·pᵢ / Σᵢ wᵢ in float64. When each member's rows sum to 1, so do the result's.

    Args:
        probabilities: one array per member, all of the same shape, typically (rows, classes).
        weights: one weight per member: finite, none negative, not all zero. A weight of 0 leaves a member out.

    Returns:
        A float64 array of the members' shape.

    Raises:
        UsageError: the weights do not match the members in number, one is negative or not finite, all are
            zero, or the arrays differ in shape.

    Example:
        >>> combine([np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]])], [3, 1])
        array([[0.75, 0.25]])
    """
    values = tuple(float(w) for w in weights)
    check_weight_values(values, len(probabilities), field="weights")
    arrays = [np.asarray(p, dtype=np.float64) for p in probabilities]
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise UsageError(f"invalid value for probabilities: the members' arrays differ in shape "
                         f"({', '.join(str(a.shape) for a in arrays)}); expected one shape")
    total = np.zeros(arrays[0].shape, dtype=np.float64)
    for weight, array in zip(values, arrays):
        if weight:
            total += weight * array
    return total / math.fsum(values)


@dataclass(frozen=True)
class MemberWeight:
    value: float
    basis: str  # "validation accuracy", "test accuracy", "equal", "explicit", "only model"


def _recorded_accuracy(source: ModelSource) -> MemberWeight:
    if source.metrics is None:
        raise UsageError(f"--weights accuracy needs each model's recorded accuracy, but {source.name} is a bare "
                         "model file without the trainer's metrics.json",
                         hint="pass a job dir, --weights equal, or explicit weights such as 0.5,0.5")
    for key, basis in ACCURACY_KEYS:
        value = source.metrics.get(key)
        if value is not None:
            if not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise UsageError(f"metrics.json of {source.name} records {key}={value!r}; expected a number in "
                                 "[0, 1]", hint="pass --weights equal or explicit weights")
            return MemberWeight(float(value), basis)
    raise UsageError(f"metrics.json of {source.name} records neither validation_accuracy nor test_accuracy",
                     hint="pass --weights equal or explicit weights")


def member_weights(spec: WeightSpec, sources: Sequence[ModelSource]) -> list[MemberWeight]:
    """The weight of each member, and what it is based on.

    Raises:
        UsageError: accuracy weights for a model without metrics.json, or weights that are all zero.
    """
    if spec.mode == "explicit":
        check_weight_values(spec.values, len(sources))
        return [MemberWeight(v, "explicit") for v in spec.values]
    if spec.mode == "equal":
        return [MemberWeight(1.0, "equal") for _ in sources]
    if len(sources) == 1 and sources[0].metrics is None:
        return [MemberWeight(1.0, "only model")]
    weights = [_recorded_accuracy(s) for s in sources]
    if not any(w.value for w in weights):
        raise UsageError("--weights accuracy: every model records an accuracy of 0, so no weight is > 0",
                         hint="pass --weights equal or explicit weights")
    return weights
