"""What kube-apiserver checks in a create or update before it stores an object, for the kinds the emulated API
serves, in its words and codes (a refusal is an ApiStatus; nothing is stored):

1. the body's apiVersion/kind against the URL (missing ones are taken from it; another kind is 400 BadRequest,
   so a Pod posted as a Job is refused, not run), metadata's shape (400), the body's namespace against the URL's;
2. names (422 Invalid): a Namespace or a Job's label-length name an RFC 1123 label, a Service, JobSet or TFJob a
   DNS-1035 label, other objects an RFC 1123 subdomain — so `../../x` or `BAD_Name.ÜNI` never reach a path or a
   process; `generateName` gets its 5 random characters; label keys and values;
3. what the controllers need and the API server requires: a Job's template with containers (name and image each)
   and restartPolicy Never or OnFailure, completions and parallelism within the Indexed limit (100000), a JobSet's
   replicatedJobs (each a Job template), a TFJob's tfReplicaSpecs; a ConfigMap's keys (`[-._a-zA-Z0-9]+`, so no
   key names a path outside its volume) and its data at most 1 MiB;
4. the object's schema (mlsubmit.emulator.kube_openapi: wrong types and missing fields 422; unknown fields 400
   only with `fieldValidation=Strict`, as kube-apiserver drops them otherwise);
5. etcd's request limit: an object over 1.5 MiB is 413 RequestEntityTooLarge (`etcdserver: request is too large`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
from typing import Any

from mlsubmit.emulator import kube_openapi
from mlsubmit.emulator.kube_wire import ApiStatus

MAX_CONFIG_MAP = 1024 * 1024  # core.MaxSecretSize, which ValidateConfigMap applies to data + binaryData
MAX_OBJECT = 1_572_864  # etcd's --max-request-bytes default
MAX_INDEXED = 100_000  # completions and parallelism of an Indexed Job
INT32 = 2**31 - 1
TF_REPLICA_TYPES = ("Chief", "Master", "Worker", "PS", "Evaluator")
_LABEL = (re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"), 63,
          "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
          "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
          "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_SUBDOMAIN = (re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"), 253,
              "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
              "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
              r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_DNS1035 = (re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?"), 63,
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
            "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
            "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
_JOB_NAME = (_SUBDOMAIN[0], 63, _SUBDOMAIN[2])  # a Job's name is also its pods' job-name label value
NAME_RULES = {"namespaces": _LABEL, "services": _DNS1035, "configmaps": _SUBDOMAIN, "pods": _SUBDOMAIN,
              "jobs": _JOB_NAME, "jobsets": _DNS1035, "tfjobs": _DNS1035}
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_VALUE_WORDS = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                      "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                      "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONFIG_KEY_WORDS = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  "
                     "or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
_GENERATED = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of kube-apiserver's generateName suffix


def _quote(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else json.dumps(value)


class _Errors(list):
    """field.ErrorList: (field, type, body) in the words of k8s.io/apimachinery's field errors."""

    def required(self, field: str, detail: str = "") -> None:
        self.append((field, "FieldValueRequired", "Required value" + (f": {detail}" if detail else "")))

    def invalid(self, field: str, value: Any, detail: str) -> None:
        self.append((field, "FieldValueInvalid", f"Invalid value: {_quote(value)}: {detail}"))

    def too_long(self, field: str, limit: int, unit: str = "bytes") -> None:
        self.append((field, "FieldValueTooLong", f"Too long: must have at most {limit} {unit}"))

    def unsupported(self, field: str, value: Any, allowed: tuple[str, ...]) -> None:
        supported = ", ".join(_quote(a) for a in allowed)
        self.append((field, "FieldValueNotSupported", f"Unsupported value: {_quote(value)}: supported values: "
                     f"{supported}"))

    def name(self, field: str, value: str, rule: tuple[re.Pattern, int, str]) -> None:
        pattern, limit, words = rule
        if len(value) > limit:
            self.invalid(field, value, f"must be no more than {limit} characters")
        if not pattern.fullmatch(value):
            self.invalid(field, value, words)


def qualified_kind(kind: str, group_version: str) -> str:
    group = group_version.rpartition("/")[0]
    return f"{kind}.{group}" if group else kind


