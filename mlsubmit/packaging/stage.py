"""Stage a built sdist, content-addressed, so an unchanged package is never sent twice.

`gs://BUCKET/PREFIX` → `gs://BUCKET/PREFIX/packages/<sha256>/<file>.tar.gz` (gcloud's layout under a job
dir); a plain directory `DIR` → `DIR/packages/<sha256>/<file>.tar.gz` (for local runs). The semantics —
create-only, skip when identical, checksum verified, retried — are `mlsubmit.cloud.storage.put_file`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mlsubmit.cloud import storage
from mlsubmit.errors import OperationFailed, invalid_value
from mlsubmit.packaging.extras import ExtraPackage
from mlsubmit.packaging.sdist import Sdist, file_sha256


@dataclass(frozen=True)
class StagedPackage:
    """Where the package is staged, its sha256, and whether this call sent it (and how many bytes)."""

    uri: str
    sha256: str
    uploaded: bool
    bytes_sent: int


def check_destination(destination: str) -> str:
    """Validate a stage destination (gs://BUCKET/PREFIX or a directory); local paths come back absolute."""
    destination = str(destination)
    if storage.is_gcs(destination):
        storage.split_gcs(destination)  # validates the bucket name
    elif "://" in destination:
        raise invalid_value("--stage", destination, "gs://BUCKET/PREFIX or a local directory",
                            hint="only Cloud Storage and local directories can hold packages")
    elif Path(destination).is_file():
        raise invalid_value("--stage", destination, "gs://BUCKET/PREFIX or a local directory",
                            hint="it is a file")
    else:
        destination = str(Path(destination).resolve())
    return destination


def content_uri(destination: str, sha256: str, filename: str) -> str:
    """`<destination>/packages/<sha256>/<filename>` for a checked destination."""
    return storage.join(destination, "packages", sha256, filename)


def package_uri(sdist: Sdist, destination: str) -> str:
    """The content-addressed URI (or path) of `sdist` under `destination`."""
    return content_uri(check_destination(destination), sdist.sha256, sdist.filename)


def stage(sdist: Sdist, destination: str, *, retry: storage.RetryPolicy | None = None,
          show_progress: bool = False) -> StagedPackage:
    """Put `sdist` under `destination` unless the same bytes are already there.

    Raises:
        UsageError: a bad destination, missing bucket, refused access or unreachable endpoint (exit 2).
        OperationFailed: the sdist changed since it was built, or the upload failed after retries (exit 1).
    """
    uri = package_uri(sdist, destination)
    digest = file_sha256(sdist.path)
    if digest != sdist.sha256:
        raise OperationFailed(f"{sdist.path} changed since it was built (sha256 {digest[:12]}…, expected "
                              f"{sdist.sha256[:12]}…)", hint="build it again")
    put = storage.put_file(sdist.path, uri, retry=retry, show_progress=show_progress)
    return StagedPackage(put.uri, sdist.sha256, put.uploaded, put.bytes_sent)


def stage_extra(extra: ExtraPackage, destination: str, *, retry: storage.RetryPolicy | None = None,
                show_progress: bool = False) -> StagedPackage:
    """Stage an extra package beside the trainer's (content-addressed); a gs:// URI is used as it is."""
    if extra.uri is not None:
        return StagedPackage(extra.uri, "", uploaded=False, bytes_sent=0)
    uri = content_uri(check_destination(destination), extra.sha256, extra.path.name)
    put = storage.put_file(extra.path, uri, retry=retry, show_progress=show_progress)
    return StagedPackage(put.uri, extra.sha256, put.uploaded, put.bytes_sent)


def extra_uri(extra: ExtraPackage, destination: str) -> str:
    """Where `stage_extra` puts `extra` under `destination`."""
    return extra.uri or content_uri(check_destination(destination), extra.sha256, extra.path.name)
