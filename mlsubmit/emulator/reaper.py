"""Replica processes by pid: whether they are alive, and stopping any a crashed emulator left behind; the
temporary folders of emulators that were killed (SIGKILL: no `finally` ran), removed by the next one.

Replicas normally die with the emulator (the runner sets PR_SET_PDEATHSIG), but something a replica started
itself may not. A job's pids are recorded with the process's start time (from /proc), so after a restart only
a process that is provably the same one is stopped — never an unrelated process that reused the pid.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return int(fields[19]) if fields[0] != "Z" else None  # a zombie has ended
    except (OSError, IndexError, ValueError):
        return None


def alive(pid: int) -> bool:
    return _start_time(pid) is not None


def describe(task: str, pid: int) -> dict[str, Any]:
    return {"task": task, "pid": pid, "alive": alive(pid)}


def record(task: str, pid: int) -> dict[str, Any]:
    return {"task": task, "pid": pid, "started": _start_time(pid)}


def stop_leftovers(processes: list[dict[str, Any]]) -> int:
    """SIGKILL the process group of each recorded replica that is still the same process; returns how many."""
    stopped = 0
    for process in processes:
        pid, started = process.get("pid"), process.get("started")
        if isinstance(pid, int) and started is not None and _start_time(pid) == started:
            try:
                os.killpg(pid, signal.SIGKILL)
                stopped += 1
            except (ProcessLookupError, PermissionError):
                pass
    return stopped


def owned_prefix(name: str) -> str:
    """`NAME-PID-START-`: the prefix of a temporary folder that says which process owns it (remove_abandoned)."""
    pid = os.getpid()
    return f"{name}-{pid}-{_start_time(pid)}-"


def remove_abandoned(name: str, parent: str | os.PathLike | None = None) -> list[Path]:
    """Remove the `NAME-PID-START-*` folders (owned_prefix) in `parent` (the temporary folder) whose process is
    gone, as after a SIGKILL; returns them. Where /proc cannot tell (not Linux), nothing is removed."""
    if _start_time(os.getpid()) is None:
        return []
    removed = []
    for path in sorted(Path(parent or tempfile.gettempdir()).glob(f"{name}-*-*-*")):
        pid, started, _ = (path.name[len(name) + 1:].split("-", 2) + ["", ""])[:3]
        if not (pid.isdigit() and started.isdigit()) or _start_time(int(pid)) == int(started):
            continue
        try:
            if not path.is_symlink() and path.is_dir() and path.stat().st_uid == os.getuid():
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        except OSError:
            continue
    return removed
