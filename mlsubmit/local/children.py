"""Child processes that never outlive mlsubmit, and that whoever started them can stop at once.

Every process mlsubmit starts (replicas, pip installs, fake-gcs-server) goes through `popen` / `run` or takes
`popen_kwargs()`:
- it leads a process group of its own (`start_new_session`), so stopping it stops what it started too;
- on Linux it gets SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG) — whatever way mlsubmit ends,
  `kill -KILL` included, nothing is left running under PID 1. (Our threads wait for the processes they start, so
  "the thread ends" happens only when mlsubmit is going away.)

A `Group` collects the processes that the threads inside `with group:` start through `popen`/`run`, wherever
that happens (a pip install deep in the packaging code), so a job being cancelled or a server shutting down can
stop them promptly instead of waiting for them to finish:

    group = Group()
    with group:                      # in the job's thread
        install_into_venv(...)       # its pip process joins the group
    group.stop()                     # from any thread: SIGTERM to each process group, SIGKILL after `grace`
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

_local = threading.local()
_LINUX = sys.platform.startswith("linux")
PR_SET_PDEATHSIG = 1


def _libc() -> Any:
    import ctypes

    return ctypes.CDLL("libc.so.6", use_errno=True)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _die_with_parent_and_take_ctrl_c() -> None:  # pragma: no cover - runs in the child between fork and exec
    _die_with_parent()
    try:  # a shell's background job starts with SIGINT ignored, and children inherit that: undo it
        _libc().signal(signal.SIGINT, 0)  # SIG_DFL
    except (OSError, AttributeError):
        pass


def popen_kwargs(*, default_sigint: bool = False) -> dict[str, Any]:
    """Popen arguments that tie a child to its parent (see the module docstring). `default_sigint`: the child
    gets SIGINT's default action even if this process ignores SIGINT (for children that are sent Ctrl-C)."""
    if not _LINUX:
        return {"start_new_session": True}
    return {"start_new_session": True,
            "preexec_fn": _die_with_parent_and_take_ctrl_c if default_sigint else _die_with_parent}


def popen(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """subprocess.Popen with `popen_kwargs()`, joined to every Group the calling thread is inside."""
    process = subprocess.Popen(list(argv), **{**popen_kwargs(), **kwargs})
    for group in list(getattr(_local, "groups", ())):
        group.add(process)
    return process


def run(argv: Sequence[str], *, timeout: float | None = None, capture_output: bool = False, check: bool = False,
        **kwargs: Any) -> subprocess.CompletedProcess:
    """subprocess.run through `popen`: the process (and its group) is killed on a timeout or any interruption."""
    if capture_output:
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process = popen(argv, **kwargs)
    try:
        out, err = process.communicate(timeout=timeout)
    except BaseException:
        kill_group(process)
        process.communicate()
        raise
    done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def kill_group(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Send `sig` to the process group `process` leads (it and whatever it started)."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Group:
    """The processes started through `popen`/`run` by threads inside `with group:`; `stop()` ends them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._processes: list[subprocess.Popen] = []
        self.stopped = False

    def __enter__(self) -> "Group":
        _local.__dict__.setdefault("groups", []).append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.groups.remove(self)

    def add(self, process: subprocess.Popen) -> None:
        with self._lock:
            self._processes = [p for p in self._processes if p.poll() is None] + [process]
            stopped = self.stopped
        if stopped:  # started after stop(): it must not run either
            kill_group(process)

    def stop(self, grace: float = 1.0) -> None:
        """SIGTERM to every live process group of the group, SIGKILL to what is left after `grace` seconds; later
        processes of the group are killed as they start."""
        with self._lock:
            self.stopped = True
            running = [p for p in self._processes if p.poll() is None]
        for process in running:
            kill_group(process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while running and time.monotonic() < deadline:
            time.sleep(0.02)
            running = [p for p in running if p.poll() is None]
        for process in running:
            kill_group(process)
