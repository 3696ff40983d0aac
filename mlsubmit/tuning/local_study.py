"""`mlsubmit train --local` with a tuning spec: the study's trials run here, with the suggestions the emulator
makes (mlsubmit.tuning.search), at most `parallel_trials` at once.

Each trial is the job run as `mlsubmit train --local` runs it (mlsubmit.local.local_job: TF_CONFIG, CLUSTER_SPEC, AIP_*
on free ports of 127.0.0.1) from the package installed once into its venv, with the trial's values as
`--name=value` arguments, its own job dir `<job dir>/<trial id>`, CLOUD_ML_TRIAL_ID, CLOUD_ML_HP_METRIC_FILE
(`<trial job dir>/hypertune/output.metrics`) and `task.trial` in TF_CONFIG. Its metric is the last one it
reported through cloudml-hypertune (legacy: or, failing that, the TensorFlow summary tag in its job dir). A
trial that fails or reports nothing is INFEASIBLE; more than `max_failed_trials` of them end the study.
Ctrl-C (or `cancel()`) stops every running trial.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mlsubmit.local import local_job
from mlsubmit.local.runner import Runner
from mlsubmit.jobspec.spec import JobSpec

_POLL = 0.1


@dataclass
class LocalTrial:
    id: str
    values: dict[str, Any]
    job_dir: str
    state: str = "ACTIVE"  # ACTIVE, SUCCEEDED, INFEASIBLE, CANCELLED
    value: float | None = None
    step: int = 0
    reason: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class LocalStudy:
    state: str  # SUCCEEDED, FAILED, CANCELLED
    job_dir: str
    trials: tuple[LocalTrial, ...]
    reason: str = ""

    def resource(self, tuning: Any) -> dict[str, Any]:
        """The study as a legacy Job's trainingOutput reads (for mlsubmit.tuning.results)."""
        from mlsubmit.tuning.requests import legacy_hyperparameters
        from mlsubmit.tuning.search import flag_value

        trials = []
        for trial in self.trials:
            entry: dict[str, Any] = {"trialId": trial.id, "state": trial.state,
                                     "hyperparameters": {k: flag_value(v) for k, v in trial.values.items()}}
            if trial.value is not None:
                entry["finalMetric"] = {"trainingStep": str(trial.step), "objectiveValue": trial.value}
            trials.append(entry)
        return {"trainingInput": {"hyperparameters": legacy_hyperparameters(tuning)},
                "trainingOutput": {"trials": trials, "completedTrialCount": str(len(trials)),
                                   "isHyperparameterTuningJob": True}}


