"""The wire side of the emulated Kubernetes API: what kube-apiserver's HTTP server and filters do before a handler
sees a request, on http.server. Every answer is a Status object (`ApiStatus`), never an HTML page or silence:

- HTTPS with a certificate made at start (`Tls`), as a cluster serves: kubectl sends a kubeconfig's bearer token
  only over TLS (client-go's clientcmd drops user credentials for an http:// server). The handshake happens in the
  connection's own thread, within READ_TIMEOUT; plain HTTP sent to the port gets a 400 Status in plain HTTP;
- authentication first: a request without `Authorization: Bearer <the server's token>` is 401 Unauthorized (the
  token is made at start and handed out only in a 0600 kubeconfig; see mlsubmit.emulator.kube_api);
- a garbled request line is 400 BadRequest, an over-long one 414, over-long or too many headers 431, an unknown
  method 405 MethodNotAllowed; a client that stalls READ_TIMEOUT seconds in its body gets 408 Timeout (mid-headers,
  the connection is closed) instead of holding a thread;
- bodies: Content-Length or chunked (malformed chunking is 400), at most MAX_BODY bytes (413 RequestEntityTooLarge,
  kube-apiserver's limit); a Content-Encoding is 415 (the API server decodes none); `application/json` (also
  the default) or `application/yaml` (no aliases), any other media type 415 UnsupportedMediaType; JSON that does
  not parse, is not an object or nests deeper than MAX_DEPTH is 400 BadRequest;
- an unexpected exception is a 500 InternalError Status: one bad request never leaves a client without an answer.

Why http.server rather than an HTTP server library: TLS (ssl), the request line and the headers are the standard
library's, parsed and bounded there; what is written here is body framing (Content-Length, chunked: ~30 bounded
lines; no gzip, which the API server does not decode either) and the Status answers, which no library would give.
aiohttp would mean an asyncio rewrite of the log streams and the threaded controllers; Werkzeug's server is itself
built on http.server; h11 leaves the server loop to us. None is a dependency of mlsubmit today.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import os
import socket
import ssl
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from mlsubmit.emulator.server import drain, respond

log = logging.getLogger("mlsubmit.emulator.kube")
MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's MaxRequestBodyBytes: "Request entity too large: limit is 3145728"
MAX_DEPTH = 100  # nesting levels of a request body (real objects use < 30; deeper ones would exhaust recursion)
READ_TIMEOUT = 5.0  # seconds a request's headers or body may stall (MLSUBMIT_EMULATOR_READ_TIMEOUT changes it)
IDLE_TIMEOUT = 300.0  # seconds a kept-alive connection may wait for its next request
_DRAIN_LIMIT = 64 << 20  # a refused body up to this is read and discarded, so the client reads its answer
_MAX_LINE = 1024  # a chunk size line
_MAX_TRAILERS = 100
_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
            408: "Timeout", 409: "AlreadyExists", 413: "RequestEntityTooLarge", 414: "BadRequest",
            415: "UnsupportedMediaType", 422: "Invalid", 431: "BadRequest", 500: "InternalError"}
JSON_TYPES = ("application/json",)
YAML_TYPES = ("application/yaml",)
PATCH_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")


class ApiStatus(Exception):
    """A refusal, answered as kube-apiserver's Status object."""

    def __init__(self, code: int, message: str, reason: str | None = None, **details: Any):
        super().__init__(message)
        self.code, self.message, self.details = code, message, details
        self.reason = _REASONS.get(code, "") if reason is None else reason

    def body(self) -> dict[str, Any]:
        return status(self.code, self.reason, self.message, **self.details)


