"""TuningSpec: a hyperparameter tuning study, immutable and validated when built.

It holds what both services' tuning specs share: one metric and its goal, the parameters (DOUBLE, INTEGER,
CATEGORICAL, DISCRETE with a scale), trial counts, the algorithm and early stopping. The trials themselves run the
job of a JobSpec; `mlsubmit.tuning.requests` renders the pair as a Vertex AI HyperparameterTuningJob or a legacy
`trainingInput.hyperparameters`, and reads both back.

Every mistake is one UsageError naming the parameter and the field as the user wrote them
(`trainingInput.hyperparameters.params[1] (learning_rate).minValue`).

Example:
    >>> TuningSpec(goal="MAXIMIZE", metric="accuracy", max_trials=4, parallel_trials=2,
    ...            params=(Parameter("learning_rate", "DOUBLE", 1e-4, 1e-1, scale="UNIT_LOG_SCALE"),))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from mlsubmit.errors import UsageError, did_you_mean, invalid_value

TYPES = ("DOUBLE", "INTEGER", "CATEGORICAL", "DISCRETE")
SCALES = ("UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE")
GOALS = ("MAXIMIZE", "MINIMIZE")
ALGORITHMS = ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH")
DEFAULT_METRIC = "training/hptuning/metric"  # the tag cloudml-hypertune and the legacy service used by default
# How each API spells a parameter's fields, for error messages.
FIELDS = {"legacy": {"min": "minValue", "max": "maxValue", "DISCRETE": "discreteValues",
                     "CATEGORICAL": "categoricalValues", "scale": "scaleType", "type": "type"},
          "vertex": {"min": "{spec}.minValue", "max": "{spec}.maxValue", "DISCRETE": "discreteValueSpec.values",
                     "CATEGORICAL": "categoricalValueSpec.values", "scale": "scaleType", "type": "the value spec"}}
_SPECS = {"DOUBLE": "doubleValueSpec", "INTEGER": "integerValueSpec"}


def number(value: Any, field_name: str, *, whole: bool = False) -> float | int:
    """A finite number from YAML (a YAML boolean is 0/1, as gcloud reads it; numeric strings are accepted)."""
    if isinstance(value, bool):
        return int(value)
    try:
        result = float(value) if not isinstance(value, (int, float)) else value
    except (TypeError, ValueError):
        result = None
    if result is None or not math.isfinite(result):
        raise invalid_value(field_name, value, "a whole number" if whole else "a number")
    if whole:
        if float(result) != int(result):
            raise invalid_value(field_name, value, "a whole number")
        return int(result)
    return result


@dataclass(frozen=True)
class Parameter:
    """One tuned parameter, passed to each trial as `--name=value`.

    Attributes:
        name: the parameter (and the trainer's flag) name.
        type: one of TYPES.
        min_value, max_value: the range of a DOUBLE or INTEGER parameter.
        values: the choices of a CATEGORICAL (strings) or DISCRETE (increasing numbers) parameter.
        scale: one of SCALES, or None (the service's default).
        where, api: how the user's file names this parameter and which spelling it uses, for errors.
    """

    name: str
    type: str
    min_value: float | int | None = None
    max_value: float | int | None = None
    values: tuple[Any, ...] = ()
    scale: str | None = None
    where: str = field(default="parameter", compare=False)
    api: str = field(default="legacy", compare=False)

    def _field(self, key: str) -> str:
        spelled = FIELDS[self.api][key].format(spec=_SPECS.get(self.type, "valueSpec"))
        return f"{self.where} ({self.name}).{spelled}"

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        if not isinstance(self.name, str) or not self.name.strip():
            raise invalid_value(f"{self.where}.parameterName", self.name, "a parameter name (the trainer's flag)")
        if self.type not in TYPES:
            raise invalid_value(self._field("type"), self.type, "one of " + ", ".join(TYPES),
                                hint=did_you_mean(str(self.type).upper(), TYPES))
        if self.scale is not None and self.scale not in SCALES:
            raise invalid_value(self._field("scale"), self.scale, "one of " + ", ".join(SCALES),
                                hint=did_you_mean(str(self.scale).upper(), SCALES))
        if self.type in ("DOUBLE", "INTEGER"):
            self._check_range()
        else:
            self._check_values()

    def _check_range(self) -> None:
        whole = self.type == "INTEGER"
        for key, value in (("min", self.min_value), ("max", self.max_value)):
            if value is None:
                raise invalid_value(self._field(key), None, f"a {'whole ' if whole else ''}number for a "
                                    f"{self.type} parameter")
            object.__setattr__(self, f"{key}_value", number(value, self._field(key), whole=whole))
        if self.min_value > self.max_value:  # both bounds are inclusive (aiplatform.v1): equal ones name one value
            raise invalid_value(self._field("max"), self.max_value, f"a value at or above minValue {self.min_value}")
        if self.scale in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE") and self.min_value <= 0:
            raise invalid_value(self._field("min"), self.min_value, f"a value above 0 with {self.scale} (a "
                                "logarithm needs positive values)", hint="use UNIT_LINEAR_SCALE or a positive minimum")
        if self.values:
            raise UsageError(f"invalid {self.where} ({self.name}): a {self.type} parameter takes minValue and "
                             f"maxValue; received values {list(self.values)} too", hint="drop the values")

    def _check_values(self) -> None:
        key = self._field(self.type)
        if self.min_value is not None or self.max_value is not None:
            raise UsageError(f"invalid {self.where} ({self.name}): a {self.type} parameter takes a list of values; "
                             f"received minValue/maxValue too", hint="drop minValue and maxValue")
        if not self.values:
            raise invalid_value(key, [], f"at least one value for a {self.type} parameter")
        if self.type == "CATEGORICAL":
            if self.scale is not None:
                raise invalid_value(self._field("scale"), self.scale, "no scale for a CATEGORICAL parameter")
            if any(not isinstance(v, str) for v in self.values) or len(set(self.values)) != len(self.values):
                raise invalid_value(key, list(self.values), "distinct strings", hint="quote values such as '1'")
            return
        numbers = tuple(number(v, key) for v in self.values)
        if any(b <= a for a, b in zip(numbers, numbers[1:])):
            raise invalid_value(key, list(self.values), "values in increasing order, each once",
                                hint=f"use {sorted(set(numbers))}")
        if self.scale in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE") and numbers[0] <= 0:
            raise invalid_value(key, list(self.values), f"values above 0 with {self.scale}")
        object.__setattr__(self, "values", numbers)


@dataclass(frozen=True)
class TuningSpec:
    """A tuning study over the trials of one job.

    Attributes:
        goal: MAXIMIZE or MINIMIZE the metric.
        metric: the metric's tag, as the trainer reports it through cloudml-hypertune.
        params: the tuned parameters, in order.
        max_trials, parallel_trials: how many trials in all, and at most at once.
        max_failed_trials: failed trials before the study fails (None: the service's default).
        algorithm: one of ALGORITHMS (ALGORITHM_UNSPECIFIED: the service's Bayesian optimisation).
        early_stopping: stop trials whose curves show they will not win.
        resume_previous_job_id: a legacy job whose trials this study continues (legacy AI Platform only); with it,
            goal and params may be left out (the study continues the previous job's: `resume_only`).
        where: how the user's file names the spec, for errors.
    """

    goal: str | None
    params: tuple[Parameter, ...]
    metric: str = DEFAULT_METRIC
    max_trials: int = 1
    parallel_trials: int = 1
    max_failed_trials: int | None = None
    algorithm: str = "ALGORITHM_UNSPECIFIED"
    early_stopping: bool = False
    resume_previous_job_id: str | None = None
    where: str = field(default="hyperparameters", compare=False)
    keys: tuple[str, str, str] = field(default=("hyperparameters.maxTrials", "hyperparameters.maxParallelTrials",
                                                "hyperparameters.maxFailedTrials"), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        if self.goal is None and self.resume_previous_job_id and not self.params:
            pass  # a resume-only spec: ml.v1 takes the previous job's study (goal defaults to MAXIMIZE there)
        elif self.goal not in GOALS:
            raise invalid_value(f"{self.where}.goal", self.goal, "MAXIMIZE or MINIMIZE",
                                hint=did_you_mean(str(self.goal).upper(), GOALS))
        if not isinstance(self.metric, str) or not self.metric.strip():
            raise invalid_value(f"{self.where} metric", self.metric, "the metric's tag as the trainer reports it")
        if not self.params and not self.resume_previous_job_id:
            raise invalid_value(f"{self.where}.params", [], "at least one parameter to tune",
                                hint="or resumePreviousJobId to continue a legacy job's study")
        names = [p.name for p in self.params]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise invalid_value(f"{self.where}.params", ", ".join(repeated), "each parameter once")
        if self.algorithm not in ALGORITHMS:
            raise invalid_value(f"{self.where}.algorithm", self.algorithm, "one of " + ", ".join(ALGORITHMS),
                                hint=did_you_mean(str(self.algorithm).upper(), ALGORITHMS))
        trials_field, parallel_field, failed_field = self.keys  # full field names as the user's file spells them
        trials, parallel = trials_field.rsplit(".", 1)[-1], parallel_field.rsplit(".", 1)[-1]
        object.__setattr__(self, "max_trials", _count(self.max_trials, trials_field, 1))
        object.__setattr__(self, "parallel_trials", _count(self.parallel_trials, parallel_field, 1))
        if self.max_failed_trials is not None:
            object.__setattr__(self, "max_failed_trials", _count(self.max_failed_trials, failed_field, 0))
        if self.parallel_trials > self.max_trials:
            raise invalid_value(parallel_field, self.parallel_trials, f"at most {trials} ({self.max_trials})",
                                hint=f"lower {parallel} or raise {trials}")
        if self.algorithm == "GRID_SEARCH":
            continuous = [p.name for p in self.params if p.type == "DOUBLE"]
            if continuous:
                raise invalid_value(f"{self.where}.algorithm", "GRID_SEARCH", "INTEGER, DISCRETE or CATEGORICAL "
                                    f"parameters only; {', '.join(continuous)} is DOUBLE",
                                    hint="use DISCRETE values, or RANDOM_SEARCH")


    @property
    def resume_only(self) -> bool:
        """A legacy spec that only continues a previous job's study (resumePreviousJobId, no params)."""
        return bool(self.resume_previous_job_id) and not self.params

    def fixed(self) -> list[str]:
        """Notes on parameters whose inclusive bounds are equal: each trial gets that one value."""
        return [f"{p.where} ({p.name}): minValue = maxValue = {p.min_value}: every trial gets that value (the "
                "bounds are inclusive)" for p in self.params if p.min_value is not None and p.min_value == p.max_value]


def _count(value: Any, field_name: str, minimum: int) -> int:
    count = number(value, field_name, whole=True) if not isinstance(value, bool) else None
    if count is None or count < minimum:
        raise invalid_value(field_name, value, f"a whole number >= {minimum}")
    return int(count)
