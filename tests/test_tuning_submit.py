"""Tuning jobs end to end with a tiny real trainer (numpy, reporting through the real cloudml-hypertune package):
`mlsubmit train --hptune-config` against the training-service emulator (a Vertex AI hyperparameterTuningJob of 4
trials, 2 at once), followed with `mlsubmit jobs` and the real gcloud; and `mlsubmit train --local` running the
trials here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlsubmit.images import carried
from support.hypertune_package import expected_mse, make_hp_project

pytest_plugins = ["support.training_emulator", "support.submit_cli"]

ROOT = Path(__file__).resolve().parents[1]
LEGACY_SPEC = """\
trainingInput:
  hyperparameters:
    goal: MINIMIZE
    hyperparameterMetricTag: mse
    maxTrials: 4
    maxParallelTrials: 2
    algorithm: GRID_SEARCH
    params:
      - parameterName: learning_rate
        type: DISCRETE
        discreteValues: [0.01, 0.1]
      - parameterName: optimizer
        type: CATEGORICAL
        categoricalValues: [sgd, momentum]
"""
VERTEX_SPEC = """\
studySpec:
  metrics: [{metricId: mse, goal: MINIMIZE}]
  algorithm: GRID_SEARCH
  parameters:
    - parameterId: learning_rate
      discreteValueSpec: {values: [0.01, 0.1]}
    - parameterId: optimizer
      categoricalValueSpec: {values: [sgd, momentum]}
