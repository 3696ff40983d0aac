"""The trainer's one error family: bad input the user must fix, reported as one line with exit code 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from mlsubmit_runtime.errors import InputError

EXIT_USAGE = InputError.exit_code


class TrainerError(InputError):
    """Bad input (flags, data, devices, job dir): one line, exit code 2, raised before training starts. The
    runtime's own InputError (data, storage) is reported the same way."""


def invalid(field: str, received: object, expected: str, hint: str | None = None) -> TrainerError:
    """Keras-style message: "Invalid value for `field`. Received: … Expected …"."""
    message = f"invalid value for {field}: received {received!r}; expected {expected}"
    return TrainerError(f"{message}; {hint}" if hint else message)


def suggest(word: str, choices: Iterable[str]) -> str:
    """" (did you mean 'x'?)" for the closest choice, or "" when nothing is close."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {match[0]!r}?)" if match else ""
