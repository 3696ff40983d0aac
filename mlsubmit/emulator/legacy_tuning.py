"""Legacy AI Platform hyperparameter tuning: `projects.jobs.create` with `trainingInput.hyperparameters`, run
with real trials by the Vertex AI study machinery (`hp_tuning.HpTuning`: the same suggestions, at most
maxParallelTrials at once, maxFailedTrials honoured, cancel stops the running trials).

The job is an ordinary legacy job for get, list and cancel (`legacy.py`); its state follows the study, and its
`trainingOutput` carries `isHyperparameterTuningJob`, `hyperparameterMetricTag`, `completedTrialCount` and
`trials[]` ({trialId, hyperparameters{name: "value"}, finalMetric{trainingStep, objectiveValue}, state,
startTime, endTime}). Each trial runs the job's program as the legacy service did (`args` + `--name=value` +
`--job-dir <jobDir>`, TF_CONFIG naming the chief `master`, with `task.trial`) plus CLOUD_ML_TRIAL_ID and
CLOUD_ML_HP_METRIC_FILE; its log lines carry the job's id. The metric is the last cloudml-hypertune report of
`hyperparameterMetricTag` (default `training/hptuning/metric`), else — as the legacy service also read it — the
last value of that TensorFlow summary tag in the event files under `<jobDir>/<trial id>` (gs:// or local, when
TensorBoard can be imported by the emulator).
"""

from __future__ import annotations

import re
from typing import Any, Callable

from mlsubmit.emulator import jobs_api
from mlsubmit.emulator.errors import field_error
from mlsubmit.emulator.hp_tuning import HpTuning, Study, Trial
from mlsubmit.emulator.plan import TRIAL_ENV, legacy_plan
from mlsubmit.emulator.store import Job
from mlsubmit.emulator.times import now

# job name -> the trainingOutput of its study, for legacy.render (which sees the stored job only)
OUTPUTS: dict[str, Callable[[], dict[str, Any]]] = {}
_STATES = {"ACTIVE": "RUNNING", "SUCCEEDED": "SUCCEEDED", "INFEASIBLE": "FAILED", "STOPPING": "CANCELLING"}


def is_tuning(body: dict[str, Any]) -> bool:
    return bool((body.get("trainingInput") or {}).get("hyperparameters"))


def training_output(job_name: str, resource: dict[str, Any]) -> dict[str, Any]:
    """`resource` with its study's trainingOutput when the job is a tuning job (else unchanged)."""
    output = OUTPUTS.get(job_name)
    if output is None:
        return resource
    return {**resource, "trainingOutput": {**(resource.get("trainingOutput") or {}), **output()}}


