"""Legacy AI Platform Training `projects.jobs` (ml v1): create, get, list, cancel.

Paths and JSON as in the ml v1 discovery document:
    POST /v1/projects/{p}/jobs                 create {jobId, labels, trainingInput} → Job (409 ALREADY_EXISTS
                                               when the project has, or had, a job with that id)
    GET  /v1/projects/{p}/jobs/{id}            get → Job
    GET  /v1/projects/{p}/jobs?filter=…        list → {jobs, nextPageToken}
    POST /v1/projects/{p}/jobs/{id}:cancel     cancel → {}
States: QUEUED → PREPARING → RUNNING → SUCCEEDED | FAILED | CANCELLING → CANCELLED; `errorMessage` says why
a job failed (with the failing replica's last lines) or that it was cancelled. List filters: state, jobId
(job_id), labels.KEY, createTime (create_time), startTime, endTime.
"""

from __future__ import annotations

import hashlib
from functools import partial
from typing import Any

from mlsubmit.emulator import ids, jobs_api, legacy_tuning
from mlsubmit.emulator.filters import Fields, time_field
from mlsubmit.emulator.plan import legacy_plan
from mlsubmit.emulator.server import Request, Router
from mlsubmit.emulator.store import Job
from mlsubmit.emulator.validation import checked_body

_PROJECT = r"/v1/projects/(?P<project>[^/:]+)"
_JOB = _PROJECT + r"/jobs/(?P<job>[^/:]+)"
STATES = {state: state for state in ("QUEUED", "PREPARING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING",
                                     "CANCELLED")}


def render(job: Job) -> dict[str, Any]:
    """The Job resource as the API returns it."""
    resource = {**job.body, "createTime": job.create_time, "state": job.state,
                "etag": hashlib.sha256(job.update_time.encode()).hexdigest()[:12]}
    if job.start_time:
        resource["startTime"] = job.start_time
    if job.end_time:
        resource["endTime"] = job.end_time
    if job.error:
        resource["errorMessage"] = job.error
    if job.state in ("RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"):
        resource["trainingOutput"] = {"consumedMLUnits": 0}
    return legacy_tuning.training_output(job.name, resource)


FIELDS = Fields({"state": lambda r: r["state"], "jobId": lambda r: r["jobId"], "job_id": lambda r: r["jobId"],
                 "labels": lambda r: r.get("labels") or {}, "createTime": time_field("createTime"),
                 "create_time": time_field("createTime"), "startTime": time_field("startTime"),
                 "endTime": time_field("endTime")}, maps=("labels",))

FLAVOR = jobs_api.Flavor(
    api="legacy", noun="job", collection="jobs", states=STATES, render=render, fields=FIELDS,
    name=lambda p: f"projects/{p['project']}/jobs/{p['job']}", parent=lambda p: f"projects/{p['project']}/jobs/")


def create(emulator: Any, request: Request) -> tuple[int, dict]:
    project = request.params["project"]
    ids.check_project(project)
    body = checked_body("ml.v1", "GoogleCloudMlV1__Job", request.body or {})
    if legacy_tuning.is_tuning(body):  # trials run by the study machinery
        return emulator.legacy_tuning.create_job(body, project, render)
    plan = legacy_plan(body, project)
    job = Job(name=f"projects/{project}/jobs/{body['jobId']}", api="legacy", job_id=body["jobId"], project=project,
              body=body)
    return jobs_api.create(emulator, FLAVOR, job, plan)


def register(router: Router, emulator: Any) -> None:
    router.add("POST", _PROJECT + r"/jobs", partial(create, emulator), creates=True)
    router.add("GET", _PROJECT + r"/jobs", partial(jobs_api.list_jobs, emulator, FLAVOR))
    router.add("GET", _JOB, partial(jobs_api.get, emulator, FLAVOR))
    router.add("POST", _JOB + r":cancel", partial(jobs_api.cancel, emulator, FLAVOR))
