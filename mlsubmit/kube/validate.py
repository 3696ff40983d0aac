"""Every object checked before anything is sent: built-in kinds against the cluster version's OpenAPI schemas
(`kubernetes-validate`, strict: unknown fields refused), a JobSet against the typed models that
`kubeflow-trainer-api` publishes (pydantic; unknown fields refused by walking the models here) with its Job
templates checked as batch/v1 Jobs by `kubernetes-validate` too.
"""

from __future__ import annotations

import typing
from typing import Any

from mlsubmit.errors import UsageError

DEFAULT_VERSION = "1.33"
SUPPORTED = ("1.31", "1.32", "1.33", "1.34", "1.35")
MAX_CONFIG_MAP = 1024 * 1024  # what the API server takes in a ConfigMap's data (the schemas do not say it)


def _missing(package: str) -> UsageError:
    return UsageError(f"validating Kubernetes objects needs the {package} package, which is not installed",
                      hint="pip install 'mlsubmit[kubernetes]'")


def validate_builtin(obj: dict[str, Any], version: str) -> None:
    try:
        import kubernetes_validate
    except ImportError:
        raise _missing("kubernetes-validate") from None
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as err:
        where = ".".join(str(p) for p in err.path) or "(top)"
        raise UsageError(f"Kubernetes {version} refuses {obj['kind']} {obj['metadata'].get('name')!r}: "
                         f"{where}: {err.message}") from None
    except kubernetes_validate.SchemaNotFoundError:
        raise UsageError(f"Kubernetes {version} has no schema for {obj.get('apiVersion')}/{obj.get('kind')}") from None


def _model_of(annotation: Any) -> Any:
    """The pydantic model class inside Optional[...] / List[...] / Dict[str, ...], else None."""
    import pydantic

    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def unknown_fields(model: Any, data: Any, path: str = "") -> list[str]:
    """Paths of the keys in `data` that `model` (a pydantic model class) has no field for."""
    if isinstance(data, list):
        return [bad for i, item in enumerate(data) for bad in unknown_fields(model, item, f"{path}[{i}]")]
    if not isinstance(data, dict):
        return []
    fields = {(field.alias or name): field for name, field in model.model_fields.items()}
    bad = []
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            bad.append(f"{path}.{key}".lstrip("."))
            continue
        inner = _model_of(field.annotation)
        if inner is not None and not typing.get_origin(field.annotation) is dict:
            bad += unknown_fields(inner, value, f"{path}.{key}")
    return bad


def validate_jobset(obj: dict[str, Any], version: str) -> None:
    try:
        from kubeflow_trainer_api.models import JobsetV1alpha2JobSet
    except ImportError:
        raise _missing("kubeflow-trainer-api") from None
    import pydantic

    name = obj["metadata"].get("name")
    shallow = {**obj, "spec": {**obj["spec"], "replicatedJobs": [
        {k: v for k, v in r.items() if k != "template"} for r in obj["spec"].get("replicatedJobs", [])]}}
    try:
        JobsetV1alpha2JobSet.from_dict(obj)
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        raise UsageError(f"the JobSet schema refuses {name!r}: {'.'.join(map(str, first['loc']))}: "
                         f"{first['msg']}") from None
    bad = [b for b in unknown_fields(JobsetV1alpha2JobSet, shallow) if not b.startswith("metadata.")]
    if bad:
        raise UsageError(f"the JobSet schema refuses {name!r}: unknown field {bad[0]}")
    for replicated in obj["spec"].get("replicatedJobs", []):
        template = replicated.get("template", {})
        validate_builtin({"apiVersion": "batch/v1", "kind": "Job",
                          "metadata": {"name": f"{name}-{replicated.get('name')}", **template.get("metadata", {})},
                          "spec": template.get("spec", {})}, version)


def validate(objects: list[dict[str, Any]], version: str = DEFAULT_VERSION) -> None:
    """UsageError (one line) naming the first object and field the schemas refuse."""
    for obj in objects:
        if obj.get("apiVersion", "").startswith("jobset.x-k8s.io/"):
            validate_jobset(obj, version)
        elif obj.get("apiVersion", "").startswith("kubeflow.org/"):
            from mlsubmit.kube import tfjob

            tfjob.validate(obj, version)
        else:
            validate_builtin(obj, version)
        if obj.get("kind") == "ConfigMap":
            size = sum(len(value.encode()) for value in (obj.get("data") or {}).values())
            if size > MAX_CONFIG_MAP:
                raise UsageError(f"the ConfigMap {obj['metadata'].get('name')!r} would hold {size} bytes; Kubernetes "
                                 f"takes at most {MAX_CONFIG_MAP} (1 MiB) in one", hint="stage the packages "
                                 "(`mlsubmit package --stage`) and use `config --format kubernetes --package-uris`")
