"""Each MODEL argument → one local, verified model file (and the run's metrics when it is a job dir).

A job dir (local or gs://) is trusted only through its MANIFEST.json, which the trainer writes last: without it the
dir is incomplete; with it, every listed file must be present with the listed size and sha256, or the dir is refused
as incomplete or corrupt, naming the file. Files of a gs:// job dir are downloaded (crc32c-checked and retried by
`mlsubmit.cloud.storage.get_file`) into the content-addressed cache (`mlsubmit.predict.cache`) and reused: a later run
lists the prefix once and downloads nothing whose cached copy matches both the manifest (sha256) and the object in
the bucket (its crc32c or MD5), so a file replaced in the bucket after it was cached is still caught. A bare
.keras/.h5 file (local or gs://) is accepted as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mlsubmit.errors import OperationFailed, UsageError, invalid_value
from mlsubmit.predict.cache import Cache, Digests, md5_hex
from mlsubmit.predict.request import MODEL_SUFFIXES
from mlsubmit.cloud.storage import Checksums, ObjectInfo, get_file, split_gcs, stat
from mlsubmit_runtime.artifacts import FORMAT as MANIFEST_FORMAT  # the format trainers write, in one place
from mlsubmit_runtime.artifacts import MANIFEST

# In order of preference: every Keras backend writes and loads model.keras; model.h5 only where the trainer could write
# it. A job dir needs one of them, and whatever else its manifest lists (nothing beyond what a JAX or PyTorch job wrote).
MODEL_FILES = ("model/model.keras", "model/model.h5")
METRICS = "metrics.json"
# What a job dir may declare before anything of it is read whole or downloaded: a trainer's MANIFEST.json lists a
# few files in a few KB, its metrics.json is a few KB; every listed file is downloaded, so all of them must fit.
MAX_JSON_BYTES = 16 << 20
MAX_MANIFEST_FILES = 10_000


@dataclass(frozen=True)
class ModelSource:
    """One ensemble member as found: where its model file is on this machine, and its metrics (job dirs only)."""

    name: str  # the argument as the user gave it
    model_file: Path
    metrics: dict | None
    kind: str  # "job dir" or "model file"

    @property
    def backend(self) -> str | None:
        """The Keras backend it was trained under, as its metrics.json records it (None: not recorded)."""
        metrics = self.metrics if isinstance(self.metrics, dict) else {}
        value = metrics.get("backend") or metrics.get("keras_backend")  # the second: what trainers wrote first
        return value if isinstance(value, str) else None

    @property
    def backend_version(self) -> str | None:
        metrics = self.metrics if isinstance(self.metrics, dict) else {}
        value = metrics.get("backend_version") or (metrics.get("tensorflow_version")
                                                   if self.backend == "tensorflow" else None)
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Entry:
    path: str
    size: int
    sha256: str


def _incomplete(job_dir: str, why: str) -> UsageError:
    return UsageError(f"job dir {job_dir} is incomplete: {why}",
                      hint="wait for the run to finish, or re-run training; the trainer writes MANIFEST.json last")


def _corrupt(job_dir: str, why: str) -> UsageError:
    return UsageError(f"job dir {job_dir} is corrupt: {why}",
                      hint="a file changed after training; re-run training or restore the file")


def parse_manifest(job_dir: str, text: bytes | str) -> list[Entry]:
    """MANIFEST.json → its entries; any malformed part makes the dir corrupt."""
    try:
        manifest = json.loads(text)
        if manifest.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format {manifest.get('format')!r}, expected {MANIFEST_FORMAT!r}")
        if len(manifest["files"]) > MAX_MANIFEST_FILES:
            raise ValueError(f"it lists {len(manifest['files']):,} files; expected at most {MAX_MANIFEST_FILES:,}")
        entries = [Entry(str(f["path"]), int(f["size"]), str(f["sha256"]).lower()) for f in manifest["files"]]
    except RecursionError:
        raise _corrupt(job_dir, f"{MANIFEST} cannot be read (nested too deeply to be a manifest)") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _corrupt(job_dir, f"{MANIFEST} cannot be read ({exc})") from None
    for entry in entries:
        pure = PurePosixPath(entry.path)
        if pure.is_absolute() or ".." in pure.parts or entry.path in ("", MANIFEST):
            raise _corrupt(job_dir, f"{MANIFEST} lists an invalid path {entry.path!r}")
    listed = {e.path for e in entries}
    if not any(f in listed for f in MODEL_FILES):
        raise _corrupt(job_dir, f"{MANIFEST} lists no model file ({' or '.join(MODEL_FILES)})")
    return entries


def _check_file(job_dir: str, entry: Entry, digests: Digests) -> None:
    if digests.sha256 != entry.sha256:
        raise _corrupt(job_dir, f"{entry.path} has sha256 {digests.sha256[:12]}…, but {MANIFEST} lists "
                       f"{entry.sha256[:12]}…")


def _check_json_size(job_dir: str, what: str, size: int) -> None:
    if size > MAX_JSON_BYTES:
        raise _corrupt(job_dir, f"{what} has {size:,} bytes; expected at most {MAX_JSON_BYTES:,} (16 MiB), as a "
                       "trainer writes it (a few KB)")


def _check_space(job_dir: str, cache: Cache, entries: list[Entry]) -> None:
    """Every listed file is downloaded: refuse before the first one when they cannot all fit in the cache."""
    import shutil

    needed = sum(e.size for e in entries if not cache.path("sha256", e.sha256, PurePosixPath(e.path).suffix).is_file())
    cache.root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(cache.root).free
    if needed > free:
        raise UsageError(f"job dir {job_dir} lists {needed:,} bytes to download; the cache at {cache.root} has "
                         f"{free:,} bytes free", hint="free some space, or set MLSUBMIT_HOME to a larger disk")


def _preferred_files() -> tuple[str, ...]:
    """MODEL_FILES in the order this process's Keras loads best: Keras 2 (TensorFlow ≤ 2.15) reads Keras 3's .h5
    files, not its .keras archives."""
    from mlsubmit.predict.backend import keras_major

    return MODEL_FILES if keras_major() >= 3 else tuple(reversed(MODEL_FILES))


def _pick(job_dir: str, files: dict[str, Path]) -> tuple[Path, dict | None]:
    model = next(files[f] for f in _preferred_files() if f in files)
    metrics = None
    if METRICS in files:
        _check_json_size(job_dir, METRICS, files[METRICS].stat().st_size)
        try:
            metrics = json.loads(files[METRICS].read_text())
        except RecursionError:
            raise _corrupt(job_dir, f"{METRICS} is nested too deeply to be a trainer's metrics") from None
        except ValueError as exc:
            raise _corrupt(job_dir, f"{METRICS} is not JSON ({exc})") from None
    return model, metrics


def local_job_dir(name: str) -> ModelSource:
    root = Path(name)
    manifest = root / MANIFEST
    if not manifest.is_file():
        raise _incomplete(name, f"no {MANIFEST}")
    _check_json_size(name, MANIFEST, manifest.stat().st_size)
    files = {}
    for entry in parse_manifest(name, manifest.read_bytes()):
        path = root / entry.path
        if not path.is_file():
            raise _incomplete(name, f"{entry.path} is listed in {MANIFEST} but missing")
        if path.stat().st_size != entry.size:
            raise _corrupt(name, f"{entry.path} has {path.stat().st_size} bytes, but {MANIFEST} lists {entry.size}")
        _check_file(name, entry, Digests.of_file(path))
        files[entry.path] = path
    model, metrics = _pick(name, files)
    return ModelSource(name, model, metrics, "job dir")


def _listing(uri: str, wanted: set[str] | None = None, most: int = 1_000) -> dict[str, ObjectInfo]:
    """The objects below the gs:// prefix, by path relative to it (one list request per 1,000 objects): those in
    `wanted`, the listing ending once all are found; without `wanted`, at most `most` + 1 of them. A prefix of
    millions of objects (a bucket's root given by mistake) is never held in memory."""
    from mlsubmit.emulator.gcs_emulator import storage_client

    bucket_name, prefix = split_gcs(uri)
    prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    found: dict[str, ObjectInfo] = {}
    try:
        for blob in storage_client().list_blobs(bucket_name, prefix=prefix):
            path = blob.name[len(prefix):]
            if wanted is None or path in wanted:
                found[path] = ObjectInfo(f"gs://{bucket_name}/{blob.name}", int(blob.size or 0),
                                         Checksums(blob.crc32c, blob.md5_hash))
            if len(found) == (len(wanted) if wanted is not None else most + 1):
                break
    except Exception as exc:  # stat() of the manifest already told a missing bucket or credentials apart
        raise OperationFailed(f"cannot list {uri}: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}",
                              hint="run the same command again") from None
    return found


def _cached_copy(path: Path, remote: ObjectInfo, sha256: str | None = None) -> bool:
    """True when `path` is cached (with this sha256) and still the same content as the object in the bucket."""
    if not path.is_file():
        return False
    digests = Digests.of_file(path)
    if sha256 and digests.sha256 != sha256:  # damaged in the cache: fetch again
        path.unlink()
        return False
    return remote.checksums.agrees_with(digests.checksums)


def gcs_job_dir(name: str, cache: Cache) -> ModelSource:
    uri = name.rstrip("/")
    remote_manifest = stat(f"{uri}/{MANIFEST}")  # also reports a missing bucket, refused access, no credentials
    if remote_manifest is None:
        listing = _listing(uri)
        count = f"{len(listing)}" if len(listing) <= 1_000 else "more than 1,000"
        found = f"{count} file(s) there" if listing else "the prefix is empty or does not exist"
        raise _incomplete(name, f"no {MANIFEST} ({found})")
    _check_json_size(name, MANIFEST, remote_manifest.size)
    temp = get_file(f"{uri}/{MANIFEST}", cache.temp_file())
    try:
        entries = parse_manifest(name, temp.read_bytes())
    finally:
        temp.unlink(missing_ok=True)
    listing = _listing(uri, {entry.path for entry in entries})
    for entry in entries:  # every file there, with its listed size, before anything is downloaded
        remote = listing.get(entry.path)
        if remote is None:
            raise _incomplete(name, f"{entry.path} is listed in {MANIFEST} but missing")
        if remote.size != entry.size:
            raise _corrupt(name, f"{entry.path} has {remote.size} bytes, but {MANIFEST} lists {entry.size}")
    _check_space(name, cache, entries)
    files = {}
    for entry in entries:
        remote = listing[entry.path]
        target = cache.path("sha256", entry.sha256, PurePosixPath(entry.path).suffix)
        if _cached_copy(target, remote, entry.sha256):
            cache.reused.append(remote.uri)
        elif target.is_file():  # the cached copy is what the manifest lists; the bucket's object is not
            raise _corrupt(name, f"{entry.path} in the bucket differs from the copy verified against {MANIFEST}")
        else:
            temp = get_file(remote.uri, cache.temp_file())  # crc32c-checked download, retried
            try:
                _check_file(name, entry, Digests.of_file(temp))
            except UsageError:
                temp.unlink(missing_ok=True)
                raise
            cache.admit(temp, target)
            cache.downloaded.append(remote.uri)
        files[entry.path] = target
    model, metrics = _pick(name, files)
    return ModelSource(name, model, metrics, "job dir")


def gcs_model_file(name: str, cache: Cache) -> ModelSource:
    """A bare gs:// .keras/.h5, cached under the MD5 Cloud Storage records for it."""
    remote = stat(name)
    if remote is None:
        raise invalid_value("MODEL", name, "an existing gs:// object, job dir or .keras/.h5 file",
                            hint="check the bucket and path")
    suffix = PurePosixPath(name).suffix
    target = cache.path("md5", md5_hex(remote.checksums.md5), suffix) if remote.checksums.md5 else None
    if target is not None and _cached_copy(target, remote):
        cache.reused.append(name)
        return ModelSource(name, target, None, "model file")
    temp = get_file(name, cache.temp_file())
    target = target or cache.path("sha256", Digests.of_file(temp).sha256, suffix)  # composite objects: no MD5
    cache.admit(temp, target)
    cache.downloaded.append(name)
    return ModelSource(name, target, None, "model file")


def resolve(name: str, cache: Cache) -> ModelSource:
    """One MODEL argument → a verified local model file.

    Raises:
        UsageError: the job dir is missing, incomplete (no MANIFEST.json, a listed file missing) or corrupt
            (a size or sha256 that differs from the manifest), naming the file.
    """
    if name.startswith("gs://"):
        if PurePosixPath(name).suffix in MODEL_SUFFIXES:
            return gcs_model_file(name, cache)
        return gcs_job_dir(name, cache)
    path = Path(name)
    if path.is_file():
        return ModelSource(name, path, None, "model file")
    return local_job_dir(name)


def resolve_all(names: tuple[str, ...], cache: Cache) -> list[ModelSource]:
    return [resolve(name, cache) for name in names]