def status(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    return {**body, "details": details} if details else body


def unsupported_media_type(accepted: tuple[str, ...]) -> ApiStatus:
    return ApiStatus(415, "the body of the request was in an unknown format - accepted media types include: "
                     + ", ".join(accepted))


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid character {name[0]!r} looking for beginning of value")


def _load_yaml(text: str) -> Any:
    import yaml

    class NoAliases(yaml.SafeLoader):  # an alias bomb expands to gigabytes once converted to JSON
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise yaml.YAMLError("yaml: aliases are not supported")
            return super().compose_node(parent, index)

    # YAML → JSON as the API server converts it (a timestamp stays the text it was)
    return json.loads(json.dumps(yaml.load(text, Loader=NoAliases), default=str))


def decode(raw: bytes, media: str, expected_kind: str, patch: bool = False) -> dict[str, Any]:
    """The JSON object in a request body (media: its Content-Type without parameters), or an ApiStatus."""
    accepted = PATCH_TYPES if patch else JSON_TYPES + YAML_TYPES
    media = media or accepted[0]
    if media not in accepted:
        raise unsupported_media_type(accepted)
    summary = raw[:30].decode("utf-8", "replace") + ("..." if len(raw) > 30 else "")
    unrecognized = f"the object provided is unrecognized (must be of type {expected_kind})"
    try:
        text = raw.decode("utf-8")
        body = _load_yaml(text) if media in YAML_TYPES else json.loads(text, parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise ApiStatus(400, f"{unrecognized}: the body is not UTF-8 ({summary!r})") from None
    except json.JSONDecodeError as err:
        raise ApiStatus(400, f"{unrecognized}: couldn't get version/kind; json parse error: {err.msg} at line "
                        f"{err.lineno} column {err.colno} ({summary!r})") from None
    except RecursionError:
        raise ApiStatus(400, f"{unrecognized}: json: exceeded max depth ({MAX_DEPTH} levels)") from None
    except Exception as err:  # YAML errors (and a ValueError for NaN) carry their own words
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ApiStatus(400, f"{unrecognized}: couldn't get version/kind; {'yaml' if media in YAML_TYPES else 'json'}"
                        f" parse error: {first} ({summary!r})") from None
    if not isinstance(body, dict):
        raise ApiStatus(400, f"{unrecognized}: couldn't get version/kind; json parse error: json: cannot unmarshal "
                        f"{type(body).__name__} into an object ({summary!r})")
    if _too_deep(body):
        raise ApiStatus(400, f"{unrecognized}: json: exceeded max depth ({MAX_DEPTH} levels)")
    return body


class Tls:
    """A self-signed certificate for 127.0.0.1 and localhost (EC P-256), made at start; `ca_data` is what a
    kubeconfig's `certificate-authority-data` carries. Its key lives in `folder` (mode 0600), never elsewhere."""

    def __init__(self, folder: Path):
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mlsubmit-emulator")])
        now = datetime.datetime.now(datetime.timezone.utc)
        usage = x509.KeyUsage(digital_signature=True, key_cert_sign=True, content_commitment=False,
                              key_encipherment=False, data_encipherment=False, key_agreement=False, crl_sign=False,
                              encipher_only=False, decipher_only=False)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=365))
                .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                            x509.DNSName("localhost")]), critical=False)
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(usage, critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(key, hashes.SHA256()))
        pem = cert.public_bytes(serialization.Encoding.PEM)
        self.ca_file, key_file = folder / "ca.crt", folder / "server.key"
        self.ca_file.write_bytes(pem)
        descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
        self.ca_data = base64.b64encode(pem).decode()
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.load_cert_chain(self.ca_file, key_file)

    def client_context(self) -> ssl.SSLContext:
        """What a client of this server trusts (for tests and tools that are not kubeconfig readers)."""
        return ssl.create_default_context(cafile=str(self.ca_file))


