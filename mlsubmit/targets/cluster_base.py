"""What the cluster targets (spark://, dask://, ray://) share: the Engine interface each implements, the choice of
engine from `--target`, and the control channel the replicas' launchers report to.

An engine places one long-running task per replica and hands each the launcher (mlsubmit/launcher/replica.py,
shipped by value: nothing of mlsubmit is needed on the cluster) with the replicas' addresses in order. The
launchers connect back to this machine's `Control` server: their lines and exit codes arrive there, `chief_done`
and `stop` go out, and a launcher that loses the connection stops its replica, so no replica outlives the
`mlsubmit train` that started it.
"""

from __future__ import annotations

import abc
import json
import queue
import secrets
import socket
import threading
from collections.abc import Sequence
from typing import Any

from mlsubmit.errors import UsageError, did_you_mean, invalid_value

SCHEMES = {"spark": "spark", "dask": "dask", "ray": "ray"}  # scheme → the extra that brings the engine
CONNECT_SECONDS = 10.0


class Engine(abc.ABC):
    """One cluster engine at `address` (host:port)."""

    scheme = ""
    module = ""  # the engine's import name, to say which extra is missing

    def __init__(self, address: str):
        self.address = address
        self.host, _, port = address.rpartition(":")
        self.port = int(port)

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
        """UsageError within CONNECT_SECONDS when nothing answers at the address."""
        try:
            with socket.create_connection((self.host, self.port), timeout=CONNECT_SECONDS):
                return
        except OSError as err:
            raise UsageError(f"cannot reach the {self.scheme} cluster at {self.where()}: "
                             f"{err.strerror or err}", hint="start it, or check the host and port") from None


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
    return scheme, f"{host}:{int(port)}"


def engine_for(text: str) -> Engine:
    """The Engine of a `--target` value. UsageError (nothing started) for an unknown scheme or a missing extra."""
    import importlib

    scheme, address = parse_target(text)
    module = importlib.import_module(f"mlsubmit.targets.{scheme}")
    engine = module.ENGINE(address)
    try:
        importlib.import_module(engine.module)
    except ImportError:
        raise UsageError(f"--target {scheme}:// needs the {engine.module} package, which is not installed",
                         hint=f"pip install 'mlsubmit[{SCHEMES[scheme]}]'") from None
    return engine


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
