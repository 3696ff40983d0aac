"""Vertex AI `projects.locations.hyperparameterTuningJobs` (aiplatform v1): create, get, list, cancel, delete,
with trials that really run.

    POST   /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs              create → HyperparameterTuningJob
    GET    /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs/{id}         get (with its trials)
    GET    /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs?filter=…    list → {hyperparameterTuningJobs}
    POST   /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs/{id}:cancel  cancel → {} (stops running trials)
    DELETE /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs/{id}         delete → Operation (done)

Each trial is a CustomJob of the emulator (trialJobSpec, every pool's args + `--name=value` per parameter, env
CLOUD_ML_TRIAL_ID and CLOUD_ML_HP_METRIC_FILE), started by a study thread at most `parallelTrialCount` at once with
values from `mlsubmit.tuning.search` (GRID and RANDOM exact, TPE for the default algorithm). The metric is read as
the service reads it: the last line of the cloudml-hypertune metrics file that carries the study's metricId. A
trial that fails, or reports no metric, is INFEASIBLE; more than `maxFailedTrialCount` of them (default: all)
fail the study. Studies live in memory: they do not survive a restart of the emulator.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlsubmit.emulator import jobs_api, paging, vertex
from mlsubmit.emulator.errors import RPC_CODES, failed_precondition, field_error, not_found
from mlsubmit.emulator.filters import compile_filter
from mlsubmit.emulator.plan import vertex_plan
from mlsubmit.emulator.server import Request, Router
from mlsubmit.emulator.store import Job
from mlsubmit.emulator.times import now
from mlsubmit.emulator.validation import checked_body
from mlsubmit.images import carried
from mlsubmit.tuning.trial import read_metric

_PARENT = r"/v1/projects/(?P<project>[^/:]+)/locations/(?P<location>[^/:]+)"
_STUDY = _PARENT + r"/hyperparameterTuningJobs/(?P<job>[^/:]+)"
_POLL = 0.1


@dataclass
class Trial:
    id: str
    values: dict[str, Any]
    custom_job: str
    metric_file: Path
    state: str = "ACTIVE"  # ACTIVE, SUCCEEDED or INFEASIBLE
    start_time: str = ""
    end_time: str | None = None
    value: float | None = None
    step: int = 0
    reason: str | None = None

    def render(self, metric: str) -> dict[str, Any]:
        trial: dict[str, Any] = {"id": self.id, "state": self.state, "startTime": self.start_time,
                                 "parameters": [{"parameterId": k, "value": v} for k, v in self.values.items()],
                                 "customJob": self.custom_job}
        if self.value is not None:
            trial["finalMeasurement"] = {"stepCount": str(self.step),
                                         "metrics": [{"metricId": metric, "value": self.value}]}
        if self.end_time:
            trial["endTime"] = self.end_time
        if self.reason:
            trial["infeasibleReason"] = self.reason
        return trial


@dataclass
class Study:
    name: str
    body: dict[str, Any]
    tuning: Any  # TuningSpec
    project: str
    location: str
    state: str = "QUEUED"  # the store's vocabulary: QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLING, CANCELLED
    create_time: str = field(default_factory=now)
    update_time: str = field(default_factory=now)
    start_time: str | None = None
    end_time: str | None = None
    error: str | None = None
    error_status: str | None = None
    trials: list[Trial] = field(default_factory=list)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def render(self) -> dict[str, Any]:
        resource = {"name": self.name, **self.body, "state": vertex.STATES[self.state],
                    "createTime": self.create_time, "updateTime": self.update_time}
        if self.trials:
            resource["trials"] = [t.render(self.tuning.metric) for t in self.trials]
        for key, value in (("startTime", self.start_time), ("endTime", self.end_time)):
            if value:
                resource[key] = value
        if self.error:
            resource["error"] = {"code": RPC_CODES.get(self.error_status or "UNKNOWN", 2), "message": self.error}
        return resource


class HpTuning:
    """The studies of one emulator and the threads that drive them."""

    WORK_NAME = "hptuning"  # the trials' metric files, in the executor's work folder

    def __init__(self, emulator: Any):
        self.emulator = emulator
        self.studies: dict[str, Study] = {}
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.work = Path(emulator.executor.work_dir) / self.WORK_NAME
        shutil.rmtree(self.work, ignore_errors=True)  # what a killed emulator with the same --data-dir left
        self.work.mkdir(parents=True)

    # -- API --------------------------------------------------------------------------------------------------
    def create(self, request: Request) -> tuple[int, dict]:
        from mlsubmit.errors import UsageError
        from mlsubmit.tuning.requests import from_vertex

        body = checked_body("aiplatform.v1", "GoogleCloudAiplatformV1HyperparameterTuningJob", request.body or {})
        for key in ("displayName", "studySpec", "maxTrialCount", "parallelTrialCount", "trialJobSpec"):
            if not body.get(key):
                raise field_error(key, "required field is missing")
        try:
            tuning, _ = from_vertex(body)
        except UsageError as err:
            where = re.sub(r" \(.*?\)", "", err.message.split(": ")[0].removeprefix("invalid value for "))
            raise field_error(where.removeprefix("invalid "), err.one_line()) from None
        project, location = request.params["project"], request.params["location"]
        plan = vertex_plan({"displayName": body["displayName"], "jobSpec": _trial_spec(body, {}, "0", "")},
                           project, location, "0")
        self.emulator.executor.check_packages(plan)
        study_id = str(secrets.randbelow(9 * 10**18) + 10**18)
        study = Study(f"projects/{project}/locations/{location}/hyperparameterTuningJobs/{study_id}", body, tuning,
                      project, location)
        with self.lock:
            self.studies[study.name] = study
        thread = threading.Thread(target=self._drive, args=(study,), name=f"hptuning-{study_id}", daemon=True)
        self.threads.append(thread)
        thread.start()
        return 200, study.render()

    def get(self, request: Request) -> tuple[int, dict]:
        return 200, self._find(request).render()

    def list(self, request: Request) -> tuple[int, dict]:
        prefix = f"projects/{request.params['project']}/locations/{request.params['location']}/"
        match = compile_filter(request.query.get("filter"), vertex.FIELDS)
        with self.lock:
            resources = [s.render() for s in self.studies.values() if s.name.startswith(prefix)]
        selected = [r for r in resources if match(r)]
        size = paging.page_size(request.query.get("pageSize"), default=jobs_api.LIST_PAGE[0],
                                maximum=jobs_api.LIST_PAGE[1])
        page, token = paging.paginate(selected, key=lambda r: r["createTime"], size=size,
                                      token=request.query.get("pageToken"), descending=True,
                                      query=[prefix, request.query.get("filter")])
        body: dict[str, Any] = {"hyperparameterTuningJobs": page} if page else {}
        if token:
            body["nextPageToken"] = token
        return 200, body

    def cancel(self, request: Request) -> tuple[int, dict]:
        study = self._find(request)
        if study.state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            raise failed_precondition(f"The HyperparameterTuningJob {study.name} is in state "
                                      f"{vertex.STATES[study.state]} and can no longer be cancelled.")
        self._update(study, state="CANCELLING")
        study.cancelled.set()
        return 200, {}

    def delete(self, request: Request) -> tuple[int, dict]:
        study = self._find(request)
        if study.state not in ("SUCCEEDED", "FAILED", "CANCELLED"):
            raise failed_precondition(f"The HyperparameterTuningJob {study.name} is in state "
                                      f"{vertex.STATES[study.state]}: cancel it and wait until it has ended before "
                                      "deleting it.")
        with self.lock:
            del self.studies[study.name]
        return 200, {"name": f"{study.name}/operations/{secrets.randbelow(9 * 10**18) + 10**18}", "done": True,
                     "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}}

    def stop(self) -> None:
        """Stop every study (their running trials are stopped by the executor) and remove the metric files."""
        for study in list(self.studies.values()):
            study.cancelled.set()
        for thread in self.threads:
            thread.join(timeout=10)
        shutil.rmtree(self.work, ignore_errors=True)

    def _find(self, request: Request) -> Study:
        name = (f"projects/{request.params['project']}/locations/{request.params['location']}"
                f"/hyperparameterTuningJobs/{request.params['job']}")
        with self.lock:
            study = self.studies.get(name)
        if study is None:
            raise not_found(f"The HyperparameterTuningJob {name} does not exist (or was deleted).")
        return study

    def _update(self, study: Study, **changes: Any) -> None:
        with self.lock:
            for key, value in changes.items():
                setattr(study, key, value)
            study.update_time = now()

    # -- the study thread ------------------------------------------------------------------------------------
    def _drive(self, study: Study) -> None:
        from mlsubmit.tuning.search import Search

        try:
            search = Search(study.tuning, seed=self._seed(study))
            self._update(study, state="RUNNING", start_time=now())
            running: dict[int, Trial] = {}
            numbers: dict[str, int] = {}
            failed = 0
            limit = study.tuning.max_failed_trials
            while True:
                for number, trial in list(running.items()):
                    if self._settle(trial, study.tuning.metric):
                        search.tell(number, trial.value)
                        failed += trial.state == "INFEASIBLE"
                        del running[number]
                if study.cancelled.is_set() or self._cancel_asked(study):
                    self._stop_trials(running.values())
                    self._update(study, state="CANCELLED", end_time=now(), error="CANCELED",
                                 error_status="CANCELLED")
                    return
                done = len(study.trials) - len(running)
                if failed and failed > (limit if limit is not None else search.total - 1):
                    self._stop_trials(running.values())
                    self._update(study, state="FAILED", end_time=now(), error_status="FAILED_PRECONDITION",
                                 error=f"{failed} trials failed (maxFailedTrialCount {limit or 'default'}); the "
                                       f"last: {study.trials[-1].reason if study.trials else ''}")
                    return
                if len(study.trials) < search.total and len(running) < study.tuning.parallel_trials:
                    number, values = search.ask()
                    trial = self._start_trial(study, values)
                    numbers[trial.id] = number
                    running[number] = trial
                    continue
                if not running and done >= search.total:
                    self._update(study, state="SUCCEEDED", end_time=now())
                    return
                time.sleep(_POLL)
        except Exception as err:  # a study thread must never die silently
            self._update(study, state="FAILED", end_time=now(), error=f"internal error: {err}",
                         error_status="INTERNAL")

    def _seed(self, study: Study) -> int:
        return int(study.name.rsplit("/", 1)[-1]) % 2**31

    def _cancel_asked(self, study: Study) -> bool:
        return False  # Vertex AI studies are cancelled through `cancel` (study.cancelled)

    def _start_trial(self, study: Study, values: dict[str, Any]) -> Trial:
        trial_id = str(len(study.trials) + 1)
        metric_file = self.work / study.name.rsplit("/", 1)[-1] / trial_id / "output.metrics"
        metric_file.parent.mkdir(parents=True, exist_ok=True)
        body = {"displayName": f"{study.body['displayName']}-trial-{trial_id}"[:128],
                "labels": {**(study.body.get("labels") or {}), "hp_tuning_trial": trial_id},
                "jobSpec": _trial_spec(study.body, values, trial_id, str(metric_file))}
        job_id = str(secrets.randbelow(9 * 10**18) + 10**18)
        name = f"projects/{study.project}/locations/{study.location}/customJobs/{job_id}"
        plan = vertex_plan(body, study.project, study.location, job_id)
        jobs_api.create(self.emulator, vertex.FLAVOR, Job(name=name, api="vertex", job_id=job_id,
                                                          project=study.project, body=body), plan)
        trial = Trial(trial_id, values, name, metric_file, start_time=now())
        with self.lock:
            study.trials.append(trial)
            study.update_time = now()
        return trial

    def _settle(self, trial: Trial, metric: str) -> bool:
        """Record the end of a trial whose job has ended; False while it runs."""
        job = self.emulator.store.get(trial.custom_job)
        if job is None or not job.is_terminal:
            return False
        value, step = self._read_metric(trial, metric)
        trial.end_time = job.end_time or now()
        if job.state == "SUCCEEDED" and value is not None:
            trial.state, trial.value, trial.step = "SUCCEEDED", value, step
        else:
            trial.state = "INFEASIBLE"
            trial.reason = (f"the trial's job {job.state.lower()}: {job.error}" if job.state != "SUCCEEDED"
                            else f"the trial reported no {metric!r} through cloudml-hypertune")
        return True

    def _read_metric(self, trial: Trial, metric: str) -> tuple[float | None, int]:
        return read_metric(trial.metric_file, metric)

    def _stop_trials(self, trials: Any) -> None:
        for trial in trials:
            self.emulator.executor.cancel(trial.custom_job)
        deadline = time.monotonic() + 30
        for trial in trials:
            while time.monotonic() < deadline and not self._settle(trial, ""):
                time.sleep(_POLL)


def _trial_spec(body: dict[str, Any], values: dict[str, Any], trial_id: str, metric_file: str) -> dict[str, Any]:
    """The trialJobSpec with the trial's `--name=value` arguments and hypertune environment in every pool."""
    from mlsubmit.tuning.search import trial_args

    spec = json.loads(json.dumps(body["trialJobSpec"]))
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if base and trial_id != "0":  # each trial's AIP_MODEL_DIR is <base>/<trial id>/model/, as the service sets it
        spec["baseOutputDirectory"]["outputUriPrefix"] = f"{base.rstrip('/')}/{trial_id}"
    for pool in spec.get("workerPoolSpecs") or []:
        package = carried.program(pool)  # a pythonPackageSpec, or a package run on a public image
        if not package:
            continue
        package["args"] = [*(package.get("args") or []), *trial_args(values)]
        package["env"] = [*(package.get("env") or []), {"name": "CLOUD_ML_TRIAL_ID", "value": trial_id},
                          {"name": "CLOUD_ML_HP_METRIC_FILE", "value": metric_file}]
        carried.set_program(pool, package)
    return spec


def register(router: Router, emulator: Any) -> HpTuning:
    hp = HpTuning(emulator)
    router.add("POST", _PARENT + r"/hyperparameterTuningJobs", hp.create, creates=True)
    router.add("GET", _PARENT + r"/hyperparameterTuningJobs", hp.list)
    router.add("GET", _STUDY, hp.get)
    router.add("POST", _STUDY + r":cancel", hp.cancel)
    router.add("DELETE", _STUDY, hp.delete)
    return hp
