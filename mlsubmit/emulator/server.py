"""The HTTP side of the emulator: a threaded server on 127.0.0.1 that decodes requests and routes them.

Everything about the wire lives here, so the API modules only see decoded requests and return JSON:
- bodies must be JSON objects sent as `application/json`, at most MAX_BODY bytes as sent and after decoding
  (`Content-Encoding: gzip` is inflated no further than MAX_BODY; chunk trailers are bounded); anything else is a 400
  INVALID_ARGUMENT in Google's error shape, never a crash (an unexpected exception is a 500 INTERNAL);
- only the user who started the emulator (and root) is served: a connection from another local account's socket
  gets 403 PERMISSION_DENIED (`peers`: the kernel's socket table names each socket's owner), since accepted jobs
  run as the emulator's user; any `Authorization` header is accepted and ignored — it is never logged (the access
  log shows the method, the path without its query string, and the status);
- injected faults (`faults.Faults`) are applied before routing; the admin paths under `/emulator/` are exempt;
- whatever the request, the answer is Google's error JSON, never HTML: HEAD is a GET without a body, OPTIONS and
  TRACE are 405, a request line over 16 KiB is 414, an over-long or excess header 431, malformed chunking 400,
  and a client that stops sending its headers or body for READ_TIMEOUT seconds gets a 408 (or, mid-headers, the
  connection closed) instead of holding a thread forever (`MLSUBMIT_EMULATOR_READ_TIMEOUT` changes it).
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import struct
import threading
import urllib.parse
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mlsubmit.emulator import peers
from mlsubmit.emulator.errors import ApiError, invalid_argument, not_found
from mlsubmit.emulator.faults import Faults

log = logging.getLogger("mlsubmit.emulator")
MAX_BODY = 1_572_864  # what the Google front end accepts for these APIs' JSON requests
_DRAIN_LIMIT = 64 << 20  # read (and discard) oversized bodies up to this, so the client gets its 400
ADMIN_PREFIX = "/emulator/"
MAX_URL = 16_384  # longer request targets are 414, as Google's front end answers them
READ_TIMEOUT = 5.0  # seconds a request's headers or body may stall
IDLE_TIMEOUT = 300.0  # seconds a kept-alive connection may wait for its next request
ALLOWED = "GET, HEAD, POST, DELETE"
_MAX_LINE = 65_536  # a chunked body's trailer line
_MAX_TRAILERS = 100


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, str]  # named groups of the route's pattern
    query: dict[str, str]
    body: Any  # the decoded JSON object, or None


@dataclass
class Route:
    method: str
    pattern: re.Pattern
    handler: Callable[[Request], tuple[int, Any]]
    creates: bool = False  # a create whose answer `drop_create_response` may drop


@dataclass
class Router:
    routes: list[Route] = field(default_factory=list)

    def add(self, method: str, pattern: str, handler: Callable[[Request], tuple[int, Any]], *,
            creates: bool = False) -> None:
        self.routes.append(Route(method, re.compile(pattern), handler, creates))

    def find(self, method: str, path: str) -> tuple[Route, dict[str, str]]:
        for route in self.routes:
            match = route.pattern.fullmatch(path)
            if match and route.method == method:
                return route, match.groupdict()
        raise not_found(f"Method not found: {method} {path} is not part of the emulated APIs "
                        f"(Vertex AI customJobs v1, AI Platform jobs v1, Cloud Logging entries v2)")


class _Dropped(Exception):
    """The connection is closed without an answer (an injected reset or a dropped create response)."""


class EmulatorServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # listen backlog (socketserver's 5 drops a burst's connections: clients wait on SYN retries)

    def __init__(self, port: int, router: Router, faults: Faults, *, read_timeout: float | None = None):
        self.router, self.faults = router, faults
        self.read_timeout = read_timeout if read_timeout is not None else \
            float(os.environ.get("MLSUBMIT_EMULATOR_READ_TIMEOUT") or READ_TIMEOUT)
        super().__init__(("127.0.0.1", port), _Handler)

    @property
    def endpoint(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def handle_error(self, request, client_address) -> None:  # a client that went away is not our problem
        log.debug("connection from %s ended with an error", client_address, exc_info=True)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="emulator-http", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: EmulatorServer
    server_version = "mlsubmit-emulator"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, Nagle + delayed ACK stall each answer ~40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        if not peers.allowed(self.connection):  # another local user: the emulator runs code as the one who started it
            log.info("connection from another user's socket -> 403")
            self.close_connection = True
            self.command, self.request_version, self.requestline = "", "HTTP/1.1", ""
            self._send(403, ApiError(403, "The training-service emulator serves only the user who started it (it "
                                          "runs the jobs it accepts as that user).").body())
            return
        super().handle()

    def log_message(self, format: str, *args: Any) -> None:  # the default would print headers-free lines to stderr
        pass

    def handle_one_request(self) -> None:
        self.connection.settimeout(IDLE_TIMEOUT)  # waiting for the next request line
        super().handle_one_request()

    def parse_request(self) -> bool:
        self.connection.settimeout(self.server.read_timeout)  # the request began: headers and body must follow
        if len(self.raw_requestline) > MAX_URL:
            self.command, self.request_version, self.requestline = "", "HTTP/1.1", ""
            self.send_error(414)
            return False
        return super().parse_request()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What http.server sends as an HTML page (bad request line, unsupported method, header too long, …),
        in Google's error JSON."""
        words = {414: "The request URL is too long.", 431: "The request headers are too large.",
                 501: f"Method not implemented: {self.command!r}."}
        self.close_connection = True
        self.request_version = "HTTP/1.1"  # a garbled request line leaves HTTP/0.9, whose answers have no status
        log.info("%s -> %d", (getattr(self, "requestline", "") or "")[:200], code)
        self._send(code, ApiError(code, words.get(code) or message or f"HTTP {code}").body())

    def _handle(self) -> None:
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        status = 500
        try:
            status, payload, route = self._dispatch(path)
        except _Dropped:
            log.info("%s %s -> connection dropped", self.command, path)
            self._drop()
            return
        except ApiError as err:
            status, payload = err.code, err.body()
        except Exception as err:  # never let one request take the emulator down
            log.exception("internal error answering %s %s", self.command, path)
            status, payload = 500, ApiError(500, f"Internal error in the emulator: {type(err).__name__}: {err}"
                                            ).body()
        log.info("%s %s -> %d", self.command, path, status)
        self._send(status, payload)

    def _dispatch(self, path: str) -> tuple[int, Any, Route]:
        try:
            raw = self._read_body()
        except TimeoutError:
            self.close_connection = True
            raise ApiError(408, f"The request body did not arrive within {self.server.read_timeout:g} s.") from None
        if not path.startswith(ADMIN_PREFIX):
            fault = self.server.faults.before(self.command, path)
            if fault == "reset":
                raise _Dropped()
            if isinstance(fault, ApiError):
                raise fault
        route, params = self.server.router.find("GET" if self.command == "HEAD" else self.command, path)
        query = self._query()
        raw = self._decoded(raw)
        body = _decode(raw, self.headers.get("Content-Type", "")) if raw else None
        status, payload = route.handler(Request(self.command, path, params, query, body))
        if route.creates and status < 300 and self.server.faults.drop_create_response(self.command, path):
            raise _Dropped()
        return status, payload, route

    def _query(self) -> dict[str, str]:
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query,
                                                              keep_blank_values=True).items()}
        alt = query.pop("alt", "json")
        if alt != "json":
            raise invalid_argument(f"Invalid value for alt: {alt!r}; the emulator answers alt=json only",
                                   [("alt", "expected json")])
        query.pop("prettyPrint", None)
        query.pop("access_token", None)  # accepted, never used or logged
        return query

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            raise invalid_argument("Invalid Content-Length header") from None
        if length > MAX_BODY:
            self._discard(length)
            raise invalid_argument(f"Request payload size exceeds the limit: {MAX_BODY} bytes.")
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked(self) -> bytes:
        chunks, total = [], 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                self.close_connection = True
                raise invalid_argument(f"Malformed chunked request body: the chunk size line {line[:40]!r} is not a "
                                       "hexadecimal number.") from None
            if size == 0:
                break
            total += size
            if total > MAX_BODY:
                self.close_connection = True
                raise invalid_argument(f"Request payload size exceeds the limit: {MAX_BODY} bytes.")
            chunks.append(self.rfile.read(size))
            self.rfile.readline(1024)
        for _ in range(_MAX_TRAILERS + 1):  # trailer lines, bounded in length and number, until the blank line
            if self.rfile.readline(_MAX_LINE) in (b"\r\n", b"\n", b""):
                return b"".join(chunks)
        self.close_connection = True
        raise invalid_argument(f"Malformed chunked request body: more than {_MAX_TRAILERS} trailer lines.")

    def _decoded(self, raw: bytes) -> bytes:
        """The body without its Content-Encoding: gzip is inflated at most to MAX_BODY (a 1 MB gzip bomb that
        inflates to gigabytes is refused after MAX_BODY bytes, as the front end limits the decoded size)."""
        encoding = self.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding in ("", "identity") or not raw:
            return raw
        if encoding not in ("gzip", "x-gzip"):
            raise invalid_argument(f"Unsupported Content-Encoding {encoding[:40]!r}: send the body as identity or "
                                   "gzip.")
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = inflate.decompress(raw, MAX_BODY + 1)
        except zlib.error as err:
            raise invalid_argument(f"Malformed gzip request body: {err}.") from None
        if len(data) > MAX_BODY or inflate.unconsumed_tail:
            raise invalid_argument(f"Request payload size exceeds the limit: {MAX_BODY} bytes (after gzip "
                                   "decoding).")
        if not inflate.eof:
            raise invalid_argument("Malformed gzip request body: it ends before the gzip stream does.")
        return data

    def _discard(self, length: int) -> None:
        if not drain(self.rfile, length):
            self.close_connection = True

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload, indent=2).encode("utf-8") + b"\n"
        respond(self, status, data, "application/json; charset=UTF-8",
                [("Allow", ALLOWED)] if status == 405 else [])

    def _drop(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _not_allowed(self) -> None:
        self._discard(int(self.headers.get("Content-Length") or 0) if (self.headers.get("Content-Length") or
                                                                     "0").isdigit() else _DRAIN_LIMIT + 1)
        log.info("%s %s -> 405", self.command, urllib.parse.urlsplit(self.path).path)
        self._send(405, ApiError(405, f"Method {self.command} is not allowed; the emulated APIs answer {ALLOWED}."
                                 ).body())

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _handle
    do_OPTIONS = do_TRACE = do_CONNECT = _not_allowed


def respond(handler: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str,
            headers: Sequence[tuple[str, str]] = ()) -> None:
    """Send one whole answer on `handler`'s connection: its length, `Connection: close` when the handler will
    close it, and no body for HEAD."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    for name, value in headers:
        handler.send_header(name, value)
    if handler.close_connection:
        handler.send_header("Connection", "close")
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)


def drain(rfile: Any, length: int, limit: int = _DRAIN_LIMIT) -> bool:
    """Read and drop `length` bytes of a body this request will not use, so the connection can carry the answer;
    False (nothing read) when it is over `limit`: the connection must then be closed."""
    if length > limit:
        return False
    while length > 0:
        chunk = rfile.read(min(length, 1 << 20))
        if not chunk:
            break
        length -= len(chunk)
    return True


def _decode(raw: bytes, content_type: str) -> Any:
    """The JSON object in a request body, or a 400 in the words of the Google front end."""
    media = content_type.split(";")[0].strip().lower()
    if media != "application/json":
        raise invalid_argument(f"Invalid JSON payload received. Unexpected Content-Type {media or '(none)'!r}: "
                               f"send the body as application/json.", [("", "expected Content-Type: application/json")])
    try:
        text = raw.decode("utf-8")
        body = json.loads(text, parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise invalid_argument("Invalid JSON payload received. The body is not UTF-8.") from None
    except json.JSONDecodeError as err:
        shown = text.splitlines()[err.lineno - 1][:80] if text.splitlines() else ""
        raise invalid_argument(f"Invalid JSON payload received. {err.msg} at line {err.lineno} column {err.colno}: "
                               f"{shown!r}", [("", f"malformed JSON: {err.msg}")]) from None
    except (ValueError, RecursionError) as err:
        raise invalid_argument(f"Invalid JSON payload received. {err}") from None
    if not isinstance(body, dict):
        raise invalid_argument("Invalid JSON payload received. Expected an object ({...}) at the top level; "
                               f"received {type(body).__name__}.", [("", "expected a JSON object")])
    return body


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
