"""Errors in the shape Google's REST APIs send them.

Every API error the emulator answers with is an `ApiError`, rendered as
`{"error": {"code", "message", "status", "details": [...]}}`; field problems travel as one
`type.googleapis.com/google.rpc.BadRequest` detail with a `fieldViolations` entry per field, which is what
google-api-python-client's `HttpError.error_details` and gcloud show.
"""

from __future__ import annotations

from collections.abc import Iterable

# google.rpc.Code names and their HTTP statuses (google/rpc/code.proto)
STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
          408: "DEADLINE_EXCEEDED", 409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED",
          500: "INTERNAL", 501: "UNIMPLEMENTED", 502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
          # refusals at the HTTP level, which google.rpc has no names for: the front end calls them invalid
          405: "INVALID_ARGUMENT", 411: "INVALID_ARGUMENT", 414: "INVALID_ARGUMENT", 431: "INVALID_ARGUMENT",
          505: "INVALID_ARGUMENT"}
RPC_CODES = {"OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
             "NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8,
             "FAILED_PRECONDITION": 9, "ABORTED": 10, "INTERNAL": 13, "UNAVAILABLE": 14, "UNAUTHENTICATED": 16}
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"


class ApiError(Exception):
    """An error answer: HTTP code, google.rpc status name, message, and field violations (field, description)."""

    def __init__(self, code: int, message: str, *, status: str | None = None,
                 violations: Iterable[tuple[str, str]] = ()):
        super().__init__(message)
        self.code = code
        self.status = status or STATUS.get(code, "UNKNOWN")
        self.message = message
        self.violations = [(str(field), str(description)) for field, description in violations]

    def body(self) -> dict:
        error: dict = {"code": self.code, "message": self.message, "status": self.status}
        if self.violations:
            error["details"] = [{"@type": BAD_REQUEST, "fieldViolations": [
                {"field": field, "description": description} for field, description in self.violations]}]
        return {"error": error}


def invalid_argument(message: str, violations: Iterable[tuple[str, str]] = ()) -> ApiError:
    return ApiError(400, message, violations=violations)


def field_error(field: str, description: str) -> ApiError:
    """400 INVALID_ARGUMENT about one field, worded as the Google front end words it."""
    return ApiError(400, f"Invalid value at '{field}': {description}" if field else description,
                    violations=[(field, description)])


def violations_error(violations: list[tuple[str, str]]) -> ApiError:
    """400 INVALID_ARGUMENT listing every violation; the message names the first (and how many more)."""
    field, description = violations[0]
    more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
    return ApiError(400, f"Request contains an invalid argument: {field}: {description}{more}",
                    violations=violations)


def not_found(message: str) -> ApiError:
    return ApiError(404, message)


def already_exists(message: str) -> ApiError:
    return ApiError(409, message)


def failed_precondition(message: str) -> ApiError:
    """What the services answer for an action the job's state does not allow (cancel a finished job)."""
    return ApiError(400, message, status="FAILED_PRECONDITION")
