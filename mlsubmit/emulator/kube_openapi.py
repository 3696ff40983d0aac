"""The emulated Kubernetes API's OpenAPI v3 and its server-side field validation (`?fieldValidation=Strict`).

kubectl (1.27+) validates by default with `--validate=strict`: it reads `/openapi/v3` (the index of group-version
documents), then a group version's document, and looks there for the PATCH operation of the object's kind
(`x-kubernetes-group-version-kind`) with a `fieldValidation` query parameter. Found: it leaves validation to the
server and sends `fieldValidation=Strict`; not found: it would validate on its side against schemas this emulator
does not serve. So the documents here carry the operations (every kind's paths, with that parameter), not the
object schemas; the server side checks objects against the same schemas mlsubmit uses offline
(`kubernetes-validate` strict for built-in kinds, the JobSet models of `kubeflow-trainer-api`), and refuses as
kube-apiserver does: 400 BadRequest `<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding error:
unknown field "<path>"`, or 422 Invalid for a value the schema refuses.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

_PARAMETERS = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True},
                "description": "Ignore, Warn or Strict: what the server does with unknown or duplicate fields"},
               {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
               {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]


def _gvk(group_version: str, kind: str) -> dict[str, str]:
    group, _, version = group_version.rpartition("/")
    return {"group": group, "version": version, "kind": kind}


def document(prefix: str, table: dict[str, tuple[str, bool]], group_version: str) -> dict[str, Any]:
    """The OpenAPI v3 document of one group version (`prefix` /api/v1 or /apis/GROUP/VERSION)."""
    paths: dict[str, Any] = {}
    for plural, (kind, namespaced) in table.items():
        base = f"{prefix}/namespaces/{{namespace}}/{plural}" if namespaced else f"{prefix}/{plural}"
        gvk = {"x-kubernetes-group-version-kind": _gvk(group_version, kind)}
        operation = {"parameters": _PARAMETERS, "responses": {"200": {"description": "OK"}}, **gvk}
        paths[base] = {"post": {**operation, "operationId": f"create{kind}", "x-kubernetes-action": "post"},
                       "get": {**gvk, "operationId": f"list{kind}", "x-kubernetes-action": "list",
                               "responses": {"200": {"description": "OK"}}}}
        paths[f"{base}/{{name}}"] = {
            "patch": {**operation, "operationId": f"patch{kind}", "x-kubernetes-action": "patch"},
            "put": {**operation, "operationId": f"replace{kind}", "x-kubernetes-action": "put"}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (mlsubmit emulator)", "version": "v1.33.0"},
            "paths": paths, "components": {"schemas": {}}}


def index(tables: dict[str, tuple[dict[str, tuple[str, bool]], str]]) -> dict[str, Any]:
    """`/openapi/v3`: where each group version's document is (its hash in the URL, as kube-apiserver does)."""
    paths = {}
    for prefix, (table, group_version) in tables.items():
        digest = hashlib.sha512(json.dumps(document(prefix, table, group_version)).encode()).hexdigest()[:32].upper()
        paths[prefix.lstrip("/")] = {"serverRelativeURL": f"/openapi/v3{prefix}?hash={digest}"}
    return {"paths": paths}


def _unknown_builtin(obj: dict[str, Any], version: str) -> tuple[list[str], str | None]:
    """(unknown field paths, the first other refusal) of a built-in object; kubernetes-validate names one error at
    a time, so each unknown field found is dropped from a copy and the copy checked again."""
    import kubernetes_validate

    data, unknown, invalid = json.loads(json.dumps(obj)), [], None
    for _ in range(50):
        try:
            kubernetes_validate.validate(data, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.path).lstrip(".")
            path = list(err.path)
            parent = data
            for part in path[:-1]:
                parent = parent[part]
            if err.message.startswith("Additional properties are not allowed"):
                parent = parent[path[-1]] if path else data
                for name in re.findall(r"'([^']+)'", err.message.split("(", 1)[-1]):
                    parent.pop(name, None)
                    unknown.append(f"{where}.{name}".lstrip("."))
                continue
            invalid = invalid or f"{where or '(top)'}: Invalid value: {err.message}"
            if not path:
                break
            parent.pop(path[-1])  # a dict key or a list item: checked no further
            continue
        except kubernetes_validate.SchemaNotFoundError:
            pass
        break
    return unknown, invalid


def refusal(obj: dict[str, Any], version: str = "1.33", strict: bool = True) -> tuple[int, str, str] | None:
    """(code, reason, message) of kube-apiserver's schema validation of `obj`, or None when it passes: a value the
    schema refuses is 422; an unknown field is 400 only when `strict` (`fieldValidation=Strict`), as the API
    server otherwise drops it."""
    from mlsubmit.kube import validate

    kind = obj.get("kind", "")
    group_version = obj.get("apiVersion", "")
    if group_version.startswith("jobset.x-k8s.io/"):
        from kubeflow_trainer_api.models import JobsetV1alpha2JobSet

        unknown = validate.unknown_fields(JobsetV1alpha2JobSet, {k: v for k, v in obj.items() if k != "status"})
        invalid = None
        for i, replicated in enumerate(obj.get("spec", {}).get("replicatedJobs", [])):
            template = replicated.get("template", {})
            inner, invalid = _unknown_builtin({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
                                               "spec": template.get("spec", {})}, version)
            unknown = [u for u in unknown if not u.startswith(f"spec.replicatedJobs[{i}].template.spec")]
            unknown += [f"spec.replicatedJobs[{i}].template.{u}" for u in inner]
            if invalid:
                break
    elif group_version.startswith("kubeflow.org/"):
        from mlsubmit.kube import tfjob

        unknown, invalid = tfjob.unknown_fields(obj), None
        for rtype, replica in (obj.get("spec", {}).get("tfReplicaSpecs") or {}).items():
            inner, invalid = _unknown_builtin({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"},
                                               "template": replica.get("template", {})}, version)
            unknown += [f"spec.tfReplicaSpecs.{rtype}.{u}" for u in inner]
            if invalid:
                break
    else:
        unknown, invalid = _unknown_builtin(obj, version)
    unknown = [u for u in unknown if not u.startswith(("metadata.labels.", "metadata.annotations."))]
    if unknown and strict:
        fields = ", ".join(f'unknown field "{u}"' for u in unknown)
        return 400, "BadRequest", (f'{kind} in version "{group_version.rpartition("/")[2]}" cannot be handled as a '
                                   f"{kind}: strict decoding error: {fields}")
    if invalid:
        name = obj.get("metadata", {}).get("name")
        group = group_version.rpartition("/")[0]
        return 422, "Invalid", f'{kind}{"." + group if group else ""} "{name}" is invalid: {invalid}'
    return None
