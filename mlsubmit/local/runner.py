"""Start, watch and stop the processes of a local job: one per replica, each in its own process group.

- Every line a replica prints is passed on with its name, `[chief-0] Epoch 1/3`, coloured by role on a terminal.
- The chief's exit ends the job. When it succeeds, the other replicas get a grace period to end on their own
  (multi-worker workers end with the chief, workers and parameter servers of parameter-server training stop once
  the chief is gone, evaluators finish the last checkpoint); whatever still runs after it is stopped.
- The first replica that fails ends the job: the others are stopped and its last traceback is kept.
- Given `logs` (replica name → file), every line a replica prints is also written to its file, complete even when
  the sink shows only part of it: the whole log the user is pointed at.
- Ctrl-C (or SIGTERM to mlsubmit) stops every replica. Stopping is SIGTERM to the replica's process group, then
  SIGKILL after a few seconds; on Linux each replica also dies with the runner (PR_SET_PDEATHSIG), so not even a
  runner killed with SIGKILL leaves a replica behind.

The runner never prints: lines go to the `sink` it is given.
"""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlsubmit.local import children
from mlsubmit.chatter import drop_chatter

SUCCEEDED, FAILED, CANCELLED = "SUCCEEDED", "FAILED", "CANCELLED"
_COLOURS = {"chief": "36", "worker": "32", "ps": "35", "evaluator": "33"}  # cyan, green, magenta, yellow
_TAIL_LINES = 400
MAX_LINE = 65_536  # characters: a longer line (no newline in 100 MB) is passed on in pieces, never held whole;
# 4 bytes a character at most, so each piece fits a Cloud Logging entry (256 KiB)


@dataclass(frozen=True)
class Replica:
    """One process to start: its name (`worker-1`), role, command line, full environment and directory."""

    name: str
    role: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(repr=False)
    cwd: str


@dataclass(frozen=True)
class Outcome:
    state: str  # SUCCEEDED, FAILED or CANCELLED
    seconds: float
    exit_codes: Mapping[str, int | None]  # None: still running when stopped (then killed)
    failed: str | None = None  # the replica that ended the job by failing
    reason: str = ""
    traceback: str = ""

    @property
    def exit_code(self) -> int:
        return {SUCCEEDED: 0, FAILED: 1, CANCELLED: 130}[self.state]


class _Stop(Exception):
    """SIGTERM to the runner, or its output closed: stop like Ctrl-C."""


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def last_traceback(lines: Sequence[str], limit: int = 40) -> str:
    """The last Python traceback in `lines` (through the exception line), else the last few lines."""
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return "\n".join(lines[-12:])
    block = list(lines[starts[-1]:])
    return "\n".join(block if len(block) <= limit else block[:5] + ["  …"] + block[-(limit - 6):])


