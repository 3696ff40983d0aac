"""Legacy AI Platform Training jobs (ml v1, `projects.jobs`) behind the Target interface.

The service was shut down on 2025-01-31; it is kept for compatibility and for the emulator. The client picks
the job id, so creates are idempotent by nature: a repeated create answers 409 ALREADY_EXISTS, and the job
found under that id is ours if it carries our request id (label `mlsubmit_request_id`), someone else's if not.
"""

from __future__ import annotations

from typing import Any

from mlsubmit.targets.base import REQUEST_LABEL, Target, JobStatus, PoolSummary, friendly_task
from mlsubmit.errors import UsageError

# role -> (machine type key, config key, count key) of a trainingInput
_KEYS = {"chief": ("masterType", "masterConfig", None), "worker": ("workerType", "workerConfig", "workerCount"),
         "ps": ("parameterServerType", "parameterServerConfig", "parameterServerCount"),
         "evaluator": ("evaluatorType", "evaluatorConfig", "evaluatorCount")}
_TASKS = {"chief": "master", "worker": "worker", "ps": "ps", "evaluator": "evaluator"}


def status_of(resource: dict[str, Any], project: str) -> JobStatus:
    """A legacy Job resource in common terms."""
    training = resource.get("trainingInput") or {}
    pools = []
    for role, (type_key, config_key, count_key) in _KEYS.items():
        count = int(training.get(count_key) or 0) if count_key else 1
        if not training.get(type_key) or not count:
            continue
        accelerator = (training.get(config_key) or {}).get("acceleratorConfig") or {}
        pools.append(PoolSummary(role, count, training[type_key], accelerator.get("type"),
                                 int(accelerator.get("count") or 0)))
    job_id = resource.get("jobId", "")
    output = resource.get("trainingOutput") or {}
    return JobStatus(
        api="legacy", name=f"projects/{project}/jobs/{job_id}", job_id=job_id, display_name=job_id,
        state=resource.get("state", "STATE_UNSPECIFIED"), api_state=resource.get("state", "STATE_UNSPECIFIED"),
        project=project, region=training.get("region", ""), create_time=resource.get("createTime"),
        start_time=resource.get("startTime"), end_time=resource.get("endTime"), error=resource.get("errorMessage"),
        artifacts=training.get("jobDir"), labels=dict(resource.get("labels") or {}),
        tier=training.get("scaleTier", "BASIC"), pools=tuple(pools),
        program={"module": training.get("pythonModule"), "args": list(training.get("args") or ()),
                 "packages": list(training.get("packageUris") or ()), "runtime": training.get("runtimeVersion")},
        consumed={k: v for k, v in output.items() if k.startswith("consumed")}, resource=resource)


class LegacyTarget(Target):
    api = "legacy"
    noun = "AI Platform job"
    collection = "jobs"
    permissions = "ml.jobs"
    role = "roles/ml.developer"
    service_name = "ml.googleapis.com"

    @property
    def parent(self) -> str:
        return f"projects/{self.project}"

    def jobs(self) -> Any:
        return self.clients.service("ml").projects().jobs()

    def status_of(self, resource: dict[str, Any]) -> JobStatus:
        return status_of(resource, self.project)

    def state_filter(self, state: str) -> str:
        return f"state={state}"

    def created_meanwhile(self, request_id: str) -> JobStatus | None:
        return None  # the same jobId is sent again: a create that did happen answers 409

    def already_exists(self, body: dict[str, Any], request_id: str) -> JobStatus:
        existing = self.get(body["jobId"])
        if existing.labels.get(REQUEST_LABEL) == request_id:
            return existing  # our own create, whose answer was lost
        raise UsageError(f"a job with id {body['jobId']!r} already exists in project {self.project} "
                         f"({existing.state}, created {existing.create_time}); job ids are unique in a project, also "
                         "after the job ended",
                         hint="choose another --job-name, or leave it out to have a unique one generated")

    def task_name(self, task: str) -> str:
        known = friendly_task(task)
        return f"{_TASKS[known[0]]}-replica-{known[1]}" if known else task

    def console_url(self, status: JobStatus) -> str | None:
        if self.clients.emulated:
            return None
        return f"https://console.cloud.google.com/ai-platform/jobs/{status.job_id}?project={status.project}"
