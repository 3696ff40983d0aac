"""The one error family of mlsubmit.

Every mistake a user can make, and every failure they must act on, is raised as an `MlsubmitError` (or a
subclass) carrying a one-line message, an optional hint and an exit code. The CLI turns it into a single red
`error: …` line in exactly one place (`mlsubmit.cli`); library code never prints.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

USAGE = 2  # bad input: nothing was done
FAILED = 1  # the work was valid but did not succeed (a failed job, an upload that ran out of retries)


class MlsubmitError(Exception):
    """A user-facing error: what was wrong, what was received, what is allowed, and a fix when there is one."""

    exit_code = USAGE

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def one_line(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


class UsageError(MlsubmitError):
    """Invalid flags, specs or files (exit code 2)."""


class OperationFailed(MlsubmitError):
    """Valid input, failed work: a job that failed, an upload that ran out of retries (exit code 1)."""

    exit_code = FAILED


def invalid_value(field: str, received: object, allowed: str, *, hint: str | None = None) -> UsageError:
    """Build the standard message: "Invalid value for `field`. Received: … Expected …"."""
    return UsageError(f"invalid value for {field}: received {received!r}; expected {allowed}", hint=hint)


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """Return "did you mean 'x'?" for the closest of `choices`, or None if nothing is close."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {match[0]!r}?" if match else None
