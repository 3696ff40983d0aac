"""Jobs run for real by a `mlsubmit emulator` subprocess, driven through google-api-python-client: the
environment each service sets, logs, failure, cancel, queueing and a restart with --data-dir.

The program is a tiny package (tests/support/training_emulator.TASK_PY) so no TensorFlow is paid for here;
test_submit_train.py runs the real trainer (Vertex AI and legacy, through the CLI)."""

from __future__ import annotations

import json
import signal
import time

import pytest
from support.training_emulator import TrainingEmulator

from mlsubmit.jobspec.requests import legacy_job, vertex_custom_job
from mlsubmit.jobspec.spec import JobSpec, Pool
from mlsubmit.images import carried

PROJECT, REGION = "emu-project", "us-central1"
PARENT = f"projects/{PROJECT}/locations/{REGION}"

pytest_plugins = ["support.training_emulator"]  # fixtures: training_emulator, task_package, emulator_home


def spec(uri: str, bucket: str, *args: str, workers: int = 0, name: str = "emu-job", **changes) -> JobSpec:
    return JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-4"),
                   worker=Pool("worker", "n1-standard-4", workers) if workers else None, job_name=name,
                   job_dir=f"gs://{bucket}/out/{name}", package_uris=(uri,), python_module="tinypkg.task",
                   args=args, **changes)


def create_vertex(emulator, body: dict) -> dict:
    return emulator.vertex_jobs().create(parent=PARENT, body=body).execute()


def run_vertex(emulator, body: dict) -> dict:
    job = create_vertex(emulator, body)
    return emulator.wait(emulator.vertex_jobs().get(name=job["name"]).execute)


def texts(entries: list[dict], task: str) -> list[str]:
    return [e["textPayload"] for e in entries if e["resource"]["labels"]["task_name"] == task]


def env_of(entries: list[dict], task: str) -> dict:
    line = next(t for t in texts(entries, task) if t.startswith("ENV "))
    return json.loads(line[4:])


