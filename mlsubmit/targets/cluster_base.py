"""What the cluster targets (spark://, dask://, ray://) share: the Engine interface each implements, the choice of
engine from `--target`, and the control channel the replicas' launchers report to.

An engine places one long-running task per replica and hands each the launcher (mlsubmit/launcher/replica.py,
shipped by value: nothing of mlsubmit is needed on the cluster) with the replicas' addresses in order. The
launchers connect back to this machine's `Control` server: their lines and exit codes arrive there, `chief_done`
and `stop` go out, and a launcher that loses the connection stops its replica, so no replica outlives the
`mlsubmit train` that started it.

Before any engine client is started, `Engine.reachable` speaks the engine's first message itself on a plain socket
(each engine's `greet`) with a deadline and bounded reads: the engines' own clients wait without end on a port that
accepts and says nothing, or trust the length a port answering garbage sends.
"""

from __future__ import annotations

import abc
import ipaddress
import json
import queue
import re
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from mlsubmit.errors import UsageError, did_you_mean, invalid_value

SCHEMES = {"spark": "spark", "dask": "dask", "ray": "ray"}  # scheme → the extra that brings the engine
CONNECT_SECONDS = 10.0  # for the cluster's port to accept a connection
ANSWER_SECONDS = 5.0  # then for it to answer the engine's first message (a live engine answers at once)
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")


class NotTheEngine(Exception):
    """What answered at the cluster's address does not speak the engine's protocol (the message says how)."""


def read_exactly(sock: socket.socket, count: int, deadline: float) -> bytes:
    """`count` bytes from `sock` by `deadline` (time.monotonic()); TimeoutError after it, NotTheEngine when the
    other side closes the connection first."""
    data = bytearray()
    while len(data) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError()
        sock.settimeout(left)
        chunk = sock.recv(min(count - len(data), 65536))
        if not chunk:
            raise NotTheEngine(f"it closed the connection after {len(data)} bytes" if data else
                               "it closed the connection without answering")
        data += chunk
    return bytes(data)


