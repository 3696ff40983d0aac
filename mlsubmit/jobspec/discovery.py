"""Validate JSON objects against the request schemas of Google's discovery documents.

google-api-python-client ships the discovery documents of the APIs mlsubmit talks to
(`googleapiclient/discovery_cache/documents/{ml.v1,aiplatform.v1,logging.v2}.json`). This module reads those
files directly (no googleapiclient import) and checks an object against a named schema the way the service's
JSON parser would: field names, JSON types, enum values, int64/uint64 as decimal strings, int32 ranges,
google-duration / google-datetime / byte formats, arrays and maps, following `$ref`.

It returns violations rather than raising, so the same function serves `mlsubmit config` (which turns the
first violation into a UsageError) and the REST emulator (which answers 400 with one BadRequest
fieldViolation per item).

Example:
    >>> validate("ml.v1", "GoogleCloudMlV1__TrainingInput", {"scaleTier": "HUGE", "workerCount": 4})
    [Violation(field='scaleTier', description="invalid enum value 'HUGE'; expected one of BASIC, …"),
     Violation(field='workerCount', description='expected an int64 as a decimal string; received 4')]
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any, NamedTuple

from mlsubmit.errors import did_you_mean

APIS = ("ml.v1", "aiplatform.v1", "logging.v2")


class Violation(NamedTuple):
    """One problem: the JSON path of the field (`workerPoolSpecs[0].replicaCount`) and what is wrong."""

    field: str
    description: str


def documents_dir() -> Path:
    """The folder of discovery documents inside the installed google-api-python-client (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("googleapiclient")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("google-api-python-client is not installed; its discovery documents are needed")
    return Path(next(iter(spec.submodule_search_locations))) / "discovery_cache" / "documents"


@functools.lru_cache(maxsize=None)
def schemas(api: str) -> dict[str, dict]:
    """The `schemas` section of one discovery document, e.g. schemas("ml.v1")["GoogleCloudMlV1__Job"]."""
    if api not in APIS:
        raise ValueError(f"unknown api {api!r}; expected one of {', '.join(APIS)}")
    with open(documents_dir() / f"{api}.json", encoding="utf-8") as handle:
        return json.load(handle)["schemas"]


_INT64 = re.compile(r"-?\d+")
_UINT64 = re.compile(r"\d+")
_DURATION = re.compile(r"-?\d+(\.\d{1,9})?s")
_DATETIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)")
_BYTES = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")
_INT_RANGES = {"int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1),
               "int64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1)}
_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
               float: "a number", type(None): "null"}


def validate(api: str, schema: str, obj: Any, *, lenient_numbers: bool = False) -> list[Violation]:
    """Check `obj` against `schema` of `api`; return every violation found (empty when valid).

    Args:
        api: "ml.v1", "aiplatform.v1" or "logging.v2".
        schema: a schema id of that document, e.g. "GoogleCloudAiplatformV1CustomJobSpec".
        obj: the decoded JSON (dicts, lists, str, int, float, bool, None).
        lenient_numbers: also accept JSON numbers for int64 fields and decimal strings for int32 fields, as
            the proto3 JSON parser of the real services does. Off by default: documents mlsubmit writes must
            use the canonical form (int64 as strings).

    Returns:
        A list of Violation(field, description), in document order.
    """
    table = schemas(api)
    if schema not in table:
        raise ValueError(f"{api} has no schema {schema!r}")
    found: list[Violation] = []
    _check(table, {"$ref": schema}, obj, "", found, lenient_numbers)
    return found


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check(table: dict, prop: dict, value: Any, path: str, out: list[Violation], lenient: bool) -> None:
    if "$ref" in prop:
        prop = table[prop["$ref"]]
    kind = prop.get("type", "any")
    if value is None or kind == "any":
        return  # proto3 JSON: null means "not set" for every field
    if kind == "object":
        _check_object(table, prop, value, path, out, lenient)
    elif kind == "array":
        if not isinstance(value, list):
            out.append(Violation(path, f"expected an array; received {_describe(value)}"))
            return
        for index, item in enumerate(value):
            _check(table, prop.get("items", {}), item, f"{path}[{index}]", out, lenient)
    elif kind == "string":
        _check_string(prop, value, path, out, lenient)
    elif kind == "integer":
        _check_integer(prop.get("format", "int32"), value, path, out, lenient)
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            out.append(Violation(path, f"expected a number; received {_describe(value)}"))
    elif kind == "boolean" and not isinstance(value, bool):
        out.append(Violation(path, f"expected true or false; received {_describe(value)}"))


def _check_object(table: dict, prop: dict, value: Any, path: str, out: list[Violation], lenient: bool) -> None:
    if not isinstance(value, dict):
        out.append(Violation(path, f"expected an object; received {_describe(value)}"))
        return
    properties = prop.get("properties")
    extra = prop.get("additionalProperties")
    for key, item in value.items():
        if not isinstance(key, str):
            out.append(Violation(path, f"object keys must be strings; received {key!r}"))
        elif properties is not None and key in properties:
            _check(table, properties[key], item, _join(path, key), out, lenient)
        elif extra is not None:
            _check(table, extra, item, f'{path}["{key}"]' if path else key, out, lenient)
        else:
            hint = did_you_mean(key, properties or ())
            out.append(Violation(_join(path, key), f"unknown field {key!r}" + (f"; {hint}" if hint else "")))


def _check_string(prop: dict, value: Any, path: str, out: list[Violation], lenient: bool) -> None:
    fmt = prop.get("format")
    if fmt in ("int64", "uint64"):
        if lenient and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        pattern = _INT64 if fmt == "int64" else _UINT64
        low, high = _INT_RANGES[fmt]
        if not isinstance(value, str) or not pattern.fullmatch(value) or not low <= int(value) <= high:
            out.append(Violation(path, f"expected an {fmt} as a decimal string; received {_describe(value)}"))
        return
    if not isinstance(value, str):
        out.append(Violation(path, f"expected a string; received {_describe(value)}"))
    elif "enum" in prop and value not in prop["enum"]:
        hint = did_you_mean(value, prop["enum"])
        out.append(Violation(path, f"invalid enum value {value!r}; expected one of {', '.join(prop['enum'])}"
                             + (f"; {hint}" if hint else "")))
    elif fmt == "google-duration" and not _DURATION.fullmatch(value):
        out.append(Violation(path, f"expected a duration in seconds such as '3600s'; received {value!r}"))
    elif fmt == "google-datetime" and not _DATETIME.fullmatch(value):
        out.append(Violation(path, f"expected an RFC 3339 timestamp; received {value!r}"))
    elif fmt == "byte" and not _BYTES.fullmatch(value):
        out.append(Violation(path, f"expected base64 bytes; received {value!r}"))


def _check_integer(fmt: str, value: Any, path: str, out: list[Violation], lenient: bool) -> None:
    if lenient and isinstance(value, str) and _INT64.fullmatch(value):
        value = int(value)
    low, high = _INT_RANGES.get(fmt, _INT_RANGES["int64"])
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON has one number type: 2.0 is the integer 2
    if isinstance(value, bool) or not isinstance(value, int):
        out.append(Violation(path, f"expected an integer ({fmt}); received {_describe(value)}"))
    elif not low <= value <= high:
        out.append(Violation(path, f"{value} is out of range for {fmt} ({low}..{high})"))


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return repr(value)
    return _JSON_NAMES.get(type(value), type(value).__name__)