def test_vertex_cluster_job_gets_chief_cluster_spec_and_aip_dirs(training_emulator, task_package):
    bucket, uri = task_package
    body = vertex_custom_job(spec(uri, bucket, "--lines", "40", workers=1, name="vertex-env"))
    pool = body["jobSpec"]["workerPoolSpecs"][0]  # a pythonPackageSpec or the package on a public image
    carried.set_program(pool, {**carried.program(pool), "env": [{"name": "GREETING", "value": "hi"}]})
    job = run_vertex(training_emulator, body)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    assert job["createTime"] <= job["startTime"] <= job["endTime"]
    job_id = job["name"].rsplit("/", 1)[-1]
    entries = training_emulator.log_lines(job_id, PROJECT, page_size=7)  # several pages
    chief, worker = env_of(entries, "workerpool0-0"), env_of(entries, "workerpool1-0")
    tf_config = json.loads(chief["TF_CONFIG"])
    assert set(tf_config["cluster"]) == {"chief", "worker"}
    assert (tf_config["task"]["type"], tf_config["task"]["index"]) == ("chief", 0)
    assert json.loads(worker["TF_CONFIG"])["task"]["type"] == "worker"
    cluster_spec = json.loads(chief["CLUSTER_SPEC"])
    assert set(cluster_spec["cluster"]) == {"workerpool0", "workerpool1"}
    assert cluster_spec["task"]["type"] == "workerpool0"
    base = f"gs://{bucket}/out/vertex-env"
    assert (chief["AIP_MODEL_DIR"], chief["AIP_CHECKPOINT_DIR"], chief["AIP_TENSORBOARD_LOG_DIR"]) == (
        f"{base}/model/", f"{base}/checkpoints/", f"{base}/logs/")
    assert chief["CLOUD_ML_JOB_ID"] == job_id and chief["GREETING"] == "hi" and worker["GREETING"] is None
    assert chief["STORAGE_EMULATOR_HOST"].startswith("http://127.0.0.1:")
    # logs: in order, each line once, with task names; ids and timestamps increase
    lines = texts(entries, "workerpool0-0")
    assert [t for t in lines if t.startswith("line ")] == [f"line {i} of chief-0" for i in range(40)]
    assert [t for t in texts(entries, "workerpool1-0") if t.startswith("line ")] == [
        f"line {i} of worker-0" for i in range(40)]
    ids = [e["insertId"] for e in entries]
    assert len(ids) == len(set(ids)) and ids == sorted(ids)
    assert [e["timestamp"] for e in entries] == sorted(e["timestamp"] for e in entries)
    assert all(e["labels"]["ml.googleapis.com/task_name"] == e["resource"]["labels"]["task_name"] for e in entries)
    assert texts(entries, "service")[-1] == "Job completed successfully."
    # gcloud's continuation filter returns exactly the entries after a position
    middle = entries[len(entries) // 2]
    after = training_emulator.log_lines(job_id, PROJECT, extra_filter=(
        f'((timestamp="{middle["timestamp"]}" AND insertId>"{middle["insertId"]}") OR '
        f'timestamp>"{middle["timestamp"]}")'))
    assert after == entries[len(entries) // 2 + 1:]
    only_worker = training_emulator.log_lines(job_id, PROJECT, 'resource.labels.task_name="workerpool1-0"')
    assert only_worker == [e for e in entries if e["resource"]["labels"]["task_name"] == "workerpool1-0"]


def test_legacy_job_gets_master_and_job_dir_argument(training_emulator, task_package):
    bucket, uri = task_package
    jobs = training_emulator.legacy_jobs()
    body = legacy_job(spec(uri, bucket, "--lines", "2", workers=1, name="legacy_env"))
    created = jobs.create(parent=f"projects/{PROJECT}", body=body).execute()
    assert created["jobId"] == "legacy_env" and created["state"] in ("QUEUED", "PREPARING", "RUNNING")
    job = training_emulator.wait(jobs.get(name=f"projects/{PROJECT}/jobs/legacy_env").execute)
    assert job["state"] == "SUCCEEDED", job
    entries = training_emulator.log_lines("legacy_env", PROJECT)
    master = env_of(entries, "master-replica-0")
    tf_config = json.loads(master["TF_CONFIG"])
    assert set(tf_config["cluster"]) == {"master", "worker"} and tf_config["task"]["type"] == "master"
    assert json.loads(env_of(entries, "worker-replica-0")["TF_CONFIG"])["task"]["type"] == "worker"
    assert master["CLUSTER_SPEC"] is None and master["AIP_MODEL_DIR"] is None
    argv = json.loads(next(t for t in texts(entries, "master-replica-0") if t.startswith("ARGV "))[5:])
    assert argv == ["--lines", "2", "--job-dir", f"gs://{bucket}/out/legacy_env"]


def test_a_failing_replica_fails_the_job_with_its_last_lines(training_emulator, task_package):
    bucket, uri = task_package
    job = run_vertex(training_emulator, vertex_custom_job(spec(uri, bucket, "--fail", name="fails")))
    assert job["state"] == "JOB_STATE_FAILED"
    message = job["error"]["message"]
    assert message.startswith("The replica workerpool0-0 exited with a non-zero status of 1.")
    assert message == "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error."
    # the traceback is in the replica's log, once (not again in the service's own line)
    logs = [e.get("textPayload", "") for e in training_emulator.log_lines(job["name"].rsplit("/", 1)[-1], PROJECT)]
    assert sum("Traceback (most recent call last)" in line for line in logs) == 1, logs
    assert job["error"]["code"] == 3


def test_cancel_mid_run_stops_every_process(training_emulator, task_package):
    bucket, uri = task_package
    jobs = training_emulator.vertex_jobs()
    job = create_vertex(training_emulator, vertex_custom_job(spec(uri, bucket, "--sleep", "120", workers=1,
                                                                  name="to-cancel")))
    training_emulator.wait(jobs.get(name=job["name"]).execute, {"JOB_STATE_RUNNING"})
    deadline = time.monotonic() + 30
    while len(processes := training_emulator.processes(job["name"])) < 2 or not all(p["alive"] for p in processes):
        assert time.monotonic() < deadline, processes
        time.sleep(0.05)
    assert jobs.cancel(name=job["name"], body={}).execute() == {}
    ended = training_emulator.wait(jobs.get(name=job["name"]).execute)
    assert ended["state"] == "JOB_STATE_CANCELLED" and ended["error"]["code"] == 1
    for process in processes:
        assert not _alive(process["pid"]), process
    with pytest.raises(Exception) as err:
        jobs.cancel(name=job["name"], body={}).execute()
    assert err.value.status_code == 400 and "FAILED_PRECONDITION" in err.value.content.decode()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_jobs_queue_beyond_the_limit_and_a_restart_keeps_them(gcs_emulator, emulator_home, task_package, tmp_path):
    bucket, uri = task_package
    data_dir = tmp_path / "data"
    first = TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=emulator_home, data_dir=data_dir,
                             max_running=1).start()
    try:
        jobs = first.vertex_jobs()
        done = run_vertex(first, vertex_custom_job(spec(uri, bucket, name="kept")))
        long = create_vertex(first, vertex_custom_job(spec(uri, bucket, "--sleep", "120", name="long")))
        queued = create_vertex(first, vertex_custom_job(spec(uri, bucket, name="waits")))
        first.wait(jobs.get(name=long["name"]).execute, {"JOB_STATE_RUNNING"})
        time.sleep(0.5)
        assert jobs.get(name=queued["name"]).execute()["state"] == "JOB_STATE_QUEUED"  # --max-running 1
        assert jobs.cancel(name=queued["name"], body={}).execute() == {}
        assert jobs.get(name=queued["name"]).execute()["state"] == "JOB_STATE_CANCELLED"
    finally:
        first.stop(signal.SIGKILL)  # a crash: nothing is written on the way out
    second = TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=emulator_home, data_dir=data_dir).start()
    try:
        jobs = second.vertex_jobs()
        listed = jobs.list(parent=PARENT).execute()["customJobs"]
        assert {j["displayName"]: j["state"] for j in listed} == {
            "kept": "JOB_STATE_SUCCEEDED", "long": "JOB_STATE_FAILED", "waits": "JOB_STATE_CANCELLED"}
        crashed = jobs.get(name=long["name"]).execute()
        assert "emulator stopped while this job was RUNNING" in crashed["error"]["message"] and crashed["endTime"]
        kept_logs = second.log_lines(done["name"].rsplit("/", 1)[-1], PROJECT)
        assert [t for t in texts(kept_logs, "workerpool0-0") if t.startswith("line ")] == [
            f"line {i} of chief-0" for i in range(3)]
        for process in second.processes(long["name"]):
            assert not process["alive"]
        running = create_vertex(second, vertex_custom_job(spec(uri, bucket, "--sleep", "120", name="at-stop")))
        second.wait(jobs.get(name=running["name"]).execute, {"JOB_STATE_RUNNING"})
        deadline = time.monotonic() + 30
        while not (pids := [p["pid"] for p in second.processes(running["name"])]) and time.monotonic() < deadline:
            time.sleep(0.05)  # RUNNING is said just before the replicas start
    finally:
        assert second.stop() == 0  # SIGTERM: a clean stop
    assert pids and not any(_alive(pid) for pid in pids)
    (data_dir / "jobs" / "damaged.json").write_bytes(b'{"name": "proj')  # a damaged job and log file: reported,
    (data_dir / "logs" / "damaged.jsonl").write_bytes(b"\xff\xfe\x00binary\n{}\n")  # the rest is served
    with TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=emulator_home, data_dir=data_dir) as third:
        stopped = third.vertex_jobs().get(name=running["name"]).execute()
        assert stopped["state"] == "JOB_STATE_FAILED"
        assert "emulator was stopped while this job was RUNNING" in stopped["error"]["message"]
        assert len(third.vertex_jobs().list(parent=PARENT).execute()["customJobs"]) == 4
        warnings = [line for line in third.stderr_path.read_text().splitlines() if "damaged" in line]
        assert [line.split(": ")[0] for line in warnings] == ["warning"] * 2
        assert "damaged.json" in warnings[0] and "damaged.jsonl" in warnings[1]