maxTrialCount: 4
parallelTrialCount: 2
"""
POINTS = {(0.01, "sgd"), (0.01, "momentum"), (0.1, "sgd"), (0.1, "momentum")}
BEST = (0.1, "sgd")  # the lowest mse of the grid


@pytest.fixture(scope="module")
def hp_project(tmp_path_factory):
    return str(make_hp_project(tmp_path_factory.mktemp("hp-project") / "proj"))


def _peak(trials: list[dict]) -> int:
    events = sorted([(t["startTime"], 1) for t in trials] + [(t["endTime"], -1) for t in trials])
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    return peak


def test_train_creates_a_vertex_tuning_job_and_jobs_show_its_trials(cloud, hp_project, tmp_path):
    spec = tmp_path / "study.yaml"
    spec.write_text(VERTEX_SPEC)
    run = cloud.run("train", "--package-path", hp_project, "--python-module", "hptrainer.task", "--job-name",
                    "hp-study", "--hptune-config", str(spec), "--stream-logs")
    assert run.code == 0, run.stderr[-3000:]
    study_id = re.search(r"job (\d+) \(hp-study\) accepted", run.stderr).group(1)
    # the trials' logs streamed, each line named by its trial; then the results table with the best marked
    assert re.search(r"trial-\d/workerpool0-0 \| trial \d: lr 0\.1 -> mse", run.stdout)
    best_row = next(line for line in run.stdout.splitlines() if line.startswith("*"))
    assert re.search(r"\*\s+\d\s+SUCCEEDED\s+0\.1\s+sgd\s+0\.1898", best_row), run.stdout
    assert "4 of 4 trials, at most 2 at once; best: trial" in run.stdout

    studies = cloud.emulator.client("aiplatform", "v1").projects().locations().hyperparameterTuningJobs()
    study = studies.get(name=f"projects/{cloud.project}/locations/us-central1/hyperparameterTuningJobs/"
                             f"{study_id}").execute()
    assert study["state"] == "JOB_STATE_SUCCEEDED" and study["labels"]["mlsubmit_request_id"]
    assert _peak(study["trials"]) <= 2
    package = carried.program(study["trialJobSpec"]["workerPoolSpecs"][0])
    assert package["pythonModule"] == "hptrainer.task"
    # each trial is a CustomJob writing under <job dir>/<trial id> (its AIP_MODEL_DIR), as the service runs it
    trial = next(t for t in study["trials"] if t["id"] == "2")
    trial_job = cloud.emulator.vertex_jobs().get(name=trial["customJob"]).execute()
    base = study["trialJobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
    assert trial_job["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"] == f"{base}/2"
    not_tuning = cloud.run("jobs", "describe", trial["customJob"].rsplit("/", 1)[-1], "--plot", str(tmp_path / "x.png"))
    assert not_tuning.code == 2 and not_tuning.stderr.count("\n") == 1 and "is not a tuning job" in not_tuning.stderr
    assert not (tmp_path / "x.png").exists()

    described = cloud.json("jobs", "describe", study_id)
    tuning = described["tuning"]
    assert tuning["goal"] == "MINIMIZE" and tuning["metric"] == "mse"
    values = {(t["parameters"]["learning_rate"], t["parameters"]["optimizer"]): t for t in tuning["trials"]}
    assert set(values) == POINTS
    for (rate, optimizer), trial in values.items():
        assert trial["value"] == pytest.approx(expected_mse(rate, optimizer=optimizer))
        assert trial["step"] == 20 and trial["best"] == ((rate, optimizer) == BEST)
    assert tuning["best"] == values[BEST]["id"]

    plot = tmp_path / "trials.png"
    table = cloud.run("jobs", "describe", study_id, "--plot", str(plot))
    assert table.code == 0, table.stderr
    assert "Vertex AI hyperparameter tuning job" in table.stdout and "hptrainer.task" in table.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    listed = cloud.json("jobs", "list", "--tuning")
    assert [job["job_id"] for job in listed] == [study_id]
    logs = cloud.run("jobs", "logs", study_id)
    assert logs.code == 0, logs.stderr
    # every trial's lines, named by the trial, which its environment and TF_CONFIG's task.trial also name
    named = re.findall(r"trial-(\d)/workerpool0-0 \| trial (\d): lr .* \(TF_CONFIG task chief trial (\d)\)",
                       logs.stdout)
    assert sorted(named) == [(str(n),) * 3 for n in range(1, 5)], logs.stdout

    if shutil.which("gcloud") is None:
        return
    env = {**os.environ, "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true",
           "CLOUDSDK_CORE_PROJECT": cloud.project, "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
           "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM": cloud.emulator.endpoint + "/"}
    # the same study (2 trials of it) created by gcloud from a config file (the trials' job spec mlsubmit sent),
    # followed by mlsubmit
    config = tmp_path / "gcloud-study.yaml"
    config.write_text(json.dumps({"studySpec": study["studySpec"], "maxTrialCount": 2, "parallelTrialCount": 2,
                                  "trialJobSpec": study["trialJobSpec"]}))
    created = subprocess.run(["gcloud", "ai", "hp-tuning-jobs", "create", "--config", str(config), "--region",
                              "us-central1", "--display-name", "by-gcloud", "--format", "json"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    waited = cloud.run("jobs", "wait", "by-gcloud", "--output", "json")
    assert waited.code == 0, waited.stderr
    tuning = json.loads(waited.stdout)["tuning"]
    points = {(t["parameters"]["learning_rate"], t["parameters"]["optimizer"]) for t in tuning["trials"]}
    assert len(points) == 2 and points <= POINTS, tuning
    for trial in tuning["trials"]:
        assert trial["value"] == pytest.approx(expected_mse(trial["parameters"]["learning_rate"],
                                                            optimizer=trial["parameters"]["optimizer"]))
    assert tuning["trials"][int(tuning["best"]) - 1]["value"] == min(t["value"] for t in tuning["trials"])
    done = subprocess.run(["gcloud", "ai", "hp-tuning-jobs", "list", "--region", "us-central1", "--format", "json"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(j["displayName"] for j in json.loads(done.stdout)) == ["by-gcloud", "hp-study"]


def test_train_local_runs_the_trials_here_two_at_once_with_a_results_table(hp_project, tmp_path):
    spec = tmp_path / "hptuning_config.yaml"
    spec.write_text(LEGACY_SPEC)
    job_dir = tmp_path / "study"
    done = subprocess.run([sys.executable, "-m", "mlsubmit", "train", "--local", "--package-path", hp_project,
                           "--python-module", "hptrainer.task", "--config", str(spec), "--job-dir", str(job_dir)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "MLSUBMIT_HOME": str(tmp_path / "home"), "NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    seen = {}
    for trial in range(1, 5):
        # Vertex AI: nothing added to the trial's arguments; it writes under AIP_MODEL_DIR = <job dir>/<trial>/model/
        record = json.loads((job_dir / str(trial) / "model" / "trial.json").read_text())
        assert record["trial"] == str(trial) and record["task"] == {"type": "chief", "index": 0, "trial": str(trial)}
        seen[(record["args"]["learning_rate"], record["args"]["optimizer"])] = record["mse"]
    assert set(seen) == POINTS
    best_row = next(line for line in done.stdout.splitlines() if line.startswith("*"))
    assert re.search(r"\*\s+\d\s+SUCCEEDED\s+0\.1\s+sgd\s+0\.1898", best_row), done.stdout
    # never more than maxParallelTrials at once: a trial starts only when one of the two before it ended
    order = [line.split(":")[0] for line in done.stdout.splitlines() if re.match(r"trial \d(:| SUCCEEDED)", line)]
    running = peak = 0
    for event in order:
        running += -1 if event.endswith("SUCCEEDED") else 1
        peak = max(peak, running)
    assert peak == 2
    assert (job_dir / "trials.png").read_bytes()[:4] == b"\x89PNG"


def test_train_local_tuning_installs_the_requirements_the_job_would(tmp_path):
    # --requirements reach every trial here as they reach the cloud job (before #39 the study dropped them, and a
    # trainer importing a --requirements package failed here though it ran in the cloud); a resume-only spec, which
    # only legacy AI Platform could continue, is one line
    package = make_hp_project(tmp_path / "proj")
    (package / "task.py").write_text("import tabulate\n" + (package / "task.py").read_text())
    spec = tmp_path / "hptuning_config.yaml"
    spec.write_text(LEGACY_SPEC.replace("maxTrials: 4", "maxTrials: 1").replace("maxParallelTrials: 2",
                                                                               "maxParallelTrials: 1"))
    env = {**os.environ, "MLSUBMIT_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    command = [sys.executable, "-m", "mlsubmit", "train", "--local", "--package-path", str(package),
               "--python-module", "hptrainer.task", "--job-dir", str(tmp_path / "study")]
    done = subprocess.run([*command, "--config", str(spec), "--requirements", "tabulate"], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert json.loads((tmp_path / "study" / "1" / "model" / "trial.json").read_text())["trial"] == "1"
    spec.write_text("trainingInput:\n  hyperparameters:\n    maxTrials: 2\n    resumePreviousJobId: hp_1\n")
    resume = subprocess.run([*command, "--config", str(spec)], capture_output=True, text=True, timeout=120,
                            cwd=ROOT, env=env)
    assert resume.returncode == 2 and resume.stderr.count("\n") == 1, resume.stderr
    assert "resumePreviousJobId: received 'hp_1'" in resume.stderr


def test_a_legacy_tuning_job_runs_its_trials_driven_by_mlsubmit_and_by_gcloud(cloud, hp_project, tmp_path):
    spec = tmp_path / "hptuning_config.yaml"
    spec.write_text(LEGACY_SPEC)
    run = cloud.run("train", "--api", "legacy", "--package-path", hp_project, "--python-module", "hptrainer.task",
                    "--config", str(spec), "--job-name", "legacy_hp", "--stream-logs")
    assert run.code == 0, run.stderr[-3000:]
    # four trials ran, each told its trial in TF_CONFIG (the chief named master, as legacy AI Platform named it);
    # each line is named by the trial that wrote it (Cloud Logging's ml.googleapis.com/trial_id label)
    assert sorted(re.findall(r"trial-(\d)/master-replica-0 +\| trial (\d): lr .* \(TF_CONFIG task master trial "
                             r"(\d)\)", run.stdout)) == [(str(n), str(n), str(n)) for n in range(1, 5)], run.stdout
    assert re.search(r"\*\s+\d\s+SUCCEEDED\s+0\.1\s+sgd\s+0\.1898", run.stdout), run.stdout
    job = cloud.emulator.legacy_jobs().get(name=f"projects/{cloud.project}/jobs/legacy_hp").execute()
    output = job["trainingOutput"]
    assert job["state"] == "SUCCEEDED" and output["isHyperparameterTuningJob"] is True
    assert output["completedTrialCount"] == "4" and output["hyperparameterMetricTag"] == "mse"
    trials = {(t["hyperparameters"]["learning_rate"], t["hyperparameters"]["optimizer"]): t for t in output["trials"]}
    assert set(trials) == {(str(rate), optimizer) for rate, optimizer in POINTS}
    for (rate, optimizer), trial in trials.items():
        assert trial["state"] == "SUCCEEDED" and trial["finalMetric"]["trainingStep"] == "20"
        assert trial["finalMetric"]["objectiveValue"] == pytest.approx(expected_mse(float(rate),
                                                                                    optimizer=optimizer))
    assert _peak(output["trials"]) <= 2
    described = cloud.json("jobs", "describe", "legacy_hp", "--api", "legacy")
    assert described["tuning"]["trials"][int(described["tuning"]["best"]) - 1]["parameters"] == {
        "learning_rate": 0.1, "optimizer": "sgd"}

    if shutil.which("gcloud") is None:
        return
    env = {**os.environ, "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true",
           "CLOUDSDK_CORE_PROJECT": cloud.project, "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
           "CLOUDSDK_API_ENDPOINT_OVERRIDES_ML": cloud.emulator.endpoint + "/"}
    spec.write_text(LEGACY_SPEC.replace("maxTrials: 4", "maxTrials: 2"))  # 2 trials are enough to follow
    submitted = subprocess.run(
        ["gcloud", "ai-platform", "jobs", "submit", "training", "gcloud_hp", "--config", str(spec), "--region",
         "us-central1", "--module-name", "hptrainer.task", "--packages", job["trainingInput"]["packageUris"][0],
         "--runtime-version", "2.11", "--python-version", "3.7"],
        env=env, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    cloud.emulator.wait(cloud.emulator.legacy_jobs().get(name=f"projects/{cloud.project}/jobs/gcloud_hp").execute)
    described = subprocess.run(["gcloud", "ai-platform", "jobs", "describe", "gcloud_hp", "--format", "json"],
                               env=env, capture_output=True, text=True, timeout=120)
    assert described.returncode == 0, described.stderr[-3000:]
    done = json.loads(described.stdout)
    assert done["state"] == "SUCCEEDED" and len(done["trainingOutput"]["trials"]) == 2
    assert done["trainingInput"]["hyperparameters"]["maxParallelTrials"] == 2


def test_a_contradictory_legacy_tuning_spec_is_a_400_naming_the_parameter_field(cloud):
    body = {"jobId": "bad_hp", "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "pythonModule": "hptrainer.task",
        "packageUris": ["gs://nowhere/hptrainer-0.1.0.tar.gz"], "runtimeVersion": "2.11", "pythonVersion": "3.7",
        "hyperparameters": {"goal": "MAXIMIZE", "maxTrials": 2, "params": [
            {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.5, "maxValue": 0.1}]}}}
    status, answer = cloud.emulator.raw("POST", f"/v1/projects/{cloud.project}/jobs", json.dumps(body).encode())
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT"
    violation = answer["error"]["details"][0]["fieldViolations"][0]
    assert violation["field"] == "trainingInput.hyperparameters.params[0].maxValue"
    assert "expected a value at or above minValue 0.5" in violation["description"]
    assert cloud.legacy_jobs() == []


def test_a_dropped_tuning_create_response_leaves_exactly_one_study(cloud, hp_project, tmp_path):
    spec = tmp_path / "study.yaml"
    spec.write_text(VERTEX_SPEC.replace("maxTrialCount: 4", "maxTrialCount: 2"))
    cloud.emulator.arm_faults(drop_create_response=1, path="hyperparameterTuningJobs")
    run = cloud.run("train", "--async", "--package-path", hp_project, "--python-module", "hptrainer.task",
                    "--skip-preflight", "--job-name", "dropped-study", "--hptune-config", str(spec))
    assert run.code == 0, run.stderr
    studies = cloud.emulator.client("aiplatform", "v1").projects().locations().hyperparameterTuningJobs()
    found = studies.list(parent=f"projects/{cloud.project}/locations/us-central1").execute()
    assert [s["name"].rsplit("/", 1)[-1] for s in found["hyperparameterTuningJobs"]] == [run.stdout.strip()]
    assert any("drop_create_response" in fired for fired in cloud.emulator.admin("GET", "faults")["fired"])
    cloud.emulator.wait(studies.get(name=found["hyperparameterTuningJobs"][0]["name"]).execute)


BUNDLED_SPEC = """\
studySpec:
  metrics: [{metricId: val_accuracy, goal: MAXIMIZE}]
  algorithm: GRID_SEARCH
  parameters:
    - parameterId: learning-rate
      discreteValueSpec: {values: [0.001, 0.01]}
    - parameterId: optimizer
      categoricalValueSpec: {values: [adam, sgd]}
