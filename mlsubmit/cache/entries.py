"""One kept environment: built aside, held while used, stamped with its last use.

- **Built aside** (`building`): a new environment is made in `<parent>/.installing-<id>` (`.building-<id>` for an
  image's), locked through `<that>.lock` while it is built, and renamed onto its final name only when complete. Any
  failure removes it; one that ran out of disk (ENOSPC, EDQUOT: from Python, pip or venv) becomes one line,
  OperationFailed, saying where and how much is free. The building directory carries mlsubmit's mark from the moment
  it is made (mlsubmit.cache.ownership), so the environment renamed into place does too. A marked building directory
  whose lock nobody holds was left by a build that was killed: `remove_stale` removes it; one without the mark is
  never removed.
- **Held while used** (`hold`): whoever runs on an environment (a local job, a pre-flight, an emulator's job) takes
  a shared lock on `<entry>/.mlsubmit-use` for the rest of its process; pruning takes it exclusively, then renames
  the entry aside before deleting it, so a running job's environment is never removed and no job starts on one
  being removed (`hold` checks the entry is still in place once it has the lock).
- **Stamped**: holding an entry sets that file's modification time, the entry's last use.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from mlsubmit.cache import ownership
from mlsubmit.errors import MlsubmitError, OperationFailed

STAMP = ".mlsubmit-use"
BUILDING = (".installing-", ".building-", ".removing-")
UNLOCKED_STALE_AFTER = 3600.0  # seconds: a building directory without a lock file (an older mlsubmit's)
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_DISK_FULL_WORDS = ("No space left on device", "Disk quota exceeded", "[Errno 28]", "[Errno 122]")
_HELD: dict[str, int] = {}  # entry -> descriptor of its stamp, locked shared until this process ends


def try_lock(path: Path, *, shared: bool = False, create: bool = True) -> int | None:
    """An open descriptor of `path` locked (exclusively, or `shared`) without waiting, or None if another holds a
    conflicting lock (or, with `create` False, the file is missing). Read-only: flock needs no write access."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | (os.O_CREAT if create else 0), 0o644)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def hold(entry: Path) -> bool:
    """Hold `entry` for the rest of this process (shared: other users may hold it too) and stamp its last use.
    False: it is gone or being removed (build it again). An entry whose stamp cannot be written (a read-only or
    full disk) counts as held: nothing that cannot write there can remove it either."""
    stamp = entry / STAMP
    try:
        fd = try_lock(stamp, shared=True)
    except OSError as err:
        if err.errno in (*_DISK_FULL, errno.EACCES, errno.EROFS, errno.EPERM):
            return entry.is_dir()
        raise
    if fd is None:
        return False
    try:
        in_place = os.fstat(fd).st_ino == os.stat(stamp).st_ino
    except OSError:
        in_place = False
    if not in_place:  # renamed aside by a prune between open and lock
        os.close(fd)
        return False
    try:
        os.utime(fd)
    except OSError:
        pass  # another user's: held all the same, its last use not stamped
    previous = _HELD.pop(str(entry), None)
    _HELD[str(entry)] = fd
    if previous is not None:
        os.close(previous)
    return True


def held() -> set[str]:
    """The entries this process holds."""
    return set(_HELD)


def last_use(entry: Path) -> float:
    """When `entry` was last held (its stamp's mtime), else when it was made or last changed."""
    for path in (entry / STAMP, entry):
        try:
            return path.stat().st_mtime
        except OSError:
            continue
    return 0.0


def in_use_by_lock(entry: Path) -> bool:
    """Whether some process holds `entry` (a shared lock on its stamp). Creates nothing."""
    if str(entry) in _HELD:
        return True
    try:
        fd = try_lock(entry / STAMP, create=False)
    except OSError:  # unreadable: nothing here can hold it, nor remove it
        return False
    if fd is None:
        return (entry / STAMP).exists()
    os.close(fd)
    return False


@contextlib.contextmanager
def removing(entry: Path) -> Iterator[Path | None]:
    """The entry taken for removal: exclusively locked, then renamed aside to `.removing-<name>-<id>` (nobody can
    find it there, nor hold it), yielded for the caller to delete; None when someone holds it."""
    if str(entry) in _HELD:
        yield None
        return
    try:
        fd = try_lock(entry / STAMP) if entry.is_dir() and not entry.is_symlink() else None
    except OSError:
        fd = None
    if fd is None and entry.is_dir() and not entry.is_symlink():
        yield None
        return
    aside = entry.with_name(f".removing-{entry.name}-{secrets.token_hex(4)}")
    try:
        os.rename(entry, aside)
    except OSError:
        aside = None
    finally:
        if fd is not None:
            os.close(fd)
    try:
        yield aside
    finally:
        if aside is not None:
            delete(aside)


def delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


