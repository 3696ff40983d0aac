"""#31 capacity: waiting for GPUs (FLEX_START), reservations, retry settings, and failover to alternatives when the
service has no quota or no machines, as a user meets them against the training-service emulator told to refuse by
quota in one region and to have no machines in another; gcloud takes the same settings from `mlsubmit config`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app
from mlsubmit.jobspec import discovery, requests
from mlsubmit.jobspec.spec_input import RoleDraft, SpecDraft, build_spec

pytest_plugins = ["support.training_emulator", "support.submit_cli"]
L4_JOB = ("--machine-type", "g2-standard-8")  # one L4: FLEX_START serves it, and it is offered in every US region
TINY = ("--python-module", "tinypkg.task", "--skip-preflight")


def _config(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, ["config", *args], env={"NO_COLOR": "1", **(env or {})})


def test_capacity_settings_reach_the_vertex_body_and_the_discovery_schema_accepts_them():
    spec = build_spec(SpecDraft(tier="CUSTOM", chief=RoleDraft(machine_type="a3-highgpu-8g"),
                                worker=RoleDraft(count=1), flex_start=True, max_wait="90m",
                                reservation=None, restart_job_on_worker_restart=True, job_name="flex"))
    body = requests.vertex_custom_job(spec)
    assert body["jobSpec"]["scheduling"] == {"strategy": "FLEX_START", "maxWaitDuration": "5400s",
                                             "restartJobOnWorkerRestart": True}
    assert discovery.validate("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", body) == []


def test_config_writes_capacity_settings_gcloud_style_and_reads_them_back(tmp_path):
    out = tmp_path / "job.yaml"
    made = _config(*L4_JOB, "--workers", "2", "--flex-start", "--max-wait-duration", "2h", "--reservation-affinity",
                   "reservation-affinity-type=SPECIFIC_RESERVATION,key=compute.googleapis.com/reservation-name,"
                   "values=projects/p/zones/us-central1-a/reservations/l4s", "--disable-retries", "-o", str(out))
    assert made.exit_code == 0, made.output
    import yaml

    document = yaml.safe_load(out.read_text())
    assert document["scheduling"] == {"strategy": "FLEX_START", "maxWaitDuration": "7200s", "disableRetries": True}
    affinity = {"reservationAffinityType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
                "values": ["projects/p/zones/us-central1-a/reservations/l4s"]}
    assert [pool["machineSpec"].get("reservationAffinity") for pool in document["workerPoolSpecs"]] == [affinity] * 2
    again = _config("--config", str(out), "-o", str(tmp_path / "again.yaml"))  # read back: nothing lost or noted
    assert again.exit_code == 0 and "not mapped" not in again.output, again.output
    assert yaml.safe_load((tmp_path / "again.yaml").read_text()) == document



def test_a_tuning_jobs_trials_get_the_capacity_settings_and_its_body_validates(tmp_path):
    """gcloud ai hp-tuning-jobs create --config takes the HyperparameterTuningJob mlsubmit writes: each trial waits
    for its L4 (FLEX_START) and is not retried, and the body is one the discovery schema accepts."""
    out = tmp_path / "study.yaml"
    made = _config("--hptune-config", str(Path(__file__).parents[1] / "configs/inputs/hptuning_config.yaml"), *L4_JOB, "--flex-start",
                   "--max-wait-duration", "2h", "--disable-retries", "--format", "vertex", "-o", str(out))
    assert made.exit_code == 0, made.output
    import yaml

    study = yaml.safe_load(out.read_text())
    assert study["trialJobSpec"]["scheduling"] == {"strategy": "FLEX_START", "maxWaitDuration": "7200s",
                                                   "disableRetries": True}
    assert discovery.validate("aiplatform.v1", "GoogleCloudAiplatformV1HyperparameterTuningJob",
                              {"displayName": "study", **study}) == []

BAD = [
    (("--gpus", "4", "--flex-start"), "invalid value for --flex-start: Vertex AI's FLEX_START (Dynamic Workload "
     "Scheduler) serves L4, A100, H100, H200 and B200 GPUs; received n1-standard-16 + 4 NVIDIA_TESLA_T4"),
    ((*L4_JOB, "--max-wait-duration", "1h"), "invalid value for --max-wait-duration: received 3600s; a wait for "
     "capacity needs the FLEX_START strategy"),
    ((*L4_JOB, "--flex-start", "--spot"), "invalid options: --flex-start and --spot are two scheduling strategies"),
    ((*L4_JOB, "--workers", "1", "--worker-machine-type", "n1-standard-4", "--flex-start"),
     "FLEX_START needs the same machine configuration for every worker pool; received chief g2-standard-8 + 1 "
     "NVIDIA_L4, worker n1-standard-4"),
    ((*L4_JOB, "--flex-start", "--max-runtime", "8d"), "invalid value for --max-runtime: received '691200s'; "
     "expected at most 604800s (7 days) with FLEX_START"),
    ((*L4_JOB, "--flex-start", "--max-wait-duration", "soon"), "invalid value for --max-wait-duration: received "
     "'soon'"),
    (("--disable-retries", "--restart-job-on-worker-restart"), "invalid options: --disable-retries overrides "
     "--restart-job-on-worker-restart to false"),
    (("--reservation-affinity", "reservation-affinity-type=SPECIFIC_RESERVATION"), "expected "
     "key=compute.googleapis.com/reservation-name and values=RESERVATION with SPECIFIC_RESERVATION"),
    (("--reservation", "Bad_Name"), "invalid value for --reservation: received 'Bad_Name'"),
    (("--reservation", "r1", "--reservation-affinity", "reservation-affinity-type=ANY_RESERVATION"),
     "received both --reservation-affinity and --reservation"),
    (("--format", "legacy", "--disable-retries"), "invalid option for legacy AI Platform: --disable-retries"),
    # empty values are refused, never read as "no reservation"; a reservation in another region's zone too
    (("--reservation", ""), "invalid value for --reservation: received ''; expected a reservation name or "
     "projects/PROJECT/zones/ZONE/reservations/NAME; drop --reservation to draw from no reservation"),
    (("--reservation-affinity", ""), "invalid value for --reservation-affinity: received ''; expected "
     "reservation-affinity-type=TYPE[,key=KEY,values=V1;V2] as gcloud takes it"),
    ((*L4_JOB, "--reservation", "projects/p/zones/europe-west4-a/reservations/l4s"), "invalid value for "
     "--reservation: received 'projects/p/zones/europe-west4-a/reservations/l4s', a reservation in europe-west4-a; "
     "expected one in a zone of us-central1, the job's region (a job draws only from reservations in its own "
     "region); use --region europe-west4, or a reservation in us-central1"),
    ((*L4_JOB, "--region", "us-east4", "--reservation-affinity", "reservation-affinity-type=SPECIFIC_RESERVATION,"
      "key=compute.googleapis.com/reservation-name,values=projects/p/zones/us-central1-a/reservations/l4s"),
     "invalid value for --reservation-affinity: received 'projects/p/zones/us-central1-a/reservations/l4s', a "
     "reservation in us-central1-a; expected one in a zone of us-east4"),
    # FLEX_START and reservations where the target has no such thing
    ((*L4_JOB, "--flex-start", "--format", "kubernetes", "--job-name", "j"), "invalid option for --format "
     "kubernetes: --flex-start (the Kubernetes objects carry no FLEX_START, reservation or retry settings: on GKE "
     "those belong to the node pool); drop --flex-start, or use --format vertex"),
    ((*L4_JOB, "--reservation", "l4s", "--format", "kubernetes", "--job-name", "j"), "invalid option for --format "
     "kubernetes: --reservation ("),
]


@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_capacity_settings_are_one_line_exit_2_and_write_nothing(args, message, tmp_path):
    out = tmp_path / "job.yaml"
    result = _config(*args, "-o", str(out))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert not out.exists()


@pytest.mark.parametrize("target, flag", [("kubernetes", "--flex-start"), ("spark://127.0.0.1:7077", "--reservation")])
def test_a_cluster_of_your_own_refuses_vertex_scheduling_naming_the_target(target, flag, tmp_path):
    """Not "with --local": the refusal names where the job was going."""
    given = [flag] if flag == "--flex-start" else [flag, "l4s"]
    result = CliRunner().invoke(app, ["train", "--target", target, *L4_JOB, *given, "--job-name", "j"],
                                env={"NO_COLOR": "1", "MLSUBMIT_HOME": str(tmp_path)})
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"error: invalid option with --target {target}: {flag} (a cluster of your "
                                          "own runs on the machines it has: no FLEX_START, reservation or retry "
                                          f"settings); drop {flag}"]


def _env(tmp_path) -> dict:
    return {**os.environ, "MLSUBMIT_PROJECT": "p", "MLSUBMIT_REGION": "us-central1", "NO_COLOR": "1",
            "MLSUBMIT_STAGING_BUCKET": "gs://capacity-bucket", "MLSUBMIT_HOME": str(tmp_path / "home")}


def _train(tmp_path, task_project, *args: str) -> subprocess.CompletedProcess:
    import sys

    return subprocess.run([sys.executable, "-m", "mlsubmit", "train", "--package-path", task_project, *TINY, *args],
                          capture_output=True, text=True, timeout=120, env=_env(tmp_path))


BAD_ALTERNATIVES = [
    (("--alternative", "region=us-central1"), "(this one is the job itself)"),
    (("--alternative", "region=us-east4", "--alternative", "region=us-east4"), "(this one is an earlier "
     "alternative)"),
    (("--alternative", "gpus=3"), "no machine carries 3 NVIDIA_L4; counts offered: 1, 2, 4, 8"),
    (("--alternative", "machine-type=a3-megagpu-8g,region=asia-east1"), "NVIDIA_H100_MEGA_80GB (chief) is not "
     "offered in asia-east1"),
    (("--alternative", "zone=us-east4-a"), "expected KEY=VALUE pairs, each key once: region, machine-type, gpu-type, "
     "gpus"),
    (("--reservation", "l4s", "--alternative", "region=us-east4"), "another region cannot use it"),
    (("--cheapest-first",), "--cheapest-first orders the job's --alternative choices; received none"),
    (("--api", "legacy", "--alternative", "region=us-east4"), "invalid option for legacy AI Platform: --alternative "
     "region=us-east4 (legacy AI Platform has no failover: mlsubmit fails over between Vertex AI regions and machines); "
     "drop --alternative, or use --api vertex"),
]


@pytest.mark.parametrize("args,message", BAD_ALTERNATIVES, ids=[" ".join(a) for a, _ in BAD_ALTERNATIVES])
def test_an_alternative_that_is_the_job_or_cannot_run_is_one_line_and_nothing_is_sent(args, message, tmp_path,
                                                                                       task_project):
    done = _train(tmp_path, task_project, *L4_JOB, *args, "--dry-run")
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, done.stderr


def test_a_failover_dry_run_prices_each_alternative_in_the_order_tried_and_shows_every_body(tmp_path, task_project):
    done = _train(tmp_path, task_project, "--gpus", "1", "--alternative", "gpu-type=NVIDIA_TESLA_V100",
                  "--alternative", "machine-type=a2-highgpu-1g", "--alternative", "region=asia-northeast1",
                  "--cheapest-first", "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    start = lines.index("failover: 3 alternative(s) if the job gets no capacity, tried in this order:")
    assert lines[start + 1:start + 5] == [  # the cheapest first; an unknown price last
        "  the job: us-central1: n1-standard-8 + 1 NVIDIA_TESLA_T4 ($0.8395/h)",
        "  alternative 1: asia-northeast1: n1-standard-8 + 1 NVIDIA_TESLA_T4 ($0.9861/h)",
        "  alternative 2: us-central1: n1-standard-8 + 1 NVIDIA_TESLA_V100 ($3.2890/h)",
        "  alternative 3: us-central1: a2-highgpu-1g + 1 NVIDIA_TESLA_A100 (price unknown)"]
    decoder = json.JSONDecoder()
    bodies = [decoder.raw_decode(part.split("\n", 1)[1])[0] for part in done.stdout.split("POST https://")[1:]]
    assert [(b["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"],
             b["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"]) for b in bodies] == [
        ("n1-standard-8", "NVIDIA_TESLA_T4"), ("n1-standard-8", "NVIDIA_TESLA_T4"),
        ("n1-standard-8", "NVIDIA_TESLA_V100"), ("a2-highgpu-1g", "NVIDIA_TESLA_A100")]
    assert len({b["displayName"] for b in bodies}) == 1  # one job name; a request id each
    assert len({b["labels"]["mlsubmit_request_id"] for b in bodies}) == 4
    assert done.stdout.count("/locations/asia-northeast1/customJobs") == 1


# -- against the emulator ------------------------------------------------------------------------------------------
def _jobs(cloud, region: str) -> list[dict]:
    answer = cloud.emulator.vertex_jobs().list(parent=f"projects/{cloud.project}/locations/{region}").execute()
    return answer.get("customJobs", [])


@pytest.fixture
def scarce(cloud):
    """The emulator without quota for L4s in us-central1 and without L4 machines in us-east4 (for this test)."""
    cloud.emulator.admin("POST", "capacity", {"quota": ["us-central1/NVIDIA_L4"], "stockout": ["us-east4/NVIDIA_L4"]})
    yield cloud
    cloud.emulator.admin("DELETE", "capacity")


@pytest.mark.parametrize("rules, says", [
    ({"quota": ["mars-1"]}, "Invalid value at 'quota[0]': quota[0]: received 'mars-1'; expected a region of "
     "mlsubmit's table ("),
    ({"quota": ["us-central1/NVIDIA_L4"], "stockout": ["us-east4", "us-east4/NVIDIA_TESLA_T5"]},
     "Invalid value at 'stockout[1]': stockout[1]: received 'us-east4/NVIDIA_TESLA_T5'; expected an accelerator of "
     "the aiplatform v1 enum (e.g. NVIDIA_L4); did you mean 'NVIDIA_TESLA_T4'?"),
])
def test_a_capacity_rule_that_could_never_apply_is_a_400_and_adds_nothing(rules, says, cloud):
    status, answer = cloud.emulator.raw("POST", "/emulator/v1/capacity", json.dumps(rules).encode())
    assert status == 400 and answer["error"]["message"].startswith(says), answer
    assert cloud.emulator.admin("GET", "capacity") == {"quota": [], "stockout": []}  # all or nothing


def test_failover_goes_past_a_quota_refusal_and_a_stockout_and_succeeds_in_the_third_region(scarce, task_project):
    cloud = scarce
    args = ("train", "--package-path", task_project, *TINY, *L4_JOB, "--job-name", "failover",
            "--alternative", "region=us-east4", "--alternative", "region=us-west1", "--", "--lines", "2")
    run = cloud.run(*args)
    assert run.code == 0, run.stderr[-3000:]
    said = [line for line in run.stderr.splitlines() if line.startswith("failover: ")]
    assert said[1].startswith("failover: us-central1: g2-standard-8 + 1 NVIDIA_L4 (") and \
        "refused for quota (The following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_" \
        "nvidia_l4_gpus); submitting alternative 1: us-east4: " in said[1], said
    assert "FAILED before it ran, for lack of capacity (Resources are insufficient in region: us-east4. Please try " \
           "a different region.); submitting alternative 2: us-west1: g2-standard-8" in said[2], said
    assert len(said) == 3  # the plan, then one line per step
    assert _jobs(cloud, "us-central1") == []  # refused: nothing made
    (east,), (west,) = _jobs(cloud, "us-east4"), _jobs(cloud, "us-west1")
    assert east["state"] == "JOB_STATE_FAILED" and east["error"]["code"] == 8 and "startTime" not in east
    assert west["state"] == "JOB_STATE_SUCCEEDED"
    assert east["endTime"] <= west["createTime"]  # one job live at a time
    assert east["displayName"] == west["displayName"] == "failover"

    again = cloud.run(*args)  # the same command again: it finds both jobs and makes none
    assert again.code == 0, again.stderr[-3000:]
    assert again.stderr.count("this same submission already made job") == 2, again.stderr
    assert len(_jobs(cloud, "us-east4")) == len(_jobs(cloud, "us-west1")) == 1


def test_a_failure_that_is_not_about_capacity_is_never_retried_elsewhere(scarce, task_project):
    cloud = scarce
    run = cloud.run("train", "--package-path", task_project, *TINY, *L4_JOB, "--region", "us-west1", "--job-name",
                    "own_bug", "--alternative", "region=us-west4", "--", "--fail")
    assert run.code == 1 and "boom in chief-0" in run.stderr, run.stderr[-3000:]
    assert "failover: job" not in run.stderr
    assert _jobs(cloud, "us-west4") == [] and len(_jobs(cloud, "us-west1")) == 1


def test_a_flex_start_job_waits_for_capacity_then_runs_and_one_whose_wait_runs_out_fails(cloud, task_project):
    cloud.emulator.admin("POST", "capacity", {"stockout": ["us-central1/NVIDIA_L4"]})
    try:
        started = cloud.run("train", "--package-path", task_project, *TINY, *L4_JOB, "--flex-start", "--job-name",
                            "waits", "--async")
        assert started.code == 0, started.stderr
        job_id = started.stdout.strip()
        deadline = time.monotonic() + 60
        while not any("Waiting for resources in us-central1" in entry.get("textPayload", "")
                      for entry in cloud.emulator.log_lines(job_id, cloud.project)):  # (no CLI process per poll)
            assert time.monotonic() < deadline, "the job never said it waits"
            time.sleep(0.1)
        described = cloud.run("jobs", "describe", job_id)
        assert "waiting for capacity (FLEX_START: Dynamic Workload Scheduler, up to 24h (the service's default))" \
            in " ".join(described.stdout.split()), described.stdout
        assert cloud.json("jobs", "describe", job_id)["capacity"]["waiting"] is True
        short = cloud.run("train", "--package-path", task_project, *TINY, *L4_JOB, "--flex-start",
                          "--max-wait-duration", "1s", "--job-name", "gives_up")
        assert short.code == 1 and "could not be provisioned in us-central1 within the maximum wait (1s" in \
            short.stderr, short.stderr[-2000:]
    finally:
        cloud.emulator.admin("DELETE", "capacity")  # capacity comes back: the waiting job runs
    waited = cloud.run("jobs", "wait", job_id)
    assert waited.code == 0, waited.stderr[-2000:]
    final = cloud.json("jobs", "describe", job_id)
    assert final["state"] == "SUCCEEDED" and final["capacity"]["waiting"] is False


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
def test_gcloud_creates_a_flex_start_job_from_mlsubmit_config_and_the_emulator_refuses_what_the_service_does(
        cloud, tmp_path):
    from test_byo_trainers import _gcloud

    config = _config(*L4_JOB, "--flex-start", "--max-wait-duration", "30m", "-o", str(tmp_path / "flex.yaml"))
    assert config.exit_code == 0, config.output
    done = _gcloud(cloud, tmp_path, "ai", "custom-jobs", "create", "--region", "us-central1", "--display-name",
                   "flex-gcloud", "--config", str(tmp_path / "flex.yaml"), "--format=json")
    assert done.returncode == 0, done.stderr
    created = json.loads(done.stdout)
    assert created["jobSpec"]["scheduling"] == {"strategy": "FLEX_START", "maxWaitDuration": "1800s"}
    (tmp_path / "t4.yaml").write_text((tmp_path / "flex.yaml").read_text().replace(
        "g2-standard-8", "n1-standard-8").replace("NVIDIA_L4", "NVIDIA_TESLA_T4"))
    refused = _gcloud(cloud, tmp_path, "ai", "custom-jobs", "create", "--region", "us-central1", "--display-name",
                      "flex-t4", "--config", str(tmp_path / "t4.yaml"))
    assert refused.returncode != 0 and "FLEX_START (Dynamic Workload Scheduler) serves L4, A100, H100, H200 and " \
        "B200 GPUs" in refused.stderr, refused.stderr


def test_an_h200_job_and_a_tpu_v5e_job_run_in_the_emulator(cloud, task_project):
    """The new machines end to end: an a3-ultragpu-8g job (8 H200) in us-central1 and a ct5lp-hightpu-4t job (TPU
    v5e, 2x2) in us-west1 on the public TensorFlow image, each accepted and run (on this machine's CPU)."""
    h200 = cloud.run("train", "--package-path", task_project, *TINY, "--machine-type", "a3-ultragpu-8g",
                     "--job-name", "h200", "--", "--lines", "1")
    assert h200.code == 0, h200.stderr[-3000:]
    v5e = cloud.run("train", "--package-path", task_project, *TINY, "--worker-machine-type", "ct5lp-hightpu-4t",
                    "--workers", "1", "--region", "us-west1", "--executor-image", "tensorflow/tensorflow:2.21.0",
                    "--job-name", "v5e", "--", "--lines", "1")
    assert v5e.code == 0, v5e.stderr[-3000:]
    (h200_job,) = [job for job in _jobs(cloud, "us-central1") if job["displayName"] == "h200"]
    (v5e_job,) = _jobs(cloud, "us-west1")
    assert h200_job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] == {
        "machineType": "a3-ultragpu-8g", "acceleratorType": "NVIDIA_H200_141GB", "acceleratorCount": 8}
    assert v5e_job["jobSpec"]["workerPoolSpecs"] == [v5e_job["jobSpec"]["workerPoolSpecs"][0]]  # the TPU VM only
    assert v5e_job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] == {"machineType": "ct5lp-hightpu-4t",
                                                                       "tpuTopology": "2x2"}
    assert {h200_job["state"], v5e_job["state"]} == {"JOB_STATE_SUCCEEDED"}


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
@pytest.mark.parametrize("region,args,machine_spec", [
    ("us-central1", ("--machine-type", "a3-ultragpu-8g"),
     {"machineType": "a3-ultragpu-8g", "acceleratorType": "NVIDIA_H200_141GB", "acceleratorCount": 8}),
    ("us-central1", ("--machine-type", "a4-highgpu-8g", "--flex-start"),
     {"machineType": "a4-highgpu-8g", "acceleratorType": "NVIDIA_B200", "acceleratorCount": 8}),
    ("us-west1", ("--worker-machine-type", "ct5lp-hightpu-4t", "--workers", "1", "--executor-image",
                  "tensorflow/tensorflow:2.21.0"), {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "2x2"}),
], ids=["h200", "b200-flex-start", "tpu-v5e"])
def test_gcloud_creates_the_new_machines_from_mlsubmit_config(region, args, machine_spec, cloud, tmp_path,
                                                             task_package):
    from test_byo_trainers import _gcloud

    config = _config(*args, "--region", region, "--package-uris", task_package[1], "--python-module", "tinypkg.task",
                     "-o", str(tmp_path / "job.yaml"))
    assert config.exit_code == 0, config.output
    done = _gcloud(cloud, tmp_path, "ai", "custom-jobs", "create", "--region", region, "--display-name", "new-hw",
                   "--config", str(tmp_path / "job.yaml"), "--format=json")
    assert done.returncode == 0, done.stderr
    created = json.loads(done.stdout)
    assert created["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] == machine_spec
    assert created["name"].startswith(f"projects/{cloud.project}/locations/{region}/customJobs/")
