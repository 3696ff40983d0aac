"""Local directories and gs:// prefixes behind one small interface.

TensorFlow's own GCS filesystem always talks to the real endpoint and Keras writes `model.save("gs://…/x.h5")`
to a local `gs:/…` path without a word, so a trainer should never hand a gs:// path to TensorFlow: write to a
local directory and upload with google-cloud-storage (imported when a gs:// location is first used), which
honours STORAGE_EMULATOR_HOST. Problems are one-line InputErrors.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from pathlib import Path

from mlsubmit_runtime.errors import InputError

LATEST, SNAPSHOTS = "LATEST", "snapshots"  # push_snapshot's pointer and folder below a location
_TEMPORARY: list[Path] = []  # this process's local stand-ins for gs:// locations and downloads


def _temporary_folder(prefix: str) -> Path:
    """A new private folder, removed when this process exits (normally, or unwinding from an exception or a
    SIGTERM turned into SystemExit): a gs:// job dir's files are pushed before then, and a trainer run by hand with
    a gs:// --job-dir no longer leaves its mirror in the temporary folder."""
    if not _TEMPORARY:
        atexit.register(_remove_temporary_folders, os.getpid())
    path = Path(tempfile.mkdtemp(prefix=prefix))
    _TEMPORARY.append(path)
    return path


def _remove_temporary_folders(owner: int) -> None:
    if os.getpid() != owner:  # a forked child that exits through atexit: the folders are its parent's
        return
    while _TEMPORARY:
        shutil.rmtree(_TEMPORARY.pop(), ignore_errors=True)


def is_gcs(uri: str) -> bool:
    return uri.startswith("gs://")


def split_gcs(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri[len("gs://"):].partition("/")
    if not bucket:
        raise InputError(f"invalid GCS path {uri!r}; expected gs://BUCKET/PREFIX")
    return bucket, prefix.strip("/")


def _client():
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project=os.environ.get("GOOGLE_CLOUD_PROJECT", "local-project"),
                              credentials=AnonymousCredentials())
    return storage.Client()


