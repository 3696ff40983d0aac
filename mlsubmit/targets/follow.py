"""Following a job: wait for it to end, or stream its logs meanwhile, with backoff and a timeout.

`stream` polls the job and Cloud Logging's entries.list the way gcloud does: gcloud's filter from the last
timestamp seen on (inclusive), oldest first, each entry once (deduplicated by insertId), until the job has
ended, then once more for the lines the service writes as it ends. `wait` polls the state only. Both call
back for everything a user sees (`on_entries`, `on_status`, `on_warning`) and print nothing themselves.
The poll interval starts short, grows while nothing happens and is short again when lines arrive.
Ctrl-C is not handled here: KeyboardInterrupt reaches the caller, which detaches (the job keeps running).

`TracebackFinder` keeps the last Python traceback of a job's logs, to show (once) why a failed job failed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mlsubmit.targets.base import Target, JobStatus, LogEntry
from mlsubmit.errors import OperationFailed, UsageError, invalid_value

_TRACEBACK = "Traceback (most recent call last):"
_TRACEBACK_LINES = 200


@dataclass(frozen=True)
class PollPolicy:
    """Seconds between polls (first, largest, growth) and how long to follow at most (None: until the end)."""

    initial: float = 1.0
    maximum: float = 10.0
    multiplier: float = 1.5
    timeout: float | None = None

    @classmethod
    def from_env(cls, timeout: float | None = None) -> "PollPolicy":
        """Defaults; MLSUBMIT_POLL_INTERVAL (seconds) sets the first interval (the largest is 10× it, ≤ 10 s)."""
        text = os.environ.get("MLSUBMIT_POLL_INTERVAL")
        if text is None:
            return cls(timeout=timeout)
        try:
            seconds = float(text)
        except ValueError:
            seconds = -1.0
        if not seconds > 0:
            raise invalid_value("MLSUBMIT_POLL_INTERVAL", text, "a positive number of seconds")
        return cls(initial=seconds, maximum=max(seconds, min(10.0, 10 * seconds)), timeout=timeout)


@dataclass
class LogCursor:
    """Where the last read ended: its timestamp, and the insertIds already seen at that timestamp."""

    since: str | None = None
    seen: set[str] = field(default_factory=set)

    def take(self, entries: Iterable[LogEntry]) -> list[LogEntry]:
        """The entries not seen before, in order; moves the cursor past them."""
        new = [entry for entry in entries if entry.insert_id not in self.seen]
        if new:
            last = new[-1].timestamp
            if last != self.since:
                self.seen = set()
            self.since = last
            self.seen.update(entry.insert_id for entry in new if entry.timestamp == last)
        return new


class TracebackFinder:
    """The last Python traceback in a job's logs (one task's consecutive lines, or one multi-line entry): the
    failing replica's, usually after others it logged and survived. `fed` says whether any entry went through it
    (the caller streamed the logs, so the traceback was shown already)."""

    def __init__(self) -> None:
        self.task: str | None = None
        self.lines: list[str] = []
        self.complete = False
        self.fed = False

    def feed(self, entries: Iterable[LogEntry]) -> None:
        for entry in entries:
            self.fed = True
            at = entry.text.find(_TRACEBACK)
            if at >= 0 and (self.complete or self.task is None or entry.task == self.task):
                self.task, self.lines = entry.task, entry.text[at:].splitlines()
                self.complete = len(self.lines) > 1  # a whole traceback in one entry
            elif self.task is not None and not self.complete and entry.task == self.task:
                self.lines.append(entry.text)
                # the exception line ends it: the first unindented line after the frames
                self.complete = (bool(entry.text) and not entry.text[0].isspace()) or \
                    len(self.lines) >= _TRACEBACK_LINES

    @property
    def text(self) -> str | None:
        return "\n".join(self.lines) if self.lines else None

    @property
    def exception(self) -> str | None:
        """The traceback's last line (`ValueError: boom`), or None."""
        return self.lines[-1].strip() if self.lines and self.complete else None


class _Poller:
    def __init__(self, policy: PollPolicy, sleep: Callable[[float], None]):
        self.policy, self.sleep = policy, sleep
        self.interval, self.started = policy.initial, time.monotonic()

    def check_timeout(self, status: JobStatus) -> None:
        timeout = self.policy.timeout
        if timeout is not None and time.monotonic() - self.started >= timeout:
            raise OperationFailed(f"stopped waiting after {timeout:g} s: the job {status.job_id} is still "
                                  f"{status.state} and keeps running",
                                  hint=f"wait again with `mlsubmit jobs wait {status.job_id}`")

    def pause(self, active: bool) -> None:
        self.interval = self.policy.initial if active else min(self.interval * self.policy.multiplier,
                                                               self.policy.maximum)
        self.sleep(self.interval)


def wait(target: Target, status: JobStatus, *, policy: PollPolicy,
         on_status: Callable[[JobStatus], None] = lambda status: None,
         sleep: Callable[[float], None] = time.sleep) -> JobStatus:
    """Poll until the job ends; returns its final status. OperationFailed when `policy.timeout` passes first."""
    poller, last = _Poller(policy, sleep), None
    while True:
        status = target.get(status.name)
        on_status(status)
        if status.done:
            return status
        poller.check_timeout(status)
        poller.pause(active=status.state != last)  # poll again soon after a change
        last = status.state


def stream(target: Target, status: JobStatus, *, policy: PollPolicy, task: str | None = None,
           on_entries: Callable[[list[LogEntry]], None], on_status: Callable[[JobStatus], None] = lambda s: None,
           on_warning: Callable[[str], None] = lambda text: None, cursor: LogCursor | None = None,
           sleep: Callable[[float], None] = time.sleep) -> JobStatus:
    """Show the job's log entries as they arrive (each once, in order) until it ends; returns its final status.

    A refusal to read the logs (403) is reported through `on_warning` once, and following goes on with the
    status only.
    """
    poller, cursor = _Poller(policy, sleep), cursor or LogCursor()
    reading = True

    def read(current: JobStatus) -> bool:
        nonlocal reading
        if not reading:
            return False
        try:
            new = cursor.take(target.logs(current, since=cursor.since, task=task))
        except UsageError as err:
            reading = False
            on_warning(f"{err.one_line()}; following the job's state only")
            return False
        if new:
            on_entries(new)
        return bool(new)

    while True:
        status = target.get(status.name)
        arrived = read(status)
        on_status(status)
        if status.done:
            sleep(policy.initial)  # the service writes its last lines as the job ends
            read(status)
            return status
        poller.check_timeout(status)
        poller.pause(active=arrived)
