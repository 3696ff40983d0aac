"""`mlsubmit train --local` with a tuning spec: run the trials here (mlsubmit.tuning.local_study) and render them — each
trial's output prefixed with `[trial N]`, then the results table (best marked) and a PNG of the metric per trial
against each parameter in the job dir (`trials.png`)."""

from __future__ import annotations

import os
from typing import Any

import typer

from mlsubmit.errors import OperationFailed, invalid_value


def train_local_tuning(spec_flags: dict[str, Any], tuning: Any, tuning_notes: list[str], *, api: str,
                       package_path: str, package_flags: dict[str, Any] | None = None) -> None:
    """Run the study here: every trial runs the package as the job would, installed with its --requirements and
    --extra-packages on the job's image environment (as `train --local` and the cloud job install them)."""
    from mlsubmit.commands._spec_options import local_spec
    from mlsubmit.jobspec.job_names import generate_job_name
    from mlsubmit.extras import require
    from mlsubmit.local.local_run import job_python
    from mlsubmit.packaging import resolve_extras
    from mlsubmit.packaging.requirements_txt import split_requirements
    from mlsubmit.tuning.local_study import LocalTuning

    if tuning.resume_only:
        raise invalid_value(f"{tuning.where}.resumePreviousJobId", tuning.resume_previous_job_id, "a study with its "
                            "own goal and params for --local (only legacy AI Platform kept the previous job's study)",
                            hint=f"copy goal and params from job {tuning.resume_previous_job_id} into the spec")
    package_flags = package_flags or {}
    requirements = split_requirements(package_flags.get("requirements") or [])
    extras = resolve_extras(package_flags.get("extra_packages") or [])
    require("tuning", purpose="a tuning study run here (--hptune-config with --local)")
    # the hyperparameters' notes are left out: they are mapped, the trials run
    spec = local_spec(spec_flags, mapped="trainingInput.hyperparameters:", more_notes=tuple(tuning_notes))
    if spec.job_dir and spec.job_dir.startswith("gs://"):
        raise invalid_value("--job-dir", spec.job_dir, "a local directory for a study run with --local (each trial "
                            "writes its job dir and cloudml-hypertune metrics under it)", hint="pass a local --job-dir")
    say = typer.echo
    python, name = job_python(spec, package_path=package_path, setup_py=None, say=say, api=api,  # the job's image
                              requirements=requirements, extras=extras)
    job_id = spec.job_name or generate_job_name(name)
    job_dir = os.path.abspath(spec.job_dir or f"jobs/{job_id}")
    say(f"study {job_id}: {tuning.max_trials} trials, at most {tuning.parallel_trials} at once, "
        f"{tuning.goal.lower()} {tuning.metric!r} ({tuning.algorithm}); trial job dirs under {job_dir}/")
    study = LocalTuning(spec.replace(job_name=job_id), tuning, api=api, job_dir=job_dir, python=python,
                        say=say).run()
    render_study(study, tuning, job_id, job_dir)


def render_study(study: Any, tuning: Any, job_id: str, job_dir: str) -> None:
    """The trials table (best marked), trials.png in the job dir, how the study ended (OperationFailed unless it
    SUCCEEDED)."""
    from mlsubmit.commands._tuning_view import trial_table, write_plot
    from mlsubmit.tuning.results import results_of

    results = results_of(study.resource(tuning))
    trial_table(results)
    if results.best is not None:
        write_plot(results, os.path.join(job_dir, "trials.png"), title=f"study {job_id}")
    colour = {"SUCCEEDED": "green", "FAILED": "red"}.get(study.state, "yellow")
    typer.secho(f"study {job_id} {study.state}" + (f": {study.reason}" if study.reason else ""), fg=colour,
                bold=True, err=True)
    if study.state == "CANCELLED":
        raise OperationFailed(f"study {job_id} stopped by the user; every running trial was stopped", exit_code=130)
    if study.state != "SUCCEEDED":
        raise OperationFailed(f"study {job_id} failed: {study.reason}", hint=f"the trials' output is above; their "
                              f"job dirs are under {job_dir}/")
