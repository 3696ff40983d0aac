"""Submitting a tuning job: the Submission of its trials' job (mlsubmit.cloud.submit.prepare) turned into a Vertex AI
HyperparameterTuningJob, or a legacy job with `trainingInput.hyperparameters`, created as idempotently as a
single job (the same request-id label).

    tuning, notes = tuning_of(config="hptuning_config.yaml", hptune_config=None)
    submission = with_tuning(submit.prepare(spec, api="vertex", settings=settings), tuning)
    service = tuning_service(service)          # Vertex AI: the hyperparameterTuningJobs collection
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mlsubmit.errors import UsageError
from mlsubmit.targets.base import REQUEST_LABEL
from mlsubmit.cloud.submit import Submission, request_id_of


@dataclasses.dataclass(frozen=True)
class TuningSubmission(Submission):
    tuning: Any = None  # mlsubmit.tuning.spec.TuningSpec

    @property
    def method(self) -> str:
        if self.api == "legacy":
            return super().method
        return super().method.removesuffix("/customJobs") + "/hyperparameterTuningJobs"


def tuning_of(config: str | None, hptune_config: str | Path | None) -> tuple[Any, list[str]]:
    """The tuning spec of `--hptune-config` (which wins), else the one inside `--config` (None: neither has one)."""
    from mlsubmit.tuning import requests as tuning_requests

    if hptune_config is not None:
        return tuning_requests.read_file(hptune_config, only_tuning=True)
    if config:
        return tuning_requests.read_file(config, only_tuning=False)
    return None, []


def with_tuning(submission: Submission, tuning: Any) -> TuningSubmission:
    """The submission with its body turned into the tuning job's (checked against the discovery schema)."""
    from mlsubmit.jobspec import discovery
    from mlsubmit.jobspec.limits import check_request
    from mlsubmit.tuning.requests import legacy_hyperparameters, study_spec

    body = submission.body
    if submission.api == "legacy":
        body = {**body, "trainingInput": {**body["trainingInput"], "hyperparameters": legacy_hyperparameters(tuning)}}
        schema = ("ml.v1", "GoogleCloudMlV1__Job")
    else:
        body = {"displayName": body["displayName"], "labels": body.get("labels") or {},
                "studySpec": study_spec(tuning), "maxTrialCount": tuning.max_trials,
                "parallelTrialCount": tuning.parallel_trials, "trialJobSpec": body["jobSpec"]}
        if tuning.max_failed_trials is not None:
            body["maxFailedTrialCount"] = tuning.max_failed_trials
        schema = ("aiplatform.v1", "GoogleCloudAiplatformV1HyperparameterTuningJob")
    violations = discovery.validate(*schema, body)
    if violations:
        raise UsageError(f"invalid tuning request body: {violations[0].field}: {violations[0].description}")
    notes = list(submission.notes)
    if submission.api == "vertex" and tuning.resume_previous_job_id:
        notes.append(f"resumePreviousJobId {tuning.resume_previous_job_id}: Vertex AI cannot continue a legacy "
                     "study; the trials start afresh")
    # a study is another submission than the plain job of the same package: its own idempotency key
    request_id = request_id_of(body, api=submission.api, parent=submission.parent,
                               package_sha256=submission.request_id)
    body["labels"] = {**(body.get("labels") or {}), REQUEST_LABEL: request_id}
    check_request(body, "the tuning job's request body")
    fields = {f.name: getattr(submission, f.name) for f in dataclasses.fields(Submission)}
    return TuningSubmission(**{**fields, "body": body, "notes": tuple(notes), "request_id": request_id},
                            tuning=tuning)


def tuning_service(service: Any) -> Any:
    """The service that creates and reads tuning jobs on `service`'s API: Vertex AI keeps them in their own
    collection; legacy tuning jobs are ordinary jobs."""
    if service.api != "vertex":
        return service
    from mlsubmit.targets.vertex_tuning import TuningTarget

    return TuningTarget(service.clients, project=service.project, region=service.region, retry=service.retry)
