"""Build a trainer package's sdist in-process, reproducibly: the same sources give the same bytes.

Entries are sorted; every entry has the same mtime (SOURCE_DATE_EPOCH, else 1980-01-01), owner 0:0 with empty
owner names, and mode 0644 (0755 for files executable in the source); gzip is written with mtime 0 and no file
name. The archive holds `<name>-<version>/` with PKG-INFO, a generated setup.py and pyproject.toml
(`generated.py`), and the package's files as `selection.py` chose them (nothing outside the package directory,
no credentials). Files are streamed into the archive and the hash, so memory stays flat for any file size.

Which build a package gets is `project.py`'s choice: a project whose metadata cannot be read statically
(`pyproject.toml`, a setup.py that computes its metadata) is built by pypa/build instead (`frontend.py`); its
plan then carries that `prebuilt` sdist, which is copied and hashed as it is.
"""

from __future__ import annotations

import dataclasses
import errno
import gzip
import hashlib
import io
import os
import shutil
import stat
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from mlsubmit.errors import OperationFailed, UsageError, invalid_value
from mlsubmit.packaging import generated
from mlsubmit.packaging.credentials import CHUNK, ContentScan
from mlsubmit.packaging.ignore import Skipped
from mlsubmit.packaging.project import choose_build
from mlsubmit.packaging.selection import (ExcludedFile, PackageFile, is_inside, select_files, signature,
                                          unreadable)
from mlsubmit.packaging.setup_meta import ProjectMetadata

DEFAULT_EPOCH = 315532800  # 1980-01-01T00:00:00Z, the earliest time a zip (wheel) can hold


@dataclass(frozen=True)
class SdistPlan:
    """What an sdist will contain; nothing is written yet."""

    metadata: ProjectMetadata
    package: str
    package_dir: Path
    files: tuple[PackageFile, ...]
    excluded_secrets: tuple[ExcludedFile, ...]  # credentials, and links that leave the package: each is warned
    skipped: tuple[Skipped, ...]
    build: str = ""  # how it is built, one line (project.py)
    prebuilt: Path | None = None  # the sdist pypa/build made, when the package's own backend builds it
    prebuilt_members: tuple[str, ...] = ()

    @property
    def root(self) -> str:
        return self.metadata.filename_stem

    @property
    def filename(self) -> str:
        return self.prebuilt.name if self.prebuilt is not None else f"{self.root}.tar.gz"

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    def generated_files(self) -> dict[str, str]:
        if self.prebuilt is not None:
            return {}  # the backend wrote its own metadata files
        paths = [f.path for f in self.files]
        return {"PKG-INFO": generated.pkg_info(self.metadata), "pyproject.toml": generated.PYPROJECT_TOML,
                "setup.py": generated.setup_py(self.metadata, paths)}


@dataclass(frozen=True)
class Sdist:
    """A built sdist: where it is, its sha256 and size, what it holds and what was kept out."""

    path: Path
    name: str
    version: str
    package: str
    sha256: str
    size: int
    files: tuple[str, ...]  # archive members, relative to the archive's top directory
    excluded_secrets: tuple[ExcludedFile, ...]

    @property
    def filename(self) -> str:
        return self.path.name


def _packages_inside(path: Path) -> list[str]:
    """The names of the Python packages directly inside `path` (tests and hidden directories last/left out)."""
    try:
        found = sorted(entry.name for entry in os.scandir(path) if entry.is_dir() and entry.name.isidentifier()
                       and not entry.name.startswith((".", "_")) and os.path.isfile(os.path.join(entry, "__init__.py")))
    except OSError:
        return []
    return sorted(found, key=lambda name: name in ("tests", "test"))


def _package_dir(package_path: str | os.PathLike) -> Path:
    path = Path(package_path)
    allowed = "a directory holding a Python package (with __init__.py)"
    if not path.exists():
        raise invalid_value("--package-path", str(package_path), allowed,
                            hint="it does not exist; pass the trainer package's directory, e.g. --package-path trainer")
    if not path.is_dir():
        raise invalid_value("--package-path", str(package_path), allowed, hint="it is a file, not a directory")
    try:
        has_init = (path / "__init__.py").is_file()
    except OSError as err:  # a directory that cannot be searched
        raise unreadable(str(package_path), err, hint="make it readable (chmod) or pass another --package-path") \
            from None
    if not has_init:
        inside = _packages_inside(path)
        if inside:  # a project root (`--package-path .`): point at the package it holds
            named = " or ".join(f"--package-path {os.path.normpath(os.path.join(package_path, name))}"
                                for name in inside[:3])
            raise invalid_value("--package-path", str(package_path), allowed,
                                hint=f"it is the project holding the package, not the package: pass {named}")
        raise invalid_value("--package-path", str(package_path), allowed,
                            hint=f"it has no __init__.py; create an empty {path / '__init__.py'}")
    path = path.resolve()
    if not path.name.isidentifier():
        raise invalid_value("--package-path", str(package_path), "a directory whose name is a Python identifier",
                            hint=f"rename it (e.g. {path.name.replace('-', '_')!r}) so `python -m` can import it")
    return path


