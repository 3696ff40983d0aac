"""Hyperparameter tuning jobs run for real by a `mlsubmit emulator` subprocess: a GRID study of 4 trials, 2 at once,
each a CustomJob of a tiny package that reports its metric with the cloudml-hypertune file format; followed with
google-api-python-client and the real gcloud."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from mlsubmit.images import carried
from support.training_emulator import stage_package

pytest_plugins = ["support.training_emulator"]  # fixtures: training_emulator, emulator_home

PARENT = "projects/emu-project/locations/us-central1"
# Reports units * (2 if adam else 1) as "score", the way cloudml-hypertune writes it (one JSON line per report).
HP_TASK = '''\
import argparse, json, os, time

parser = argparse.ArgumentParser(prog="tinypkg.task")
parser.add_argument("--units", type=int, required=True)
parser.add_argument("--optimizer", required=True)
args = parser.parse_args()
score = args.units * (2 if args.optimizer == "adam" else 1)
path = os.environ["CLOUD_ML_HP_METRIC_FILE"]
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "a") as handle:
    for step in (1, 2):
        handle.write(json.dumps({"timestamp": time.time(), "trial": os.environ["CLOUD_ML_TRIAL_ID"],
                                 "score": str(score * step / 2), "global_step": str(step)}) + "\\n")
time.sleep(0.5)
'''


@pytest.fixture(scope="module")
def hp_package(gcs_emulator, tmp_path_factory):
    from support.tiny_package import make_project

    root = tmp_path_factory.mktemp("hp-package")
    bucket = f"hp-{root.name.lower().replace('_', '-')[-20:]}"
    gcs_emulator.create_bucket(bucket)
    return stage_package(make_project(root / "proj", task=HP_TASK), gcs_emulator.endpoint, bucket)


def study_body(uri: str) -> dict:
    return {"displayName": "grid-study", "maxTrialCount": 6, "parallelTrialCount": 2,
            "studySpec": {"metrics": [{"metricId": "score", "goal": "MAXIMIZE"}], "algorithm": "GRID_SEARCH",
                          "parameters": [{"parameterId": "units", "integerValueSpec": {"minValue": "16",
                                                                                        "maxValue": "17"}},
                                         {"parameterId": "optimizer",
                                          "categoricalValueSpec": {"values": ["adam", "sgd"]}}]},
            "trialJobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"},
                                                  "replicaCount": "1",
                                                  "pythonPackageSpec": {
                                                      "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/"
                                                                          "sklearn-cpu.1-6:latest",
                                                      "packageUris": [uri], "pythonModule": "tinypkg.task"}}]}}


def test_a_grid_study_runs_every_point_two_at_a_time(training_emulator, hp_package, tmp_path):
    studies = training_emulator.client("aiplatform", "v1").projects().locations().hyperparameterTuningJobs()
    created = studies.create(parent=PARENT, body=study_body(hp_package)).execute()
    assert created["state"] in ("JOB_STATE_QUEUED", "JOB_STATE_RUNNING")
    done = training_emulator.wait(studies.get(name=created["name"]).execute)
    assert done["state"] == "JOB_STATE_SUCCEEDED", json.dumps(done.get("error"))
    trials = done["trials"]
    # the grid has 4 points (< maxTrialCount 6): each runs once, and the metric is the last one reported
    points = {(t["parameters"][0]["value"], t["parameters"][1]["value"]): t for t in trials}
    assert sorted(points) == [(16, "adam"), (16, "sgd"), (17, "adam"), (17, "sgd")]
    for (units, optimizer), trial in points.items():
        assert trial["state"] == "SUCCEEDED"
        assert trial["finalMeasurement"] == {"stepCount": "2", "metrics": [
            {"metricId": "score", "value": units * (2 if optimizer == "adam" else 1)}]}
    # never more than parallelTrialCount at once
    events = sorted([(t["startTime"], 1) for t in trials] + [(t["endTime"], -1) for t in trials],
                    key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    assert peak <= 2
    # each trial is a CustomJob with its values as --name=value and the hypertune environment
    job = training_emulator.vertex_jobs().get(name=points[(17, "sgd")]["customJob"]).execute()
    package = carried.program(job["jobSpec"]["workerPoolSpecs"][0])
    assert package["args"] == ["--units=17", "--optimizer=sgd"]
    assert {e["name"] for e in package["env"]} == {"CLOUD_ML_TRIAL_ID", "CLOUD_ML_HP_METRIC_FILE"}

    if shutil.which("gcloud") is None:
        return
    env = {**os.environ, "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true",
           "CLOUDSDK_CORE_PROJECT": "emu-project", "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
           "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM": training_emulator.endpoint + "/"}
    described = subprocess.run(["gcloud", "ai", "hp-tuning-jobs", "describe", created["name"].rsplit("/", 1)[-1],
                                "--region", "us-central1", "--format", "json"], env=env, capture_output=True,
                               text=True, timeout=120)
    assert described.returncode == 0, described.stderr
    assert len(json.loads(described.stdout)["trials"]) == 4


def test_bad_study_is_a_400_naming_the_field(training_emulator, hp_package):
    body = study_body(hp_package)
    body["parallelTrialCount"] = 9
    status, answer = training_emulator.raw("POST", f"/v1/{PARENT}/hyperparameterTuningJobs",
                                           json.dumps(body).encode())
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT"
    violation = answer["error"]["details"][0]["fieldViolations"][0]
    assert violation["field"] == "parallelTrialCount"
    assert "expected at most maxTrialCount (6)" in violation["description"]


def test_cancel_stops_the_running_trials_of_a_random_study(training_emulator, hp_package):
    studies = training_emulator.client("aiplatform", "v1").projects().locations().hyperparameterTuningJobs()
    body = study_body(hp_package)
    body["studySpec"]["algorithm"] = "RANDOM_SEARCH"
    body["studySpec"]["parameters"][0]["integerValueSpec"]["maxValue"] = "64"
    created = studies.create(parent=PARENT, body={**body, "maxTrialCount": 3, "parallelTrialCount": 1}).execute()
    running = training_emulator.wait(studies.get(name=created["name"]).execute,
                                     states={"JOB_STATE_RUNNING"})
    assert running["state"] == "JOB_STATE_RUNNING"
    training_emulator.wait(lambda: {"state": "started" if studies.get(name=created["name"]).execute().get("trials")
                                    else "waiting"}, states={"started"})
    studies.cancel(name=created["name"]).execute()
    done = training_emulator.wait(studies.get(name=created["name"]).execute)
    assert done["state"] == "JOB_STATE_CANCELLED" and len(done["trials"]) == 1
    trial_job = training_emulator.vertex_jobs().get(name=done["trials"][0]["customJob"]).execute()
    assert trial_job["state"] == "JOB_STATE_CANCELLED"
    assert 16 <= int(done["trials"][0]["parameters"][0]["value"]) <= 64


def test_more_failed_trials_than_allowed_fail_the_study(training_emulator, hp_package):
    studies = training_emulator.client("aiplatform", "v1").projects().locations().hyperparameterTuningJobs()
    body = study_body(hp_package)
    body["studySpec"]["parameters"].append({"parameterId": "depth", "discreteValueSpec": {"values": [1, 2]}})
    created = studies.create(parent=PARENT, body={**body, "maxTrialCount": 4, "parallelTrialCount": 1,
                                                  "maxFailedTrialCount": 1}).execute()  # the task rejects --depth
    done = training_emulator.wait(studies.get(name=created["name"]).execute)
    assert done["state"] == "JOB_STATE_FAILED" and len(done["trials"]) == 2
    assert all(t["state"] == "INFEASIBLE" and "failed" in t["infeasibleReason"] for t in done["trials"])
    assert done["error"]["message"].startswith("2 trials failed (maxFailedTrialCount 1)")


def test_a_legacy_resume_only_study_names_the_job_it_resumes(training_emulator, hp_package):
    # a resume-only spec (resumePreviousJobId, no params) is accepted as ml.v1 accepted it; the study it continues
    # must exist (here: none does, so the answer names it)
    body = {"jobId": "resume_me", "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": "2.11", "pythonVersion": "3.7",
        "pythonModule": "tinypkg.task", "packageUris": [hp_package],
        "hyperparameters": {"maxTrials": 2, "resumePreviousJobId": "hp_never_ran"}}}
    status, answer = training_emulator.raw("POST", "/v1/projects/emu-project/jobs", json.dumps(body).encode())
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT", answer
    assert "no hyperparameter tuning job hp_never_ran in project emu-project to resume" in answer["error"]["message"]
