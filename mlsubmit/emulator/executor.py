"""Run accepted jobs for real: QUEUED → PREPARING → RUNNING → SUCCEEDED / FAILED / CANCELLED.

- A queue and at most `max_running` jobs preparing or running at once; the rest wait in order.
- PREPARING fetches the package URIs from Cloud Storage and installs them into an isolated venv (`prepare`) — but
  for a package run on a public image as a custom container, whose replicas run the container command as sent,
  which installs them (`container_run`).
- RUNNING starts one process per replica with `mlsubmit.local.runner.Runner` — the runner of `mlsubmit train
  --local` — each with the environment its service sets (`mlsubmit.local.local_job.plan`: TF_CONFIG naming the chief
  `master` for legacy AI Platform and `chief` for Vertex AI, CLUSTER_SPEC, AIP_* directories, CLOUD_ML_JOB_ID)
  and the program and arguments of the job body (`plan`). Every output line becomes a log entry of its task.
- The job ends as the runner's outcome says; a failure carries the failing replica's exit status and last lines,
  worded as the service words it. Cancel stops every replica's process group; `scheduling.timeout` /
  `maxRunningTime` is enforced the same way.
- Spot jobs (`scheduling.strategy: SPOT`) are preempted on request (`preempt_spot_after` seconds after their
  replicas start, at most `preempt_spot_times` times): every replica is stopped and the same job is started again,
  with the same AIP_CHECKPOINT_DIR, as Vertex AI restarts a preempted spot job; the trainer resumes from its backup.
"""

from __future__ import annotations

import collections
import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from mlsubmit.local import children
from mlsubmit.emulator import prepare, reaper
from mlsubmit.emulator.plan import JobPlan, legacy_plan, vertex_plan
from mlsubmit.emulator.store import Job, Store
from mlsubmit.emulator.times import now

log = logging.getLogger("mlsubmit.emulator")
SERVICE_TASK = "service"  # the task name of the service's own log lines, as gcloud shows them
_SERVICE_VARIABLES = ("TF_CONFIG", "CLUSTER_SPEC", "AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR",
                      "CLOUD_ML_JOB_ID", "CLOUD_ML_PROJECT_ID", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
                      "TF_USE_LEGACY_KERAS", "MLSUBMIT_EMULATE_DEVICES")


def plan_of(job: Job) -> JobPlan:
    """The run plan of a stored job (recomputed from its accepted body: a pure function)."""
    if job.api == "vertex":
        location = job.name.split("/")[3]
        return vertex_plan(job.body, job.project, location, job.job_id)
    return legacy_plan(job.body, job.project)


def _is_spot(job: Job) -> bool:
    return ((job.body.get("jobSpec") or {}).get("scheduling") or {}).get("strategy") == "SPOT"


