"""Isolated venvs holding a job's packages, kept under $MLSUBMIT_HOME/venvs/ and named by the packages' sha256.

The same bytes are installed once: a later job with identical packages (`mlsubmit train --local`, the emulator)
reuses the venv. A venv is built in a temporary directory and renamed into place only once it is complete (and,
when asked, checked), so a failed or concurrent install never leaves a venv that looks ready. While it is
built, its installer holds a lock on `.installing-<id>.lock`; a building directory whose lock nobody holds was
left by an installer that was killed, and is removed by the next install (`remove_stale`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from mlsubmit.home import mlsubmit_home  # noqa: F401 - where the venvs live, beside the images' environments


def venv_dir_for(packages: Sequence[Path]) -> Path:
    from mlsubmit.packaging.sdist import file_sha256

    digests = [file_sha256(path) for path in packages]
    key = digests[0] if len(digests) == 1 else hashlib.sha256("".join(digests).encode()).hexdigest()
    return mlsubmit_home() / "venvs" / f"{key[:16]}-py{sys.version_info[0]}{sys.version_info[1]}"


def cached_venv(packages: Sequence[Path], *, installing: Callable[[Path], None] = lambda path: None,
                check: Callable[[Path, Path], object] | None = None) -> tuple[Path, bool]:
    """(the python of a venv holding `packages`, whether it was reused).

    `installing(path)` is called before each package is installed; `check(python, venv_dir)` runs on a new venv
    before it is put in place. Errors of either (UsageError from the installer) propagate; nothing is kept then.
    """
    from mlsubmit.packaging import install_into_venv

    if not packages:
        raise ValueError("a venv needs at least one package")
    venv_dir = venv_dir_for(packages)
    python = venv_dir / "bin" / "python"
    if python.exists():
        return python, True
    venv_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(venv_dir.parent)
    with _building(venv_dir.parent) as building:
        for path in packages:
            installing(Path(path))
            built = install_into_venv(path, building)
        if check is not None:
            check(built, building)
        try:
            os.rename(building, venv_dir)
        except OSError:
            pass  # an identical job finished first: use its venv
    return python, False


def _try_lock(path: Path) -> int | None:
    """An open, exclusively locked descriptor of `path` (created if missing), or None if another holds it."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def _building(venvs: Path):
    """A new `.installing-<id>` directory under `venvs`, locked while the caller builds in it; removed after
    (unless the caller renamed it into place)."""
    while True:
        name = f".installing-{secrets.token_hex(6)}"
        lock = venvs / f"{name}.lock"
        fd = _try_lock(lock)  # the lock first: a directory without a held lock is always stale
        if fd is not None:
            break
    building = venvs / name
    try:
        building.mkdir()
        yield building
    finally:
        shutil.rmtree(building, ignore_errors=True)
        lock.unlink(missing_ok=True)
        os.close(fd)


def remove_stale(venvs: Path) -> list[Path]:
    """Remove the `.installing-*` directories under `venvs` that no running installer holds (one that was killed
    mid-install left them). Returns what was removed."""
    if os.name == "nt":
        return []
    removed = []
    builds = {path.with_suffix("") if path.suffix == ".lock" else path for path in venvs.glob(".installing-*")}
    for building in sorted(builds):  # a directory, its lock, or both (a lock alone: killed before the mkdir)
        lock = Path(f"{building}.lock")
        fd = _try_lock(lock)
        if fd is None:
            continue  # being built right now
        try:
            shutil.rmtree(building, ignore_errors=True)
            lock.unlink(missing_ok=True)
            removed.append(building)
        finally:
            os.close(fd)
    return removed