maxTrialCount: 1
parallelTrialCount: 1
"""
GRID = {(0.001, "adam"), (0.001, "sgd"), (0.01, "adam"), (0.01, "sgd")}


def test_the_bundled_trainer_is_tunable_out_of_the_box(cloud, tmp_path):
    """The project's own trainer reports every epoch's metrics through cloudml-hypertune: a study of 1 trial of a
    grid of 4 (each trial a TensorFlow process; trials on distinct points of the grid, at most 2 at once, are the tiny
    trainer's test: test_train_creates_a_vertex_tuning_job_and_jobs_show_its_trials), its flags as `--name=value`,
    created by mlsubmit; the trial's value is what it wrote."""
    spec = tmp_path / "study.yaml"
    spec.write_text(BUNDLED_SPEC)
    run = cloud.run("train", "--package-path", str(ROOT / "trainer"), "--job-name", "bundled-study",
                    "--hptune-config", str(spec), "--skip-preflight", "--wait", "--",
                    "--data", "synthetic:8x8x1:4:256", "--epochs", "2", "--steps-per-epoch", "2", "--batch-size", "16")
    assert run.code == 0, run.stderr[-3000:]
    study_id = re.search(r"job (\d+) \(bundled-study\) accepted", run.stderr).group(1)
    tuning = cloud.json("jobs", "describe", study_id)["tuning"]
    assert tuning["metric"] == "val_accuracy" and len(tuning["trials"]) == 1
    (trial,) = tuning["trials"]
    assert (trial["parameters"]["learning-rate"], trial["parameters"]["optimizer"]) in GRID, trial
    assert trial["state"] == "SUCCEEDED" and trial["step"] == 2 and 0.0 <= trial["value"] <= 1.0
