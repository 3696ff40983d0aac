"""The one error family of mlsubmit.

Every mistake a user can make, and every failure they must act on, is raised as an `MlsubmitError` (or a
subclass) carrying a one-line message, an optional hint and an exit code. The CLI turns it into a single red
`error: …` line in exactly one place (`mlsubmit.cli`); library code never prints.
"""

from __future__ import annotations

import difflib
import errno
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
        return bounded(printable(f"{self.message}; {self.hint}" if self.hint else self.message))


class UsageError(MlsubmitError):
    """Invalid flags, specs or files (exit code 2)."""


class OperationFailed(MlsubmitError):
    """Valid input, failed work: a job that failed, an upload that ran out of retries (exit code 1)."""

    exit_code = FAILED


def printable(text: str) -> str:
    """`text` as one printable line: a newline, control character or lone surrogate a user typed (or a file
    held) is shown escaped, as Python writes it, so an error is always exactly one line and always encodable."""
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in text)


MAX_SHOWN = 200  # characters of a received value shown whole; a longer one shows its first SHOWN_START
SHOWN_START = 60
MAX_LINE = 4000  # characters of one error line, whatever a message was built from


def shown(received: object) -> str:
    """`received` as an error message quotes it: its repr, or for a long one its start and its length
    (`'aaaa…' (100,000 characters)`), so a 100 KB value typed by mistake gives a readable line, not 100 KB."""
    if isinstance(received, str) and len(received) > MAX_SHOWN:
        return f"{received[:SHOWN_START] + '…'!r} ({len(received):,} characters)"
    text = repr(received)
    return text if len(text) <= MAX_SHOWN else f"{text[:SHOWN_START]}… ({len(text):,} characters)"


def bounded(line: str) -> str:
    """`line` cut in the middle when longer than MAX_LINE: the start says what was wrong, the end what to do."""
    if len(line) <= MAX_LINE:
        return line
    return f"{line[:MAX_LINE // 2]} … ({len(line):,} characters in all) … {line[-MAX_LINE // 4:]}"


def invalid_value(field: str, received: object, allowed: str, *, hint: str | None = None) -> UsageError:
    """Build the standard message: "Invalid value for `field`. Received: … Expected …".

    A long `received` is shown by its start and length (`shown`), in the hint too where the hint repeats it."""
    if hint and isinstance(received, str) and len(received) > MAX_SHOWN:
        hint = hint.replace(received, f"{received[:SHOWN_START]}…")
    return UsageError(f"invalid value for {field}: received {shown(received)}; expected {allowed}", hint=hint)


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """Return "did you mean 'x'?" for the closest of `choices`, or None if nothing is close."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {match[0]!r}?" if match else None


def from_user_input(err: BaseException) -> UsageError | None:
    """The UsageError for a failure only a user's input causes, wherever in the code it surfaces: a path whose
    name is too long for the file system, or text that cannot be encoded (bytes that were not UTF-8 on the
    command line). None for anything else, which stays a real failure."""
    if isinstance(err, OSError) and err.errno == errno.ENAMETOOLONG:
        name = str(err.filename or "")
        shown = name if len(name) <= 60 else f"{name[:60]}…"
        return UsageError(f"invalid path: received {shown!r} ({len(name)} characters); expected a file name the "
                          f"file system can hold (at most 255 bytes a part, 4096 in all): {err.strerror}")
    if isinstance(err, UnicodeEncodeError):
        bad = err.object[err.start:err.end]
        return UsageError(f"invalid text: received {err.object[:60]!r}, which holds {bad!r}; expected "
                          f"{err.encoding.upper()} text", hint="retype it, or check the terminal's encoding")
    return None


def from_system(err: BaseException) -> OperationFailed | None:
    """The one line for a failure of this machine rather than of the input: the disk (or the user's quota) is full,
    wherever it surfaces (a build cache, an sdist, a check result). None for anything else."""
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        where = f" writing {err.filename}" if err.filename else ""
        return OperationFailed(f"out of disk space{where} ({err.strerror})",
                               hint="see what mlsubmit keeps with `mlsubmit cache list`, free space with `mlsubmit "
                                    "cache prune --max-size SIZE`, or set MLSUBMIT_HOME to a larger disk")
    return None
