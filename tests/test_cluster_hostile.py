"""`train --target spark://|dask://|ray://` against what is not a cluster, and job names that would leave their
directory (#32). Each ends within 10 s with exit 2 and one line on stderr, builds and records nothing, and leaves no
process: a port that accepts and says nothing, one that answers garbage (or, for Dask, a length of 18 EiB), an HTTP
server (a dashboard's port given by mistake), one that closes at once; a 10,000-character host. (Job names that
would leave their directory, `--job-name ../../../x/CJTRAV` or a name with a newline, are refused on a live Dask
cluster: tests/test_engine_dask.py, which has one running.)"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import engine_checks as checks

SCHEMES = ("spark", "dask", "ray")
# the ports that say nothing to the engine's first message: each refusal waits out ANSWER_SECONDS (5 s)
SILENT = {(scheme, "silent") for scheme in SCHEMES} | {("dask", "http")}  # a Dask scheduler speaks first
HTTP_400 = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nBad Request"


class FakeServer:
    """A TCP server on 127.0.0.1 that plays something other than a cluster engine:
    silent: accepts and never answers; junk: answers 0xff bytes at once and to whatever it is sent (a Dask client
    reads the first 8 as a frame length of 18 EiB); http: answers each request with HTTP 400, as a dashboard or web
    UI does; close: closes every connection at once."""

    def __init__(self, kind: str):
        self.kind = kind
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.accepted = threading.Event()  # set by the first connection
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.accepted.set()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.kind == "close":
                conn.close()
                return
            if self.kind == "junk":
                conn.sendall(b"\xff" * 4096)
            while data := conn.recv(65536):
                if self.kind == "junk":
                    conn.sendall(b"\xff" * len(data))
                elif self.kind == "http":
                    conn.sendall(HTTP_400)
                    conn.close()
                    return
        except OSError:
            pass

    def stop(self) -> None:
        self.server.close()
        for conn in self.conns:
            conn.close()


@pytest.fixture(scope="module")
def fakes():
    servers = {kind: FakeServer(kind) for kind in ("junk", "http", "close")}  # the silent ones: `waited`
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return checks.tiny_project(tmp_path_factory.mktemp("tiny"))


def _processes_with(home: Path) -> list[int]:
    """Processes whose environment names `home` as MLSUBMIT_HOME (a driver JVM, a Ray client, a replica)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and f"MLSUBMIT_HOME={home}\0".encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _train(target: str, home: Path, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": str(home)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mlsubmit", "train", "--target", target, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    return done, time.monotonic() - started


def _refused(done: subprocess.CompletedProcess, seconds: float, home: Path) -> str:
    assert (done.returncode, done.stderr.count("\n"), done.stdout) == (2, 1, ""), done.stdout + done.stderr
    assert seconds < 10, f"{seconds:.1f} s: {done.stderr}"  # wall time, Python's start and the engine's import in it
    assert not home.exists() or not any(home.iterdir()), sorted(home.rglob("*"))  # no record, no driver log
    assert not _processes_with(home)
    return done.stderr


def _not_the_engine(scheme: str, fake: FakeServer, tiny, tmp: Path) -> tuple[subprocess.CompletedProcess, float]:
    return _train(f"{scheme}://127.0.0.1:{fake.port}", tmp / "home", tmp, "--package-path", str(tiny),
                  "--module-name", "tinypkg.task", "--workers", "1")


@pytest.fixture(scope="module")
def waited(tiny, tmp_path_factory):
    """The refusals that wait out the 5 s answer bound run in the background from the module's first case on,
    beside the other cases, each on a fake server of its own and timed from its own start to its own end. Each is
    started once the one before it waits (its server has the connection): no two start at once, so none waits
    longer for the CPU than when they ran one after another (and all are started here, in the fixture's setup)."""
    cases = sorted(SILENT)
    fakes = {case: FakeServer(case[1]) for case in cases}
    try:
        with ThreadPoolExecutor(len(cases)) as pool:
            running = {}
            for case in cases:
                tmp = tmp_path_factory.mktemp("-".join(case))
                running[case] = (fakes[case], tmp, pool.submit(_not_the_engine, case[0], fakes[case], tiny, tmp))
                deadline = time.monotonic() + 60
                while not fakes[case].accepted.wait(0.05) and not running[case][2].done() and \
                        time.monotonic() < deadline:
                    pass
            yield running
    finally:
        for fake in fakes.values():
            fake.stop()


@pytest.mark.parametrize("kind, said", [
    ("junk", "it answered b'\\xff"),
    ("http", "it answered b'HTTP/1.1 "),
    ("close", "it closed the connection without answering"),
    ("silent", "it accepted the connection but said nothing within 5 s")])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_port_that_is_not_the_engine_is_one_line_within_10_seconds(scheme, kind, said, fakes, tiny, tmp_path,
                                                                     waited):
    if (scheme, kind) in SILENT:  # an HTTP server waits for a request, and a Dask scheduler speaks first
        said = "it accepted the connection but said nothing within 5 s"
        fake, tmp, running = waited[scheme, kind]
        done, seconds = running.result(timeout=120)
    else:
        fake, tmp = fakes[kind], tmp_path
        done, seconds = _not_the_engine(scheme, fake, tiny, tmp)
    error = _refused(done, seconds, tmp / "home")
    serves = {"spark": "a Spark standalone master (port 7077 by default)",
              "dask": "a Dask scheduler (port 8786 by default)",
              "ray": "a Ray Client server (the head's port 10001 by default)"}[scheme]
    assert error.startswith(f"error: {scheme}://127.0.0.1:{fake.port} does not answer as {serves}: {said}"), error
    assert error.rstrip().endswith("check the host and port, and that the cluster is up")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_10000_character_host_is_one_line(scheme, tiny, tmp_path):
    home = tmp_path / "home"
    done, seconds = _train(f"{scheme}://{'h' * 10_000}:7077", home, tmp_path, "--package-path", str(tiny),
                           "--module-name", "tinypkg.task")
    error = _refused(done, seconds, home)
    assert error.startswith(f"error: invalid value for --target: received '{scheme}://hhhh") and \
        "(10," in error and "whose HOST is a host name" in error and len(error) < 400
