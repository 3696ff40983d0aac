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

import math
import random
from collections.abc import Iterator
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


class Grid:
    """The points of a GRID_SEARCH study, never listed: an INTEGER range of 10**18 values, or ten parameters of a
    thousand values each (10**30 points), costs what the trials asked for, not what the grid holds.

    Point i is read from i's digits in the mixed radix of the axes' sizes. `order` draws the points' indices in a
    seeded random order, each once: a shuffle of every index for a grid of at most SHUFFLED points, else distinct
    random indices (the study asks for at most maxTrialCount of them).
    """

    SHUFFLED = 100_000

    def __init__(self, tuning: TuningSpec):
        self.axes = [(p.name, p.max_value - p.min_value + 1 if p.type == "INTEGER" else len(p.values), p)
                     for p in tuning.params]
        self.size = math.prod(size for _, size, _ in self.axes)

    def point(self, index: int) -> dict[str, Any]:
        values = {}
        for name, size, param in reversed(self.axes):
            index, digit = divmod(index, size)
            values[name] = param.min_value + digit if param.type == "INTEGER" else param.values[digit]
        return {name: values[name] for name, _, _ in self.axes}

    def order(self, seed: int) -> Iterator[int]:
        rng = random.Random(seed)
        if self.size <= self.SHUFFLED:
            indices = list(range(self.size))
            rng.shuffle(indices)
            yield from indices
            return
        drawn: set[int] = set()
        while len(drawn) < self.size:
            index = rng.randrange(self.size)
            if index not in drawn:
                drawn.add(index)
                yield index


class Search:
    """Ask for a trial's values, tell its metric (None: the trial failed)."""

    def __init__(self, tuning: TuningSpec, *, seed: int = 0):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.tuning, self.results = tuning, {}
        self.notes = [f"{p.name}: UNIT_REVERSE_LOG_SCALE is searched on a linear scale" for p in tuning.params
                      if p.scale == "UNIT_REVERSE_LOG_SCALE"]
        self.points: Iterator[int] | None = None
        if tuning.algorithm == "GRID_SEARCH":
            self.grid = Grid(tuning)
            self.points, self.total, self.study = self.grid.order(seed), min(tuning.max_trials, self.grid.size), None
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
            return number, self.grid.point(next(self.points))
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
