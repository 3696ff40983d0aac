"""A JobSpec as Kubernetes objects (pure: dicts in, dicts out, nothing sent).

Default (`api="job"`): one ConfigMap holding the replica launcher (mlsubmit/launcher/replica.py) and one launcher
spec per role, one headless Service selecting every pod of the job, and one Indexed batch/v1 Job per role
(completions = parallelism = replicas). Pods set `subdomain` to the Service, so replica i of role r is reachable as
`<job>-<r>-<i>.<job>` (the Indexed Job hostname `<job name>-<index>` under the Service); the launcher takes its
index from $JOB_COMPLETION_INDEX and builds TF_CONFIG/CLUSTER_SPEC from the address pattern.

`api="jobset"`: one jobset.x-k8s.io/v1alpha2 JobSet, one replicatedJob per role (pods
`<jobset>-<role>-0-<i>.<jobset>`), success when the chief's replicatedJob succeeds, `failurePolicy.maxRestarts`.
`api="tfjob"`: one kubeflow.org/v1 TFJob (mlsubmit.kube.tfjob; the Training Operator sets TF_CONFIG).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from mlsubmit.errors import UsageError, invalid_value

APIS = ("job", "jobset", "tfjob")
PORT = 2222
MOUNT = "/mlsubmit"
JOB_LABEL, REQUEST_LABEL, ROLE_LABEL = "mlsubmit.dev/job", "mlsubmit.dev/request-id", "mlsubmit.dev/role"
GPU_RESOURCE = "nvidia.com/gpu"
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
GKE_SPOT = "cloud.google.com/gke-spot"
# Vertex/ml accelerator name → GKE node label value (GKE documents these; K80 is gone from GKE)
GKE_GPU_LABELS = {
    "NVIDIA_TESLA_T4": "nvidia-tesla-t4", "NVIDIA_L4": "nvidia-l4", "NVIDIA_TESLA_A100": "nvidia-tesla-a100",
    "NVIDIA_A100_80GB": "nvidia-a100-80gb", "NVIDIA_H100_80GB": "nvidia-h100-80gb",
    "NVIDIA_H100_MEGA_80GB": "nvidia-h100-mega-80gb", "NVIDIA_TESLA_V100": "nvidia-tesla-v100",
    "NVIDIA_TESLA_P100": "nvidia-tesla-p100", "NVIDIA_TESLA_P4": "nvidia-tesla-p4",
}
# memory per vCPU (GiB) of the Compute Engine families; requests leave ~10 % of a node to the system
_GIB_PER_VCPU = {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9, "megagpu": 9.1, "highgpu": 7.08, "ultragpu": 14.1}
_SHARE = 0.9
_NAME = re.compile(r"[^a-z0-9-]+")
# the longest pod hostname is <name>-<role>-<index> (a JobSet adds -0): with at most 40 it stays a DNS label
MAX_NAME = 40
_VALID_NAME = re.compile(r"[a-z]([a-z0-9-]{0,38}[a-z0-9])?")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # an RFC 1123 label
INT32_MAX = 2**31 - 1  # failurePolicy.maxRestarts is an int32


@dataclass(frozen=True)
class KubeJob:
    """What the builders need besides the JobSpec: the job's Kubernetes name, its request id, the namespace and
    the packages the launcher installs (gs:// URIs, paths on the image, or {"name", "data"} inline sdists)."""

    name: str
    request_id: str
    namespace: str = "default"
    packages: tuple = ()
    api: str = "job"
    spot: bool = False
    max_restarts: int = 0

    def __post_init__(self) -> None:
        check_options(self.namespace, self.api, self.max_restarts)
        if not _VALID_NAME.fullmatch(self.name):
            raise invalid_value("Kubernetes job name", self.name, f"1 to {MAX_NAME} lowercase letters, digits or '-', "
                                "starting with a letter and ending with a letter or digit",
                                hint="mlsubmit.kube.manifests.kube_name derives one from any --job-name")


def check_options(namespace: str, api: str, max_restarts: int) -> None:
    """UsageError for a namespace, --k8s-api or --max-restarts no cluster would take (before anything is built)."""
    check_namespace(namespace)
    if api not in APIS:
        raise invalid_value("--k8s-api", api, " or ".join(APIS))
    if not 0 <= max_restarts <= INT32_MAX:
        raise invalid_value("--max-restarts", max_restarts, f"a count of restarts from 0 to {INT32_MAX} "
                            "(failurePolicy.maxRestarts is an int32)")
    if max_restarts and api != "jobset":
        raise invalid_value("--max-restarts", max_restarts, "0 with --k8s-api job (an Indexed Job fails "
                            "at its first failed pod)", hint="add --k8s-api jobset, or drop --max-restarts")


def check_namespace(namespace: str) -> str:
    """UsageError unless `namespace` can name a Kubernetes namespace (an RFC 1123 label, as the API server checks)."""
    if not _NAMESPACE.fullmatch(namespace or ""):
        raise invalid_value("--namespace", namespace, "a Kubernetes namespace: 1 to 63 lowercase letters, digits or "
                            "'-', starting and ending with a letter or digit", hint="for example --namespace training")
    return namespace


def kube_name(job_name: str) -> str:
    """The Kubernetes name of a job: the job name itself when it is one (1 to 40 lowercase letters, digits or '-',
    starting with a letter, ending with a letter or digit). Any other name is never cut or escaped silently into
    one that another job name could also give: its lowercase letters, digits and '-' (runs of anything else as
    one '-'), at most 31 of them, then '-' and 8 hex digits of the whole name's sha256 (`name_note` says so).

    Example: kube_name("mnist-k8s") == "mnist-k8s"; kube_name("mnist_k8s") == "mnist-k8s-" + 8 hex digits.
    """
    if _VALID_NAME.fullmatch(job_name):
        return job_name
    stem = _NAME.sub("-", job_name.lower()).strip("-")
    if not stem[:1].isalpha():
        stem = f"j-{stem}"
    return f"{stem[:31].rstrip('-')}-{hashlib.sha256(job_name.encode()).hexdigest()[:8]}"


def name_note(job_name: str, name: str) -> str | None:
    """The line that states a derived name (None when the job name is the Kubernetes name)."""
    if job_name == name:
        return None
    return (f"--job-name {job_name!r} is not a Kubernetes name (1 to {MAX_NAME} lowercase letters, digits or '-', "
            f"starting with a letter): its objects are named {name!r}, its readable part and a hash of the whole "
            "name, so no other job name shares them")


def default_name(distribution: str) -> str:
    """A fresh Kubernetes job name for a package: `<name, up to 16>-<UTC yyyymmdd-HHMMSS>-<6 hex>`."""
    import secrets
    import time

    stem = _NAME.sub("-", distribution.lower()).strip("-")[:16].rstrip("-")
    stem = stem if stem[:1].isalpha() else f"job{'-' + stem if stem else ''}"[:16].rstrip("-")
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"


def request_id(spec: Any, name: str, packages: tuple = ()) -> str:
    """A stable id of this submission: the same job run again has the same one (so a re-run finds its objects)."""
    text = json.dumps([name, repr(spec), [p if isinstance(p, str) else p.get("name") for p in packages]])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def gke_gpu_label(accelerator: str) -> str:
    label = GKE_GPU_LABELS.get(accelerator)
    if label is None:
        raise invalid_value("--gpu-type", accelerator, "a GPU GKE has a node label for: " + ", ".join(GKE_GPU_LABELS),
                            hint="GKE has no K80 or TPU node pools for these jobs; use NVIDIA_TESLA_T4 or NVIDIA_L4")
    return label


def _requests(pool: Any) -> dict[str, str]:
    machine = pool.machine
    if not machine.vcpus:
        raise UsageError(f"the {pool.role} machine type {machine.name} has no Compute Engine equivalent to size a "
                         "pod with", hint="use an n1-*, a2-*, a3-* or g2-* machine type")
    kind = machine.name.split("-")[1] if machine.name.count("-") >= 2 else "standard"
    memory = _GIB_PER_VCPU.get(kind, 3.75) * machine.vcpus * _SHARE
    return {"cpu": f"{int(machine.vcpus * 1000 * _SHARE)}m", "memory": f"{int(memory * 1024)}Mi"}


def _image(spec: Any) -> str:
    """The pods' image: the one mlsubmit.images.choose gives the job's first pool with a GPU (else the chief's)."""
    from mlsubmit.images import choose

    return choose.choose(spec, _image_role(spec)).uri


def _image_role(spec: Any) -> str:
    """The pool whose image every pod runs: the first with a GPU (a GPU image serves CPU pods too), else the chief."""
    return next((role for role, pool in spec.pools.items() if pool.accelerator), "chief")


def address_pattern(job: KubeJob) -> str:
    if job.api == "tfjob":  # the Training Operator's Service per pod
        return f"{{job}}-{{role}}-{{index}}.{job.namespace}.svc:{PORT}"
    middle = "-0" if job.api == "jobset" else ""
    return f"{{job}}-{{role}}{middle}-{{index}}.{job.name}:{PORT}"


def launcher_specs(spec: Any, job: KubeJob) -> dict[str, dict[str, Any]]:
    """{role: the launcher spec its pods run} ($JOB_COMPLETION_INDEX gives the index). Its `requirements`, installed
    with the packages and before them: what the image adds and the image's listed packages that the job's packages
    import (mlsubmit.images.listed; read from the inline sdists, or JobSpec.package_imports)."""
    roles = [[role, pool.replica_count] for role, pool in spec.pools.items()]
    from mlsubmit.images import choose, listed

    choice = choose.choose(spec, _image_role(spec))
    # what the image adds, then the image's listed packages the job's packages import (pandas, hypertune), as a
    # Vertex AI container's command installs them before the package (and `train --local` and the emulator give them)
    imports = spec.package_imports or listed.shipped_imports(job.packages)
    adds = [*(requirement for requirement, _ in choice.adds), *listed.requirements(choice.image, imports)]
    base = {"job_id": job.name, "api": "vertex", "tier": spec.tier, "roles": roles, "module": spec.python_module,
            **({"requirements": adds} if adds else {}),
            "args": list(spec.args), "job_dir": spec.job_dir, "packages": list(job.packages), "env": spec.env_dict,
            "address_pattern": address_pattern(job), **({"tf_config": "env"} if job.api == "tfjob" else {})}
    return {role: {**base, "role": role} for role, _ in roles}


def labels(job: KubeJob, role: str | None = None) -> dict[str, str]:
    found = {JOB_LABEL: job.name, REQUEST_LABEL: job.request_id}
    return {**found, ROLE_LABEL: role} if role else found


def _meta(job: KubeJob, name: str, role: str | None = None) -> dict[str, Any]:
    return {"name": name, "namespace": job.namespace, "labels": labels(job, role)}


def config_map(spec: Any, job: KubeJob) -> dict[str, Any]:
    from mlsubmit.launcher import source

    data = {"replica.py": source()}
    data.update({f"{role}.json": json.dumps(s, sort_keys=True) for role, s in launcher_specs(spec, job).items()})
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(job, f"{job.name}-launcher"), "data": data}


