"""Suggestions for the trials of a TuningSpec, from a real optimizer: Optuna's ask/tell.

- GRID_SEARCH: every point of the grid (INTEGER ranges step 1, DISCRETE and CATEGORICAL values), each once, in a
  seeded order; a grid smaller than maxTrialCount ends the study early, as the service does. (Enumerated here:
  Optuna's GridSampler stops its study from inside `tell`, which ask/tell use does not allow.)
- RANDOM_SEARCH: independent uniform draws (log-uniform on UNIT_LOG_SCALE), seeded.
- ALGORITHM_UNSPECIFIED (the service's Bayesian optimisation): Optuna's TPE sampler, seeded. Why Optuna and not
  Open Source Vizier (the service's own family): Vizier's default designer needs JAX and a gRPC service; Optuna is
  a pure-Python, well-kept library whose ask/tell fits trials that run as separate jobs.

UNIT_REVERSE_LOG_SCALE has no Optuna distribution: such a parameter is searched on a linear scale (`notes` says so).
Values reach the trainer as `--name=value`: integers and whole DISCRETE values without a decimal point.

Example:
    >>> search = Search(tuning, seed=0)
    >>> number, values = search.ask()
    >>> search.tell(number, 0.93)
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from mlsubmit.tuning.spec import Parameter, TuningSpec


def _distribution(param: Parameter) -> Any:
    import optuna

    log = param.scale == "UNIT_LOG_SCALE"
    if param.type == "DOUBLE":
        return optuna.distributions.FloatDistribution(param.min_value, param.max_value, log=log)
    if param.type == "INTEGER":
        return optuna.distributions.IntDistribution(param.min_value, param.max_value, log=log)
    return optuna.distributions.CategoricalDistribution(list(param.values))


def grid(tuning: TuningSpec) -> dict[str, list[Any]]:
    """The grid of a GRID_SEARCH study: every value of every parameter."""
    return {p.name: list(range(p.min_value, p.max_value + 1)) if p.type == "INTEGER" else list(p.values)
            for p in tuning.params}


class Search:
    """Ask for a trial's values, tell its metric (None: the trial failed)."""

    def __init__(self, tuning: TuningSpec, *, seed: int = 0):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.tuning, self.results = tuning, {}
        self.notes = [f"{p.name}: UNIT_REVERSE_LOG_SCALE is searched on a linear scale" for p in tuning.params
                      if p.scale == "UNIT_REVERSE_LOG_SCALE"]
        self.points: list[dict[str, Any]] | None = None
        if tuning.algorithm == "GRID_SEARCH":
            axes = grid(tuning)
            points = [dict(zip(axes, values)) for values in itertools.product(*axes.values())]
            random.Random(seed).shuffle(points)
            self.points, self.total, self.study = points, min(tuning.max_trials, len(points)), None
            return
        if tuning.algorithm == "RANDOM_SEARCH":
            sampler, self.total = optuna.samplers.RandomSampler(seed=seed), tuning.max_trials
        else:
            sampler, self.total = optuna.samplers.TPESampler(seed=seed), tuning.max_trials
        self.study = optuna.create_study(direction="maximize" if tuning.goal == "MAXIMIZE" else "minimize",
                                         sampler=sampler)
        self.distributions = {p.name: _distribution(p) for p in tuning.params}

    def ask(self) -> tuple[int, dict[str, Any]]:
        if self.points is not None:
            number = len(self.results)
            self.results[number] = None
            return number, dict(self.points[number])
        trial = self.study.ask(self.distributions)
        return trial.number, dict(trial.params)

    def tell(self, number: int, value: float | None) -> None:
        import optuna

        if self.points is not None:
            self.results[number] = value
        elif value is None:
            self.study.tell(number, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(number, value)


def flag_value(value: Any) -> str:
    """How a value is written in `--name=value`: 64 and 64.0 as "64", 0.001 as "0.001", strings as they are."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def trial_args(values: dict[str, Any]) -> list[str]:
    return [f"--{name}={flag_value(value)}" for name, value in values.items()]