def _epoch() -> int:
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is None:
        return DEFAULT_EPOCH
    if not (value.isascii() and value.isdigit()):
        raise invalid_value("SOURCE_DATE_EPOCH", value, "a whole number of seconds since 1970",
                            hint="unset it to use 1980-01-01")
    return int(value)


def plan_sdist(package_path: str | os.PathLike, setup_py: str | os.PathLike | None = None,
               requirements: tuple[str, ...] = ()) -> SdistPlan:
    """Select the package's files and read its metadata; writes nothing beside the package (what `--dry-run`
    shows). A project built by its own backend is built here, into mlsubmit's cache (`frontend.py`).

    Raises:
        UsageError: missing package directory, no __init__.py, a setup.py or requirements.txt that cannot be
            read, or a project its backend cannot build.
    """
    package_dir = _package_dir(package_path)
    choice = choose_build(package_dir, setup_py, tuple(requirements))
    metadata = choice.metadata
    selection = select_files(package_dir)
    files = selection.files
    init = f"{package_dir.name}/__init__.py"
    if init not in {f.path for f in files}:
        excluded = {item.path: item.reason for item in selection.excluded}
        if init in excluded:
            raise UsageError(f"{init} cannot go into the package: {excluded[init]}",
                             hint="make it a plain file inside the package directory")
        raise UsageError(f"the ignore rules leave {init} out of the package",
                         hint="remove the pattern that matches it from .gitignore / .mlsubmitignore")
    prebuilt = choice.prebuilt
    return SdistPlan(metadata, package_dir.name, package_dir, files, selection.excluded, selection.skipped,
                     build=choice.how, prebuilt=prebuilt.path if prebuilt else None,
                     prebuilt_members=prebuilt.members if prebuilt else ())


class _DigestWriter:
    """A write-only stream that hashes and counts what passes through to `target` (or nowhere)."""

    def __init__(self, target: BinaryIO | None = None):
        self.target, self.sha256, self.size = target, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        if self.target is not None:
            self.target.write(data)
        return len(data)

    def flush(self) -> None:
        if self.target is not None:
            self.target.flush()