def service(job: KubeJob) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(job, job.name),
            "spec": {"clusterIP": "None", "selector": {JOB_LABEL: job.name}, "publishNotReadyAddresses": True,
                     "ports": [{"name": "tf", "port": PORT, "targetPort": PORT}]}}


def pod_spec(spec: Any, job: KubeJob, role: str) -> dict[str, Any]:
    pool = spec.pools[role]
    resources: dict[str, Any] = {"requests": _requests(pool)}
    selector: dict[str, str] = {}
    tolerations: list[dict[str, str]] = []
    if pool.accelerator:
        kind, count = pool.accelerator
        selector[GKE_ACCELERATOR] = gke_gpu_label(kind)
        resources["limits"] = {GPU_RESOURCE: str(count)}
        tolerations.append({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    if job.spot:
        selector[GKE_SPOT] = "true"
        tolerations.append({"key": GKE_SPOT, "operator": "Equal", "value": "true", "effect": "NoSchedule"})
    container = {"name": "replica", "image": _image(spec),
                 "command": ["python3", f"{MOUNT}/replica.py", f"{MOUNT}/{role}.json"],
                 "ports": [{"containerPort": PORT, "name": "tf"}], "resources": resources,
                 "volumeMounts": [{"name": "launcher", "mountPath": MOUNT, "readOnly": True}]}
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container],
                           "volumes": [{"name": "launcher", "configMap": {"name": f"{job.name}-launcher"}}]}
    if job.api == "job":
        pod["subdomain"] = job.name
    if selector:
        pod["nodeSelector"] = selector
    if tolerations:
        pod["tolerations"] = tolerations
    return pod


