"""Sending API requests: each request once, transient failures retried with backoff, errors in the user's terms.

`send(request, op)` executes one googleapiclient request and translates what went wrong:
- 429, 5xx and requests that got no answer → `Transient` (the caller decides whether repeating is safe), except a
  429 RESOURCE_EXHAUSTED for a quota ("… exceed quota limits"), which waiting does not cure → `QuotaExceeded`;
- 409 → `Conflict`, 404 → `NotFound` (the targets turn them into what they mean for the call);
- 401 → no valid credentials; 403 → the permission (and role) the call needs on which resource, or the API
  to enable; 400 → the service's own words: all `UsageError` (exit 2).
`call(factory, op, retry)` repeats a request that is safe to repeat (reads, cancel) until it succeeds or the
retry policy's deadline passes. Creates are not safe to repeat blindly: see the targets' `submit`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mlsubmit.cloud.clients import TransportError
from mlsubmit.errors import OperationFailed, UsageError
from mlsubmit.cloud.storage import RetryPolicy

TRANSIENT_STATUSES = (408, 429, 500, 502, 503, 504)
QUOTA_MESSAGE = re.compile(r"exceed(s|ed)? quota limits?", re.IGNORECASE)  # a quota, not a rate limit


@dataclass(frozen=True)
class Op:
    """What a request does, for messages: `what` ("create a Vertex AI custom job"), the resource it acts on,
    the IAM permission it needs, a role that grants it, and the API it belongs to."""

    what: str
    resource: str
    permission: str
    role: str
    service: str


class QuotaExceeded(OperationFailed):
    """The service refused the request for the project's quota (429 RESOURCE_EXHAUSTED, "The following quota
    metrics exceed quota limits: …"): retrying the same request does not help; another region or machine may
    (mlsubmit.cloud.failover)."""


class Transient(Exception):
    """A failure worth retrying. `answered`: the server answered (429/5xx); False: no answer at all. `reached`:
    the request may have reached the server (False only when no connection was ever made)."""

    def __init__(self, description: str, answered: bool, reached: bool = True):
        super().__init__(description)
        self.description, self.answered, self.reached = description, answered, reached


class Conflict(Exception):
    """409: the resource exists already."""


class NotFound(Exception):
    """404: the resource (or its parent) does not exist."""


def _status(err: Any) -> tuple[str, str]:
    """(google.rpc status name, message) of an HttpError's body."""
    try:
        error = json.loads(err.content.decode("utf-8")).get("error") or {}
        return str(error.get("status") or ""), str(error.get("message") or err.reason or "").strip()
    except (ValueError, AttributeError, UnicodeDecodeError):
        return "", str(getattr(err, "reason", "") or "").strip()


def _short(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= 300 else first[:297] + "..."


def send(request: Any, op: Op) -> dict[str, Any]:
    """Execute `request` once (a googleapiclient HttpRequest) and return its JSON answer."""
    from googleapiclient.errors import HttpError

    try:
        return request.execute(num_retries=0)
    except TransportError as err:
        raise Transient(str(err), answered=False, reached=err.sent) from None
    except HttpError as err:
        code = err.resp.status
        status, message = _status(err)
        if code == 429 and QUOTA_MESSAGE.search(message):
            refused_for_quota = QuotaExceeded(f"cannot {op.what}: the quota is exhausted (429 "
                                              f"{status or 'RESOURCE_EXHAUSTED'}): {_short(message).rstrip('.')}",
                                              hint="ask for more quota (console: IAM & Admin > Quotas), or fail "
                                                   "over: --alternative region=…,machine-type=…")
            refused_for_quota.detail = _short(message)  # type: ignore[attr-defined]
            raise refused_for_quota from None
        if code in TRANSIENT_STATUSES:
            raise Transient(f"HTTP {code} {status or ''} {_short(message)}".replace("  ", " "), answered=True) \
                from None
        if code == 409:
            raise Conflict(_short(message)) from None
        if code == 404:
            raise NotFound(_short(message)) from None
        raise refused(op, code, status, message) from None


def refused(op: Op, code: int, status: str, message: str) -> UsageError:
    """The UsageError for a 400/401/403 (or any other non-retryable answer) to `op`."""
    said = _short(message).rstrip(".") or f"HTTP {code}"
    if code == 401:
        return UsageError(f"cannot {op.what}: the credentials were refused (401): {said}",
                          hint="run `gcloud auth application-default login` again")
    if code == 403:
        if "SERVICE_DISABLED" in message or "has not been used" in message or "is disabled" in message:
            return UsageError(f"cannot {op.what}: the API {op.service} is not enabled for the project: {said}",
                              hint=f"run `gcloud services enable {op.service}`")
        return UsageError(f"cannot {op.what}: permission {op.permission} denied on {op.resource} (403): {said}",
                          hint=f"grant the account a role that has it, such as {op.role}")
    if code == 400:
        return UsageError(f"cannot {op.what}: the service refused the request (400 {status or 'INVALID_ARGUMENT'})"
                          f": {said}")
    return UsageError(f"cannot {op.what}: HTTP {code} {status}: {said}".replace("  ", " "))


def backoff(retry: RetryPolicy, deadline: float) -> Iterator[float]:
    """Delays before each retry (exponential, capped) while they fit before `deadline` seconds from now."""
    end, delay = time.monotonic() + deadline, retry.initial
    while time.monotonic() + delay <= end:
        yield delay
        delay = min(delay * retry.multiplier, retry.maximum)


def give_up(op: Op, last: Transient, retry: RetryPolicy, endpoint: str) -> Exception:
    """The error after retries ran out: unreachable (no answer at all) is a usage problem, else the call failed.
    It is marked `retries_ran_out` (a create that gives up may have happened all the same)."""
    if not last.answered:
        error: Exception = UsageError(f"cannot {op.what}: no answer from {endpoint} within {retry.probe_deadline:g} s "
                                      f"({last.description})", hint="check the network, --endpoint / "
                                                                    "MLSUBMIT_API_ENDPOINT")
    else:
        error = OperationFailed(f"cannot {op.what}: still failing after retrying for {retry.deadline:g} s "
                                f"({last.description})", hint="try again later; MLSUBMIT_RETRY_DEADLINE sets how "
                                                              "long to keep retrying")
    error.retries_ran_out = True  # type: ignore[attr-defined]
    return error


class Attempts:
    """Backoff over one logical request: waits before each retry while the deadline allows, then gives up.
    A server that answers 429/5xx gets `deadline`; one that does not answer at all gets `probe_deadline`."""

    def __init__(self, op: Op, retry: RetryPolicy, *, endpoint: str = "the API",
                 sleep: Callable[[float], None] = time.sleep):
        self.op, self.retry, self.endpoint, self.sleep = op, retry, endpoint, sleep
        self._delays = {True: backoff(retry, retry.deadline), False: backoff(retry, retry.probe_deadline)}

    def wait(self, err: Transient) -> None:
        """Sleep before the next attempt, or raise the final error if there is none."""
        delay = next(self._delays[err.answered], None)
        if delay is None:
            raise give_up(self.op, err, self.retry, self.endpoint) from None
        self.sleep(delay)


def call(factory: Callable[[], Any], op: Op, retry: RetryPolicy, *, endpoint: str = "the API",
         sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """`send(factory(), op)`, repeated with backoff while the failure is transient (safe requests only)."""
    attempts = Attempts(op, retry, endpoint=endpoint, sleep=sleep)
    while True:
        try:
            return send(factory(), op)
        except Transient as err:
            attempts.wait(err)