class LegacyTuning(HpTuning):
    """The tuning jobs of one emulator's legacy API."""

    WORK_NAME = "legacy-hptuning"

    def create_job(self, body: dict[str, Any], project: str, render: Callable[[Job], dict]) -> tuple[int, dict]:
        from mlsubmit.errors import UsageError
        from mlsubmit.tuning.requests import from_legacy

        try:
            tuning, _ = from_legacy(self._resumed(body["trainingInput"]["hyperparameters"], project))
        except UsageError as err:
            where = re.sub(r" \(.*?\)", "", err.message.split(": ")[0].removeprefix("invalid value for "))
            raise field_error(where.removeprefix("invalid "), err.one_line()) from None
        plan = legacy_plan(body, project)
        self.emulator.executor.check_packages(plan)
        job = Job(name=f"projects/{project}/jobs/{body['jobId']}", api="legacy", job_id=body["jobId"],
                  project=project, body=body)
        if self.emulator.store.get(job.name) is not None or (stored := self.emulator.store.add(job)) is None:
            raise jobs_api._exists(job)
        study = Study(job.name, body, tuning, project, "")
        with self.lock:
            self.studies[study.name] = study
        OUTPUTS[job.name] = lambda: self._output(study)
        self.emulator.store.append_log(stored, "service", f"Job {job.job_id} is queued: hyperparameter tuning, "
                                       f"{tuning.max_trials} trials, at most {tuning.parallel_trials} at once.")
        self._start(study)
        return 200, render(self.emulator.store.get(job.name))

    def _resumed(self, spec: dict[str, Any], project: str) -> dict[str, Any]:
        """A resume-only spec (resumePreviousJobId, no params) continues the previous job's study: its goal, metric
        and params, with this spec's counts (the trials run afresh here)."""
        previous = spec.get("resumePreviousJobId")
        if not previous or spec.get("params"):
            return spec
        job = self.emulator.store.get(f"projects/{project}/jobs/{previous}")
        before = ((job.body if job is not None else {}).get("trainingInput") or {}).get("hyperparameters")
        if not before:
            raise field_error("job.training_input.hyperparameters.resume_previous_job_id",
                              f"no hyperparameter tuning job {previous} in project {project} to resume")
        return {**{k: before[k] for k in ("goal", "hyperparameterMetricTag", "params") if k in before}, **spec}

    def _start(self, study: Study) -> None:
        import threading

        thread = threading.Thread(target=self._drive, args=(study,), name=f"hptuning-{study.name}", daemon=True)
        self.threads.append(thread)
        thread.start()

    def _output(self, study: Study) -> dict[str, Any]:
        from mlsubmit.tuning.search import flag_value

        with self.lock:
            trials = list(study.trials)
        rendered = []
        for trial in trials:
            job = self.emulator.store.get(trial.custom_job)
            cancelled = job is not None and job.state == "CANCELLED"
            state = "CANCELLED" if cancelled else _STATES.get(trial.state, trial.state)
            entry: dict[str, Any] = {"trialId": trial.id, "state": state,
                                     "hyperparameters": {k: flag_value(v) for k, v in trial.values.items()},
                                     "startTime": trial.start_time}
            if trial.value is not None:
                entry["finalMetric"] = {"trainingStep": str(trial.step), "objectiveValue": trial.value}
            if trial.end_time:
                entry["endTime"] = trial.end_time
            rendered.append(entry)
        done = sum(1 for t in trials if t.state != "ACTIVE")
        return {"isHyperparameterTuningJob": True, "hyperparameterMetricTag": study.tuning.metric,
                "completedTrialCount": str(done), "trials": rendered}

    # -- HpTuning's hooks ----------------------------------------------------------------------------------
    def _seed(self, study: Study) -> int:
        import zlib

        return zlib.crc32(study.name.encode())

    def _cancel_asked(self, study: Study) -> bool:
        job = self.emulator.store.get(study.name)
        return job is not None and job.state == "CANCELLING"  # legacy.py's cancel asked the executor

    def _update(self, study: Study, **changes: Any) -> None:
        super()._update(study, **changes)
        mirrored = {key: changes[key] for key in ("state", "start_time", "end_time") if key in changes}
        if "error" in changes and changes.get("state") != "CANCELLED":
            mirrored["error"] = changes["error"]
            mirrored["error_status"] = changes.get("error_status")
        if mirrored:
            job = self.emulator.store.update(study.name, **mirrored)
            if "end_time" in mirrored:
                said = f"Job {'completed successfully' if job.state == 'SUCCEEDED' else job.state.lower()}."
                self.emulator.store.append_log(job, "service", said if not job.error else f"{said} {job.error}",
                                               "ERROR" if job.state == "FAILED" else "INFO")

    def _start_trial(self, study: Study, values: dict[str, Any]) -> Trial:
        from mlsubmit.tuning.search import trial_args

        from mlsubmit.emulator.legacy import FLAVOR

        trial_id = str(len(study.trials) + 1)
        job_id = study.body["jobId"]
        metric_file = self.work / job_id / trial_id / "output.metrics"
        metric_file.parent.mkdir(parents=True, exist_ok=True)
        training = {k: v for k, v in study.body["trainingInput"].items() if k != "hyperparameters"}
        training["args"] = [*(training.get("args") or []), *trial_args(values)]
        body = {"jobId": job_id, "labels": {**(study.body.get("labels") or {}), "hp_tuning_trial": trial_id},
                "trainingInput": training,
                TRIAL_ENV: {"CLOUD_ML_TRIAL_ID": trial_id, "CLOUD_ML_HP_METRIC_FILE": str(metric_file)}}
        name = f"projects/{study.project}/hptuningTrials/{job_id}/{trial_id}"  # outside the jobs collection
        jobs_api.create(self.emulator, FLAVOR, Job(name=name, api="legacy", job_id=job_id, project=study.project,
                                                   body=body), legacy_plan(body, study.project))
        trial = Trial(trial_id, values, name, metric_file, start_time=now())
        with self.lock:
            study.trials.append(trial)
            study.update_time = now()
        return trial

    def _read_metric(self, trial: Trial, metric: str) -> tuple[float | None, int]:
        from mlsubmit.tuning.trial import read_summary_metric

        value, step = super()._read_metric(trial, metric)
        job = self.emulator.store.get(trial.custom_job)
        job_dir = ((job.body.get("trainingInput") or {}).get("jobDir") or "") if job else ""
        if value is None and metric and job_dir:
            value, step = read_summary_metric(f"{job_dir.rstrip('/')}/{trial.id}", metric)
        return value, step
