"""Vertex AI hyperparameter tuning jobs (aiplatform v1, `projects.locations.hyperparameterTuningJobs`) behind the
Target interface: created, read, listed and cancelled like custom jobs (the same request-id label finds a
create whose answer was lost), their trials in `JobStatus.resource["trials"]` (see mlsubmit.tuning.results).

A study's logs are its trials' logs: each trial runs as a CustomJob (`trials[].customJob`), whose entries are
read one trial after the other, every task named `trial-<id>/<task>`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mlsubmit.targets import vertex
from mlsubmit.targets.base import JobStatus, LogEntry


def status_of(resource: dict[str, Any]) -> JobStatus:
    """A HyperparameterTuningJob in common terms: its trials' CustomJobSpec gives the cluster and program."""
    status = vertex.status_of({**resource, "jobSpec": resource.get("trialJobSpec") or {}})
    return replace(status, resource=resource)


class TuningTarget(vertex.VertexTarget):
    noun = "Vertex AI hyperparameter tuning job"
    collection = "hyperparameterTuningJobs"
    permissions = "aiplatform.hyperparameterTuningJobs"

    def jobs(self) -> Any:
        return self.clients.service("aiplatform").projects().locations().hyperparameterTuningJobs()

    def status_of(self, resource: dict[str, Any]) -> JobStatus:
        return status_of(resource)

    def logs(self, status: JobStatus, *, since: str | None = None, task: str | None = None) -> list[LogEntry]:
        found: list[LogEntry] = []
        for trial in status.resource.get("trials") or ():
            job = trial.get("customJob")
            if not job:
                continue
            trial_job = replace(status, job_id=job.rsplit("/", 1)[-1], name=job)
            found += [replace(entry, task=f"trial-{trial.get('id')}/{entry.task}")
                      for entry in super().logs(trial_job, since=since, task=task)]
        return sorted(found, key=lambda entry: entry.timestamp)
