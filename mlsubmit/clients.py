"""The one factory of Google API clients: googleapiclient services built from their shipped discovery documents.

    clients = Clients(region="us-central1")                       # Application Default Credentials
    clients = Clients(region="us-central1", endpoint="http://127.0.0.1:8090")   # the emulator, anonymous
    jobs = clients.service("aiplatform").projects().locations().customJobs()

Build one `Clients` per command and pass it in: credentials are looked up once, each service is built once
(`static_discovery=True`: no discovery request, works offline), and every request goes through one HTTP
session. Vertex AI is called at its regional endpoint `https://{region}-aiplatform.googleapis.com`; with an
endpoint override (`--endpoint`, `MLSUBMIT_API_ENDPOINT`) every API is called there, without credentials.

Why not googleapiclient's default transport: httplib2 resends a request by itself when a connection drops
before the answer arrives, POST included, so a create whose response was lost would make a second job behind
our back. `Transport` sends each request exactly once (no hidden retries, connect/read timeouts) and leaves
retrying to `mlsubmit.backends.calls`, which knows which requests are safe to repeat. Tokens live in the
session's Authorization header only; nothing here prints or logs requests.
"""

from __future__ import annotations

from typing import Any

from mlsubmit import __version__
from mlsubmit.errors import UsageError

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
VERSIONS = {"aiplatform": "v1", "ml": "v1", "logging": "v2"}
TIMEOUT = (10.0, 60.0)  # seconds: connect, read


class TransportError(ConnectionError):
    """The request got no HTTP answer (refused, reset, timed out): it may or may not have reached the server.
    `sent` is False only when no connection was ever made (refused, connect timeout): then it surely did not."""

    def __init__(self, message: str, *, sent: bool = True):
        super().__init__(message)
        self.sent = sent


class Transport:
    """An httplib2-shaped `request()` over a requests session, which googleapiclient accepts as `http=`."""

    def __init__(self, session: Any, timeout: tuple[float, float] = TIMEOUT):
        self.session, self.timeout = session, timeout

    def request(self, uri: str, method: str = "GET", body: Any = None, headers: dict | None = None,
                redirections: int = 5, connection_type: Any = None):
        import httplib2
        import requests

        try:
            answer = self.session.request(method, uri, data=body, headers=headers, timeout=self.timeout,
                                          allow_redirects=False)
        except requests.RequestException as err:
            import urllib3

            reason = getattr(err.args[0] if err.args else None, "reason", None)
            never_connected = isinstance(err, requests.ConnectTimeout) or \
                isinstance(reason, urllib3.exceptions.ConnectTimeoutError)  # NewConnectionError (refused) included
            raise TransportError(f"{type(err).__name__} talking to {_origin(uri)}: {_first_line(err)}",
                                 sent=not never_connected) from None
        info = {key.lower(): value for key, value in answer.headers.items()}
        info["status"] = str(answer.status_code)
        response = httplib2.Response(info)
        response.reason = answer.reason or ""
        return response, answer.content


def _origin(uri: str) -> str:
    import urllib.parse

    parts = urllib.parse.urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}"


def _first_line(err: BaseException) -> str:
    text = str(err).splitlines()
    return text[0][:200] if text else ""


def default_credentials():
    """Application Default Credentials for the cloud-platform scope; UsageError with the fix if there are none."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(scopes=list(SCOPES))
    except DefaultCredentialsError:
        raise UsageError("no Google Cloud credentials found (Application Default Credentials)",
                         hint="run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS "
                              "to a key file; for the local emulator pass --endpoint URL") from None
    return credentials


class Clients:
    """googleapiclient services for one region and endpoint, built on first use and kept."""

    def __init__(self, *, region: str, endpoint: str | None = None, credentials: Any = None):
        self.region, self.endpoint = region, endpoint
        self._credentials = credentials
        self._transport: Transport | None = None
        self._services: dict[str, Any] = {}

    @property
    def emulated(self) -> bool:
        return self.endpoint is not None

    def transport(self) -> Transport:
        if self._transport is None:
            import requests

            if self.endpoint is not None:
                session = requests.Session()  # the emulator: no credentials, no Authorization header
            else:
                from google.auth.transport.requests import AuthorizedSession

                session = AuthorizedSession(self._credentials or default_credentials())
            session.headers["User-Agent"] = f"mlsubmit/{__version__}"
            self._transport = Transport(session)
        return self._transport

    def api_endpoint(self, name: str) -> str | None:
        """Where `name` is called: the override, Vertex AI's regional endpoint, or the discovery default."""
        if self.endpoint is not None:
            return self.endpoint
        if name == "aiplatform":
            return f"https://{self.region}-aiplatform.googleapis.com"
        return None

    def service(self, name: str) -> Any:
        """The googleapiclient Resource of `name` ("aiplatform", "ml" or "logging")."""
        if name not in self._services:
            from googleapiclient.discovery import build

            endpoint = self.api_endpoint(name)
            self._services[name] = build(name, VERSIONS[name], http=self.transport(), static_discovery=True,
                                         cache_discovery=False,
                                         client_options={"api_endpoint": endpoint} if endpoint else None)
        return self._services[name]
