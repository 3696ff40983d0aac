"""A small threaded HTTP proxy on 127.0.0.1 that injects faults in front of a real server (the GCS emulator).

The first requests that match `when` get the listed faults, in order — an HTTP status (503, 429, 403, …)
with a JSON error body, or "reset" (the connection is closed with an RST after the request was read) — and
every later matching request gets `then` (None: passed through). Everything passed through goes to the
upstream unchanged and comes back with `Location` headers rewritten to point at the proxy (and its body
through `rewrite(method, path, body)`, to play a server that misreports). `log` records
each request as (method, path, outcome, request-body bytes), so tests can also assert what was *not* sent.

    with FaultProxy(emulator.endpoint, faults=[503, "reset", 503]) as proxy:
        os.environ["STORAGE_EMULATOR_HOST"] = proxy.endpoint
"""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

Fault = int | str  # an HTTP status code, or "reset"
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
               "transfer-encoding", "upgrade", "content-length", "host"}


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    outcome: str  # "503", "reset", "passed 200", …
    body_bytes: int


def is_upload(method: str, path: str) -> bool:
    """A `when` filter: only object uploads (media, multipart or resumable), not metadata look-ups."""
    return method in ("POST", "PUT") and path.startswith("/upload/")


class FaultProxy:
    """Loopback proxy in front of `upstream` (e.g. "http://127.0.0.1:4443"); use as a context manager."""

    def __init__(self, upstream: str, faults: Sequence[Fault] = (), *, then: Fault | None = None,
                 when: Callable[[str, str], bool] | None = None,
                 rewrite: Callable[[str, str, bytes], bytes] | None = None):
        parts = urlsplit(upstream)
        self.upstream = upstream.rstrip("/")
        self._upstream_host, self._upstream_port = parts.hostname, parts.port or 80
        self._faults = list(faults)
        self._then, self._when = then, when or (lambda method, path: True)
        self._rewrite = rewrite or (lambda method, path, body: body)
        self._lock = threading.Lock()
        self.log: list[Seen] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _next_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            if not self._when(method, path):
                return None
            return self._faults.pop(0) if self._faults else self._then

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.log.append(seen)

    def start(self) -> "FaultProxy":
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while (size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)) > 0:
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _handle(self) -> None:
                body = self._body()
                fault = proxy._next_fault(self.command, self.path)
                if fault == "reset":
                    proxy._record(Seen(self.command, self.path, "reset", len(body)))
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                if fault is not None:
                    proxy._record(Seen(self.command, self.path, str(fault), len(body)))
                    payload = json.dumps({"error": {"code": fault, "message": f"injected {fault}"}}).encode()
                    self.send_response(int(fault))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self._forward(body)

            def _forward(self, body: bytes) -> None:
                upstream = http.client.HTTPConnection(proxy._upstream_host, proxy._upstream_port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                finally:
                    upstream.close()
                proxy._record(Seen(self.command, self.path, f"passed {response.status}", len(body)))
                data = proxy._rewrite(self.command, self.path, data)
                self.send_response(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() in _HOP_BY_HOP:
                        continue
                    if key.lower() == "location":
                        value = value.replace(proxy.upstream, proxy.endpoint)
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address) -> None:  # resets are on purpose
                pass

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def outcomes(self, when: Callable[[str, str], bool] = lambda method, path: True) -> list[str]:
        """The outcome of each logged request that `when` selects, in order."""
        with self._lock:
            return [seen.outcome for seen in self.log if when(seen.method, seen.path)]
