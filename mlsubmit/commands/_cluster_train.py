"""`mlsubmit train --target spark://|dask://|ray://HOST:PORT`: parse and render; the work is
mlsubmit.targets.cluster_run."""

from __future__ import annotations

import os
from typing import Any

import typer

from mlsubmit.errors import OperationFailed


def train_cluster(spec_flags: Any, target: str, *, api: str, package_path: str,
                  package_flags: dict[str, Any]) -> None:
    from mlsubmit.commands._spec_options import local_spec
    from mlsubmit.packaging import resolve_extras
    from mlsubmit.packaging.requirements_txt import split_requirements
    from mlsubmit.targets.cluster_base import engine_for
    from mlsubmit.targets.cluster_run import run_on_cluster

    engine = engine_for(target)  # bad scheme, missing extra: before anything else
    spec = local_spec(spec_flags)
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
