"""gs:// URIs and local paths behind one small interface: stat, create-only upload, download.

Uploads never overwrite: an object that is already there with the same checksum is not sent again; a new
object is created with `if_generation_match=0`, so a concurrent writer cannot be overwritten; afterwards the
object's crc32c (or md5) is compared with the local file's, and a mismatch deletes the object. Transient
failures (408/429/5xx, connection resets) are retried with exponential backoff (`RetryPolicy`, injectable so
tests are fast). Local destinations get the same semantics through a hard link from a temporary file.

Errors: a missing bucket, refused access, missing credentials or an unreachable endpoint are `UsageError`
(exit 2); an upload that fails after its retries is `OperationFailed` (exit 1). google-cloud-storage is
imported inside the functions that talk to it; the client comes from `gcs_emulator.storage_client()`, so
`STORAGE_EMULATOR_HOST` points everything at a local emulator.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from mlsubmit.errors import OperationFailed, UsageError, invalid_value

SCHEME = "gs://"
_CHUNK = 8 << 20  # resumable-upload chunk above which a progress bar can move
_PROGRESS_AFTER = 0.5  # seconds: a bar only for uploads that take more than a moment
_TRANSIENT = (408, 429, 500, 502, 503, 504)


def is_gcs(uri: str) -> bool:
    return str(uri).startswith(SCHEME)


def split_gcs(uri: str) -> tuple[str, str]:
    """`gs://bucket/a/b` → ("bucket", "a/b"), validating the bucket name."""
    bucket, _, name = uri[len(SCHEME):].partition("/")
    if not (3 <= len(bucket) <= 222) or not bucket.isascii() \
            or not all(c.islower() or c.isdigit() or c in "-_." for c in bucket) \
            or not bucket[0].isalnum() or not bucket[-1].isalnum():
        raise invalid_value("bucket", bucket or uri, "a bucket name of 3-63 lowercase letters, digits, '-', '_', '.'",
                            hint="write it as gs://BUCKET/PREFIX")
    return bucket, name


def join(base: str, *parts: str) -> str:
    """Join path segments onto a gs:// URI or a local path."""
    if is_gcs(base):
        return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])
    return str(Path(base, *parts))


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff for transient errors: first delay, cap, growth, and how long to keep trying
    (`probe_deadline` for the first contact, so an unreachable endpoint is reported quickly)."""

    initial: float = 1.0
    maximum: float = 32.0
    multiplier: float = 2.0
    deadline: float = 120.0
    probe_deadline: float = 20.0

    def __post_init__(self) -> None:
        for field in ("initial", "maximum", "deadline", "probe_deadline"):
            if not getattr(self, field) > 0:
                raise invalid_value(f"retry {field}", getattr(self, field), "a positive number of seconds")
        if self.multiplier < 1:
            raise invalid_value("retry multiplier", self.multiplier, "a number >= 1")

    @classmethod
    def from_env(cls) -> "RetryPolicy":
        """Defaults, overridden by MLSUBMIT_RETRY_DEADLINE and MLSUBMIT_RETRY_INITIAL_DELAY (seconds)."""
        policy = cls()
        for var, field in (("MLSUBMIT_RETRY_DEADLINE", "deadline"), ("MLSUBMIT_RETRY_INITIAL_DELAY", "initial")):
            if var in os.environ:
                try:
                    seconds = float(os.environ[var])
                except ValueError:
                    seconds = -1.0
                if not seconds > 0:
                    raise invalid_value(var, os.environ[var], "a positive number of seconds")
                policy = replace(policy, **{field: seconds})
        return replace(policy, probe_deadline=min(policy.probe_deadline, policy.deadline),
                       maximum=max(policy.initial, policy.maximum))

    def google(self, deadline: float | None = None):
        """The equivalent google.api_core Retry (predicate: google-cloud-storage's transient errors)."""
        from google.cloud.storage.retry import DEFAULT_RETRY

        return DEFAULT_RETRY.with_delay(initial=self.initial, maximum=self.maximum, multiplier=self.multiplier) \
            .with_timeout(deadline if deadline is not None else self.deadline)


@dataclass(frozen=True)
class Checksums:
    """Base64 crc32c and md5, as Cloud Storage reports them (None where unknown)."""

    crc32c: str | None
    md5: str | None

    def agrees_with(self, other: "Checksums") -> bool:
        if self.crc32c and other.crc32c:
            return self.crc32c == other.crc32c
        return bool(self.md5 and other.md5 and self.md5 == other.md5)


def file_checksums(path: str | os.PathLike) -> Checksums:
    import google_crc32c

    crc, md5 = google_crc32c.Checksum(), hashlib.md5()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            crc.update(block)
            md5.update(block)
    return Checksums(base64.b64encode(crc.digest()).decode(), base64.b64encode(md5.digest()).decode())


@dataclass(frozen=True)
class ObjectInfo:
    uri: str
    size: int
    checksums: Checksums


@dataclass(frozen=True)
class Upload:
    """The outcome of `put_file`: where the object is, whether this call created it, and the bytes it sent
    (payload bytes read for upload: 0 when an identical object was already there)."""

    uri: str
    uploaded: bool
    bytes_sent: int


def _endpoint() -> str:
    return os.environ.get("STORAGE_EMULATOR_HOST") or "https://storage.googleapis.com"


def _describe(err: BaseException) -> str:
    cause = getattr(err, "cause", None) or err
    return f"{cause.__class__.__name__}: {str(cause).splitlines()[0][:200] if str(cause) else ''}"


@contextmanager
def _gcs_errors(uri: str, *, probing: bool, retry_seconds: float):
    """Translate google-cloud-storage exceptions into the mlsubmit error family."""
    import requests
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    bucket = uri[len(SCHEME):].partition("/")[0]
    try:
        yield
    except (auth.DefaultCredentialsError, auth.RefreshError, auth.TransportError) as err:
        from mlsubmit.cloud.clients import credentials_error

        raise credentials_error(err) from None
    except api.GoogleAPICallError as err:
        if err.code == 404:
            raise UsageError(f"bucket gs://{bucket} does not exist (endpoint {_endpoint()})",
                             hint=f"create it (gcloud storage buckets create gs://{bucket}) or fix the name") from None
        if err.code in (401, 403):
            raise UsageError(f"access to gs://{bucket} refused ({err.code}): {err.message.splitlines()[0][:200]}",
                             hint="grant the account storage.objects.create/get on the bucket, or run "
                                  "`gcloud auth application-default login`") from None
        if err.code not in _TRANSIENT:
            raise OperationFailed(f"Cloud Storage refused the request for {uri} ({err.code}): "
                                  f"{err.message.splitlines()[0][:200]}") from None
        _raise_transient(err, uri, probing, retry_seconds)
    except (api.RetryError, requests.ConnectionError, ConnectionError) as err:
        if isinstance(getattr(err, "cause", None), auth.TransportError):  # the token, not the storage API
            from mlsubmit.cloud.clients import credentials_error

            raise credentials_error(err.cause) from None
        _raise_transient(err, uri, probing, retry_seconds)


def _raise_transient(err: BaseException, uri: str, probing: bool, retry_seconds: float):
    if probing:
        raise UsageError(f"cannot reach Cloud Storage at {_endpoint()} for {uri} within {retry_seconds:g} s "
                         f"({_describe(err)})", hint="check the network, the endpoint and STORAGE_EMULATOR_HOST") from None
    raise OperationFailed(f"upload to {uri} failed after retrying for up to {retry_seconds:g} s ({_describe(err)})",
                          hint="run the same command again: nothing was left half-written") from None


def _blob_info(uri: str, blob) -> ObjectInfo:
    return ObjectInfo(uri, int(blob.size or 0), Checksums(blob.crc32c, blob.md5_hash))


def stat(uri: str, *, retry: RetryPolicy | None = None) -> ObjectInfo | None:
    """Size and checksums of the object or file at `uri`, or None if there is none."""
    if not is_gcs(uri):
        path = Path(uri)
        return ObjectInfo(uri, path.stat().st_size, file_checksums(path)) if path.is_file() else None
    from mlsubmit.emulator.gcs_emulator import storage_client

    policy = retry or RetryPolicy.from_env()
    bucket_name, name = split_gcs(uri)
    with _gcs_errors(uri, probing=True, retry_seconds=policy.probe_deadline):
        bucket = storage_client().bucket(bucket_name)
        blob = bucket.get_blob(name, retry=policy.google(policy.probe_deadline))
        if blob is None and not _bucket_exists(bucket, policy):
            from google.api_core.exceptions import NotFound

            raise NotFound(f"bucket {bucket_name}")
    return None if blob is None else _blob_info(uri, blob)


def _bucket_exists(bucket, policy: RetryPolicy) -> bool:
    """Tell a missing object from a missing bucket; without buckets.get permission, assume it exists."""
    from google.api_core.exceptions import Forbidden

    try:
        return bucket.exists(retry=policy.google(policy.probe_deadline))
    except Forbidden:
        return True


class _Reader:
    """A file wrapper that counts the bytes read for upload and shows a progress bar once it is slow."""

    def __init__(self, handle, total: int, label: str, show_progress: bool):
        self.handle, self.total, self.label, self.show = handle, total, label, show_progress
        self.bytes_read, self.started, self.progress, self.task = 0, time.monotonic(), None, None

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.bytes_read += len(data)
        if self.show and self.progress is None and time.monotonic() - self.started > _PROGRESS_AFTER:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

            self.progress = Progress("{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                                     console=Console(stderr=True), transient=True)
            self.progress.start()
            self.task = self.progress.add_task(f"uploading {self.label}", total=self.total)
        if self.progress is not None:
            self.progress.update(self.task, completed=min(self.handle.tell(), self.total))
        return data

    def __getattr__(self, name):  # seek, tell, … as the uploader needs them
        return getattr(self.handle, name)

    def close_progress(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def _put_gcs(path: Path, uri: str, policy: RetryPolicy, show_progress: bool) -> Upload:
    from google.api_core.exceptions import PreconditionFailed

    from mlsubmit.emulator.gcs_emulator import storage_client

    local = file_checksums(path)
    existing = stat(uri, retry=policy)
    if existing is not None:
        return _already_there(uri, existing, local, 0)
    bucket_name, name = split_gcs(uri)
    size = path.stat().st_size
    with _gcs_errors(uri, probing=False, retry_seconds=policy.deadline):
        blob = storage_client().bucket(bucket_name).blob(name, chunk_size=_CHUNK if size > _CHUNK else None)
        with open(path, "rb") as handle:
            reader = _Reader(handle, size, path.name, show_progress)
            try:
                blob.upload_from_file(reader, size=size, if_generation_match=0, checksum="crc32c",
                                      retry=policy.google(), content_type="application/gzip")
            except PreconditionFailed:  # someone (or our own retried request) created it meanwhile
                existing = stat(uri, retry=policy)
                if existing is None:
                    raise OperationFailed(f"upload to {uri} was refused (precondition failed) and no object "
                                          "is there", hint="run the same command again") from None
                return _already_there(uri, existing, local, reader.bytes_read)
            finally:
                reader.close_progress()
        uploaded = _blob_info(uri, blob)
        if not uploaded.checksums.agrees_with(local) or uploaded.size != size:
            blob.delete(if_generation_match=blob.generation, retry=policy.google())
            raise OperationFailed(f"the object written to {uri} does not match {path} (crc32c "
                                  f"{uploaded.checksums.crc32c} != {local.crc32c}); it was deleted",
                                  hint="run the same command again")
    return Upload(uri, True, reader.bytes_read)


def _already_there(uri: str, existing: ObjectInfo, local: Checksums, bytes_sent: int) -> Upload:
    if not existing.checksums.agrees_with(local):
        raise OperationFailed(f"{uri} already exists with different content (crc32c {existing.checksums.crc32c}, "
                              f"ours {local.crc32c})", hint="a different file was written under this name; "
                              "delete it if it is stale") from None
    return Upload(uri, False, bytes_sent)  # the object there is not (provably) the one this call sent


def _put_local(path: Path, destination: Path) -> Upload:
    local = file_checksums(path)
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise invalid_value("stage directory", str(destination.parent), "a directory mlsubmit can create",
                            hint=str(err)) from None
    if destination.exists():
        return _already_there(str(destination), stat(str(destination)), local, 0)
    partial = destination.with_name(f".{destination.name}.{os.getpid()}.partial")
    try:
        shutil.copyfile(path, partial)
        try:
            os.link(partial, destination)  # create-only, like if_generation_match=0
        except FileExistsError:
            return _already_there(str(destination), stat(str(destination)), local, partial.stat().st_size)
        except OSError:  # no hard links on this file system
            os.replace(partial, destination)
    finally:
        partial.unlink(missing_ok=True)
    return Upload(str(destination), True, path.stat().st_size)


def put_file(path: str | os.PathLike, uri: str, *, retry: RetryPolicy | None = None,
             show_progress: bool = False) -> Upload:
    """Create `uri` (gs:// or a local path) from the file at `path`, unless an identical object is there.

    Raises:
        UsageError: missing bucket, refused access, no credentials, unreachable endpoint.
        OperationFailed: the upload failed after retries, or different content is already at `uri`.
    """
    path = Path(path)
    if is_gcs(uri):
        return _put_gcs(path, uri, retry or RetryPolicy.from_env(), show_progress)
    return _put_local(path, Path(uri))


def get_file(uri: str, destination: str | os.PathLike, *, retry: RetryPolicy | None = None) -> Path:
    """Copy the object or file at `uri` to `destination` (written atomically; checksum verified on gs://)."""
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(f".{destination.name}.{os.getpid()}.partial")
    try:
        if is_gcs(uri):
            from google.api_core.exceptions import NotFound

            from mlsubmit.emulator.gcs_emulator import storage_client

            policy = retry or RetryPolicy.from_env()
            bucket_name, name = split_gcs(uri)
            with _gcs_errors(uri, probing=True, retry_seconds=policy.deadline):
                try:
                    storage_client().bucket(bucket_name).blob(name).download_to_filename(
                        str(partial), retry=policy.google(), checksum="crc32c")
                except NotFound:
                    raise UsageError(f"no object at {uri}", hint="check the URI") from None
        else:
            if not Path(uri).is_file():
                raise UsageError(f"no file at {uri}", hint="check the path")
            shutil.copyfile(uri, partial)
        os.replace(partial, destination)
    finally:
        partial.unlink(missing_ok=True)
    return destination
