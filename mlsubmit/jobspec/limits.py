"""The services' size limits, checked on what mlsubmit generates before it is written or sent.

Inputs are bounded where they are read (`safe_yaml`: the file and what its aliases expand to); a generated
document can still outgrow them, because one setting may appear several times in it — a legacy config's `args`
land in every Vertex AI worker pool, up to four copies. Google's front end refuses a request body over
MAX_REQUEST_BYTES; `check_request` says so first, in one line, before anything is written, uploaded or submitted.

Example:
    >>> check_request({"displayName": "j"}, "the CustomJob request")
"""

from __future__ import annotations

import json
from typing import Any

from mlsubmit.errors import UsageError

MAX_REQUEST_BYTES = 1_572_864  # 1.5 MiB: the largest request body the Google APIs (Vertex AI, AI Platform) take
MAX_LABELS = 64  # labels on one resource (Resource Manager's label requirements, which Vertex AI follows)
MAX_ENV = 100  # pythonPackageSpec.env / containerSpec.env: "Maximum limit is 100"


def check_request(body: Any, what: str) -> None:
    """Refuse `body` (a JSON-able request, or the text of a config file) larger than MAX_REQUEST_BYTES.

    Raises:
        UsageError: naming `what`, its size and the limit.
    """
    size = len(body.encode("utf-8", "surrogatepass") if isinstance(body, str) else
               json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    if size > MAX_REQUEST_BYTES:
        raise UsageError(f"invalid job: {what} would be {size} bytes; expected at most {MAX_REQUEST_BYTES} "
                         "(1.5 MiB, the API's request size limit)", hint="shorten the trainer args and env values, "
                         "or pass large settings to the trainer as a file in Cloud Storage")
