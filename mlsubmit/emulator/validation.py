"""Check a create request against its schema in the discovery document, as the service's front end does.

Three passes, all derived from google-api-python-client's shipped discovery documents (never a hand-kept list):
`mlsubmit.jobspec.discovery.validate` (field names, JSON types, enums, int64 strings, formats); required fields (the
documents mark them with a description that starts "Required."; enum fields are exempt because proto3 cannot
tell an absent enum from its first value); and output-only fields (description "Output only."), which a
client may send back and the service ignores, so they are dropped.

Counts the schemas state only in prose are checked too, from mlsubmit.jobspec.limits (the numbers the client checks
before sending): at most 64 `labels` on a resource, at most 100 `env` variables in a package or container spec.

Field paths in violations are the JSON paths of the request body: `jobSpec.workerPoolSpecs[0].replicaCount`.
"""

from __future__ import annotations

import functools
from typing import Any

from mlsubmit.jobspec import discovery
from mlsubmit.jobspec.limits import MAX_ENV, MAX_LABELS
from mlsubmit.emulator.errors import violations_error


def checked_body(api: str, schema: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` without its output-only fields, or ApiError 400 listing every violation."""
    found = [(v.field, v.description) for v in discovery.validate(api, schema, body, lenient_numbers=True)]
    found += _over_limits(body, "")
    if not found:
        found = _missing(api, {"$ref": schema}, body, "")
    if found:
        raise violations_error(found)
    return _strip(api, {"$ref": schema}, body)


@functools.lru_cache(maxsize=None)
def _marks(api: str, schema: str) -> tuple[frozenset[str], frozenset[str]]:
    """(required, output-only) property names of a schema."""
    properties = discovery.schemas(api)[schema].get("properties", {})
    required = frozenset(name for name, prop in properties.items()
                         if _always_required(prop.get("description", "")) and "enum" not in prop)
    output_only = frozenset(name for name, prop in properties.items()
                            if prop.get("description", "").startswith("Output only"))
    return required, output_only


# "Required" fields the service let a sibling stand in for: a resumed study takes the previous job's params (AI
# Platform's "Resuming a completed hyperparameter tuning job" example names only resumePreviousJobId and counts)
_REQUIRED_UNLESS = {("GoogleCloudMlV1__HyperparameterSpec", "params"): "resumePreviousJobId"}


def _always_required(description: str) -> bool:
    """"Required. …" — not "Required if type is `DOUBLE` …", which the service checks with the other fields."""
    return description.startswith("Required") and not description.startswith("Required if")


def _resolve(api: str, prop: dict) -> tuple[str | None, dict]:
    if "$ref" in prop:
        return prop["$ref"], discovery.schemas(api)[prop["$ref"]]
    return None, prop


def _missing(api: str, prop: dict, value: Any, path: str) -> list[tuple[str, str]]:
    name, prop = _resolve(api, prop)
    out: list[tuple[str, str]] = []
    if isinstance(value, list) and prop.get("type") == "array":
        for index, item in enumerate(value):
            out += _missing(api, prop.get("items", {}), item, f"{path}[{index}]")
        return out
    if not isinstance(value, dict) or prop.get("type") != "object":
        return out
    properties = prop.get("properties", {})
    required = _marks(api, name)[0] if name else frozenset()
    for key in sorted(required):
        stand_in = _REQUIRED_UNLESS.get((name, key))
        if stand_in and value.get(stand_in) not in (None, "", [], {}):
            continue
        if value.get(key) in (None, "", [], {}):
            out.append((f"{path}.{key}" if path else key, "required field is missing"))
    for key, item in value.items():
        if key in properties:
            out += _missing(api, properties[key], item, f"{path}.{key}" if path else key)
    return out


def _strip(api: str, prop: dict, value: Any) -> Any:
    name, prop = _resolve(api, prop)
    if isinstance(value, list) and prop.get("type") == "array":
        return [_strip(api, prop.get("items", {}), item) for item in value]
    if not isinstance(value, dict) or prop.get("type") != "object" or "properties" not in prop:
        return value
    output_only = _marks(api, name)[1] if name else frozenset()
    return {key: _strip(api, prop["properties"][key], item) if key in prop["properties"] else item
            for key, item in value.items() if key not in output_only}


def _over_limits(value: Any, path: str) -> list[tuple[str, str]]:
    """Violations for a `labels` map of more than MAX_LABELS entries or an `env` list of more than MAX_ENV, anywhere
    in the body (a job's own, a tuning job's trial spec, every worker pool)."""
    out: list[tuple[str, str]] = []
    if isinstance(value, list):
        for index, item in enumerate(value):
            out += _over_limits(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if key == "labels" and isinstance(item, dict) and len(item) > MAX_LABELS:
                out.append((where, f"at most {MAX_LABELS} labels are allowed on a resource; received {len(item)}"))
            elif key == "env" and isinstance(item, list) and len(item) > MAX_ENV:
                out.append((where, f"at most {MAX_ENV} environment variables are allowed; received {len(item)}"))
            else:
                out += _over_limits(item, where)
    return out
