"""Vertex AI `projects.locations.customJobs` (aiplatform v1): create, get, list, cancel, delete.

Paths and JSON as in the aiplatform v1 discovery document:
    POST   /v1/projects/{p}/locations/{l}/customJobs                  create → CustomJob (the server picks the id)
    GET    /v1/projects/{p}/locations/{l}/customJobs/{id}             get → CustomJob
    GET    /v1/projects/{p}/locations/{l}/customJobs?filter=…         list → {customJobs, nextPageToken}
    POST   /v1/projects/{p}/locations/{l}/customJobs/{id}:cancel      cancel → {}
    DELETE /v1/projects/{p}/locations/{l}/customJobs/{id}             delete → Operation (done)
States: JOB_STATE_QUEUED → JOB_STATE_PENDING (preparing) → JOB_STATE_RUNNING → JOB_STATE_SUCCEEDED |
JOB_STATE_FAILED | JOB_STATE_CANCELLING → JOB_STATE_CANCELLED. A failed or cancelled job carries
`error {code, message}` (a google.rpc.Status). List filters: state, display_name (displayName), labels.KEY,
create_time, update_time, start_time, end_time, name.
"""

from __future__ import annotations

import secrets
from functools import partial
from typing import Any

from mlsubmit.emulator import ids, jobs_api
from mlsubmit.emulator.errors import RPC_CODES, failed_precondition
from mlsubmit.emulator.filters import Fields, time_field
from mlsubmit.emulator.plan import vertex_plan
from mlsubmit.emulator.server import Request, Router
from mlsubmit.emulator.store import Job
from mlsubmit.emulator.validation import checked_body

_PARENT = r"/v1/projects/(?P<project>[^/:]+)/locations/(?P<location>[^/:]+)"
_JOB = _PARENT + r"/customJobs/(?P<job>[^/:]+)"
STATES = {"QUEUED": "JOB_STATE_QUEUED", "PREPARING": "JOB_STATE_PENDING", "RUNNING": "JOB_STATE_RUNNING",
          "SUCCEEDED": "JOB_STATE_SUCCEEDED", "FAILED": "JOB_STATE_FAILED", "CANCELLING": "JOB_STATE_CANCELLING",
          "CANCELLED": "JOB_STATE_CANCELLED"}


def render(job: Job) -> dict[str, Any]:
    """The CustomJob resource as the API returns it."""
    resource = {"name": job.name, **job.body, "state": STATES[job.state], "createTime": job.create_time,
                "updateTime": job.update_time}
    if job.start_time:
        resource["startTime"] = job.start_time
    if job.end_time:
        resource["endTime"] = job.end_time
    if job.error:
        resource["error"] = {"code": RPC_CODES.get(job.error_status or "UNKNOWN", 2), "message": job.error}
    return resource


FIELDS = Fields({"state": lambda r: r["state"], "display_name": lambda r: r.get("displayName"),
                 "displayName": lambda r: r.get("displayName"), "labels": lambda r: r.get("labels") or {},
                 "name": lambda r: r["name"], "create_time": time_field("createTime"),
                 "createTime": time_field("createTime"), "update_time": time_field("updateTime"),
                 "start_time": time_field("startTime"), "end_time": time_field("endTime")}, maps=("labels",))

FLAVOR = jobs_api.Flavor(
    api="vertex", noun="CustomJob", collection="customJobs", states=STATES, render=render, fields=FIELDS,
    name=lambda p: f"projects/{p['project']}/locations/{p['location']}/customJobs/{p['job']}",
    parent=lambda p: f"projects/{p['project']}/locations/{p['location']}/customJobs/")


def create(emulator: Any, request: Request) -> tuple[int, dict]:
    project, location = request.params["project"], request.params["location"]
    ids.check_project(project)
    ids.check_location(location)
    body = checked_body("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", request.body or {})
    ids.check_display_name(body["displayName"])
    while True:
        job_id = str(secrets.randbelow(9 * 10**18) + 10**18)  # 19 digits, like the service's ids
        name = f"projects/{project}/locations/{location}/customJobs/{job_id}"
        if emulator.store.get(name) is None:
            break
    plan = vertex_plan(body, project, location, job_id)
    emulator.capacity.check_quota(location, body)  # a quota the project has not got: 429, nothing made
    return jobs_api.create(emulator, FLAVOR, Job(name=name, api="vertex", job_id=job_id, project=project,
                                                 body=body), plan)


def delete(emulator: Any, request: Request) -> tuple[int, dict]:
    job = jobs_api.find(emulator, FLAVOR, request)
    if not job.is_terminal:
        raise failed_precondition(f"The CustomJob {job.name} is in state {STATES[job.state]}: cancel it and wait "
                                  f"until it has ended before deleting it.")
    emulator.store.delete(job.name)
    operation = f"{job.name}/operations/{secrets.randbelow(9 * 10**18) + 10**18}"
    return 200, {"name": operation, "done": True,
                 "metadata": {"@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata",
                              "genericMetadata": {"createTime": job.update_time, "updateTime": job.update_time}},
                 "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}}


def register(router: Router, emulator: Any) -> None:
    router.add("POST", _PARENT + r"/customJobs", partial(create, emulator), creates=True)
    router.add("GET", _PARENT + r"/customJobs", partial(jobs_api.list_jobs, emulator, FLAVOR))
    router.add("GET", _JOB, partial(jobs_api.get, emulator, FLAVOR))
    router.add("POST", _JOB + r":cancel", partial(jobs_api.cancel, emulator, FLAVOR))
    router.add("DELETE", _JOB, partial(delete, emulator))
