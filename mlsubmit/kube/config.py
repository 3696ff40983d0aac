"""`mlsubmit config --format kubernetes`: the job's objects, validated, as one multi-document YAML."""

from __future__ import annotations

from typing import Any

from mlsubmit.errors import invalid_value
from mlsubmit.kube import manifests, validate


def check_version(version: str) -> str:
    if version not in validate.SUPPORTED:
        raise invalid_value("--k8s-version", version, " or ".join(validate.SUPPORTED))
    return version


def config_text(spec: Any, notes: list[str], *, namespace: str = "default", k8s_api: str = "job",
                k8s_version: str = validate.DEFAULT_VERSION, spot: bool = False,
                packages: tuple[str, ...] = (), max_restarts: int = 0) -> tuple[str, list[str]]:
    """(YAML text, notes) of the job's Kubernetes objects for `kubectl apply -f -`."""
    check_version(k8s_version)
    if not spec.job_name:
        raise invalid_value("--job-name", None, "a name for the Kubernetes objects", hint="add --job-name")
    notes = list(notes)
    packages = tuple(packages) or spec.package_uris
    if not packages:
        notes.append("no --package-uris: the pods install nothing; stage your sdist (gs:// or a path on the image) "
                     "and pass --package-uris")
    name = manifests.kube_name(spec.job_name)
    note = manifests.name_note(spec.job_name, name)
    if note:
        notes.append(note)
    job = manifests.KubeJob(name, manifests.request_id(spec, name, packages), namespace=namespace,
                            packages=packages, api=k8s_api, spot=spot,
                            max_restarts=max_restarts)
    objects = manifests.manifests(spec, job)
    validate.validate(objects, k8s_version)
    kinds = {"jobset": "jobsets,configmaps", "tfjob": "tfjobs,configmaps"}.get(k8s_api, "jobs,services,configmaps")
    head = (f"# kubectl apply -f FILE   (validated for Kubernetes {k8s_version}; "
            f"kubectl delete {kinds} -l {manifests.JOB_LABEL}={name} to remove)\n")
    return head + manifests.to_yaml(objects), notes
