"""The trials of a tuning job in common terms, whichever API ran them, the best one marked; and a PNG of the
metric per trial against each parameter.

    results = results_of(resource)            # a Vertex HyperparameterTuningJob or a legacy Job (None: no tuning)
    results.best                              # the best SUCCEEDED trial for the goal, or None
    plot(results, "trials.png")               # matplotlib (Agg), imported only here

Vertex AI trials: `trials[]` {id, state, parameters[{parameterId, value}], finalMeasurement{stepCount,
metrics[{metricId, value}]}, customJob, infeasibleReason}. Legacy trials: `trainingOutput.trials[]` {trialId,
hyperparameters{name: "value"}, finalMetric{trainingStep, objectiveValue}, state}.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TrialResult:
    id: str
    state: str
    parameters: dict[str, Any]
    value: float | None = None
    step: int | None = None
    best: bool = False
    job: str | None = None  # the trial's own job (Vertex AI: its CustomJob)
    reason: str | None = None


@dataclass(frozen=True)
class TuningResults:
    metric: str
    goal: str
    max_trials: int
    parallel_trials: int
    trials: tuple[TrialResult, ...] = field(default_factory=tuple)
    log_scaled: frozenset[str] = frozenset()  # parameters searched on UNIT_LOG_SCALE: plotted on a log axis

    @property
    def best(self) -> TrialResult | None:
        return next((t for t in self.trials if t.best), None)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "goal": self.goal, "maxTrials": self.max_trials,
                "parallelTrials": self.parallel_trials, "best": self.best.id if self.best else None,
                "trials": [asdict(t) for t in self.trials]}


def _value(text: Any) -> Any:
    """A legacy trial's parameter value ("0.01", "64", "adam") as a number when it is one."""
    if not isinstance(text, str):
        return text
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _mark_best(trials: list[TrialResult], goal: str) -> tuple[TrialResult, ...]:
    scored = [t for t in trials if t.value is not None and t.state == "SUCCEEDED"]
    if not scored:
        return tuple(trials)
    pick = max if goal != "MINIMIZE" else min
    best = pick(scored, key=lambda t: t.value)
    return tuple(TrialResult(**{**asdict(t), "best": t is best}) for t in trials)


def results_of(resource: dict[str, Any]) -> TuningResults | None:
    """The trials of a tuning job resource (either API); None when the resource is not a tuning job."""
    if "studySpec" in resource:
        metric = ((resource["studySpec"].get("metrics") or [{}])[0])
        trials = []
        for raw in resource.get("trials") or ():
            measured = ((raw.get("finalMeasurement") or {}).get("metrics") or [{}])[0]
            step = (raw.get("finalMeasurement") or {}).get("stepCount")
            trials.append(TrialResult(str(raw.get("id", "")), str(raw.get("state", "")),
                                      {p.get("parameterId"): p.get("value") for p in raw.get("parameters") or ()},
                                      _number(measured.get("value")), int(step) if step is not None else None,
                                      job=raw.get("customJob"), reason=raw.get("infeasibleReason")))
        goal = metric.get("goal", "MAXIMIZE")
        logs = frozenset(p.get("parameterId") for p in resource["studySpec"].get("parameters") or ()
                         if p.get("scaleType") == "UNIT_LOG_SCALE")
        return TuningResults(metric.get("metricId", ""), goal, int(resource.get("maxTrialCount") or 1),
                             int(resource.get("parallelTrialCount") or 1), _mark_best(trials, goal), logs)
    hyper = (resource.get("trainingInput") or {}).get("hyperparameters")
    if not hyper:
        return None
    trials = []
    for raw in (resource.get("trainingOutput") or {}).get("trials") or ():
        final = raw.get("finalMetric") or {}
        step = final.get("trainingStep")
        trials.append(TrialResult(str(raw.get("trialId", "")), str(raw.get("state", "")),
                                  {k: _value(v) for k, v in (raw.get("hyperparameters") or {}).items()},
                                  _number(final.get("objectiveValue")), int(step) if step is not None else None))
    goal = hyper.get("goal", "MAXIMIZE")
    logs = frozenset(p.get("parameterName") for p in hyper.get("params") or ()
                     if p.get("scaleType") == "UNIT_LOG_SCALE")
    return TuningResults(hyper.get("hyperparameterMetricTag") or "training/hptuning/metric", goal,
                         int(hyper.get("maxTrials") or 1), int(hyper.get("maxParallelTrials") or 1),
                         _mark_best(trials, goal), logs)


def plot(results: TuningResults, path: str | Path, *, title: str = "") -> Path:
    """A PNG with one panel per parameter: the metric of each trial against the parameter's value (categories
    along the axis in the order seen), the best trial a star. Trials without a metric are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(name for t in results.trials for name in t.parameters))
    scored = [t for t in results.trials if t.value is not None]
    figure, axes = plt.subplots(1, max(1, len(names)), figsize=(4 * max(1, len(names)), 3.5), squeeze=False)
    for axis, name in zip(axes[0], names or [""]):
        values = [t.parameters.get(name) for t in scored]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        labels = list(dict.fromkeys(map(str, values)))
        xs = values if numeric else [labels.index(str(v)) for v in values]
        axis.scatter(xs, [t.value for t in scored], color="tab:blue", label="trial")
        for x, trial in zip(xs, scored):
            axis.annotate(trial.id, (x, trial.value), textcoords="offset points", xytext=(4, 4), fontsize=7)
            if trial.best:
                axis.scatter([x], [trial.value], marker="*", s=220, color="tab:orange", label="best", zorder=3)
        if not numeric:
            axis.set_xticks(range(len(labels)), labels)
        elif name in results.log_scaled and values and min(values) > 0:
            axis.set_xscale("log")
        axis.set_xlabel(name)
        axis.set_ylabel(f"{results.metric} ({results.goal.lower()})")
    figure.suptitle(title or f"{len(scored)} of {len(results.trials)} trials reported {results.metric}")
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path