# -- building aside ---------------------------------------------------------------------------------------------
def disk_full(err: BaseException) -> bool:
    """Whether `err` says the disk (or the user's quota) is full: an OSError of Python's own, or a tool's output or
    an MlsubmitError quoting one (pip: "[Errno 28] No space left on device")."""
    if isinstance(err, OSError) and err.errno in _DISK_FULL:
        return True
    said = [str(err)]
    if isinstance(err, MlsubmitError):
        said.append(err.message)
    if isinstance(err, subprocess.CalledProcessError):
        said += [str(err.stdout or ""), str(err.stderr or "")]
    return any(word in text for text in said for word in _DISK_FULL_WORDS)


def _free(path: Path) -> str:
    for place in (path, *path.parents):
        try:
            free = shutil.disk_usage(place).free
        except OSError:
            continue
        return f"{free / 1e6:,.1f} MB free" if free < 10**9 else f"{free / 1e9:,.1f} GB free"
    return "free space unknown"


def out_of_disk(what: str, where: Path) -> OperationFailed:
    """The one line for a build that ran out of disk (nothing of it was kept)."""
    return OperationFailed(f"out of disk space while building {what} in {where} ({_free(where)}); nothing of it "
                           "was kept",
                           hint="see what mlsubmit keeps with `mlsubmit cache list`, free space with `mlsubmit cache "
                                "prune --max-size SIZE`, or set MLSUBMIT_HOME (and MLSUBMIT_IMAGES) to a larger disk")


@contextlib.contextmanager
def building(parent: Path, what: str, prefix: str = ".installing-") -> Iterator[Path]:
    """A new, empty `<parent>/<prefix><id>`, locked while the caller builds in it and renames it into place
    (`place`); removed after, whatever happened. A failure that ran out of disk is raised as `out_of_disk`."""
    try:
        parent.mkdir(parents=True, exist_ok=True)
        while True:
            name = f"{prefix}{secrets.token_hex(6)}"
            lock = parent / f"{name}.lock"
            fd = try_lock(lock)  # the lock first: a building directory without a held lock is always stale
            if fd is not None:
                break
    except OSError as err:
        if disk_full(err):
            raise out_of_disk(what, parent) from None
        raise
    path = parent / name
    try:
        path.mkdir()
        ownership.mark(path, "environment", what=what)  # moves with it into place: what mlsubmit made
        yield path
    except BaseException as err:
        shutil.rmtree(path, ignore_errors=True)
        if disk_full(err):
            raise out_of_disk(what, parent) from None
        if isinstance(err, subprocess.CalledProcessError):  # venv, or a probe of the new environment
            said = [line for line in str(err.stderr or err.stdout or "").splitlines() if line.strip()][-1:]
            raise OperationFailed(f"{what} could not be built: {' '.join(map(str, err.cmd[:3]))} failed: "
                                  f"{said[0] if said else f'exit code {err.returncode}'}") from None
        raise
    finally:
        shutil.rmtree(path, ignore_errors=True)
        lock.unlink(missing_ok=True)
        os.close(fd)


def place(built: Path, target: Path) -> bool:
    """Rename the complete `built` onto `target`; False if an identical build got there first (use that one)."""
    try:
        os.rename(built, target)
    except OSError as err:
        if err.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise
    return True


def is_stale(building_dir: Path, now: float | None = None) -> bool:
    """Whether no build holds `building_dir` (a `.installing-`/`.building-`/`.removing-` directory): its lock is
    free; without a lock file (an older mlsubmit's build), it is over an hour old; a removal's is always stale."""
    lock = Path(f"{building_dir}.lock")
    if not lock.exists():
        now = time.time() if now is None else now
        return building_dir.name.startswith(".removing-") or now - last_use(building_dir) > UNLOCKED_STALE_AFTER
    fd = try_lock(lock, create=False)
    if fd is None:
        return not lock.exists()
    os.close(fd)
    return True


def stale_builds(parent: Path, now: float | None = None) -> list[Path]:
    """The building directories under `parent` that mlsubmit made (its mark) and no build holds: left by one that
    was killed, or by a removal that was. One without the mark (an older mlsubmit's, or not mlsubmit's) is kept."""
    try:
        names = [path for path in parent.iterdir() if path.name.startswith(BUILDING)]
    except OSError:
        return []
    builds = sorted({p.with_suffix("") if p.suffix == ".lock" else p for p in names})
    marks = ownership.Marks()
    return [building_dir for building_dir in builds if marks.owned(building_dir) and is_stale(building_dir, now)]


def remove_build(building_dir: Path) -> bool:
    """Remove a stale building directory and its lock file; False if a build holds it (again)."""
    lock = Path(f"{building_dir}.lock")
    fd = try_lock(lock, create=False) if lock.exists() else None
    if lock.exists() and fd is None:
        return False
    try:
        delete(building_dir)
        lock.unlink(missing_ok=True)
    finally:
        if fd is not None:
            os.close(fd)
    return True


def remove_stale(parent: Path) -> list[Path]:
    """Remove what `stale_builds` finds under `parent`; returns it."""
    if os.name == "nt":
        return []
    return [building_dir for building_dir in stale_builds(parent) if remove_build(building_dir)]