def _job_spec(spec: Any, job: KubeJob, role: str) -> dict[str, Any]:
    count = spec.pools[role].replica_count
    body: dict[str, Any] = {
        "completionMode": "Indexed", "completions": count, "parallelism": count, "backoffLimit": 0,
        # a pod evicted or preempted (spot) is replaced; a bad spec (2) or a failed install (3) ends at once
        "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "replica", "operator": "In", "values": [2, 3]}}]},
        "template": {"metadata": {"labels": labels(job, role)}, "spec": pod_spec(spec, job, role)}}
    if spec.max_runtime_seconds:
        body["activeDeadlineSeconds"] = int(spec.max_runtime_seconds)
    return body


def job_manifest(spec: Any, job: KubeJob, role: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(job, f"{job.name}-{role}", role),
            "spec": _job_spec(spec, job, role)}


def jobset(spec: Any, job: KubeJob) -> dict[str, Any]:
    replicated = []
    for role in spec.pools:
        template = _job_spec(spec, job, role)
        template.pop("activeDeadlineSeconds", None)
        replicated.append({"name": role, "replicas": 1,
                           "template": {"metadata": {"labels": labels(job, role)}, "spec": template}})
    body: dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "subdomain": job.name},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": ["chief"]},
        "failurePolicy": {"maxRestarts": job.max_restarts}, "replicatedJobs": replicated}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": _meta(job, job.name),
            "spec": body}