class Engine(abc.ABC):
    """One cluster engine at `address` (host:port)."""

    scheme = ""
    module = ""  # the engine's import name, to say which extra is missing
    serves = ""  # what listens at the address: "a Dask scheduler (port 8786 by default)"

    def __init__(self, address: str):
        self.address = address
        host, _, port = address.rpartition(":")
        self.host = host[1:-1] if host.startswith("[") else host  # an IPv6 literal as sockets take it
        self.port = int(port)

    @abc.abstractmethod
    def greet(self, sock: socket.socket, deadline: float) -> None:
        """Speak the engine's first message on a fresh connection and read the answer by `deadline` (use
        `read_exactly`): NotTheEngine when the answer is not the engine's. Nothing is started by it."""

    @abc.abstractmethod
    def connect(self) -> None:
        """Join the cluster (after `reachable` said it answers). UsageError when it cannot."""

    @abc.abstractmethod
    def free_slots(self, need: int = 1) -> int:
        """How many replicas the cluster can run at once right now (one per executor core, worker or CPU); an
        engine whose resources arrive after it connects may wait a little for `need`."""

    @abc.abstractmethod
    def run(self, job_id: str, specs: Sequence[dict[str, Any]]) -> list[int]:
        """Place one task per spec (in order), fill in every spec's `addresses`, run the launcher in each and return
        their exit codes. Blocks; `cancel()` from another thread makes it return early."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """Stop every task of the job (called from another thread)."""

    def close(self) -> None:
        """Leave the cluster."""

    def where(self) -> str:
        return f"{self.scheme}://{self.address}"

    def reachable(self) -> None:
        """UsageError when nothing accepts a connection at the address within CONNECT_SECONDS, or what does is not
        the engine: no answer to its first message within ANSWER_SECONDS, or an answer in another protocol. Bounded
        whatever answers (no engine client is started, nothing is read beyond a small, checked length)."""
        try:
            sock = socket.create_connection((self.host, self.port), timeout=CONNECT_SECONDS)
        except OSError as err:
            raise UsageError(f"cannot reach the {self.scheme} cluster at {self.where()}: "
                             f"{err.strerror or err}", hint="start it, or check the host and port") from None
        with sock:
            try:
                self.greet(sock, time.monotonic() + ANSWER_SECONDS)
                return
            except TimeoutError:
                problem = f"it accepted the connection but said nothing within {ANSWER_SECONDS:g} s"
            except NotTheEngine as err:
                problem = str(err)
            except ConnectionError:  # reset, or a broken pipe while sending the first message
                problem = "it closed the connection without answering"
            except OSError as err:
                problem = f"the connection failed: {err.strerror or err}"
        raise UsageError(f"{self.where()} does not answer as {self.serves}: {problem}",
                         hint="check the host and port, and that the cluster is up")


def parse_target(text: str) -> tuple[str, str]:
    """(scheme, host:port) of `spark://HOST:PORT`, `dask://…`, `ray://…` (also Dask's tcp://)."""
    scheme, sep, rest = str(text).partition("://")
    scheme = {"tcp": "dask"}.get(scheme.lower(), scheme.lower())
    if not sep or scheme not in SCHEMES:
        allowed = ", ".join(f"{s}://HOST:PORT" for s in SCHEMES)
        raise invalid_value("--target", text, allowed, hint=did_you_mean(scheme, list(SCHEMES)) or
                            "or drop --target for Vertex AI, --local for this machine")
    host, _, port = rest.rstrip("/").rpartition(":")
    if not host or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise invalid_value("--target", text, f"{scheme}://HOST:PORT with a port from 1 to 65535")
    if not valid_host(host):
        raise invalid_value("--target", text, f"{scheme}://HOST:PORT whose HOST is a host name (letters, digits, "
                            "'-', '_' and '.', labels of at most 63 and 253 characters in all), an IPv4 address or "
                            "an IPv6 address in brackets")
    return scheme, f"{host}:{int(port)}"


def valid_host(host: str) -> bool:
    """Whether `host` is a DNS name, an IPv4 address or a bracketed IPv6 address (what the engines' URLs take)."""
    if host.startswith("[") and host.endswith("]"):
        try:
            return isinstance(ipaddress.ip_address(host[1:-1]), ipaddress.IPv6Address)
        except ValueError:
            return False
    return len(host) <= 253 and host.isascii() and _HOST_NAME.fullmatch(host) is not None


def engine_for(text: str) -> Engine:
    """The Engine of a `--target` value. UsageError (nothing started) for an unknown scheme or a missing extra.
    The engine's package is only looked for here, not imported (0.6 CPU-s for Dask's or Ray's): a job that is
    refused (a bad name, a port that is not the engine) never pays for it; `connect` imports it."""
    import importlib
    import importlib.util

    scheme, address = parse_target(text)
    module = importlib.import_module(f"mlsubmit.targets.{scheme}")
    engine = module.ENGINE(address)
    if importlib.util.find_spec(engine.module) is None:
        raise missing_engine(engine)
    return engine


def missing_engine(engine: Engine, why: str = "which is not installed") -> UsageError:
    return UsageError(f"--target {engine.scheme}:// needs the {engine.module} package, {why}",
                      hint=f"pip install 'mlsubmit[{SCHEMES[engine.scheme]}]'")


def local_ip_towards(host: str) -> str:
    """This machine's address as seen from `host` (the interface a packet to it leaves by)."""
    if host in ("127.0.0.1", "localhost", "::1"):
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((socket.gethostbyname(host), 9))
            return probe.getsockname()[0]
        except OSError:
            return socket.gethostbyname(socket.gethostname())


class Control:
    """The TCP server the launchers report to. `events` holds ("line", name, text), ("exit", name, code) and
    ("lost", name, None) — a launcher that went away without an exit code."""

    def __init__(self, host: str):
        self.token = secrets.token_hex(16)
        self.events: queue.Queue = queue.Queue()
        self._server = socket.create_server((host, 0))
        self.address = f"{host}:{self._server.getsockname()[1]}"
        self._conns: dict[str, socket.socket] = {}
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        name, exited = None, False
        try:
            for raw in conn.makefile("r", encoding="utf-8", errors="replace"):
                message = json.loads(raw)
                if name is None:
                    if message.get("token") != self.token:
                        return
                    name = str(message.get("hello"))
                    with self._lock:
                        self._conns[name] = conn
                elif "line" in message:
                    self.events.put(("line", name, str(message["line"])))
                elif "exit" in message:
                    exited = True
                    self.events.put(("exit", name, int(message["exit"])))
        except (OSError, ValueError):
            pass
        finally:
            if name is not None and not exited:
                self.events.put(("lost", name, None))
            conn.close()

    def send(self, names: Sequence[str], message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        with self._lock:
            conns = [self._conns[n] for n in names if n in self._conns]
        for conn in conns:
            try:
                conn.sendall(data)
            except OSError:
                pass

    def connected(self) -> set[str]:
        with self._lock:
            return set(self._conns)

    def close(self) -> None:
        """Every launcher loses its connection, and so stops its replica."""
        self._closed = True
        self._server.close()
        with self._lock:
            conns = list(self._conns.values())
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
