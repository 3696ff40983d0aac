"""`mlsubmit train --target spark://|dask://|ray://HOST:PORT`: parse and render; the work is
mlsubmit.targets.cluster_run."""

from __future__ import annotations

import os
from typing import Any

import typer

from mlsubmit.errors import OperationFailed, UsageError, invalid_value

ENGINE_NAMES = {"spark": "Spark", "dask": "Dask", "ray": "Ray"}


def train_cluster(spec_flags: Any, target: str, *, api: str, package_path: str, package_flags: dict[str, Any],
                  hptune_config: str | None = None) -> None:
    from mlsubmit.commands._spec_options import local_spec
    from mlsubmit.packaging import resolve_extras
    from mlsubmit.packaging.requirements_txt import split_requirements
    from mlsubmit.targets.cluster_base import engine_for
    from mlsubmit.targets.cluster_run import run_on_cluster
    from mlsubmit.tuning.submit import tuning_of

    engine = engine_for(target)  # bad scheme, missing extra: before anything else
    reject_cloud_only(spec_flags, engine)
    tuning, tuning_notes = tuning_of(spec_flags.get("config"), hptune_config)
    if tuning is not None:
        spec = local_spec(spec_flags, mapped="trainingInput.hyperparameters:", more_notes=tuple(tuning_notes),
                          where=f"--target {target}")
        return _study(engine, spec, tuning, target, api=api, package_path=package_path)
    spec = local_spec(spec_flags, where=f"--target {target}")
    outcome = run_on_cluster(engine, spec, api=api, package_path=package_path, setup_py=None,
                             say=lambda line: typer.echo(line),
                             requirements=split_requirements(package_flags["requirements"]),
                             extras=resolve_extras(package_flags["extra_packages"]),
                             timeout=spec.max_runtime_seconds)
    if outcome.tail:
        typer.secho(f"── {outcome.failed}'s last output " + "─" * 40, fg="red", err=True)
        typer.echo(outcome.tail, err=True)
    codes = ", ".join(f"{n} {'stopped' if c is None else c}" for n, c in outcome.exit_codes.items())
    colour = {"SUCCEEDED": "green", "FAILED": "red"}.get(outcome.state, "yellow")
    typer.secho(f"job {outcome.job_id} {outcome.state} in {outcome.seconds:.1f} s on {engine.where()} — exit codes: "
                f"{codes}", fg=colour, bold=True)
    if outcome.state == "SUCCEEDED":
        if spec.job_dir:
            typer.echo(f"artifacts: {spec.job_dir if '://' in spec.job_dir else os.path.abspath(spec.job_dir)}")
        return
    if outcome.state == "CANCELLED":
        raise OperationFailed(f"job {outcome.job_id} stopped; every replica on {engine.where()} was stopped",
                              exit_code=outcome.exit_code)
    raise OperationFailed(f"job {outcome.job_id} failed: {outcome.reason}; the other replicas were stopped",
                          hint=f"its output is above; `mlsubmit jobs logs {outcome.job_id} --api cluster`")


def reject_cloud_only(spec_flags: dict[str, Any], engine: Any) -> None:
    """--spot and --max-cost are Google's scheduling and prices: one line, before anything starts."""
    given = "--spot" if spec_flags.get("spot") else \
        f"--max-cost {spec_flags['max_cost']}" if spec_flags.get("max_cost") else None
    if given is None:
        return
    name = ENGINE_NAMES.get(engine.scheme, engine.scheme)
    why = (f"a {name} cluster places each replica on a node it already has; mlsubmit cannot ask it for spot VMs"
           if given == "--spot" else
           f"mlsubmit knows Google's prices, not what the {name} cluster's machines cost, so it cannot hold a job "
           "to a budget there")
    fix = ("give the cluster preemptible nodes yourself, or use --spot "
           "without --target to run on Vertex AI" if given == "--spot" else
           "use --max-runtime to bound the job's time, or --max-cost without --target to run on Vertex AI")
    raise UsageError(f"invalid option with --target {engine.where()}: {given} ({why})",
                     hint=f"drop {given.split()[0]}; {fix}")


def _study(engine: Any, spec: Any, tuning: Any, target: str, *, api: str, package_path: str) -> None:
    """The trials of `tuning` on the cluster, one after another; rendered as `train --local`'s study is."""
    from mlsubmit.commands._local_tuning import render_study
    from mlsubmit.extras import require
    from mlsubmit.jobspec.job_names import generate_job_name
    from mlsubmit.local import local_job
    from mlsubmit.targets.cluster_record import check_job_id
    from mlsubmit.targets.cluster_run import build_packages
    from mlsubmit.targets.cluster_tuning import ClusterTuning

    require("tuning", purpose=f"a tuning study on {target} (--hptune-config)")
    local_job.check_runnable(spec)
    if spec.job_name:
        check_job_id(spec.job_name, "--job-name")  # each trial's record is named after it
    if spec.job_dir and spec.job_dir.startswith("gs://"):
        raise invalid_value("--job-dir", spec.job_dir, "a directory this machine and the cluster share, for a study "
                            "(each trial's cloudml-hypertune metrics are read from it here)",
                            hint="pass a shared local --job-dir")
    engine.reachable()  # before anything is built; each trial joins the cluster on its own
    packages = build_packages(package_path, None, typer.echo)
    job_id = spec.job_name or generate_job_name(packages[1])
    job_dir = spec.job_dir or f"jobs/{job_id}"
    job_dir = job_dir if "://" in job_dir else os.path.abspath(job_dir)
    typer.echo(f"study {job_id} on {engine.where()}: {tuning.max_trials} trials, one at a time, "
               f"{tuning.goal.lower()} {tuning.metric!r} ({tuning.algorithm}); trial job dirs under {job_dir}/")
    study = ClusterTuning(spec.replace(job_name=job_id), tuning, api=api, job_dir=job_dir, target=target,
                          packages=packages, say=typer.echo).run()
    render_study(study, tuning, job_id, job_dir)