class _ScannedReader:
    """Reads a package file into the archive; when the file changed after its content was scanned, scans the very
    bytes that go in, so a file that turned into a credential meanwhile is caught."""

    def __init__(self, handle: BinaryIO, name: str, changed: bool):
        self.handle, self.scan = handle, ContentScan(name) if changed else None

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        if self.scan is not None:
            self.scan.feed(data)
        return data

    @property
    def reason(self) -> str | None:
        return self.scan.reason if self.scan is not None else None


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file, read in chunks (memory stays flat for any size)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _open_selected(plan: SdistPlan, f: PackageFile) -> tuple[BinaryIO, os.stat_result]:
    """Open a selected file without following links, checking it is still a regular file inside the package."""
    changed = UsageError(f"{f.path} changed while it was being packaged", hint="run the command again")
    if not is_inside(os.path.realpath(f.source), str(plan.package_dir)):
        raise changed
    try:
        fd = os.open(f.source, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        raise (changed if err.errno in (errno.ELOOP, errno.ENOENT) else unreadable(f.path, err)) from None
    handle = os.fdopen(fd, "rb")
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        handle.close()
        raise changed
    return handle, info


def _write_archive(plan: SdistPlan, out: BinaryIO) -> tuple[str, ...]:
    """Write the archive into `out`, streaming every file (memory stays flat whatever the files' sizes)."""
    epoch = _epoch()
    entries: dict[str, PackageFile | bytes] = {name: text.encode() for name, text in plan.generated_files().items()}
    entries.update({f.path: f for f in plan.files})

    def member(name: str, size: int, mode: int) -> tarfile.TarInfo:
        info = tarfile.TarInfo(f"{plan.root}/{name}")
        info.size, info.mtime, info.mode = size, epoch, mode
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        with tarfile.TarFile(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT, copybufsize=CHUNK) as tar:
            for name in sorted(entries):
                content = entries[name]
                if isinstance(content, bytes):
                    tar.addfile(member(name, len(content), 0o644), io.BytesIO(content))
                    continue
                handle, info = _open_selected(plan, content)
                with handle:
                    reader = _ScannedReader(handle, Path(name).name, signature(info) != content.signature)
                    try:
                        tar.addfile(member(name, info.st_size, 0o755 if content.executable else 0o644), reader)
                    except OSError as err:  # shorter than its size said, or unreadable now
                        raise UsageError(f"{content.path} changed or could not be read while it was being "
                                         f"packaged ({err})", hint="run the command again") from None
                if reader.reason is not None:
                    raise UsageError(f"{content.path} changed while it was being packaged and now looks like a "
                                     f"credential ({reader.reason}); nothing was written",
                                     hint="remove the credential from the package directory")
    return tuple(sorted(entries))


def archive_digest(plan: SdistPlan) -> tuple[str, int]:
    """The sha256 and size the sdist will have, computed without writing anything."""
    sink = _DigestWriter()
    if plan.prebuilt is not None:
        sink.write(plan.prebuilt.read_bytes())
        return sink.sha256.hexdigest(), sink.size
    _write_archive(plan, sink)
    return sink.sha256.hexdigest(), sink.size


@contextmanager
def _atomic_file(dist_dir: Path, filename: str) -> Iterator[BinaryIO]:
    """Write `dist_dir/filename` through a hidden partial file that replaces it only when complete. When it is not
    written, the folders made for it are removed again (if still empty); a full disk is one line naming the folder."""
    made = _missing_folders(dist_dir)
    partial = dist_dir / f".{filename}.{os.getpid()}.partial"
    try:
        try:
            dist_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            if err.errno in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise invalid_value("--dist-dir", str(dist_dir), "a directory mlsubmit can create and write",
                                hint=str(err)) from None
        with open(partial, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, dist_dir / filename)
    except BaseException as err:
        partial.unlink(missing_ok=True)
        for folder in made:  # deepest first; one that holds anything now is kept, and so are those above it
            try:
                folder.rmdir()
            except OSError:
                break
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise OperationFailed(f"out of disk space writing {filename} into {dist_dir} ({err.strerror})",
                                  hint=f"free space on the disk that holds {dist_dir}, or pass --dist-dir DIR on "
                                       "another disk") from None
        raise


def _missing_folders(folder: Path) -> list[Path]:
    """`folder` and those of its parents that do not exist yet, deepest first (what a mkdir -p would make)."""
    missing = []
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing


def write_sdist(plan: SdistPlan, dist_dir: str | os.PathLike | None = None) -> Sdist:
    """Write the planned sdist into `dist_dir` (default: `dist/` beside the package) atomically."""
    target_dir = Path(dist_dir) if dist_dir is not None else plan.package_dir.parent / "dist"
    with _atomic_file(target_dir, plan.filename) as handle:
        writer = _DigestWriter(handle)
        if plan.prebuilt is not None:
            writer.write(plan.prebuilt.read_bytes())
            members = plan.prebuilt_members
        else:
            members = _write_archive(plan, writer)
    meta = plan.metadata
    return Sdist((target_dir / plan.filename).resolve(), meta.name, meta.version, plan.package,
                 writer.sha256.hexdigest(), writer.size, members, plan.excluded_secrets)


def copy_sdist(sdist: Sdist, dist_dir: str | os.PathLike) -> Sdist:
    """The same sdist, copied atomically into `dist_dir`."""
    with _atomic_file(Path(dist_dir), sdist.filename) as handle, open(sdist.path, "rb") as source:
        shutil.copyfileobj(source, handle)
    return dataclasses.replace(sdist, path=(Path(dist_dir) / sdist.filename).resolve())


def build_sdist(package_path: str | os.PathLike = "trainer", setup_py: str | os.PathLike | None = None,
                dist_dir: str | os.PathLike | None = None, requirements: tuple[str, ...] = ()) -> Sdist:
    """Build the reproducible sdist of `package_path` (metadata from `setup_py`, default: the one beside it).

    Example:
        >>> sdist = build_sdist("trainer")   # dist/trainer-0.1.0.tar.gz, sdist.sha256
    """
    return write_sdist(plan_sdist(package_path, setup_py, requirements), dist_dir)
