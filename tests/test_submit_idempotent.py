"""A retried create never makes a second job: the emulator drops the answer of a create after making the job,
or answers 503 twice, and afterwards exactly one job exists — seen through the API itself, not through mlsubmit.
The program is the emulator tests' tiny task package (no TensorFlow), submitted with --async."""

from __future__ import annotations

import pytest

pytest_plugins = ["support.training_emulator", "support.submit_cli"]


def submit(cloud, task_project, *extra: str):
    return cloud.run("train", "--async", "--package-path", task_project, "--python-module", "tinypkg.task",
                     "--skip-preflight", "--machine-type", "n1-standard-4", *extra, "--", "--lines", "1")


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
    again = submit(cloud, task_project, "--api", "legacy", "--job-name", "taken")
    assert again.code == 2
    assert "(already staged, 0 bytes sent)" in again.stderr
    assert "a job with id 'taken' already exists" in again.stderr and "--job-name" in again.stderr
    assert len(cloud.legacy_jobs()) == 1
