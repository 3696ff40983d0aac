"""A tuning job's trials read from either API's resource, the best marked for the goal, and the PNG."""

from __future__ import annotations

from mlsubmit.tuning.results import plot, results_of

VERTEX = {"studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                        "parameters": [{"parameterId": "lr", "doubleValueSpec": {"minValue": 1e-4, "maxValue": 1},
                                        "scaleType": "UNIT_LOG_SCALE"},
                                       {"parameterId": "opt", "categoricalValueSpec": {"values": ["a", "b"]}}]},
          "maxTrialCount": 4, "parallelTrialCount": 2,
          "trials": [{"id": "1", "state": "SUCCEEDED", "parameters": [{"parameterId": "lr", "value": 0.01},
                                                                      {"parameterId": "opt", "value": "a"}],
                      "finalMeasurement": {"stepCount": "5", "metrics": [{"metricId": "accuracy", "value": 0.7}]}},
                     {"id": "2", "state": "SUCCEEDED", "parameters": [{"parameterId": "lr", "value": 0.1},
                                                                      {"parameterId": "opt", "value": "b"}],
                      "finalMeasurement": {"stepCount": "5", "metrics": [{"metricId": "accuracy", "value": 0.9}]}},
                     {"id": "3", "state": "INFEASIBLE", "parameters": [{"parameterId": "lr", "value": 0.5},
                                                                       {"parameterId": "opt", "value": "a"}],
                      "infeasibleReason": "the trial's job failed"},
                     {"id": "4", "state": "ACTIVE", "parameters": [{"parameterId": "lr", "value": 0.001},
                                                                   {"parameterId": "opt", "value": "b"}]}]}
LEGACY = {"trainingInput": {"hyperparameters": {"goal": "MINIMIZE", "maxTrials": 3, "maxParallelTrials": 1, "params": [
    {"parameterName": "units", "type": "INTEGER", "minValue": 8, "maxValue": 64}]}},
    "trainingOutput": {"trials": [
        {"trialId": "1", "state": "SUCCEEDED", "hyperparameters": {"units": "16"},
         "finalMetric": {"trainingStep": "100", "objectiveValue": 0.3}},
        {"trialId": "2", "state": "SUCCEEDED", "hyperparameters": {"units": "32"},
         "finalMetric": {"trainingStep": "100", "objectiveValue": 0.2}},
        {"trialId": "3", "state": "FAILED", "hyperparameters": {"units": "64"}}]}}


def test_the_best_trial_is_the_goals_among_those_that_succeeded_on_either_api(tmp_path):
    vertex = results_of(VERTEX)
    assert (vertex.metric, vertex.goal, vertex.best.id, vertex.log_scaled) == ("accuracy", "MAXIMIZE", "2",
                                                                                frozenset({"lr"}))
    assert [(t.id, t.value, t.step, t.best) for t in vertex.trials] == [
        ("1", 0.7, 5, False), ("2", 0.9, 5, True), ("3", None, None, False), ("4", None, None, False)]
    assert vertex.trials[2].reason == "the trial's job failed"
    legacy = results_of(LEGACY)
    assert (legacy.metric, legacy.best.id, legacy.best.parameters) == ("training/hptuning/metric", "2", {"units": 32})
    assert legacy.to_dict()["best"] == "2" and legacy.to_dict()["trials"][2]["value"] is None
    assert results_of({"trainingInput": {"scaleTier": "BASIC"}}) is None
    assert results_of({**LEGACY, "trainingOutput": {}}).best is None
    written = plot(vertex, tmp_path / "deep" / "trials.png")
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
