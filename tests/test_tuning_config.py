"""Hyperparameter tuning specs: legacy trainingInput.hyperparameters <-> Vertex AI HyperparameterTuningJob through
`mlsubmit config`, exact documents, schema-valid, accepted by the real gcloud, and one-line errors for bad specs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from typer.testing import CliRunner

from mlsubmit.images import carried

from mlsubmit.cli import app
from mlsubmit.jobspec.discovery import validate
from mlsubmit.jobspec.requests import LEGACY_SHUT_DOWN

CUSTOM_GPU_TUNING = """\
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-standard-8
  masterConfig:
    acceleratorConfig: {count: 2, type: NVIDIA_TESLA_T4}
  runtimeVersion: "2.11"
  pythonVersion: "3.7"
  region: europe-west4
  pythonModule: trainer.task
  packageUris: [gs://bkt/trainer-0.1.0.tar.gz]
  args: [--model, dense]
  hyperparameters:
    goal: MINIMIZE
    hyperparameterMetricTag: val_loss
    maxTrials: 6
    maxParallelTrials: 3
    maxFailedTrials: 2
    algorithm: RANDOM_SEARCH
    resumePreviousJobId: census_hp_1
    params:
    - {parameterName: learning-rate, type: DOUBLE, minValue: 0.001, maxValue: 0.1, scaleType: UNIT_REVERSE_LOG_SCALE}
    - {parameterName: batch-norm, type: DISCRETE, discreteValues: [False, True]}
    - {parameterName: units, type: INTEGER, minValue: 16, maxValue: 256, scaleType: UNIT_LOG_SCALE}
"""
STUDY = {
    "metrics": [{"metricId": "val_loss", "goal": "MINIMIZE"}],
    "parameters": [
        {"parameterId": "learning-rate", "doubleValueSpec": {"minValue": 0.001, "maxValue": 0.1},
         "scaleType": "UNIT_REVERSE_LOG_SCALE"},
        {"parameterId": "batch-norm", "discreteValueSpec": {"values": [0.0, 1.0]}},
        {"parameterId": "units", "integerValueSpec": {"minValue": "16", "maxValue": "256"},
         "scaleType": "UNIT_LOG_SCALE"}],
    "algorithm": "RANDOM_SEARCH"}
TRIAL_JOB = {"workerPoolSpecs": [{
    "machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 2},
    "replicaCount": "1",
    # runtime 2.11's image is retired: the migrated trials run on the public TensorFlow image (a custom container)
    "containerSpec": carried.container_spec("tensorflow/tensorflow:2.21.0-gpu", ["gs://bkt/trainer-0.1.0.tar.gz"],
                                            "trainer.task", ["--model", "dense"], adds=["tensorboard~=2.21.0"])}]}


def _config(tmp_path, text, *args):
    path = tmp_path / "in.yaml"
    path.write_text(text)
    return CliRunner().invoke(app, ["config", "--config", str(path), *args])


def test_custom_gpus_tuning_becomes_a_hyperparameter_tuning_job(tmp_path):
    result = _config(tmp_path, CUSTOM_GPU_TUNING)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == ("# gcloud ai hp-tuning-jobs create --region europe-west4 "
                                             "--display-name NAME --config FILE")
    document = yaml.safe_load(result.stdout)
    assert document == {"studySpec": STUDY, "maxTrialCount": 6, "parallelTrialCount": 3, "maxFailedTrialCount": 2,
                        "trialJobSpec": TRIAL_JOB}
    assert validate("aiplatform.v1", "GoogleCloudAiplatformV1HyperparameterTuningJob", document) == []
    assert result.stderr.split("cost estimate (")[0].splitlines()[2:] == [  # then the estimate (#24)
        "warning: hyperparameters.resumePreviousJobId census_hp_1: Vertex AI cannot continue a legacy study; the "
        "trials start afresh",
        "warning: Vertex AI reads the metric only from what the trainer reports with cloudml-hypertune; legacy AI "
        "Platform also read TensorFlow summaries tagged val_loss"]
    assert result.stderr.split("cost estimate (")[0].splitlines()[:2] == [
        "warning: the file's image tf-gpu.2-11 is no longer served by Vertex AI (end of availability 2024-11-15): "
        "written for tensorflow/tensorflow:2.21.0-gpu (tensorflow 2.21, Python 3.11) instead",
        "warning: Python 3.7 cannot be kept: no image Vertex AI still runs has tensorflow on Python 3.7; check the "
        "trainer on Python 3.11 first (mlsubmit train --local --runtime-version 2.21)"]
    # and back: the Vertex document as --config gives the legacy spec (booleans now the numbers gcloud sent)
    vertex = tmp_path / "vertex.yaml"
    vertex.write_text(result.stdout)
    # TensorFlow 2.21 is no legacy runtime (AI Platform offered up to 2.11): one line, not runtimeVersion '2.21'
    refused = CliRunner().invoke(app, ["config", "--config", str(vertex), "--format", "legacy", "--region",
                                       "europe-west4"])
    assert refused.exit_code == 2 and refused.stdout == "" and refused.stderr.count("\n") == 1, refused.stderr
    assert "received '2.21'; legacy AI Platform offered runtime versions up to 2.11" in refused.stderr
    back = CliRunner().invoke(app, ["config", "--config", str(vertex), "--format", "legacy", "--region",
                                    "europe-west4", "--runtime-version", "2.11"])
    assert back.exit_code == 0, back.stderr
    training = yaml.safe_load(back.stdout)["trainingInput"]
    assert training["hyperparameters"] == {
        "goal": "MINIMIZE", "hyperparameterMetricTag": "val_loss", "params": [
            {"parameterName": "learning-rate", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1,
             "scaleType": "UNIT_REVERSE_LOG_SCALE"},
            {"parameterName": "batch-norm", "type": "DISCRETE", "discreteValues": [0.0, 1.0]},
            {"parameterName": "units", "type": "INTEGER", "minValue": 16, "maxValue": 256,
             "scaleType": "UNIT_LOG_SCALE"}],
        "maxTrials": 6, "maxParallelTrials": 3, "maxFailedTrials": 2, "algorithm": "RANDOM_SEARCH"}
    assert (training["runtimeVersion"], training["pythonVersion"], training["masterType"]) == ("2.11", "3.7",
                                                                                              "n1-standard-8")
    assert validate("ml.v1", "GoogleCloudMlV1__Job", yaml.safe_load(back.stdout)) == []


def test_hptune_config_takes_a_vertex_study_and_names_the_rest(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({"studySpec": {**STUDY, "algorithm": "GRID_SEARCH", "parameters": [
        {"parameterId": "units", "integerValueSpec": {"minValue": "16", "maxValue": "64"}},
        {"parameterId": "optimizer", "categoricalValueSpec": {"values": ["adam", "sgd"]}}],
        "measurementSelectionType": "BEST_MEASUREMENT"}, "maxTrialCount": 4, "parallelTrialCount": 2,
        "displayName": "ignored"}))
    result = CliRunner().invoke(app, ["config", "--gpus", "1", "--hptune-config", str(study), "--format", "legacy"])
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(result.stdout)["trainingInput"]["hyperparameters"] == {
        "goal": "MINIMIZE", "hyperparameterMetricTag": "val_loss", "params": [
            {"parameterName": "units", "type": "INTEGER", "minValue": 16, "maxValue": 64},
            {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]}],
        "maxTrials": 4, "maxParallelTrials": 2, "algorithm": "GRID_SEARCH"}
    assert result.stderr.split("cost estimate (")[0].splitlines() == [  # then the estimate (#24)
        "warning: studySpec.measurementSelectionType: has no place in a TuningSpec; not mapped",
        "warning: displayName: --hptune-config takes only the tuning spec (the job comes from --config and the "
        "flags); not mapped", f"warning: {LEGACY_SHUT_DOWN}"]


PARAM = "    params:\n    - {{parameterName: lr, type: {type}, {fields}}}\n"


@pytest.mark.parametrize("hyper, message", [
    ("goal: MAXIMISE\n" + PARAM.format(type="DOUBLE", fields="minValue: 0.1, maxValue: 0.2"),
     "trainingInput.hyperparameters.goal: invalid enum value 'MAXIMISE'; expected one of GOAL_TYPE_UNSPECIFIED, "
     "MAXIMIZE, MINIMIZE; did you mean 'MAXIMIZE'?"),
    ("maxTrials: 3\n" + PARAM.format(type="DOUBLE", fields="minValue: 0.1, maxValue: 0.2"),
     "invalid value for trainingInput.hyperparameters.goal: received None; expected MAXIMIZE or MINIMIZE"),
    ("goal: MAXIMIZE\n" + PARAM.format(type="DOUBLE", fields="minValue: 0.5, maxValue: 0.4"),
     "invalid value for trainingInput.hyperparameters.params[0] (lr).maxValue: received 0.4; expected a value "
     "at or above minValue 0.5"),
    ("goal: MAXIMIZE\n" + PARAM.format(type="DOUBLE", fields="minValue: 0, maxValue: 1, scaleType: UNIT_LOG_SCALE"),
     "invalid value for trainingInput.hyperparameters.params[0] (lr).minValue: received 0; expected a value above "
     "0 with UNIT_LOG_SCALE"),
    ("goal: MAXIMIZE\n" + PARAM.format(type="DISCRETE", fields="discreteValues: [64, 32]"),
     "invalid value for trainingInput.hyperparameters.params[0] (lr).discreteValues: received [64, 32]; expected "
     "values in increasing order, each once; use [32, 64]"),
    ("goal: MAXIMIZE\n    maxTrials: 2\n    maxParallelTrials: 3\n"
     + PARAM.format(type="INTEGER", fields="minValue: 1, maxValue: 9"),
     "invalid value for trainingInput.hyperparameters.maxParallelTrials: received 3; expected at most maxTrials (2)"),
    ("goal: MAXIMIZE\n" + PARAM.format(type="FLOAT", fields="minValue: 1, maxValue: 9"),
     "trainingInput.hyperparameters.params[0].type: invalid enum value 'FLOAT'"),
])
def test_bad_tuning_specs_are_one_line_exit_2(tmp_path, hyper, message):
    result = _config(tmp_path, "trainingInput:\n  hyperparameters:\n    " + hyper)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


@pytest.fixture
def capture_server():
    """A local endpoint that records the body of each POST and answers like Vertex AI's create."""
    bodies = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            reply = json.dumps({**bodies[-1], "name": "projects/p/locations/us-central1/hyperparameterTuningJobs/1",
                                "state": "JOB_STATE_QUEUED"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", bodies
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="the gcloud CLI is not installed")
def test_real_gcloud_accepts_the_tuning_config(tmp_path, capture_server):
    endpoint, bodies = capture_server
    result = _config(tmp_path, CUSTOM_GPU_TUNING)
    config = tmp_path / "hp.yaml"
    config.write_text(result.stdout)
    env = {**os.environ, "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true",
           "CLOUDSDK_CORE_PROJECT": "p", "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
           "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM": endpoint}
    done = subprocess.run(["gcloud", "ai", "hp-tuning-jobs", "create", "--config", str(config), "--region",
                           "europe-west4", "--display-name", "hp"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert bodies == [{"displayName": "hp", **yaml.safe_load(result.stdout)}]


def test_train_dry_run_shows_the_tuning_job_it_would_create_on_either_api(tmp_path):
    path = tmp_path / "hptuning_config.yaml"
    path.write_text(CUSTOM_GPU_TUNING)
    flags = ["train", "--config", str(path), "--dry-run", "--project", "p", "--staging-bucket", "gs://hp-bucket",
             "--job-name", "hp_job"]
    # the file's runtime 2.11 image is retired: a dry run refuses it as the submission would, in one line
    retired = CliRunner().invoke(app, flags)
    assert retired.exit_code == 2 and retired.stdout == "", retired.stderr
    assert retired.stderr.splitlines()[-1].startswith("error: tf-gpu.2-11 is no longer served by Vertex AI")
    vertex = CliRunner().invoke(app, [*flags, "--runtime-version", "2.21", "--python-version", "3.11"])
    assert vertex.exit_code == 0, vertex.stderr
    assert vertex.stdout.startswith("POST https://europe-west4-aiplatform.googleapis.com/v1/projects/p/locations/"
                                    "europe-west4/hyperparameterTuningJobs\n")
    body = json.loads(vertex.stdout[vertex.stdout.index("{"):vertex.stdout.index("\n}\n") + 2])
    assert body["studySpec"] == STUDY and (body["maxTrialCount"], body["parallelTrialCount"],
                                           body["maxFailedTrialCount"]) == (6, 3, 2)
    assert body["trialJobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"] == 2
    assert "resumePreviousJobId census_hp_1: Vertex AI cannot continue a legacy study" in vertex.stderr
    assert "trainingInput.hyperparameters" not in vertex.stderr  # mapped, not dropped
    legacy = CliRunner().invoke(app, [*flags, "--api", "legacy"])
    assert legacy.exit_code == 0, legacy.stderr
    body = json.loads(legacy.stdout[legacy.stdout.index("{"):legacy.stdout.index("\n}\n") + 2])
    assert body["trainingInput"]["hyperparameters"] == yaml.safe_load(CUSTOM_GPU_TUNING.replace(
        "[False, True]", "[0, 1]"))["trainingInput"]["hyperparameters"]


JOB = "trainingInput:\n  scaleTier: BASIC\n  pythonModule: trainer.task\n  packageUris: [gs://bkt1/t-0.1.tar.gz]\n"


def test_a_resume_only_spec_is_written_for_legacy_and_refused_in_one_line_for_vertex(tmp_path):
    # ml.v1: resumePreviousJobId continues the previous job's study, and an unset goal defaults to MAXIMIZE
    text = JOB + "  hyperparameters:\n    maxTrials: 4\n    resumePreviousJobId: hp_job_1\n"
    legacy = _config(tmp_path, text, "--format", "legacy")
    assert legacy.exit_code == 0, legacy.stderr
    assert yaml.safe_load(legacy.stdout)["trainingInput"]["hyperparameters"] == {
        "maxTrials": 4, "maxParallelTrials": 1, "resumePreviousJobId": "hp_job_1"}
    assert validate("ml.v1", "GoogleCloudMlV1__Job", yaml.safe_load(legacy.stdout)) == []
    vertex = _config(tmp_path, text, "--format", "vertex")
    assert vertex.exit_code == 2 and vertex.stdout == "" and vertex.stderr.count("\n") == 1
    assert "resumePreviousJobId hp_job_1 with no params has no Vertex AI equivalent" in vertex.stderr
    # params without a goal and without a previous job: still refused
    missing = _config(tmp_path, JOB + "  hyperparameters:\n    maxTrials: 2\n" + PARAM.format(
        type="DOUBLE", fields="minValue: 0.1, maxValue: 0.2"))
    assert missing.exit_code == 2 and "hyperparameters.goal: received None" in missing.stderr


def test_equal_bounds_name_one_value_as_the_inclusive_bounds_say_and_it_is_said(tmp_path):
    # aiplatform.v1 DoubleValueSpec/IntegerValueSpec: minValue and maxValue are "Inclusive" bounds
    text = JOB + "  hyperparameters:\n    goal: MAXIMIZE\n    maxTrials: 2\n" + PARAM.format(
        type="DOUBLE", fields="minValue: 0.5, maxValue: 0.5")
    result = _config(tmp_path, text)
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(result.stdout)["studySpec"]["parameters"][0]["doubleValueSpec"] == {
        "minValue": 0.5, "maxValue": 0.5}
    assert ("warning: trainingInput.hyperparameters.params[0] (lr): minValue = maxValue = 0.5: every trial gets that "
            "value (the bounds are inclusive)") in result.stderr.splitlines()


def test_config_from_stdin_with_a_tuning_spec_reads_it_once(tmp_path):
    text = JOB + "  hyperparameters:\n    goal: MAXIMIZE\n    maxTrials: 2\n" + PARAM.format(
        type="DOUBLE", fields="minValue: 0.1, maxValue: 0.2")
    done = subprocess.run([sys.executable, "-m", "mlsubmit", "config", "--config", "/dev/stdin"], input=text,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["studySpec"]["parameters"][0]["parameterId"] == "lr"
