"""A JobSpec as a Training Operator TFJob (`kubeflow.org/v1`, `--k8s-api tfjob`), for clusters that run the
Kubeflow Training Operator (release 1.9, in maintenance). Pure: dicts in, dicts out.

One tfReplicaSpec per role (Chief, Worker, PS, Evaluator), `restartPolicy: Never`, `runPolicy.backoffLimit: 0`,
`runPolicy.cleanPodPolicy: Running` (when the job ends, the pods still running, the parameter servers, are
deleted), the default successPolicy (the job succeeds when the chief does), `activeDeadlineSeconds` from
--max-runtime. The operator names the container's port by the container `tensorflow` and the port `tfjob-port`,
makes one Service per pod and sets TF_CONFIG itself (`<tfjob>-<role>-<i>.<namespace>.svc:2222`): the launcher
spec says `"tf_config": "env"`, so the replica launcher takes the operator's TF_CONFIG instead of building one.

Validation: each replica's pod template against the cluster version's PodTemplateSpec (`kubernetes-validate`,
strict); the TFJob's own fields against the field names of the Training Operator SDK's models (`kubeflow-training`
1.9, `KubeflowOrgV1*`) when it is installed, else against the same names kept here (that SDK pins
`kubernetes<36`, older than the client mlsubmit is tested with, so it is not a dependency).
"""

from __future__ import annotations

from typing import Any

from mlsubmit.errors import UsageError
from mlsubmit.kube import manifests

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "tfjobs"
REPLICA_TYPES = {"chief": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"}
CONTAINER, PORT_NAME = "tensorflow", "tfjob-port"
# the Training Operator 1.9 SDK's attribute maps (KubeflowOrgV1TFJob, …TFJobSpec, …ReplicaSpec, …RunPolicy,
# …SchedulingPolicy): the fallback when `kubeflow-training` is not installed
FIELDS = {
    "TFJob": {"apiVersion": None, "kind": None, "metadata": None, "spec": "TFJobSpec", "status": None},
    "TFJobSpec": {"enableDynamicWorker": None, "runPolicy": "RunPolicy", "successPolicy": None,
                  "tfReplicaSpecs": "ReplicaSpec*"},
    "ReplicaSpec": {"replicas": None, "restartPolicy": None, "template": None},
    "RunPolicy": {"activeDeadlineSeconds": None, "backoffLimit": None, "cleanPodPolicy": None, "managedBy": None,
                  "schedulingPolicy": "SchedulingPolicy", "suspend": None, "ttlSecondsAfterFinished": None},
    "SchedulingPolicy": {"minAvailable": None, "minResources": None, "priorityClass": None, "queue": None,
                         "scheduleTimeoutSeconds": None},
}


def tfjob(spec: Any, job: manifests.KubeJob) -> dict[str, Any]:
    replicas = {}
    for role, pool in spec.pools.items():
        pod = manifests.pod_spec(spec, job, role)
        container = pod["containers"][0]
        container["name"] = CONTAINER
        container["ports"] = [{"containerPort": manifests.PORT, "name": PORT_NAME}]
        replicas[REPLICA_TYPES[role]] = {"replicas": pool.replica_count, "restartPolicy": "Never", "template": {
            "metadata": {"labels": manifests.labels(job, role)}, "spec": pod}}
    run_policy: dict[str, Any] = {"cleanPodPolicy": "Running", "backoffLimit": 0}
    if spec.max_runtime_seconds:
        run_policy["activeDeadlineSeconds"] = int(spec.max_runtime_seconds)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TFJob",
            "metadata": {"name": job.name, "namespace": job.namespace, "labels": manifests.labels(job)},
            "spec": {"runPolicy": run_policy, "tfReplicaSpecs": replicas}}


def _sdk_fields() -> dict[str, dict[str, str | None]] | None:
    """FIELDS read from the installed Training Operator SDK's models, or None."""
    try:
        from kubeflow.training import models
    except ImportError:
        return None
    found: dict[str, dict[str, str | None]] = {}
    for name in FIELDS:
        model = getattr(models, f"KubeflowOrgV1{name}", None)
        if model is None:
            return None
        found[name] = {}
        for attribute, key in model.attribute_map.items():
            kind = model.openapi_types[attribute]
            inner = kind.removeprefix("dict(str, ").removesuffix(")").removeprefix("KubeflowOrgV1")
            found[name][key] = (inner + ("*" if kind.startswith("dict(") else "")) \
                if inner.rstrip("*") in FIELDS else None
    return found


def _unknown(fields: dict[str, dict[str, str | None]], kind: str, data: Any, path: str) -> list[str]:
    if not isinstance(data, dict):
        return []
    bad = []
    for key, value in data.items():
        if key not in fields[kind]:
            bad.append(f"{path}.{key}".lstrip("."))
            continue
        inner = fields[kind][key]
        if inner and inner.endswith("*"):
            for name, item in (value or {}).items():
                bad += _unknown(fields, inner[:-1], item, f"{path}.{key}.{name}")
        elif inner:
            bad += _unknown(fields, inner, value, f"{path}.{key}")
    return bad


def unknown_fields(obj: dict[str, Any]) -> list[str]:
    """Paths of the TFJob's own fields (pod templates aside) that the models do not have."""
    return _unknown(_sdk_fields() or FIELDS, "TFJob", obj, "")


def validate(obj: dict[str, Any], version: str) -> None:
    """UsageError (one line) for a field the TFJob models do not have or a pod template Kubernetes refuses."""
    from mlsubmit.kube.validate import validate_builtin

    name = obj["metadata"].get("name")
    bad = unknown_fields(obj)
    if bad:
        raise UsageError(f"the TFJob schema refuses {name!r}: unknown field {bad[0]}")
    for kind, replica in obj["spec"]["tfReplicaSpecs"].items():
        if kind not in REPLICA_TYPES.values():
            raise UsageError(f"the TFJob schema refuses {name!r}: replica type {kind!r} is not one of "
                             + ", ".join(REPLICA_TYPES.values()))
        validate_builtin({"apiVersion": "v1", "kind": "PodTemplate",
                          "metadata": {"name": f"{name}-{kind.lower()}"}, "template": replica["template"]}, version)
