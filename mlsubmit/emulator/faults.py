"""Fault injection, set over the emulator-only admin endpoint `/emulator/v1/faults`.

    POST /emulator/v1/faults {"status": 503, "count": 2}        the next 2 API requests answer 503 UNAVAILABLE
    POST /emulator/v1/faults {"status": 429, "count": 1, "method": "POST", "path": "customJobs"}
                                                                 …only requests whose method and path match
    POST /emulator/v1/faults {"status": 503, "count": 9, "method": "GET", "path": "customJobs", "skip": 1}
                                                                 …after letting the first matching request through
    POST /emulator/v1/faults {"reset": 1}                        the next request's connection is dropped unanswered
    POST /emulator/v1/faults {"drop_create_response": 1}         the next create makes the job, then the
                                                                 connection is dropped: the client sees an error
                                                                 for a job that exists (what makes naive retries
                                                                 create two jobs)
    GET  /emulator/v1/faults                                     what is still armed (and what fired)
    DELETE /emulator/v1/faults                                   disarm everything

Faults queue in the order they were posted; each fires once per request it is counted against. Admin
requests are never faulted.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from mlsubmit.emulator.errors import STATUS, ApiError, field_error

_FAULT_STATUSES = (408, 429, 500, 502, 503, 504)
_KEYS = {"status", "count", "method", "path", "reset", "drop_create_response", "skip"}


@dataclass
class _Fault:
    kind: str  # "status", "reset" or "drop_create_response"
    remaining: int
    status: int = 0
    method: str | None = None
    path: str | None = None
    skip: int = 0  # matching requests let through before the fault starts firing

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (self.path is None or self.path in path)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "remaining": self.remaining}
        if self.kind == "status":
            out["status"] = self.status
        out.update({k: v for k, v in (("method", self.method), ("path", self.path), ("skip", self.skip)) if v})
        return out


class Faults:
    """The armed faults; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: list[_Fault] = []
        self.fired: list[str] = []

    def arm(self, request: Any) -> dict[str, Any]:
        """Arm what a POST body asks for (see the module docstring). Raises ApiError 400 on a bad request."""
        faults = _parse(request)
        with self._lock:
            self._armed.extend(faults)
        return self.describe()

    def clear(self) -> dict[str, Any]:
        with self._lock:
            self._armed.clear()
        return self.describe()

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {"armed": [f.describe() for f in self._armed], "fired": list(self.fired)}

    def before(self, method: str, path: str) -> ApiError | str | None:
        """What to do instead of answering: an ApiError to send, "reset" to drop the connection, or None."""
        fault = self._take(("status", "reset"), method, path)
        if fault is None:
            return None
        if fault.kind == "reset":
            return "reset"
        return ApiError(fault.status, f"The service is currently unavailable (fault injected by the emulator, "
                                      f"HTTP {fault.status}).")

    def drop_create_response(self, method: str, path: str) -> bool:
        """Whether to drop the answer of the create that was just made."""
        return self._take(("drop_create_response",), method, path) is not None

    def _take(self, kinds: tuple[str, ...], method: str, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._armed:
                if fault.kind in kinds and fault.matches(method, path):
                    if fault.skip > 0:
                        fault.skip -= 1
                        continue
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._armed.remove(fault)
                    self.fired.append(f"{fault.kind}{':' + str(fault.status) if fault.status else ''} "
                                      f"{method} {path}")
                    return fault
        return None


def _count(request: dict, key: str) -> int:
    value = request.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10000:
        raise field_error(key, f"expected a whole number from 1 to 10000; received {value!r}")
    return value


def _parse(request: Any) -> list[_Fault]:
    if not isinstance(request, dict) or not request:
        raise field_error("", 'expected an object such as {"status": 503, "count": 2}, {"reset": 1} or '
                              '{"drop_create_response": 1}')
    unknown = sorted(set(request) - _KEYS)
    if unknown:
        raise field_error(unknown[0], f"unknown field; expected some of {', '.join(sorted(_KEYS))}")
    method, path = request.get("method"), request.get("path")
    for key, value in (("method", method), ("path", path)):
        if value is not None and not (isinstance(value, str) and value):
            raise field_error(key, f"expected a non-empty string; received {value!r}")
    method = method.upper() if method else None
    skip = _count(request, "skip") if "skip" in request else 0
    faults = []
    if "status" in request:
        status = request["status"]
        if status not in _FAULT_STATUSES:
            raise field_error("status", f"expected one of {', '.join(map(str, _FAULT_STATUSES))} "
                                        f"({', '.join(STATUS.get(s, str(s)) for s in _FAULT_STATUSES)}); "
                                        f"received {status!r}")
        faults.append(_Fault("status", _count({"count": request.get("count", 1)}, "count"), status, method, path,
                             skip))
    elif "count" in request:
        raise field_error("count", "count goes with status")
    if "reset" in request:
        faults.append(_Fault("reset", _count(request, "reset"), method=method, path=path, skip=skip))
    if "drop_create_response" in request:
        faults.append(_Fault("drop_create_response", _count(request, "drop_create_response"), method=method,
                             path=path, skip=skip))
    if not faults:
        raise field_error("", "nothing to arm: give status (+ count), reset or drop_create_response")
    return faults
