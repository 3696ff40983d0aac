"""RUNNING: the replicas of a job plan started with `mlsubmit.local.runner.Runner`, and its outcome in the API's words.

The service environment comes from `mlsubmit.local.local_job.plan` (the one place that knows what Vertex AI and
legacy AI Platform set); the program and arguments come from the job body (`plan.Replica`), because the
service runs them unchanged — it never adds `--emulate-devices`, and only legacy AI Platform adds `--job-dir`. A pool
with more GPUs than this machine has gets MLSUBMIT_EMULATE_DEVICES in its processes' environment, as `train --local
--gpus N` gives it: never in the job's body, so nothing of it reaches a real job.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlsubmit.emulator.plan import JobPlan
from mlsubmit.emulator.store import Job

_TAIL = 20  # lines of the failing replica a failed job's error carries


class JobRunner:
    """A Runner whose lines, pids and failures are named by the API's task names (`workerpool0-0`)."""

    def __init__(self, runner: Any, tasks: dict[str, str], on_started: Callable[[dict[str, int]], None]):
        self.runner, self.tasks, self.on_started = runner, tasks, on_started

    def pids(self) -> dict[str, int]:
        return {self.tasks[name]: pid for name, pid in self.runner.pids().items()}

    def cancel(self) -> None:
        self.runner.cancel()

    def run(self) -> Any:
        done = threading.Event()

        def report_when_started() -> None:
            while not done.is_set():
                pids = self.pids()
                if len(pids) == len(self.tasks):
                    self.on_started(pids)
                    return
                time.sleep(0.05)

        threading.Thread(target=report_when_started, daemon=True).start()
        try:
            return self.runner.run()
        finally:
            done.set()


def runner_for(job: Job, plan: JobPlan, python: Path, work: Path, base_env: dict[str, str], *,
               on_line: Callable[[str, str], None],
               on_started: Callable[[dict[str, int]], None] = lambda pids: None,
               say: Callable[[str], None] = lambda text: None, container: Any = None) -> JobRunner:
    """A JobRunner for every replica of `plan`, run by `python` (the job's venv), each in its own empty working
    directory `work/replicas/<name>` (what one writes by a relative path never meets another's). With a `container`
    (emulator.container_run.Container), each replica runs its containerSpec command as sent instead, in a fresh
    environment of its own on the image's."""
    from mlsubmit.local import local_job
    from mlsubmit.local.runner import Replica, Runner
    from mlsubmit.local.workdir import replica_dir
    from mlsubmit.tuning.trial import with_trial
    from mlsubmit_runtime import EMULATE_DEVICES_VARIABLE

    ports = local_job.reserve_ports(len(plan.replicas))
    service = local_job.plan(plan.spec, api=plan.api, job_id=plan.job_id, job_dir=plan.base_output_dir or "",
                             ports=ports, gpus_here=local_job.gpus_on_this_machine())
    if service.emulated_devices:  # as `train --local --gpus N`: the process's environment only, never the job's
        say(f"This machine has {service.gpus_here} GPU(s) and the job asks for {service.emulated_devices}: each "
            f"replica gets {EMULATE_DEVICES_VARIABLE}={service.emulated_devices} (a trainer that reads it through "
            "mlsubmit_runtime splits the CPU into that many devices).")
    work.mkdir(parents=True, exist_ok=True)
    replicas, tasks = [], {}
    for planned, ours in zip(service.replicas, plan.replicas, strict=True):
        if (planned.role, planned.index) != (ours.role, ours.index):
            raise RuntimeError(f"replica order differs: {planned.name} vs {ours.task}")
        emulated = {EMULATE_DEVICES_VARIABLE: str(planned.emulate_devices)} if planned.emulate_devices else {}
        env = with_trial({**base_env, **planned.env, **dict(ours.env), **emulated})  # task.trial of a tuning trial
        if plan.api == "vertex" and not plan.base_output_dir:
            for key in ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR"):
                env.pop(key, None)  # Vertex AI sets them only with a baseOutputDirectory
        own = replica_dir(work / "replicas", planned.name)  # its own empty disk, as on Vertex AI
        temp = work / "tmp" / planned.name  # its temporary files, removed with `work` whatever ends the job
        temp.mkdir(parents=True, exist_ok=True)
        env = {**env, "PWD": str(own.path), "TMPDIR": str(temp)}
        argv: tuple[str, ...] = (str(python), "-m", ours.module, *ours.args)
        if container is not None:
            argv, env = container.argv(ours.command), container.environment(work / "containers" / planned.name, env)
        replicas.append(Replica(planned.name, planned.role, argv, env, str(own.path)))
        tasks[planned.name] = ours.task
    runner = Runner(replicas, sink=lambda line: None,
                    on_line=lambda name, text: on_line(tasks[name], text))
    return JobRunner(runner, tasks, on_started)


def tensorflow_gcs_note(traceback: str) -> str | None:
    """For a replica that failed in TensorFlow's own Cloud Storage filesystem (tf.io.gfile, a Keras save or a
    checkpoint to gs://): why that cannot work in the emulator, and what to do."""
    lines = traceback.splitlines()
    tensorflow = any("errors_impl." in line or "File system scheme 'gs'" in line for line in lines)
    if not tensorflow or not any("gs://" in line or "googleapis.com" in line for line in lines):
        return None
    return ("(emulator) TensorFlow's own GCS filesystem (tf.io.gfile, model.save or checkpoints to gs://) cannot "
            "reach the emulator's Cloud Storage: it does not read STORAGE_EMULATOR_HOST. Write to a local directory "
            "and upload it with google-cloud-storage (mlsubmit_runtime.artifacts.publish_dir does), or run "
            "`mlsubmit train --local` with a local --job-dir.")


def outcome_of(plan: JobPlan, outcome: Any, *, timed_out: bool) -> tuple[str, str | None, str | None]:
    """(state, error message, google.rpc status name) of a finished run, worded as the service words it."""
    from mlsubmit.local.runner import describe_exit

    if timed_out:
        seconds = plan.spec.max_runtime_seconds
        return "FAILED", f"Job exceeded the maximum running time of {seconds}s and was stopped.", "DEADLINE_EXCEEDED"
    if outcome.state == "SUCCEEDED":
        return "SUCCEEDED", None, None
    name = outcome.failed or "chief-0"
    replica = next((r for r in plan.replicas if f"{r.role}-{r.index}" == name), plan.chief)
    code = outcome.exit_codes.get(name)
    ended = f"exited with a non-zero status of {code}" if code is not None and code > 0 else \
        describe_exit(code) if code is not None else f"failed ({outcome.reason})"
    if plan.api == "legacy":
        message = f"The replica {'master' if replica.role == 'chief' else replica.role} {replica.index} {ended}."
    else:
        message = f"The replica {replica.task} {ended}. Termination reason: Error."
    # legacy AI Platform put the replica's last lines in the job's errorMessage; Vertex AI's error names the replica
    # and points at the logs, where its traceback is (shown once, by the logs)
    note = tensorflow_gcs_note(outcome.traceback)
    if note:  # the emulator's own word, on the line a user reads first
        message = f"{message} {note}"
    detail = "\n".join(outcome.traceback.splitlines()[-_TAIL:]) if plan.api == "legacy" else ""
    return "FAILED", f"{message}\n{detail}" if detail else message, "INVALID_ARGUMENT"