def invalid(kind: str, group_version: str, name: Any, errors: list[tuple[str, str, str]]) -> ApiStatus:
    """422 Invalid, as apierrors.NewInvalid words it (kubectl prints its causes)."""
    text = [f"{field}: {body}" for field, _, body in errors]
    joined = text[0] if len(text) == 1 else "[" + ", ".join(text) + "]"
    group = group_version.rpartition("/")[0]
    return ApiStatus(422, f"{qualified_kind(kind, group_version)} {_quote(name or '')} is invalid: {joined}",
                     name=name or "", group=group, kind=kind,
                     causes=[{"reason": kind_, "message": body, "field": field} for field, kind_, body in errors])


def _cannot_handle(kind: str, group_version: str, detail: str, given: str | None = None) -> ApiStatus:
    return ApiStatus(400, f'{given or kind} in version "{group_version.rpartition("/")[2]}" cannot be handled as a '
                     f"{kind}: {detail}")


def _check_meta(obj: dict[str, Any], kind: str, group_version: str, namespace: str | None) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise _cannot_handle(kind, group_version, f"json: cannot unmarshal {type(meta).__name__} into Go struct "
                             "field .metadata of type v1.ObjectMeta")
    for key in ("name", "generateName", "namespace"):
        if key in meta and not isinstance(meta[key], str):
            raise _cannot_handle(kind, group_version, f"json: cannot unmarshal {type(meta[key]).__name__} into Go "
                                 f"struct field ObjectMeta.metadata.{key} of type string")
    for key in ("labels", "annotations"):
        found = meta.get(key)
        if found is not None and (not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values())):
            raise _cannot_handle(kind, group_version, f"json: cannot unmarshal into Go struct field "
                                 f"ObjectMeta.metadata.{key} of type map[string]string")
    if namespace is not None and meta.get("namespace") not in (None, "", namespace):
        raise ApiStatus(400, "the namespace of the provided object does not match the namespace sent on the request")
    return meta


def _check_labels(meta: dict[str, Any], errors: _Errors) -> None:
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, name = key.rpartition("/")
        if not name or len(name) > 63 or not _LABEL_VALUE.fullmatch(name) or \
                (prefix and (len(prefix) > 253 or not _SUBDOMAIN[0].fullmatch(prefix))):
            errors.invalid("metadata.labels", key, "name part must consist of alphanumeric characters, '-', '_' or "
                           "'.', and must start and end with an alphanumeric character, with an optional DNS "
                           "subdomain prefix and '/'")
        if len(value) > 63:
            errors.invalid("metadata.labels", value, "must be no more than 63 characters")
        if not _LABEL_VALUE.fullmatch(value):
            errors.invalid("metadata.labels", value, _LABEL_VALUE_WORDS)


def _int(errors: _Errors, field: str, value: Any, low: int = 0, high: int = INT32) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high):
        errors.invalid(field, value, f"must be a whole number from {low} to {high}")


