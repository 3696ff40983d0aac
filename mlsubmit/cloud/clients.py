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
retrying to `mlsubmit.targets.calls`, which knows which requests are safe to repeat. Tokens live in the
session's Authorization header only; nothing here prints or logs requests.
"""

from __future__ import annotations

from typing import Any

from mlsubmit import __version__
from mlsubmit.errors import MlsubmitError, OperationFailed, UsageError, invalid_value

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
        from google.auth import exceptions as auth

        try:
            answer = self.session.request(method, uri, data=body, headers=headers, timeout=self.timeout,
                                          allow_redirects=False)
        except (auth.RefreshError, auth.TransportError) as err:  # refreshing the token, before the request
            raise credentials_error(err) from None
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
    except (DefaultCredentialsError, ValueError, OSError) as err:  # a binary key file: UnicodeDecodeError
        raise credentials_error(err) from None
    return credentials


def _credentials_file() -> str | None:
    """The file Application Default Credentials are read from, if there is one."""
    import os

    from google.auth import _cloud_sdk

    named = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if named:
        return named
    well_known = _cloud_sdk.get_application_default_credentials_path()
    return well_known if os.path.exists(well_known) else None


def credentials_error(err: BaseException) -> MlsubmitError:
    """One line for credentials google-auth could not load or refresh: none at all, a malformed key file, a
    token server out of reach, or a login that expired or was revoked."""
    import re

    from google.auth import exceptions as auth

    login = "run `gcloud auth application-default login`"
    where = _credentials_file()
    if isinstance(err, auth.DefaultCredentialsError) and "were not found" in str(err) or \
            where is None and not isinstance(err, auth.GoogleAuthError):
        return UsageError("no Google Cloud credentials found (Application Default Credentials)",
                          hint=f"{login}, or set GOOGLE_APPLICATION_CREDENTIALS to a key file; for the local "
                               "emulator pass --endpoint URL")
    if isinstance(err, auth.DefaultCredentialsError) and str(err).endswith("was not found."):
        return invalid_value("GOOGLE_APPLICATION_CREDENTIALS", where, "the path of an existing key file",
                             hint=f"fix or unset the variable, or {login}")
    if isinstance(err, auth.TransportError):
        text = str(err)
        host = re.search(r"host='([^']+)'", text)
        reason = re.search(r"Caused by (\w+)", text)
        return OperationFailed(f"Google Cloud credentials ({where or 'Application Default Credentials'}) could not "
                               f"be refreshed: the token server {host.group(1) if host else ''} could not be reached "
                               f"({reason.group(1) if reason else type(err).__name__})".replace("  ", " "),
                               hint=f"check the network; if the login has expired, {login}")
    if isinstance(err, auth.RefreshError):
        said = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)  # args: (text, response)
        return UsageError(f"Google Cloud credentials ({where or 'Application Default Credentials'}) could not be "
                          f"refreshed: {said.splitlines()[0][:200] if said else type(err).__name__}", hint=f"{login}, or point GOOGLE_APPLICATION_CREDENTIALS "
                                                                 "at a valid key file")
    detail = err.args[1] if isinstance(err, auth.DefaultCredentialsError) and len(err.args) > 1 else err
    return UsageError(f"invalid Application Default Credentials file {where}: malformed "
                      f"({type(detail).__name__}: {_first_line(detail)})",
                      hint=f"download the key again or {login}; GOOGLE_APPLICATION_CREDENTIALS names the file")
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
