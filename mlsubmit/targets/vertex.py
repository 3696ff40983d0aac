"""Vertex AI custom jobs (aiplatform v1, `projects.locations.customJobs`) behind the Target interface.

The service picks a custom job's id, so a create whose answer was lost cannot be repeated blindly: every job
mlsubmit creates carries a request id derived from the submission (mlsubmit.cloud.submit.request_id_of) in the label
`mlsubmit_request_id`, and before any retry of a create — and before a re-run of the same submission creates
anything — the jobs with that label are listed: if the lost create made the job, that job is the answer and no
second one is made.
"""

from __future__ import annotations

from typing import Any

from mlsubmit.targets.base import Target, JobStatus, PoolSummary, friendly_task
from mlsubmit.errors import UsageError
from mlsubmit.images import carried

ROLES = ("chief", "worker", "ps", "evaluator")  # worker pools 0-3
STATES = {"JOB_STATE_QUEUED": "QUEUED", "JOB_STATE_PENDING": "PREPARING", "JOB_STATE_RUNNING": "RUNNING",
          "JOB_STATE_SUCCEEDED": "SUCCEEDED", "JOB_STATE_FAILED": "FAILED", "JOB_STATE_CANCELLING": "CANCELLING",
          "JOB_STATE_CANCELLED": "CANCELLED", "JOB_STATE_PAUSED": "PAUSED", "JOB_STATE_EXPIRED": "EXPIRED",
          "JOB_STATE_UPDATING": "UPDATING", "JOB_STATE_PARTIALLY_SUCCEEDED": "PARTIALLY_SUCCEEDED"}
API_STATES = {common: api for api, common in STATES.items()}


def _job_dir(spec: dict[str, Any]) -> str | None:
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if base:
        return base
    pools = spec.get("workerPoolSpecs") or [{}]
    args = (carried.program(pools[0]) or {}).get("args") or []
    for index, arg in enumerate(args):
        if arg.startswith("--job-dir="):
            return arg.split("=", 1)[1]
        if arg == "--job-dir" and index + 1 < len(args):
            return args[index + 1]
    return None


def status_of(resource: dict[str, Any]) -> JobStatus:
    """A CustomJob resource in common terms."""
    name = resource.get("name", "")
    parts = name.split("/")
    spec = resource.get("jobSpec") or {}
    pools, program = [], {}
    for role, pool in zip(ROLES, spec.get("workerPoolSpecs") or ()):
        if not pool:
            continue
        machine = pool.get("machineSpec") or {}
        pools.append(PoolSummary(role, int(pool.get("replicaCount") or 1), machine.get("machineType", "?"),
                                 machine.get("acceleratorType"), int(machine.get("acceleratorCount") or 0)))
        package = carried.program(pool) or {}  # a pythonPackageSpec, or a package run on a public image
        if role == "chief" and package:
            program = {"module": package.get("pythonModule"), "args": list(package.get("args") or ()),
                       "packages": list(package.get("packageUris") or ()), "image": package.get("executorImageUri")}
        elif role == "chief" and pool.get("containerSpec"):
            program = {"container": (pool.get("containerSpec") or {}).get("imageUri")}
    api_state = resource.get("state", "JOB_STATE_UNSPECIFIED")
    return JobStatus(
        api="vertex", name=name, job_id=parts[-1] if parts else "", display_name=resource.get("displayName", ""),
        state=STATES.get(api_state, api_state.removeprefix("JOB_STATE_")), api_state=api_state,
        project=parts[1] if len(parts) > 1 else "", region=parts[3] if len(parts) > 3 else "",
        create_time=resource.get("createTime"), start_time=resource.get("startTime"), end_time=resource.get("endTime"),
        error=(resource.get("error") or {}).get("message"), artifacts=_job_dir(spec),
        labels=dict(resource.get("labels") or {}), pools=tuple(pools), program=program, resource=resource)


class VertexTarget(Target):
    api = "vertex"
    noun = "Vertex AI custom job"
    collection = "customJobs"
    permissions = "aiplatform.customJobs"
    role = "roles/aiplatform.user"
    service_name = "aiplatform.googleapis.com"

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def jobs(self) -> Any:
        return self.clients.service("aiplatform").projects().locations().customJobs()

    def status_of(self, resource: dict[str, Any]) -> JobStatus:
        return status_of(resource)

    def state_filter(self, state: str) -> str:
        return f"state={API_STATES[state]}"

    def created_meanwhile(self, request_id: str) -> JobStatus | None:
        return self.find_request(request_id)  # the lost answer may belong to a job that exists

    def already_exists(self, body: dict[str, Any], request_id: str) -> JobStatus:
        raise UsageError(f"cannot create the {self.noun}: the service says it already exists (409)")

    def resolve(self, job: str) -> str:
        """An id, a resource name, or a display name (the newest job of that name)."""
        job = job.strip()
        if job.startswith("projects/") or (job.isascii() and job.isdigit()):
            return super().resolve(job)
        named = self.list(limit=1, filter=f'display_name="{job}"')
        if not named:
            raise self.unknown(job)
        return named[0].name

    def task_name(self, task: str) -> str:
        known = friendly_task(task)
        return f"workerpool{ROLES.index(known[0])}-{known[1]}" if known else task

    def console_url(self, status: JobStatus) -> str | None:
        if self.clients.emulated:
            return None
        return (f"https://console.cloud.google.com/vertex-ai/locations/{status.region}/training/{status.job_id}/cpu"
                f"?project={status.project}")
