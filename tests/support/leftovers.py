"""No process the test session started outlives it (a pytest plugin, loaded by tests/conftest.py).

- After each test (and its fixtures' teardowns) the children its body started that still run are stopped —
  SIGTERM to their process group, SIGKILL after a few seconds — whether the test passed or failed half-way, and
  named at the end of the session, which then fails. Fixtures' processes (emulators) start before the body and
  are left to their fixtures.
- At the end of the session every process that carries the session's marker in its environment (everything
  started from this process inherits it: replicas, emulators, fake-gcs-server) or runs from the session's temporary
  directory (pip in a job's venv gets a clean environment) and is still alive is listed, killed, and fails the
  session (exit status 1). Orphans re-parented to PID 1 are found too, so nothing hides.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from mlsubmit.emulator.reaper import alive as _alive

MARKER = "MLSUBMIT_TEST_SESSION"
os.environ.setdefault(MARKER, uuid.uuid4().hex)
_SESSION = os.environ[MARKER]


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found |= {int(child) for child in (task / "children").read_text().split()}
    except OSError:
        pass
    return {child for child in found if _alive(child)}


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _stop(pids: set[int], grace: float = 5.0) -> None:
    """SIGTERM (to the process group where the process leads one), then SIGKILL what is left after `grace`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                if os.getpgid(pid) == pid:
                    os.killpg(pid, sig)
                else:
                    os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5.0)
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)


def _ours(pid: int, temp_root: str | None) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    if f"{MARKER}={_SESSION}".encode() in environ.split(b"\0"):
        return True
    return bool(temp_root) and temp_root in _command(pid)


_BEFORE_CALL = pytest.StashKey[set]()
_LEFT_BY_TESTS = pytest.StashKey[list]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    item.stash[_BEFORE_CALL] = _children(os.getpid())  # fixtures' processes (emulators) are already running
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield  # setup, call, teardown
    before = item.stash.get(_BEFORE_CALL, None)
    left = _children(os.getpid()) - before if before is not None else set()
    if left:  # started by the test itself and still running after its teardown
        names = "; ".join(f"{pid}: {_command(pid)[:160]}" for pid in sorted(left))
        _stop(left)
        item.config.stash.setdefault(_LEFT_BY_TESTS, []).append(f"{item.nodeid} left {names}")


def controller(config) -> bool:
    """Whether this process is the session's controller (not an xdist worker) in a run that runs tests."""
    return not os.environ.get("PYTEST_XDIST_WORKER") and not config.option.collectonly


def pytest_sessionfinish(session, exitstatus):
    if not controller(session.config):
        return
    try:
        temp_root = str(session.config._tmp_path_factory.getbasetemp())
    except Exception:  # noqa: BLE001 - no temporary directory was made: nothing can run from it
        temp_root = None
    me = os.getpid()
    alive = {int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()} - {me}
    left = {pid for pid in alive if _alive(pid) and _ours(pid, temp_root)}
    by_tests = session.config.stash.get(_LEFT_BY_TESTS, [])
    lines = [f"stopped after its test: {line}" for line in by_tests]
    lines += [f"still alive at the end of the session (now killed): {pid}: {_command(pid)[:200]}"
              for pid in sorted(left)]
    _stop(left, grace=2.0)
    fail_session(session, "processes the tests left behind", lines)


def fail_session(session, title: str, lines: list[str]) -> None:
    """Name `lines` under `title` at the end of the run and fail it (exit status 1); nothing if there are none."""
    if not lines:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("=", title, red=True)
        for line in lines:
            reporter.write_line(line)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
