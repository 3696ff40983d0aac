"""`mlsubmit train --backends tensorflow,jax,torch`: one job per Keras backend, rendered side by side.

Parses and renders only: the local runs are mlsubmit.local.backend_runs, the cloud jobs
mlsubmit.cloud.backend_jobs. Exit codes: 0 when every backend's job SUCCEEDED; otherwise, after all of them ended,
2 when every failure was the trainer refusing its input (exit code 2, as `train --local` reports one job), 130
when stopped by Ctrl-C, else 1.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import typer

from mlsubmit.errors import OperationFailed, UsageError

DASH = "—"


def _say(text: str) -> None:
    typer.echo(text, err=True)


def _number(value: float | None, digits: int) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def backend_table(results: list[Any]) -> list[str]:
    """The side-by-side table of local results: backend, state, accuracy, loss, samples/s, wall time, why."""
    from mlsubmit.local.backend_runs import ACCURACY_KEYS, LOSS_KEYS, SPEED_KEYS, first_number

    rows = [("backend", "state", "accuracy", "loss", "samples/s", "wall time", "")]
    for r in results:
        rows.append((r.backend, r.state, _number(first_number(r.metrics, ACCURACY_KEYS), 4),
                     _number(first_number(r.metrics, LOSS_KEYS), 4), _number(first_number(r.metrics, SPEED_KEYS), 1),
                     f"{r.seconds:.1f} s" if r.seconds else DASH, r.reason))
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1]), *(c.rjust(w) for c, w in zip(row[2:6], widths[2:]))]
        lines.append("  ".join(cells) + (f"  {row[6]}" if row[6] else ""))
    return lines


def _outcome(results: list[Any], what: str) -> None:
    """Return when every backend's job succeeded; else raise the one error that ends the command."""
    failed = [r for r in results if r.state != "SUCCEEDED"]
    if not failed:
        return
    listed = "; ".join(f"{r.backend} {r.state}" + (f" ({r.reason})" if r.reason else "") for r in failed)
    message = f"{len(failed)} of {len(results)} {what} did not succeed: {listed}"
    if any(r.state == "CANCELLED" for r in failed):
        raise OperationFailed(message, exit_code=130)
    if all(r.rejected for r in failed):
        raise UsageError(message, hint="fix the trainer arguments after -- (they reach it exactly as written)")
    raise OperationFailed(message, hint="each job's output is above, prefixed with its backend")


def train_local_backends(spec_flags: Any, backends: tuple[str, ...], *, api: str, package_path: str,
                         package_flags: dict[str, Any]) -> None:
    """`train --local --backends …`: run, then the table."""
    from mlsubmit.commands._spec_options import local_spec
    from mlsubmit.local.backend_runs import run_backends
    from mlsubmit.packaging import resolve_extras
    from mlsubmit.packaging.requirements_txt import split_requirements
    from mlsubmit.tuning.submit import tuning_of

    if tuning_of(spec_flags.get("config"), None)[0] is not None:
        raise UsageError("invalid options: --backends with a tuning study in --config",
                         hint="tune one backend at a time: --env KERAS_BACKEND=NAME")
    spec = local_spec(spec_flags)
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    results = run_backends(spec, backends, api=api, package_path=package_path, say=typer.echo, color=color,
                           requirements=split_requirements(package_flags["requirements"]),
                           extras=resolve_extras(package_flags["extra_packages"]))
    typer.echo("")
    for line in backend_table(results):
        typer.echo(line)
    for r in results:
        if r.job_dir:
            typer.echo(f"{r.backend}: {r.job_dir}")
    _outcome(results, "backends' jobs")


def _pinned(submission: Any, job: Any, *, check: bool) -> Any:
    """`job` with its backend's packages pinned to what pip resolves on the job's image (before any upload)."""
    from mlsubmit.cloud.backend_jobs import for_backend, package_kinds

    if not job.backend_packages:  # TensorFlow: the image carries it
        return job
    if not check:
        _say(f"warning: {job.keras_backend}: --skip-preflight: its packages go unpinned, not resolved against the "
             "job's image (the cloud's pip takes the newest releases)")
        return job
    from mlsubmit.jobspec.backend_pins import pins_on_image

    pins = pins_on_image(submission.spec, job.keras_backend, package_kinds(submission.body),
                         submission.package.plan.metadata.requires, _say)
    return job if pins is None else for_backend(submission, job.keras_backend, pins)


def submit_backends(submission: Any, backends: tuple[str, ...], cloud_flags: dict[str, Any], *, mode: str,
                    render_dry_run: Callable[..., None]) -> None:
    """Cloud `train --backends …`: every backend's job created (or found, on a re-run) before any is followed."""
    from mlsubmit.cloud import submit as submitting
    from mlsubmit.cloud.backend_jobs import for_backend, stage_backend_packages
    from mlsubmit.commands._cloud_options import service_of
    from mlsubmit.commands._cloud_train import create_once
    from mlsubmit.commands._jobs_view import finish, follow

    jobs = tuple(for_backend(submission, name) for name in backends)
    if cloud_flags.get("dry_run"):
        render_dry_run(submission, jobs)
        return
    jobs = tuple(_pinned(submission, job, check=not cloud_flags.get("skip_preflight")) for job in jobs)
    settings = submission.settings
    service = service_of(submission.api, settings)
    staged = submitting.stage(submission, check=not cloud_flags.get("skip_preflight"), show_progress=True, say=_say)
    sent = f"uploaded, {staged.bytes_sent:,} bytes" if staged.uploaded else "already staged, 0 bytes sent"
    _say(f"package {staged.uri} ({sent})")
    for package in stage_backend_packages(list(jobs)):
        sent = f"uploaded, {package.bytes_sent:,} bytes" if package.uploaded else "already staged, 0 bytes sent"
        _say(f"backend package {package.uri} ({sent})")
    statuses = []
    for job in jobs:
        statuses.append((job, create_once(job, service, who=job.keras_backend)))
    if mode == "async_":
        for _, status in statuses:
            typer.echo(status.job_id)
        return
    ended = []
    for job, status in statuses:  # in turn: the others keep running meanwhile
        _say(f"── {job.keras_backend}: following job {status.job_id} " + "─" * 30)
        final, finder = follow(service, status, settings=settings, logs=mode == "stream_logs", announced=True)
        try:
            finish(service, final, finder, settings=settings)
            ended.append((job.keras_backend, final, ""))
        except OperationFailed as err:
            ended.append((job.keras_backend, final, err.message))
    width = max(len(name) for name, _, _ in ended)
    for name, final, why in ended:
        typer.echo(f"{name.ljust(width)}  {final.job_id}  {final.state}" + (f"  {why}" if why else ""))
    failed = [(name, final) for name, final, _ in ended if not final.succeeded]
    if failed:
        raise OperationFailed(f"{len(failed)} of {len(ended)} backends' jobs did not succeed: "
                              + ", ".join(f"{name} {final.state}" for name, final in failed))