class _Run:
    """One job being prepared or run: its cancel/timeout flags and, once RUNNING, its runner."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()  # cancel asked (by the user, or by stop())
        self.stopping = False  # the emulator is shutting down: the job fails, saying so
        self.timed_out = False
        self.preempted = False  # the emulator preempted its spot replicas: they start again
        self.runner: Any = None
        self.children = children.Group()  # what preparing it started (pip): stopped on cancel and shutdown


WORK_DIR_NAME = "mlsubmit-emulator"  # a temporary work folder's name starts with it, then its owner (reaper)


class Executor:
    def __init__(self, store: Store, *, gcs_endpoint: str | None, max_running: int = 2,
                 work_dir: str | os.PathLike | None = None, preempt_spot_after: float | None = None,
                 preempt_spot_times: int = 2, capacity: Any = None):
        self.store, self.gcs_endpoint, self.max_running = store, gcs_endpoint, max_running
        self.capacity = capacity  # mlsubmit.emulator.capacity.Capacity: stockouts (None: capacity is unlimited)
        self.preempt_spot_after, self.preempt_spot_times = preempt_spot_after, preempt_spot_times
        self._own_work_dir = work_dir is None
        if self._own_work_dir:
            reaper.remove_abandoned(WORK_DIR_NAME)  # the folders of emulators that were killed
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix=reaper.owned_prefix(WORK_DIR_NAME)))
        self._cond = threading.Condition()
        self._queue: collections.deque[str] = collections.deque()
        self._runs: dict[str, _Run] = {}
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._dispatcher = threading.Thread(target=self._dispatch, name="emulator-dispatch", daemon=True)

    def start(self) -> None:
        for job in self.store.recovered:
            reaper.stop_leftovers(job.processes)
        shutil.rmtree(self.work_dir / "jobs", ignore_errors=True)  # what a crash left behind
        self._dispatcher.start()

    # -- what the APIs call ---------------------------------------------------------------------------------
    def check_packages(self, plan: JobPlan) -> None:
        prepare.check_packages(plan)

    def submit(self, job: Job) -> None:
        self.store.append_log(job, SERVICE_TASK, "Validating job requirements...")
        self.store.append_log(job, SERVICE_TASK, "Job creation request has been successfully validated.")
        self.store.append_log(job, SERVICE_TASK, f"Job {job.job_id} is queued.")
        with self._cond:
            self._queue.append(job.name)
            self._cond.notify_all()

    def cancel(self, name: str) -> None:
        """Ask a job to stop: a queued job is CANCELLED at once, a preparing or running one goes CANCELLING."""
        with self._cond:
            job = self.store.get(name)
            if job is None or job.is_terminal:
                return
            if name in self._queue:
                self._queue.remove(name)
                self._finish(job, "CANCELLED")
                return
            if job.state != "CANCELLING":
                self.store.update(name, state="CANCELLING")
                self.store.append_log(job, SERVICE_TASK, "Job is being cancelled.")
            run = self._runs.get(name)
        if run is not None:
            run.cancelled.set()
            if run.runner is not None:
                run.runner.cancel()
            else:
                run.children.stop()  # still preparing: a pip install is not waited for

    def preempt(self, name: str) -> bool:
        """Preempt a running spot job now (as `preempt_spot_after` does): False if it is not one."""
        with self._cond:
            run, job = self._runs.get(name), self.store.get(name)
            if run is None or run.runner is None or job is None or not _is_spot(job):
                return False
            run.preempted = True
            run.runner.cancel()
        return True

    def processes(self, name: str) -> list[dict[str, Any]]:
        """The replicas' processes: live ones from the runner, else those recorded when the job ended."""
        with self._cond:
            run = self._runs.get(name)
        if run is not None and run.runner is not None:
            return [reaper.describe(task, pid) for task, pid in run.runner.pids().items()]
        job = self.store.get(name)
        return [reaper.describe(p["task"], p["pid"]) for p in job.processes] if job else []

    def stop(self) -> None:
        """Stop everything: queued and running jobs end FAILED (the emulator is going away), processes stopped."""
        with self._cond:
            self._stopping = True
            queued, self._queue = list(self._queue), collections.deque()
            runs = dict(self._runs)
            self._cond.notify_all()
        for name in queued:
            job = self.store.get(name)
            if job is not None:
                self._finish(job, "FAILED", "The training-service emulator stopped before the job started.",
                             "ABORTED")
        for run in runs.values():
            run.stopping = True
            run.cancelled.set()
            run.children.stop(grace=0.5)
            if run.runner is not None:
                run.runner.cancel()
        for thread in list(self._threads):
            thread.join(timeout=30)
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    # -- the queue ------------------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not (self._queue and len(self._runs) < self.max_running):
                    self._cond.wait()
                if self._stopping:
                    return
                name = self._queue.popleft()
                self._runs[name] = _Run()
                thread = threading.Thread(target=self._execute, args=(name,), name=f"job-{name.rsplit('/', 1)[-1]}",
                                          daemon=True)
                self._threads.append(thread)
            thread.start()

    def _execute(self, name: str) -> None:
        run = self._runs[name]
        work = self.work_dir / "jobs" / name.rsplit("/", 1)[-1]
        try:
            with run.children:
                self._lifecycle(name, run, work)
        except Exception as err:  # a bug must fail the job, never leave it RUNNING forever
            job = self.store.get(name)
            if job is not None and not job.is_terminal and (run.stopping or run.cancelled.is_set()):
                self._interrupted(name, run)  # what it was doing (pip, a download) was stopped with it
            elif job is not None and not job.is_terminal:
                log.exception("job %s failed inside the emulator", name)
                self._finish(job, "FAILED", f"Internal error in the emulator: {type(err).__name__}: {err}",
                             "INTERNAL")
        finally:
            shutil.rmtree(work, ignore_errors=True)
            with self._cond:
                self._runs.pop(name, None)
                self._threads = [t for t in self._threads if t is not threading.current_thread()]
                self._cond.notify_all()

    def _lifecycle(self, name: str, run: _Run, work: Path) -> None:
        job = self.store.get(name)
        if job is None or job.is_terminal:
            return
        if job.state != "CANCELLING":
            job = self.store.update(name, state="PREPARING")
        say = lambda text: self.store.append_log(job, SERVICE_TASK, text)  # noqa: E731
        say("Waiting for job to be provisioned.")
        plan = plan_of(job)
        if not self._provisioned(job, plan, run, say):
            return
        if plan.tpu:
            say(f"The emulator has no Cloud TPU: the program of the {plan.tpu} pool runs on this machine's CPU "
                "(it sees no TPU devices).")
        try:
            if len(plan.replicas) > self._max_replicas():
                raise prepare.PrepareError(
                    f"The job asks for {len(plan.replicas)} replicas; the emulator runs at most "
                    f"{self._max_replicas()} on this machine (each TensorFlow process needs about 0.5 GB).")
            packages = prepare.fetch(plan, work / "packages")
            if run.cancelled.is_set():
                return self._interrupted(name, run)
            from mlsubmit.emulator.image_prepare import container_stand_in, image_python, without_backend_requirements
            container = container_stand_in(plan, packages, work, say)  # its replicas run their command as sent
            if container is not None:
                python = container.image_python
            else:
                packages = without_backend_requirements(packages, say)
                python = image_python(plan.spec, packages, say, api=plan.api) or prepare.venv_python(packages, say)
        except prepare.PrepareError as err:
            if run.cancelled.is_set():  # its install was stopped because the job was cancelled
                return self._interrupted(name, run)
            return self._finish(self.store.get(name), "FAILED", str(err), "INVALID_ARGUMENT")
        from mlsubmit.emulator.launch import outcome_of, runner_for

        timer, attempt = None, 0
        try:
            while True:
                runner = runner_for(job, plan, python, work, self._base_env(job), container=container,
                                    on_line=lambda task, text: self.store.append_log(job, task, text),
                                    on_started=lambda pids: self.store.update(
                                        name, processes=[reaper.record(task, pid) for task, pid in pids.items()]),
                                    say=say if attempt == 0 else (lambda text: None))  # devices: said once
                with self._cond:  # cancel() holds the lock too: CANCELLING is never overwritten with RUNNING
                    if run.cancelled.is_set():
                        return self._interrupted(name, run)
                    run.runner = runner
                    if attempt == 0:
                        self.store.update(name, state="RUNNING", start_time=now())
                if attempt == 0:
                    say("Job is running.")
                    timer = self._deadline(plan, run)
                preemption = self._preemption(job, run, attempt)
                try:
                    outcome = runner.run()
                finally:
                    if preemption is not None:
                        preemption.cancel()
                if not run.preempted or outcome.state == "SUCCEEDED" or run.cancelled.is_set() or run.timed_out:
                    break
                attempt, run.preempted = attempt + 1, False
                say(f"The spot VMs of this job were preempted (preemption {attempt}); its replicas were stopped and "
                    "the job is starting again.")
        finally:
            if timer is not None:
                timer.cancel()
        if not self.store.get(name).processes:  # ended before its start was recorded
            self.store.update(name, processes=[{"task": task, "pid": pid, "started": None}
                                               for task, pid in runner.pids().items()])
        if run.stopping or (run.cancelled.is_set() and not run.timed_out):
            return self._interrupted(name, run)
        state, error, status = outcome_of(plan, outcome, timed_out=run.timed_out)
        self._finish(self.store.get(name), state, error, status)

    def _provisioned(self, job: Job, plan: JobPlan, run: _Run, say: Any) -> bool:
        """Whether the job got its machines. A stockout (mlsubmit.emulator.capacity) fails it before it runs,
        unless it is FLEX_START: then it waits until the stockout is lifted or its maxWaitDuration passes."""
        region = plan.spec.region
        if self.capacity is None or job.api != "vertex" or not self.capacity.stocked_out(region, job.body):
            return True
        scheduling = (job.body.get("jobSpec") or {}).get("scheduling") or {}
        if scheduling.get("strategy") != "FLEX_START":
            self._finish(job, "FAILED", f"Resources are insufficient in region: {region}. Please try a different "
                                        "region.", "RESOURCE_EXHAUSTED")
            return False
        limit = float(str(scheduling.get("maxWaitDuration", "86400s")).rstrip("s") or 0)
        said = "indefinitely" if limit == 0 else f"up to {limit:g} s (scheduling.maxWaitDuration)"
        say(f"Waiting for resources in {region}: FLEX_START (Dynamic Workload Scheduler) waits {said}.")
        end = time.monotonic() + limit if limit else None
        while self.capacity.stocked_out(region, job.body):
            if run.cancelled.is_set():
                self._interrupted(job.name, run)
                return False
            if end is not None and time.monotonic() >= end:
                self._finish(job, "FAILED", f"The requested resources could not be provisioned in {region} within "
                                            f"the maximum wait ({limit:g}s, scheduling.maxWaitDuration).",
                             "RESOURCE_EXHAUSTED")
                return False
            self.capacity.wait(min(0.2, end - time.monotonic()) if end is not None else 0.2)
        say(f"Resources are available in {region}; the job is being provisioned.")
        return True

    def _interrupted(self, name: str, run: _Run) -> None:
        job = self.store.get(name)
        if run.stopping:
            self._finish(job, "FAILED", f"The training-service emulator was stopped while this job was {job.state}; "
                                        f"its replicas were stopped. Submit the job again.", "ABORTED")
        else:
            self._finish(job, "CANCELLED")

    def _deadline(self, plan: JobPlan, run: _Run) -> threading.Timer | None:
        seconds = plan.spec.max_runtime_seconds
        if not seconds:
            return None

        def expire() -> None:
            run.timed_out = True
            run.runner.cancel()

        timer = threading.Timer(seconds, expire)
        timer.daemon = True
        timer.start()
        return timer

    def _preemption(self, job: Job, run: _Run, attempt: int) -> threading.Timer | None:
        """A timer that preempts a spot job's replicas `preempt_spot_after` seconds from now, if asked."""
        if not _is_spot(job) or self.preempt_spot_after is None or attempt >= self.preempt_spot_times:
            return None

        def preempt() -> None:
            run.preempted = True
            run.runner.cancel()

        timer = threading.Timer(self.preempt_spot_after, preempt)
        timer.daemon = True
        timer.start()
        return timer

    def _finish(self, job: Job, state: str, error: str | None = None, status: str | None = None) -> None:
        if state == "CANCELLED":
            error, status = error or "CANCELED", status or "CANCELLED"
        job = self.store.update(job.name, state=state, end_time=now(), error=error, error_status=status)
        # the service's own line names the failure; the replica's traceback is in the replica's log, shown once
        first = (error or "").strip().splitlines()[:1]
        said = {"SUCCEEDED": "Job completed successfully.", "CANCELLED": "Job was cancelled.",
                "FAILED": f"Job failed. {first[0] if first else ''}".strip()}[state]
        self.store.append_log(job, SERVICE_TASK, said, "ERROR" if state == "FAILED" else "INFO")

    def _base_env(self, job: Job) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SERVICE_VARIABLES}
        env.update(PYTHONUNBUFFERED="1", PYTHONSAFEPATH="1", GOOGLE_CLOUD_PROJECT=job.project)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        if self.gcs_endpoint:
            env["STORAGE_EMULATOR_HOST"] = self.gcs_endpoint
        return env

    @staticmethod
    def _max_replicas() -> int:
        from mlsubmit.local.local_job import MAX_REPLICAS

        return MAX_REPLICAS