class Handler(BaseHTTPRequestHandler):
    """The HTTP side; a subclass answers `route(method)` (reading `self.raw` and `self.media`)."""

    protocol_version = "HTTP/1.1"
    server_version = "mlsubmit-kube"
    sys_version = ""
    server: Any  # has .token, .read_timeout and .tls

    def setup(self) -> None:
        """TLS first, in this connection's thread (a silent client never holds up the others)."""
        raw = self.request
        raw.settimeout(self.server.read_timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        first = raw.recv(1, socket.MSG_PEEK)
        if first and first != b"\x16":  # not a TLS handshake record: plain HTTP to an HTTPS server
            body = json.dumps(status(400, "BadRequest", "Client sent an HTTP request to an HTTPS server.")).encode()
            raw.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            raise ConnectionAbortedError("plain HTTP on the TLS port")
        self.request = self.server.tls.context.wrap_socket(raw, server_side=True)
        super().setup()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.request.close()

    def log_message(self, format: str, *args: Any) -> None:  # no access log (and so no header is ever printed)
        pass

    def handle_one_request(self) -> None:
        self.connection.settimeout(IDLE_TIMEOUT)
        super().handle_one_request()

    def parse_request(self) -> bool:
        self.connection.settimeout(self.server.read_timeout)
        return super().parse_request()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What http.server would answer with an HTML page (bad request line, unknown method, long headers)."""
        self.close_connection = True
        self.request_version = "HTTP/1.1"  # a garbled request line leaves HTTP/0.9, whose answers have no status
        if code == 501:
            code, message = 405, f"the server does not allow this method on the requested resource ({self.command!r})"
        self.send_json(code, ApiStatus(code, message or f"HTTP {code}").body())

    def send_json(self, code: int, body: Any, content_type: str = "application/json") -> None:
        respond(self, code, body if isinstance(body, bytes) else json.dumps(body).encode(), content_type)

    def start_chunked(self, content_type: str) -> None:
        """A 200 answer whose body follows in chunks (`send_chunk`, then `end_chunked`): a log or a watch."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _authorized(self) -> bool:
        given = self.headers.get("Authorization", "")
        scheme, _, token = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.server.token.encode())

    def _length(self) -> int:
        values = set(self.headers.get_all("Content-Length") or [])
        if len(values) > 1 or any(not v.strip().isdigit() for v in values):
            self.close_connection = True
            raise ApiStatus(400, f"bad Content-Length {sorted(values)!r}")
        return int(values.pop()) if values else 0

    def _discard(self) -> None:
        """Read and drop a body this request will not use, so the connection can carry the answer."""
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            return
        try:
            length = self._length()
        except ApiStatus:
            return
        if not drain(self.rfile, length, _DRAIN_LIMIT):
            self.close_connection = True

    def _read_body(self) -> bytes:
        encoding = self.headers.get("Transfer-Encoding", "").strip().lower()
        if encoding == "chunked":
            return self._read_chunked()
        if encoding:
            self.close_connection = True
            raise ApiStatus(400, f"unsupported transfer encoding {encoding[:40]!r}")
        length = self._length()
        if length > MAX_BODY:
            self._discard()
            raise ApiStatus(413, f"Request entity too large: limit is {MAX_BODY}")
        data = self.rfile.read(length) if length else b""
        if len(data) < length:
            self.close_connection = True
            raise ApiStatus(400, "unexpected EOF: the body is shorter than its Content-Length")
        return data

    def _read_chunked(self) -> bytes:
        chunks, total = [], 0
        while True:
            line = self.rfile.readline(_MAX_LINE)
            try:
                size = int(line.split(b";")[0].strip(), 16)
                if size < 0:
                    raise ValueError
            except ValueError:
                self.close_connection = True
                raise ApiStatus(400, f"invalid byte in chunk length {line[:40]!r}") from None
            if size == 0:
                break
            total += size
            if total > MAX_BODY:
                self.close_connection = True
                raise ApiStatus(413, f"Request entity too large: limit is {MAX_BODY}")
            chunk = self.rfile.read(size)
            if len(chunk) < size or self.rfile.readline(_MAX_LINE) not in (b"\r\n", b"\n"):
                self.close_connection = True
                raise ApiStatus(400, "malformed chunked encoding: a chunk does not end where its size says")
            chunks.append(chunk)
        for _ in range(_MAX_TRAILERS + 1):
            if self.rfile.readline(_MAX_LINE) in (b"\r\n", b"\n", b""):
                return b"".join(chunks)
        self.close_connection = True
        raise ApiStatus(400, f"malformed chunked encoding: more than {_MAX_TRAILERS} trailer lines")

    def _serve(self) -> None:
        method = self.command
        try:
            try:
                if not self._authorized():
                    self._discard()
                    raise ApiStatus(401, "Unauthorized")
                if self.headers.get("Content-Encoding", "identity").strip().lower() not in ("", "identity"):
                    self._discard()
                    raise unsupported_media_type(JSON_TYPES + YAML_TYPES)
                try:
                    self.raw = self._read_body()
                except TimeoutError:
                    self.close_connection = True
                    raise ApiStatus(408, f"the request body did not arrive within {self.server.read_timeout:g} s")
                self.media = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
                self.route(method)
            except ApiStatus as refusal:
                self.send_json(refusal.code, refusal.body())
            except (BrokenPipeError, ConnectionResetError):
                raise
            except Exception as err:  # never leave a client without an answer
                log.exception("internal error answering %s", method)
                self.close_connection = True
                self.send_json(500, ApiStatus(500, f"Internal error: {type(err).__name__}: {err}").body())
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True

    def route(self, method: str) -> None:
        raise NotImplementedError

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


def read_timeout() -> float:
    return float(os.environ.get("MLSUBMIT_EMULATOR_READ_TIMEOUT") or READ_TIMEOUT)
