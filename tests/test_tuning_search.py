"""Trial suggestions: the grid exactly once, seeded random draws in range (log-uniform on log scales), the default
algorithm learning from what it is told, and values written as the trainer's flags."""

from __future__ import annotations

import math

from mlsubmit.tuning.search import Search, trial_args
from mlsubmit.tuning.spec import Parameter, TuningSpec


def _spec(algorithm: str, *params: Parameter, trials: int = 8) -> TuningSpec:
    return TuningSpec(goal="MAXIMIZE", metric="score", params=params, max_trials=trials, algorithm=algorithm)


def test_grid_enumerates_every_point_once_and_ends_with_the_grid():
    search = Search(_spec("GRID_SEARCH", Parameter("units", "INTEGER", 1, 3),
                          Parameter("opt", "CATEGORICAL", values=("adam", "sgd"))), seed=3)
    assert search.total == 6  # 3 x 2 points < maxTrials 8
    points = [search.ask()[1] for _ in range(search.total)]
    assert sorted((p["units"], p["opt"]) for p in points) == [(u, o) for u in (1, 2, 3) for o in ("adam", "sgd")]


def test_random_is_seeded_and_in_range_with_log_scale():
    spec = _spec("RANDOM_SEARCH", Parameter("lr", "DOUBLE", 1e-5, 1e-1, scale="UNIT_LOG_SCALE"),
                 Parameter("batch", "DISCRETE", values=(32, 64, 128)))
    first, second = Search(spec, seed=7), Search(spec, seed=7)
    drawn = [first.ask()[1] for _ in range(40)]
    assert drawn[:5] == [second.ask()[1] for _ in range(5)]
    assert all(1e-5 <= d["lr"] <= 1e-1 and d["batch"] in (32.0, 64.0, 128.0) for d in drawn)
    assert sum(d["lr"] < 1e-3 for d in drawn) > 10  # log-uniform: half the draws below the geometric middle


def test_default_algorithm_learns_from_told_values_and_failed_trials():
    search = Search(_spec("ALGORITHM_UNSPECIFIED", Parameter("x", "DOUBLE", -10, 10), trials=30), seed=0)
    for index in range(30):
        number, values = search.ask()
        search.tell(number, None if index == 3 else -(values["x"] - 3) ** 2)
    assert math.isclose(search.study.best_params["x"], 3, abs_tol=1.5)


def test_values_become_flags():
    assert trial_args({"units": 64, "batch": 32.0, "lr": 0.001, "opt": "adam"}) == [
        "--units=64", "--batch=32", "--lr=0.001", "--opt=adam"]