def _items(value: Any) -> list[dict[str, Any]]:
    """The objects of a list field (a wrong type is the schema check's to refuse, after these checks)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _pod_spec(errors: _Errors, path: str, spec: Any, restart: tuple[str, ...] | None) -> None:
    """What kube-apiserver requires of a pod template that the emulator's kubelet reads: containers with a name and
    an image; volumes named as RFC 1123 labels (a volume's name is its folder in an emulated pod), a configMap
    volume's ConfigMap named, mounts naming a volume at a path; for a Job, restartPolicy Never or OnFailure."""
    if not isinstance(spec, dict):
        return errors.required(f"{path}.containers")
    containers = _items(spec.get("containers"))
    if not containers:
        errors.required(f"{path}.containers")
    for i, container in enumerate(containers):
        where = f"{path}.containers[{i}]"
        if not isinstance(container.get("name"), str) or not container["name"]:
            errors.required(f"{where}.name")
        else:
            errors.name(f"{where}.name", container["name"], _LABEL)
        if not container.get("image"):
            errors.required(f"{where}.image")
    volumes = _items(spec.get("volumes"))
    for i, volume in enumerate(volumes):
        if not isinstance(volume.get("name"), str) or not volume["name"]:
            errors.required(f"{path}.volumes[{i}].name")
        else:
            errors.name(f"{path}.volumes[{i}].name", volume["name"], _LABEL)
        source = volume.get("configMap")
        if isinstance(source, dict) and not source.get("name"):
            errors.required(f"{path}.volumes[{i}].configMap.name")
    names = {v["name"] for v in volumes if isinstance(v.get("name"), str)}
    for i, container in enumerate(containers):
        for j, mount in enumerate(_items(container.get("volumeMounts"))):
            where = f"{path}.containers[{i}].volumeMounts[{j}]"
            if not isinstance(mount.get("name"), str) or not mount["name"]:
                errors.required(f"{where}.name")
            elif mount["name"] not in names:
                errors.append((f"{where}.name", "FieldValueNotFound", f"Not found: {_quote(mount['name'])}"))
            if not mount.get("mountPath"):
                errors.required(f"{where}.mountPath")
    if restart is not None:
        policy = spec.get("restartPolicy") or "Always"
        if policy not in restart:
            errors.unsupported(f"{path}.restartPolicy", policy, restart)


def _job_spec(errors: _Errors, path: str, spec: Any) -> None:
    if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
        return errors.required(f"{path}.template.spec.containers")
    indexed = spec.get("completionMode") == "Indexed"
    for field in ("completions", "parallelism"):
        _int(errors, f"{path}.{field}", spec.get(field), 0, MAX_INDEXED if indexed else INT32)
    _int(errors, f"{path}.backoffLimit", spec.get("backoffLimit"))
    _int(errors, f"{path}.activeDeadlineSeconds", spec.get("activeDeadlineSeconds"), 1, 2**63 - 1)
    _pod_spec(errors, f"{path}.template.spec", spec["template"].get("spec"), ("OnFailure", "Never"))


def _config_map(errors: _Errors, obj: dict[str, Any], kind: str, group_version: str) -> None:
    total = 0
    for field in ("data", "binaryData"):
        values = obj.get(field) or {}
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise _cannot_handle(kind, group_version, f"json: cannot unmarshal into Go struct field "
                                 f"ConfigMap.{field} of type map[string]{'string' if field == 'data' else '[]byte'}")
        for key, value in values.items():
            if key in (".", ".."):
                errors.invalid(f"{field}[{key}]", key, f"must not be '{key}'")
            elif len(key) > 253 or not _CONFIG_KEY.fullmatch(key):
                errors.invalid(f"{field}[{key}]", key, _CONFIG_KEY_WORDS)
            if field == "binaryData":
                try:
                    value = base64.b64decode(value, validate=True)
                except (binascii.Error, ValueError):
                    raise _cannot_handle(kind, group_version, f"illegal base64 data in binaryData[{key}]") from None
                if key in (obj.get("data") or {}):
                    errors.invalid(f"binaryData[{key}]", key, "duplicate of key present in data")
            total += len(value.encode() if isinstance(value, str) else value)
    if total > MAX_CONFIG_MAP:
        errors.too_long("[]", MAX_CONFIG_MAP)


def _drop_nulls(value: Any) -> Any:
    """The value as the API server decodes it: a null field is unset, a null list item an empty one."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [{} if v is None else _drop_nulls(v) for v in value]
    return value


def _jobset_types(obj: dict[str, Any], group_version: str) -> None:
    """422 for a JobSet field of the wrong type, by the JobSet models kubeflow-trainer-api publishes."""
    try:
        import pydantic
        from kubeflow_trainer_api.models import JobsetV1alpha2JobSet
    except ImportError:
        return
    try:
        JobsetV1alpha2JobSet.from_dict(obj)
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        field, words = ".".join(str(p) for p in first["loc"]) or "spec", first["msg"]
    except (TypeError, ValueError, AttributeError) as err:  # the generated from_dict trips on some wrong types
        field, words = "spec", str(err).splitlines()[0][:200]
    else:
        return
    raise invalid("JobSet", group_version, obj["metadata"].get("name"),
                  [(field, "FieldValueInvalid", f"Invalid value: {words}")])


def _objects(errors: _Errors, spec: Any, *fields: str) -> None:
    """The optional fields of `spec` a controller reads as objects (a string there would stop it, not refuse it)."""
    for field in fields:
        value = spec.get(field) if isinstance(spec, dict) else None
        if value is not None and not isinstance(value, dict):
            errors.invalid(f"spec.{field}", value, "must be an object")


def _kind_rules(errors: _Errors, plural: str, obj: dict[str, Any], kind: str, group_version: str) -> None:
    spec = obj.get("spec")
    if plural in ("jobsets", "tfjobs", "jobs") and spec is not None and not isinstance(spec, dict):
        return errors.invalid("spec", spec, "must be an object")
    _objects(errors, spec, "network", "failurePolicy", "successPolicy", "runPolicy", "podFailurePolicy")
    if plural == "configmaps":
        _config_map(errors, obj, kind, group_version)
    elif plural == "jobs":
        _job_spec(errors, "spec", spec)
    elif plural == "pods":
        _pod_spec(errors, "spec", spec, ("Always", "OnFailure", "Never"))
    elif plural == "jobsets":
        replicated = spec.get("replicatedJobs") if isinstance(spec, dict) else None
        if not isinstance(replicated, list) or not replicated:
            return errors.required("spec.replicatedJobs")
        policy = spec.get("failurePolicy")
        _int(errors, "spec.failurePolicy.maxRestarts", policy.get("maxRestarts") if isinstance(policy, dict) else None)
        for i, job in enumerate(replicated):
            where = f"spec.replicatedJobs[{i}]"
            if not isinstance(job, dict) or not isinstance(job.get("name"), str):
                errors.required(f"{where}.name")
                continue
            errors.name(f"{where}.name", job["name"], _DNS1035)
            _int(errors, f"{where}.replicas", job.get("replicas"))
            template = job.get("template")
            _job_spec(errors, f"{where}.template.spec", template.get("spec") if isinstance(template, dict) else None)
    elif plural == "tfjobs":
        replicas = spec.get("tfReplicaSpecs") if isinstance(spec, dict) else None
        if not isinstance(replicas, dict) or not replicas:
            return errors.required("spec.tfReplicaSpecs")
        for role, replica in replicas.items():
            where = f"spec.tfReplicaSpecs[{role}]"
            if role not in TF_REPLICA_TYPES:  # the operator's types: a key also names the pods and their folders
                errors.unsupported("spec.tfReplicaSpecs", role, TF_REPLICA_TYPES)
                continue
            if not isinstance(replica, dict) or not isinstance(replica.get("template"), dict):
                errors.required(f"{where}.template.spec.containers")
                continue
            _int(errors, f"{where}.replicas", replica.get("replicas"), 0, MAX_INDEXED)
            _pod_spec(errors, f"{where}.template.spec", replica["template"].get("spec"), None)


def admit(obj: dict[str, Any], *, plural: str, kind: str, group_version: str, namespace: str | None,
          strict: bool = False, version: str = "1.33") -> dict[str, Any]:
    """The object as it would be stored (apiVersion, kind and a generated name filled in), or an ApiStatus."""
    for field, expected in (("apiVersion", group_version), ("kind", kind)):
        if obj.get(field) in (None, ""):
            obj[field] = expected
        elif not isinstance(obj[field], str):
            raise ApiStatus(400, f"the object provided is unrecognized (must be of type {kind}): couldn't get "
                            f"version/kind; json parse error: {field} is not a string")
    if obj["apiVersion"] != group_version:
        raise ApiStatus(400, f"the API version in the data ({obj['apiVersion']}) does not match the expected API "
                        f"version ({group_version})")
    if obj["kind"] != kind:
        raise _cannot_handle(kind, group_version, f'no kind "{obj["kind"]}" is registered for version '
                             f'"{group_version}"', given=obj["kind"])
    meta = _check_meta(obj, kind, group_version, namespace)
    obj.update(_drop_nulls(obj))
    errors = _Errors()
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + "".join(secrets.choice(_GENERATED) for _ in range(5))
    if not meta.get("name"):
        errors.required("metadata.name", "name or generateName is required")
    else:
        errors.name("metadata.name", meta["name"], NAME_RULES.get(plural, _SUBDOMAIN))
    _check_labels(meta, errors)
    _kind_rules(errors, plural, obj, kind, group_version)
    if errors:
        raise invalid(kind, group_version, meta.get("name"), errors)
    if plural == "jobsets":
        _jobset_types(obj, group_version)
    refused = kube_openapi.refusal(obj, version, strict=strict)
    if refused is not None:
        code, reason, message = refused
        raise ApiStatus(code, message, reason)
    if len(json.dumps(obj)) > MAX_OBJECT:
        raise ApiStatus(413, "etcdserver: request is too large")
    return obj