def test_a_job_past_its_timeout_fails(training_emulator, task_package):
    bucket, uri = task_package
    started = time.monotonic()
    job = run_vertex(training_emulator, vertex_custom_job(spec(uri, bucket, "--sleep", "60", name="slow",
                                                               max_runtime_seconds=1)))
    assert job["state"] == "JOB_STATE_FAILED" and job["error"]["code"] == 4  # DEADLINE_EXCEEDED
    assert "maximum running time of 1s" in job["error"]["message"] and time.monotonic() - started < 20


def test_a_gpu_job_gets_the_emulated_devices_train_local_gives_and_its_body_does_not(training_emulator, task_package):
    """#21: a pool asking for more GPUs than this machine has gets MLSUBMIT_EMULATE_DEVICES in its processes only."""
    bucket, uri = task_package
    gpu_spec = spec(uri, bucket, "--lines", "1", workers=1, name="gpu-env").replace(
        chief=Pool("chief", "n1-standard-8", 1, "NVIDIA_TESLA_T4", 2),
        worker=Pool("worker", "n1-standard-8", 1, "NVIDIA_TESLA_T4", 2))
    body = vertex_custom_job(gpu_spec)
    assert "MLSUBMIT_EMULATE_DEVICES" not in json.dumps(body)
    job = run_vertex(training_emulator, body)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    assert "MLSUBMIT_EMULATE_DEVICES" not in json.dumps(job["jobSpec"])
    entries = training_emulator.log_lines(job["name"].rsplit("/", 1)[-1], PROJECT)
    for task in ("workerpool0-0", "workerpool1-0"):
        assert env_of(entries, task)["MLSUBMIT_EMULATE_DEVICES"] == "2"
    assert any("each replica gets MLSUBMIT_EMULATE_DEVICES=2" in line for line in texts(entries, "service"))