class LocalTuning:
    def __init__(self, spec: JobSpec, tuning: Any, *, api: str, job_dir: str, python: Path,
                 say: Callable[[str], None], seed: int = 0):
        self.spec, self.tuning, self.api, self.job_dir, self.python = spec, tuning, api, job_dir, python
        self.say, self.seed = say, seed
        self._cancel = threading.Event()
        self._runners: dict[str, Runner] = {}

    def cancel(self) -> None:
        self._cancel.set()
        for runner in list(self._runners.values()):
            runner.cancel()

    def run(self) -> LocalStudy:
        from mlsubmit.tuning.search import Search

        search = Search(self.tuning, seed=self.seed)
        for note in search.notes:
            self.say(f"note: {note}")
        trials: list[LocalTrial] = []
        running: dict[int, tuple[LocalTrial, threading.Thread]] = {}
        failed = 0
        limit = self.tuning.max_failed_trials
        try:
            while True:
                for number, (trial, thread) in list(running.items()):
                    if not thread.is_alive():
                        search.tell(number, trial.value if trial.state == "SUCCEEDED" else None)
                        failed += trial.state == "INFEASIBLE"
                        del running[number]
                if self._cancel.is_set():
                    return self._end("CANCELLED", trials, running, "stopped by the user")
                if failed and failed > (limit if limit is not None else search.total - 1):
                    return self._end("FAILED", trials, running, f"{failed} trials failed (maxFailedTrials "
                                     f"{limit if limit is not None else 'default'})")
                if len(trials) < search.total and len(running) < self.tuning.parallel_trials:
                    number, values = search.ask()
                    trial = LocalTrial(str(len(trials) + 1), values, f"{self.job_dir.rstrip('/')}/{len(trials) + 1}")
                    trials.append(trial)
                    thread = threading.Thread(target=self._run_trial, args=(trial,), daemon=True)
                    running[number] = (trial, thread)
                    thread.start()
                    continue
                if not running:
                    return LocalStudy("SUCCEEDED", self.job_dir, tuple(trials))
                time.sleep(_POLL)
        except KeyboardInterrupt:
            self.cancel()
            return self._end("CANCELLED", trials, running, "stopped by the user")

    def _end(self, state: str, trials: list[LocalTrial], running: dict, reason: str) -> LocalStudy:
        self.cancel()
        for trial, thread in running.values():
            thread.join()
        return LocalStudy(state, self.job_dir, tuple(trials), reason)

    def _run_trial(self, trial: LocalTrial) -> None:
        from mlsubmit.local.local_run import local_workdirs, replicas_to_start
        from mlsubmit.local.workdir import runs_root
        from mlsubmit.tuning.search import trial_args
        from mlsubmit.tuning.trial import trial_env

        started = time.monotonic()
        try:
            spec = self.spec.replace(args=(*self.spec.args, *trial_args(trial.values)))
            ports = local_job.reserve_ports(len(local_job.roles(spec)))
            job = local_job.plan(spec, api=self.api, job_id=f"{os.path.basename(self.job_dir)}-trial-{trial.id}",
                                 job_dir=trial.job_dir, ports=ports, gpus_here=local_job.gpus_on_this_machine())
            metric_file = Path(trial.job_dir) / "hypertune" / "output.metrics"
            workdirs = local_workdirs(job, runs_root(os.path.basename(self.job_dir)) / f"trial-{trial.id}")
            replicas = [replace(r, env=trial_env(dict(r.env), trial.id, metric_file))
                        for r in replicas_to_start(job, self.python, workdirs=workdirs)]
            self.say(f"trial {trial.id}: {' '.join(trial_args(trial.values))} (job dir {trial.job_dir})")
            runner = Runner(replicas, sink=lambda line: self.say(f"[trial {trial.id}] {line}"))
            self._runners[trial.id] = runner
            if self._cancel.is_set():
                runner.cancel()
            outcome = runner.run()
        except Exception as err:  # a trial that cannot start is a failed trial, never a dead study
            trial.state, trial.reason = "INFEASIBLE", f"the trial could not start: {err}"
            return
        finally:
            trial.seconds = time.monotonic() - started
        self._settle(trial, outcome, metric_file)

    def _settle(self, trial: LocalTrial, outcome: Any, metric_file: Path) -> None:
        """The trial's state and metric once its job ended (`outcome`: a runner's or a cluster job's)."""
        from mlsubmit.tuning.trial import read_metric, read_summary_metric

        if outcome.state == "CANCELLED":
            trial.state, trial.reason = "CANCELLED", "stopped"
            return
        value, step = read_metric(metric_file, self.tuning.metric)
        if value is None and self.api == "legacy":
            value, step = read_summary_metric(trial.job_dir, self.tuning.metric)
        if outcome.state == "SUCCEEDED" and value is not None:
            trial.state, trial.value, trial.step = "SUCCEEDED", value, step
        else:
            trial.state = "INFEASIBLE"
            trial.reason = (outcome.reason if outcome.state != "SUCCEEDED"
                            else f"the trial reported no {self.tuning.metric!r} through cloudml-hypertune")
        self.say(f"trial {trial.id} {trial.state}" + (f": {self.tuning.metric} {trial.value:g}" if trial.value
                                                        is not None else f": {trial.reason}"))
