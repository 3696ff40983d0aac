"""A retried create never makes a second job: the emulator drops the answer of a create after making the job,
or answers 503 twice, and afterwards exactly one job exists — seen through the API itself, not through mlsubmit.
The program is the emulator tests' tiny task package (no TensorFlow), submitted with --async."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["support.training_emulator", "support.submit_cli"]


def submit(cloud, task_project, *extra: str, **env: str):
    return cloud.run("train", "--async", "--package-path", task_project, "--python-module", "tinypkg.task",
                     "--skip-preflight", "--machine-type", "n1-standard-4", *extra, "--", "--lines", "1", **env)


@pytest.mark.parametrize("api", ["vertex", "legacy"])
def test_a_dropped_create_response_leaves_exactly_one_job(cloud, task_project, api):
    cloud.emulator.arm_faults(drop_create_response=1, path="/jobs" if api == "legacy" else "customJobs")
    run = submit(cloud, task_project, "--api", api, "--job-name", f"dropped_{api}")
    assert run.code == 0, run.stderr
    jobs = cloud.legacy_jobs() if api == "legacy" else cloud.vertex_jobs()
    assert len(jobs) == 1, jobs
    job_id = jobs[0]["jobId"] if api == "legacy" else jobs[0]["name"].rsplit("/", 1)[-1]
    assert run.stdout.strip() == job_id  # --async prints the id of the one job
    assert any("drop_create_response" in fired for fired in cloud.emulator.admin("GET", "faults")["fired"])


def test_503_twice_then_success_makes_one_job(cloud, task_project):
    cloud.emulator.arm_faults(status=503, count=2, method="POST", path="customJobs")
    run = submit(cloud, task_project, "--job-name", "after-503s")
    assert run.code == 0, run.stderr
    assert [job["displayName"] for job in cloud.vertex_jobs()] == ["after-503s"]
    fired = cloud.emulator.admin("GET", "faults")["fired"]
    assert sum("status:503" in f and "customJobs" in f for f in fired) >= 2


def test_an_unchanged_package_is_staged_once_and_a_taken_legacy_job_id_is_refused(cloud, task_project):
    first = submit(cloud, task_project, "--api", "legacy", "--job-name", "taken")
    assert first.code == 0, first.stderr
    assert "(uploaded, " in first.stderr
    again = submit(cloud, task_project, "--api", "legacy", "--job-name", "taken", "--request-id", "another-run")
    assert again.code == 2  # another submission (a new --request-id) that wants the same job id
    assert "(already staged, 0 bytes sent)" in again.stderr
    assert "a job with id 'taken' already exists" in again.stderr and "--job-name" in again.stderr
    assert len(cloud.legacy_jobs()) == 1


@pytest.mark.parametrize("api", ["vertex", "legacy"])
def test_running_the_same_submission_again_finds_its_job_and_a_new_request_id_makes_another(cloud, task_project,
                                                                                            api):
    first = submit(cloud, task_project, "--api", api)  # a generated job name: it differs on every run
    assert first.code == 0, first.stderr
    again = submit(cloud, task_project, "--api", api)
    assert again.code == 0, again.stderr
    assert again.stdout == first.stdout  # the id of the first job
    assert f"this same submission already made job {first.stdout.strip()}" in again.stderr
    assert len(cloud.legacy_jobs() if api == "legacy" else cloud.vertex_jobs()) == 1
    other = submit(cloud, task_project, "--api", api, "--request-id", "run-2")
    assert other.code == 0 and other.stdout != first.stdout, other.stderr
    assert len(cloud.legacy_jobs() if api == "legacy" else cloud.vertex_jobs()) == 2


def test_a_create_whose_answer_and_look_ups_are_lost_says_how_to_check_and_a_rerun_finds_the_job(cloud, task_project):
    cloud.emulator.arm_faults(drop_create_response=1, path="customJobs")
    # after the look-ups before the upload (does the service answer?) and before the create: every one fails
    cloud.emulator.arm_faults(status=503, count=10000, method="GET", path="customJobs", skip=2)
    lost = submit(cloud, task_project, MLSUBMIT_RETRY_DEADLINE="1")
    cloud.emulator.admin("DELETE", "faults")
    assert lost.code == 1, lost.stderr
    error = lost.stderr.strip().splitlines()[-1]
    assert error.startswith("error: cannot list Vertex AI custom jobs: still failing after retrying for 1 s"), error
    assert "the Vertex AI custom job may have been created all the same" in error
    assert "running the same command again is safe" in error and "try again later" not in error
    check = error.split("to check: `", 1)[1].split("`", 1)[0]
    request_id = cloud.vertex_jobs()[0]["labels"]["mlsubmit_request_id"]
    assert check == (f"mlsubmit jobs list --api vertex --project {cloud.project} --region us-central1 --endpoint "
                     f"{cloud.emulator.endpoint} --request-id {request_id}")
    listed = cloud.run(*check.split()[1:], "--output", "json")
    assert listed.code == 0 and [job["job_id"] for job in json.loads(listed.stdout)] == [
        cloud.vertex_jobs()[0]["name"].rsplit("/", 1)[-1]], listed.stderr
    again = submit(cloud, task_project)
    assert again.code == 0 and "this same submission already made job" in again.stderr, again.stderr
    assert len(cloud.vertex_jobs()) == 1


def test_the_request_id_is_a_function_of_the_submission_and_a_reuse_lasts_a_day():
    from mlsubmit.targets.base import REUSE_WINDOW, within_window
    from mlsubmit.cloud.submit import request_id_of

    def body(name: str, epochs: str = "1") -> dict:
        return {"displayName": name, "jobSpec": {"baseOutputDirectory": {"outputUriPrefix": f"gs://b/jobs/{name}"},
                                                 "args": ["--epochs", epochs]}}

    where = {"api": "vertex", "parent": "projects/p-123456/locations/us-central1", "package_sha256": "ab" * 32}
    one = request_id_of(body("pkg_20250101_000000_abc123"), generated_name="pkg_20250101_000000_abc123", **where)
    two = request_id_of(body("pkg_20250102_101010_def456"), generated_name="pkg_20250102_101010_def456", **where)
    assert one == two and len(one) == 32 and int(one, 16) >= 0  # a generated name is not the submission
    assert request_id_of(body("mine"), **where) != request_id_of(body("other"), **where)  # a chosen name is
    assert request_id_of(body("mine", "2"), **where) != request_id_of(body("mine"), **where)
    assert request_id_of(body("mine"), key="again", **where) != request_id_of(body("mine"), **where)
    assert request_id_of(body("mine"), **{**where, "package_sha256": "cd" * 32}) != request_id_of(body("mine"), **where)
    created = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    assert within_window("2023-11-14T22:13:20.123456789Z", created + REUSE_WINDOW - 1)
    assert not within_window("2023-11-14T22:13:20Z", created + REUSE_WINDOW + 1)