def check_spec(spec: Any) -> None:
    """UsageError for what Kubernetes cannot run: a TPU pool, a container-image job, a GPU without a GKE label."""
    for role, pool in spec.pools.items():
        if pool.accelerator:
            kind, _ = pool.accelerator
            if kind.startswith("TPU"):
                raise invalid_value(f"{role} accelerator", kind, "a GPU (TPUs are not supported on --target "
                                    "kubernetes)", hint="use --gpu-type NVIDIA_TESLA_T4, or run on Vertex AI")
            gke_gpu_label(kind)
    if spec.container_image or spec.pool_images:
        raise UsageError("--target kubernetes runs Python packages; a custom container job is not supported yet",
                         hint="drop --container-image, or apply your own manifests")


def manifests(spec: Any, job: KubeJob) -> list[dict[str, Any]]:
    """Every object of the job, in the order to create them (the ConfigMap and Service before the pods)."""
    check_spec(spec)
    if job.api == "jobset":
        return [config_map(spec, job), jobset(spec, job)]
    if job.api == "tfjob":
        from mlsubmit.kube.tfjob import tfjob

        return [config_map(spec, job), tfjob(spec, job)]
    return [config_map(spec, job), service(job), *(job_manifest(spec, job, role) for role in spec.pools)]


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """A multi-document YAML stream for `kubectl apply -f -`."""
    import yaml

    return "".join("---\n" + yaml.safe_dump(o, sort_keys=False, default_flow_style=False, width=120)
                   for o in objects)
