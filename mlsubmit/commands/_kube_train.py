"""`mlsubmit train --target kubernetes[:CONTEXT]`: parse and render; the work is mlsubmit.targets.kubernetes."""

from __future__ import annotations

import signal
import threading
from typing import Any

import typer

from mlsubmit.errors import OperationFailed


def train_kube(spec_flags: Any, target: str, *, package_path: str, package_flags: dict[str, Any],
               namespace: str = "default", k8s_api: str = "job", max_restarts: int = 0) -> None:
    from mlsubmit.commands._spec_options import budgeted, local_spec
    from mlsubmit.kube import manifests, validate
    from mlsubmit.packaging import resolve_extras
    from mlsubmit.packaging.requirements_txt import split_requirements
    from mlsubmit.targets import kubernetes as kube
    from mlsubmit.targets.cluster_run import build_packages

    # a cluster of your own: --spot and --max-cost apply (GKE spot nodes; Compute Engine prices of the nodes)
    spec = local_spec({**spec_flags, "spot": None, "max_cost": None}, where="--target kubernetes")
    if spec_flags.get("spot"):
        spec = spec.replace(spot=True)
    spec, estimate = budgeted(spec, spec_flags, catalog="compute")  # said once the checks passed (one-line refusals)
    if spec.job_dir and "://" not in spec.job_dir:  # a path the pods share with this machine (a volume, a test)
        import os

        spec = spec.replace(job_dir=os.path.abspath(spec.job_dir))
    manifests.check_spec(spec)
    manifests.check_options(namespace, k8s_api, max_restarts)
    cluster = kube.Cluster(kube.parse_target(target), namespace)  # kubeconfig and context first
    cluster.check_namespace()  # reachable within 10 s, the namespace exists, RBAC lets us read it
    cluster.check_serves(k8s_api)  # a JobSet needs the JobSet controller's API
    packages, dist = build_packages(package_path, None, typer.echo, split_requirements(package_flags["requirements"]),
                                    resolve_extras(package_flags["extra_packages"]))
    name = manifests.kube_name(spec.job_name) if spec.job_name else manifests.default_name(dist)
    note = manifests.name_note(spec.job_name, name) if spec.job_name else None
    if note:
        typer.secho(f"note: {note}", fg="yellow", err=True)
    job = manifests.KubeJob(name, manifests.request_id(spec, name, tuple(packages)), namespace=namespace,
                            packages=tuple(packages), api=k8s_api, spot=spec.spot,
                            max_restarts=max_restarts)
    objects = manifests.manifests(spec, job)
    validate.validate(objects)
    for line in estimate:
        typer.echo(line, err=True)
    found = kube.create_once(cluster, objects)
    typer.echo(f"job {name} {'found (this submission ran before)' if found else 'created'} in namespace "
               f"{namespace} on {cluster.where}: {', '.join(o['kind'] + '/' + o['metadata']['name'] for o in objects)}")
    cancelled = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda *_: cancelled.set())
    try:
        outcome = kube.follow(cluster, name, typer.echo, cancelled, k8s_api)
    except KeyboardInterrupt:
        kube.delete_job(cluster, name)
        raise OperationFailed(f"job {name} cancelled: its objects were deleted", exit_code=130) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    colour = {"SUCCEEDED": "green", "FAILED": "red"}.get(outcome.state, "yellow")
    typer.secho(f"job {name} {outcome.state} in {outcome.seconds:.1f} s on {cluster.where}", fg=colour, bold=True)
    if outcome.state == "SUCCEEDED":
        return
    raise OperationFailed(f"job {name} {outcome.state.lower()}: {outcome.reason}",
                          exit_code=130 if outcome.state == "CANCELLED" else 1)
