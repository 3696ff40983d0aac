"""`train --local --backends tensorflow,jax,torch`: the same job spec run here once per Keras backend.

1. before anything starts: every backend importable in mlsubmit's environment (else one line naming the extra to
   install), the spec runnable here, the package installed once per environment it runs in;
2. each backend's job: `KERAS_BACKEND=<name>` in every replica's environment, the job name suffixed `_<name>`, its
   job dir `<parent>/<name>` (the parent is `--job-dir`, or jobs/<job name> as `train --local` picks one);
3. run them side by side: at most `parallel_slots()` at a time (half the cores, at least one), the others in turn;
   one failing does not stop the others; each line the user reads is prefixed with its backend;
4. one BackendResult per backend: its state, why it failed, and the metrics its trainer wrote (metrics.json).

TensorFlow runs where `train --local` runs it (the image's environment when image environments are on); the other
backends run in mlsubmit's own environment, which holds them: an image environment carries the image's TensorFlow
only, and installing JAX or PyTorch into it from the package index would cost gigabytes.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlsubmit.errors import MlsubmitError, UsageError
from mlsubmit.jobspec import keras_backends
from mlsubmit.jobspec.spec import JobSpec

# metrics.json keys read for the table, first found wins: any trainer's, the bundled trainer's names among them
ACCURACY_KEYS = ("test_accuracy", "accuracy", "validation_accuracy", "val_accuracy")
LOSS_KEYS = ("test_loss", "loss", "validation_loss", "val_loss")
SPEED_KEYS = ("samples_per_second", "samples_per_sec", "examples_per_second")


@dataclass(frozen=True)
class BackendResult:
    backend: str
    job_id: str
    job_dir: str | None
    state: str  # SUCCEEDED, FAILED, CANCELLED
    seconds: float
    reason: str = ""  # why it failed: the failing replica's last line, or the error that stopped it
    rejected: bool = False  # the trainer refused its input (exit code 2)
    metrics: dict[str, Any] = field(default_factory=dict)


def parallel_slots(cpus: int | None = None) -> int:
    """How many backends' jobs run at once: half the cores (each job is at least one busy process), at least 1."""
    return max(1, (cpus if cpus is not None else os.cpu_count() or 1) // 2)


def parent_job(spec: JobSpec, *, api: str, package_path: str, requirements: tuple[str, ...] = ()) \
        -> tuple[str, str | None]:
    """(job name, parent job dir) of the whole run, chosen as `train --local` chooses one job's."""
    from mlsubmit.jobspec.job_names import generate_job_name
    from mlsubmit.packaging import plan_sdist

    name = spec.job_name or generate_job_name(plan_sdist(package_path, None, requirements).metadata.name)
    parent = spec.job_dir or (f"jobs/{name}" if api == "vertex" else None)
    if parent and not parent.startswith("gs://"):
        parent = os.path.abspath(parent)
    return name, parent


def backend_spec(spec: JobSpec, backend: str, *, api: str, name: str, parent: str | None) -> JobSpec:
    """`spec` as `backend`'s job: KERAS_BACKEND (Vertex AI's env; legacy runs TensorFlow only), its name and dir."""
    env = spec.env if api == "legacy" else (*spec.env, (keras_backends.VARIABLE, backend))
    return spec.replace(job_name=f"{name}_{backend}", job_dir=f"{parent.rstrip('/')}/{backend}" if parent else None,
                        env=env)


def read_metrics(job_dir: str | None) -> dict[str, Any]:
    """The shallowest metrics.json under a local job dir, as a dict ({} when there is none or it is unreadable)."""
    if not job_dir or job_dir.startswith("gs://") or not Path(job_dir).is_dir():
        return {}
    found = sorted(Path(job_dir).rglob("metrics.json"), key=lambda path: (len(path.parts), path))
    for path in found:
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(document, dict):
            return document
    return {}


def first_number(metrics: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = metrics.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _on_image(backend: str) -> bool:
    """Whether `backend`'s job runs in its image's environment (TensorFlow, with image environments on)."""
    from mlsubmit.images import envs as image_env

    return backend == "tensorflow" and image_env.enabled()


def check_backends(spec: JobSpec, backends: tuple[str, ...], *, api: str) -> None:
    """Everything that must hold before any backend's job starts. Raises UsageError."""
    from mlsubmit.cloud.backend_jobs import check_env
    from mlsubmit.local import local_job

    if api == "legacy":
        keras_backends.refuse_for_legacy(backends)
        from mlsubmit.jobspec.requests import reject_env_for_legacy

        reject_env_for_legacy(spec)
    keras_backends.require_installed(backends)
    check_env(spec)
    local_job.check_runnable(spec)


def run_backends(spec: JobSpec, backends: tuple[str, ...], *, api: str, package_path: str,
                 say: Callable[[str], None], color: bool = False, requirements: tuple[str, ...] = (),
                 extras: tuple = (), parallel: int | None = None) -> list[BackendResult]:
    """Run `spec` once per backend (see the module's docstring); results in the order of `backends`.

    Raises:
        UsageError: bad input, before any job starts.
    """
    from mlsubmit.images import envs as image_env
    from mlsubmit.local.local_run import job_python, run_local

    check_backends(spec, backends, api=api)
    name, parent = parent_job(spec, api=api, package_path=package_path, requirements=requirements)
    specs = {b: backend_spec(spec, b, api=api, name=name, parent=parent) for b in backends}
    # the package installed once per environment, in turn, before any job starts (bad packages stop here)
    environments: dict[bool, tuple[Path, str]] = {}
    for backend in backends:
        on_image = _on_image(backend)
        if on_image not in environments:
            environments[on_image] = job_python(specs[backend], package_path=package_path, setup_py=None, say=say,
                                                requirements=requirements, extras=extras, image_env=on_image)
    others = [b for b in backends if b != "tensorflow"]
    if others and image_env.enabled():
        say(f"{', '.join(others)}: run in mlsubmit's own environment (an image's environment carries its "
            "TensorFlow only)")
    slots = min(len(backends), parallel or parallel_slots())
    say(f"{len(backends)} jobs under {parent or 'no job dir'}: " + (
        f"{slots} at a time" if slots > 1 else "one after another (this machine has too few cores to run them "
                                               "side by side)"))
    lock, stopping, runners = threading.Lock(), threading.Event(), []

    def keep(runner: Any) -> None:
        with lock:
            runners.append(runner)
        if stopping.is_set():
            runner.cancel()

    def run_one(backend: str) -> BackendResult:
        def said(line: str) -> None:
            with lock:
                say(f"[{backend}] {line}")

        job_spec = specs[backend]
        if stopping.is_set():
            return BackendResult(backend, job_spec.job_name, job_spec.job_dir, "CANCELLED", 0.0,
                                 "not started: stopped by the user")
        try:
            run = run_local(job_spec, api=api, package_path=package_path, say=said, color=color,
                            requirements=requirements, extras=extras,
                            installed=environments[_on_image(backend)], on_runner=keep)
        except MlsubmitError as err:  # this backend's job could not start; the others go on
            return BackendResult(backend, job_spec.job_name, job_spec.job_dir, "FAILED", 0.0, err.one_line(),
                                 rejected=isinstance(err, UsageError))
        outcome, job = run.outcome, run.job
        rejected = outcome.failed is not None and outcome.exit_codes.get(outcome.failed) == 2
        reason = ""
        if outcome.state != "SUCCEEDED":
            last = (outcome.traceback or "").strip().splitlines()
            reason = f"{outcome.failed}: {last[-1]}" if last and outcome.failed else outcome.reason
        return BackendResult(backend, job.job_id, job.job_dir, outcome.state, outcome.seconds, reason, rejected,
                             read_metrics(job.job_dir))

    if slots == 1:  # in this thread: Ctrl-C stops the running job's replicas as `train --local` does
        results = []
        for backend in backends:
            results.append(run_one(backend))
            if results[-1].state == "CANCELLED":
                stopping.set()  # Ctrl-C: the backends still to run are not started
        return results
    pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="mlsubmit-backend")
    futures = [pool.submit(run_one, backend) for backend in backends]
    try:
        return [future.result() for future in futures]
    except KeyboardInterrupt:  # stop every job that runs; those not started yet never start
        stopping.set()
        with lock:
            for runner in runners:
                runner.cancel()
        return [future.result() for future in futures]
    finally:
        pool.shutdown(wait=True)