class Runner:
    """Run `replicas` to the end of the job. `run()` returns the Outcome; it always leaves no replica running."""

    def __init__(self, replicas: Sequence[Replica], *, sink: Callable[[str], None], color: bool = False,
                 grace_seconds: float = 15.0, evaluator_grace_seconds: float = 120.0, stop_seconds: float = 5.0,
                 on_line: Callable[[str, str], None] | None = None, logs: Mapping[str, os.PathLike] | None = None):
        names = [r.name for r in replicas]
        if len(set(names)) != len(names) or "chief-0" not in names:
            raise ValueError(f"replicas need unique names and one chief-0; received {names}")
        self.replicas, self.sink, self.color = list(replicas), sink, color
        self.grace, self.evaluator_grace, self.stop_seconds = grace_seconds, evaluator_grace_seconds, stop_seconds
        width = max(len(n) for n in names) + 2
        self._prefix = {r.name: self._paint(r.role, f"[{r.name}]".ljust(width)) for r in replicas}
        self._lines: queue.Queue = queue.Queue()
        self._tails = {n: collections.deque(maxlen=_TAIL_LINES) for n in names}
        self._processes: dict[str, subprocess.Popen] = {}
        self._readers: list[threading.Thread] = []
        self.on_line = on_line  # (replica name, line without prefix) for each line, e.g. the emulator's log store
        self._cancel = threading.Event()
        self._sink_gone = False
        self._log_paths = dict(logs or {})
        self._log_files: dict[str, Any] = {}

    def _paint(self, role: str, text: str) -> str:
        return f"\x1b[{_COLOURS.get(role, '0')}m{text}\x1b[0m" if self.color else text

    # -- processes -----------------------------------------------------------------------------------------
    def _start(self, replica: Replica) -> None:
        process = subprocess.Popen(
            list(replica.argv), env=dict(replica.env), cwd=replica.cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
            **children.popen_kwargs())
        self._processes[replica.name] = process
        reader = threading.Thread(target=self._read, args=(replica.name, process), daemon=True)
        reader.start()
        self._readers.append(reader)

    def _read(self, name: str, process: subprocess.Popen) -> None:
        pieces = iter(lambda: process.stdout.readline(MAX_LINE), "")  # bounded, whatever a replica prints
        for line in drop_chatter(pieces):  # TensorFlow's C++ start-up lines (mlsubmit.chatter)
            self._lines.put((name, line.rstrip("\n")))
        process.stdout.close()

    def _drain(self, wait: float) -> None:
        try:
            name, line = self._lines.get(timeout=wait)
        except queue.Empty:
            return
        while True:
            self._tails[name].append(line)
            self._log(name, line)
            if not self._sink_gone:
                try:
                    self.sink(f"{self._prefix[name]} {line}")
                except OSError:  # the reader went away (a closed pipe): nobody watches, so stop like Ctrl-C
                    self._sink_gone = True
                    raise _Stop() from None
            if self.on_line is not None:
                self.on_line(name, line)
            try:
                name, line = self._lines.get_nowait()
            except queue.Empty:
                return

    def _log(self, name: str, line: str) -> None:
        path = self._log_paths.get(name)
        if path is None:
            return
        if name not in self._log_files:
            try:
                self._log_files[name] = open(path, "a", encoding="utf-8", errors="replace")
            except OSError:  # a log that cannot be written costs the log, never the job
                self._log_paths.pop(name)
                return
        self._log_files[name].write(line + "\n")

    def _stop(self, names) -> None:
        """SIGTERM to each replica's process group, SIGKILL to whatever is left after stop_seconds."""
        running = [self._processes[n] for n in names if self._processes[n].poll() is None]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for process in running:
                try:
                    os.killpg(process.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + (self.stop_seconds if sig == signal.SIGTERM else 10.0)
            while running and time.monotonic() < deadline:
                running = [p for p in running if p.poll() is None]
                self._drain(0.05)
        for process in self._processes.values():
            try:
                os.killpg(process.pid, signal.SIGKILL)  # helpers a replica started in its group
            except (ProcessLookupError, PermissionError):
                pass

    # -- the job -------------------------------------------------------------------------------------------
    def run(self) -> Outcome:
        started = time.monotonic()
        previous = signal.signal(signal.SIGTERM, self._on_sigterm) \
            if threading.current_thread() is threading.main_thread() else None
        state, failed, reason, stopped = None, None, "", set()
        try:
            for replica in self.replicas:
                self._start(replica)
            state, failed, reason, stopped = self._watch()
        except (KeyboardInterrupt, _Stop):
            state, reason = CANCELLED, "stopped by the user"
            stopped = set(self._processes)
            self._stop(list(self._processes))
        finally:
            self._stop(list(self._processes))
            for reader in self._readers:
                reader.join(timeout=2)
            self._drain(0)
            for handle in self._log_files.values():
                handle.close()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        codes = {n: (None if n in stopped and p.returncode not in (0,) else p.returncode)
                 for n, p in self._processes.items()}
        trace = last_traceback(list(self._tails[failed])) if failed else ""
        return Outcome(state, time.monotonic() - started, codes, failed, reason, trace)

    def cancel(self) -> None:
        """Stop every replica from another thread; `run()` then returns a CANCELLED outcome."""
        self._cancel.set()

    def pids(self) -> dict[str, int]:
        """The pid (= process group id) of each replica started so far."""
        return {name: process.pid for name, process in list(self._processes.items())}

    def _on_sigterm(self, signum, frame):
        raise _Stop()

    def _watch(self):
        roles = {r.name: r.role for r in self.replicas}
        deadlines: dict[str, float] = {}
        overdue: set[str] = set()
        chief_done = False  # not `deadlines`: a chief alone has no others to wait for
        while True:
            self._drain(0.1)
            if self._cancel.is_set():
                self._stop(list(self._processes))
                return CANCELLED, None, "cancelled", set(self._processes)
            for name, process in self._processes.items():
                code = process.poll()
                if code is not None and code != 0 and name not in deadlines:
                    self._stop([n for n in self._processes if n != name])
                    return FAILED, name, f"{name} {describe_exit(code)}", set(self._processes) - {name}
            if not chief_done and self._processes["chief-0"].poll() == 0:
                chief_done = True
                now = time.monotonic()
                deadlines = {n: now + (self.evaluator_grace if roles[n] == "evaluator" else self.grace)
                             for n in self._processes if n != "chief-0"}
            if chief_done:
                late = [n for n, at in deadlines.items() if self._processes[n].poll() is None and
                        time.monotonic() > at]
                if late:
                    overdue.update(late)
                    self._stop(late)
                if all(p.poll() is not None for p in self._processes.values()):
                    return SUCCEEDED, None, "the chief finished", overdue
