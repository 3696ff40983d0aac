"""`mlsubmit jobs list|describe|wait|logs|cancel` on jobs made through the CLI, for both APIs, with `--output json`
parsed; a failed job's exit code, error and traceback. Programs: the emulator tests' tiny task package."""

from __future__ import annotations

import json
import re

import pytest

pytest_plugins = ["support.training_emulator", "support.submit_cli"]


def submit(cloud, task_project, *args: str, api: str = "vertex", name: str) -> str:
    run = cloud.run("train", "--async", "--api", api, "--job-name", name, "--package-path", task_project,
                    "--python-module", "tinypkg.task", "--skip-preflight", "--machine-type", "n1-standard-4",
                    "--", *args)
    assert run.code == 0, run.stderr
    return run.stdout.strip()


@pytest.mark.parametrize("api", ["vertex", "legacy"])
def test_list_describe_logs_wait_and_cancel_with_json(cloud, task_project, api):
    done = submit(cloud, task_project, "--lines", "2", api=api, name="quick_one")
    slow = submit(cloud, task_project, "--sleep", "60", api=api, name="slow_one")
    api_flag = ("--api", api)

    waited = cloud.run("jobs", "wait", done, *api_flag, "--output", "json")
    assert waited.code == 0, waited.stderr
    assert json.loads(waited.stdout)["state"] == "SUCCEEDED"

    listed = cloud.json("jobs", "list", *api_flag)
    assert [job["job_id"] for job in listed] == [slow, done]  # newest first
    # Vertex AI: the base output directory defaults below the staging bucket; legacy: a jobDir only when given
    job_dir = f"gs://{cloud.bucket}/jobs/quick_one" if api == "vertex" else None
    assert listed[1]["state"] == "SUCCEEDED" and listed[1]["artifacts"] == job_dir
    assert [job["job_id"] for job in cloud.json("jobs", "list", *api_flag, "--state", "succeeded")] == [done]
    assert len(cloud.json("jobs", "list", *api_flag, "--limit", "1")) == 1

    described = cloud.json("jobs", "describe", done, *api_flag)
    assert described["pools"] == [{"role": "chief", "replicas": 1, "machine": "n1-standard-4", "accelerator": None,
                                   "accelerator_count": 0}]
    assert described["program"]["module"] == "tinypkg.task"
    assert described["create_time"] <= described["start_time"] <= described["end_time"]
    shown = cloud.run("jobs", "describe", done, *api_flag).stdout
    assert re.search(r"^state +SUCCEEDED", shown, re.M) and f"artifacts +gs://{cloud.bucket}/jobs/quick_one" \
        and re.search(r"^program +python -m tinypkg.task --lines 2", shown, re.M), shown

    chief = "workerpool0-0" if api == "vertex" else "master-replica-0"
    lines = [json.loads(line) for line in
             cloud.run("jobs", "logs", done, *api_flag, "--task", "chief-0", "--output", "json").stdout.splitlines()]
    me = "chief-0" if api == "vertex" else "master-0"  # what TF_CONFIG calls the chief on each service
    assert [e["text"] for e in lines if e["text"].startswith("line ")] == [f"line 0 of {me}", f"line 1 of {me}"]
    assert {e["task"] for e in lines} == {chief}
    table = cloud.run("jobs", "logs", done, *api_flag).stdout
    assert f"{chief} | line 1 of {me}" in table and "service" in table

    impatient = cloud.run("jobs", "wait", slow, *api_flag, "--timeout", "1s")
    assert impatient.code == 1
    still = rf"stopped waiting after 1 s: the job {slow} is still (QUEUED|PREPARING|RUNNING) and keeps running"
    assert re.search(still, impatient.stderr), impatient.stderr
    cancelled = cloud.json("jobs", "cancel", slow, *api_flag)
    assert cancelled["job_id"] == slow and cancelled["state"] in ("CANCELLING", "CANCELLED")
    after = cloud.run("jobs", "wait", slow, *api_flag)
    assert after.code == 1 and "CANCELLED" in after.stderr
    again = cloud.run("jobs", "cancel", slow, *api_flag)
    assert again.code == 2 and "already ended (CANCELLED)" in again.stderr


def test_a_failed_job_exits_1_with_its_error_and_its_traceback_once(cloud, task_project):
    run = cloud.run("train", "--wait", "--job-name", "fails", "--package-path", task_project, "--python-module",
                    "tinypkg.task", "--skip-preflight", "--machine-type", "n1-standard-4", "--", "--fail")
    assert run.code == 1, run.stderr
    assert "last traceback in the job's logs (workerpool0-0)" in run.stderr, run.stderr
    traceback = run.stderr.split("last traceback in the job's logs", 1)[1]
    assert traceback.index("Traceback (most recent call last):") < traceback.index("RuntimeError: boom in chief-0")
    assert "error: job " in run.stderr and "FAILED: The replica workerpool0-0 exited with a non-zero status of 1" \
        in run.stderr
    assert "mlsubmit jobs logs" in run.stderr
    # #21/#25: shown once, whether the logs were streamed (then by the stream) or not (then by the box)
    assert (run.stdout + run.stderr).count("Traceback (most recent call last):") == 1
    streamed = cloud.run("train", "--job-name", "fails_streamed", "--package-path", task_project, "--python-module",
                         "tinypkg.task", "--skip-preflight", "--machine-type", "n1-standard-4", "--", "--fail")
    assert streamed.code == 1, streamed.stderr
    assert (streamed.stdout + streamed.stderr).count("Traceback (most recent call last):") == 1
    assert "last traceback in the job's logs" not in streamed.stderr
    last = streamed.stderr.strip().splitlines()[-1]
    assert "; workerpool0-0 raised RuntimeError: boom in chief-0; its traceback is above; the whole log: " \
           "mlsubmit jobs logs" in last, last