class Location:
    """A directory the trainer writes: `local` is where files are written; `push()` publishes them to `uri`."""

    def __init__(self, uri: str, local: Path | None = None):
        self.uri = uri.rstrip("/") if uri != "/" else uri
        self.remote = is_gcs(uri)
        if self.remote:
            self._bucket_name, self._prefix = split_gcs(uri)
            self.local = local or _temporary_folder("mlsubmit-jobdir-")
        else:
            self.local = Path(uri)
        self._bucket = None

    def __repr__(self) -> str:
        return f"Location({self.uri!r})"

    def child(self, name: str) -> "Location":
        return Location(f"{self.uri}/{name}", self.local / name)

    def _blob_name(self, rel: str) -> str:
        return f"{self._prefix}/{rel}" if self._prefix else rel

    @property
    def bucket(self):
        if self._bucket is None:
            self._bucket = _client().bucket(self._bucket_name)
        return self._bucket

    def check_writable(self) -> None:
        """Fail early, with one line, when the job dir cannot be written."""
        probe = ".mlsubmit-write-check"
        try:
            self.local.mkdir(parents=True, exist_ok=True)
            (self.local / probe).write_bytes(b"")
            (self.local / probe).unlink()
        except OSError as exc:
            raise InputError(f"job dir {self.uri} is not writable ({exc.strerror or exc}); pass a --job-dir "
                               "you can write to") from None
        if self.remote:
            try:
                blob = self.bucket.blob(self._blob_name(probe))
                blob.upload_from_string(b"")
                blob.delete()
            except Exception as exc:  # google.api_core exceptions, connection errors
                raise InputError(f"job dir {self.uri} is not writable: {type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0][:200]}") from None

    def exists(self, rel: str) -> bool:
        if self.remote:
            return self.bucket.blob(self._blob_name(rel)).exists()
        return (self.local / rel).exists()

    def remove(self, rel: str) -> None:
        """Delete one file (local and remote) if it exists."""
        (self.local / rel).unlink(missing_ok=True)
        if self.remote:
            blob = self.bucket.blob(self._blob_name(rel))
            if blob.exists():
                blob.delete()

    def push(self, rel: str | None = None) -> list[str]:
        """Upload one file, or every file below `local` (rel=None), to the remote prefix. Returns the paths sent."""
        if not self.remote:
            return []
        files = [self.local / rel] if rel else sorted(p for p in self.local.rglob("*") if p.is_file())
        sent = []
        for path in files:
            name = path.relative_to(self.local).as_posix()
            self.bucket.blob(self._blob_name(name)).upload_from_filename(str(path))
            sent.append(name)
        return sent

    def pull(self) -> int:
        """Download every object below the remote prefix into `local`. Returns the number of files."""
        if not self.remote:
            return 0
        return self._download_below(f"{self._prefix}/" if self._prefix else "")

    def push_snapshot(self) -> str | None:
        """Publish every file below `local` as one snapshot that a reader sees whole or not at all (a backup that a
        preemption may interrupt while it is sent): the files go under `snapshots/<id>/`, then the one object
        `LATEST` names the id (a single object write is atomic), then older snapshots are deleted. Returns the id
        (None when there is nothing to send)."""
        if not self.remote:
            return None
        files = sorted(p for p in self.local.rglob("*") if p.is_file())
        if not files:
            return None
        snapshot = f"{time.time_ns():x}"
        for path in files:
            self.bucket.blob(self._blob_name(f"{SNAPSHOTS}/{snapshot}/{path.relative_to(self.local).as_posix()}")
                             ).upload_from_filename(str(path))
        self.bucket.blob(self._blob_name(LATEST)).upload_from_string(snapshot)
        keep = self._blob_name(f"{SNAPSHOTS}/{snapshot}/")
        for blob in list(self.bucket.client.list_blobs(self._bucket_name, prefix=self._blob_name(f"{SNAPSHOTS}/"))):
            if not blob.name.startswith(keep):
                blob.delete()
        return snapshot

    def pull_snapshot(self) -> int:
        """Download the snapshot `LATEST` names (push_snapshot) into `local`. Returns the number of files (0 when
        there is none)."""
        if not self.remote:
            return 0
        from google.api_core.exceptions import NotFound

        try:
            snapshot = self.bucket.blob(self._blob_name(LATEST)).download_as_text().strip()
        except NotFound:
            return 0
        return self._download_below(self._blob_name(f"{SNAPSHOTS}/{snapshot}/"))

    def _download_below(self, prefix: str) -> int:
        """Download every object whose name starts with `prefix` to the same relative path below `local`."""
        count = 0
        for blob in self.bucket.client.list_blobs(self._bucket_name, prefix=prefix):
            target = self.local / blob.name[len(prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            blob.download_to_filename(str(target))
            count += 1
        return count

    def clear_remote(self) -> None:
        """Delete every object below the remote prefix (e.g. a finished job's backup)."""
        if self.remote:
            prefix = f"{self._prefix}/" if self._prefix else ""
            for blob in list(self.bucket.client.list_blobs(self._bucket_name, prefix=prefix)):
                blob.delete()

    def cleanup_local(self) -> None:
        if self.remote:
            shutil.rmtree(self.local, ignore_errors=True)


def download_to_temp(uri: str) -> Path:
    """Download one gs:// object to a temporary file (for --data gs://…/x.npz)."""
    bucket, name = split_gcs(uri)
    target = _temporary_folder("mlsubmit-data-") / Path(name).name
    try:
        _client().bucket(bucket).blob(name).download_to_filename(str(target))
    except Exception as exc:
        raise InputError(f"invalid value for --data: cannot read {uri} ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0][:200]})") from None
    return target
