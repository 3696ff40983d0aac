"""What mlsubmit made, told by a mark it wrote when it made it — never by a name: $MLSUBMIT_HOME or $MLSUBMIT_IMAGES
may be a folder other programs (or the user's projects) share, so only what carries the mark is ever removed.

- A **folder** mlsubmit makes (an environment, an sdist's folder, a job's replica directories) holds `.mlsubmit-owned`,
  written as soon as the folder is made (for an environment: in its building directory, before anything is
  installed, so it moves with the rename into place): one JSON line, `{"kind": …, "created": …, "by": "mlsubmit"}`.
- A **file** mlsubmit keeps (a check result, a download) is listed, once it is in place, in its folder's
  `.mlsubmit-owned` ledger with its identity: one JSON line appended per file (`{"file": NAME, "inode": N,
  "mtime_ns": T, …}`; mlsubmit never changes such a file after). A file of the same name put there since by anyone
  else (another inode or modification time, even where the kernel reuses the inode number) is not mlsubmit's.

A file rather than an extended attribute: tmpfs, NFS and some container overlays keep no user xattrs, a marker file
survives `cp -r`/`rsync` of the home, and a person can see it. A mark inside the item, not a manifest beside the
home: an environment carries its mark through its rename into place, and a copy or move of the home keeps it.

What an mlsubmit before the marks made has none: it is not provably mlsubmit's, so it is listed as not mlsubmit's
and kept (removing it by hand is safe where it is an environment: mlsubmit builds it again when needed).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

MARK = ".mlsubmit-owned"


def _line(**fields: object) -> bytes:
    return (json.dumps({**fields, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "by": "mlsubmit"})
            + "\n").encode()


def mark(folder: Path, kind: str, **details: str) -> None:
    """Write the mark into `folder`, which mlsubmit has just made (`details`: what it is, for whoever reads it)."""
    (Path(folder) / MARK).write_bytes(_line(kind=kind, **details))


def make_folder(folder: Path, kind: str) -> Path:
    """`folder` (and its parents), marked when this call made it; one that was already there is left as it is (an
    older mlsubmit's, or another program's: not provably mlsubmit's)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir()
    except FileExistsError:
        return folder
    mark(folder, kind)
    return folder


def record(path: Path, kind: str) -> Path:
    """List the file `path`, just put in place by mlsubmit, in its folder's ledger (with its inode and modification
    time); returns it."""
    path = Path(path)
    info = os.stat(path)
    entry = _line(kind=kind, file=path.name, inode=info.st_ino, mtime_ns=info.st_mtime_ns)
    try:
        descriptor = os.open(path.parent / MARK, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:  # a full disk: the file is kept all the same, unlisted (never pruned) — the safe side
        return path
    try:
        os.write(descriptor, entry)  # one write of one short line: appends of concurrent writers never interleave
    except OSError:
        pass
    finally:
        os.close(descriptor)
    return path


def keep(partial: Path, path: Path, kind: str) -> Path:
    """Rename the complete `partial` onto `path` (atomically) and `record` it: a file mlsubmit keeps."""
    os.replace(partial, path)
    return record(path, kind)


class Marks:
    """Reads marks and ledgers, each ledger once (a scan asks about many files of one folder)."""

    def __init__(self) -> None:
        self._ledgers: dict[Path, dict[str, tuple[int, int]]] = {}

    def _ledger(self, folder: Path) -> dict[str, tuple[int, int]]:
        if folder not in self._ledgers:
            listed: dict[str, tuple[int, int]] = {}
            try:
                with open(folder / MARK, "rb") as handle:
                    for line in handle:
                        try:
                            item = json.loads(line)
                            listed[str(item["file"])] = (int(item["inode"]), int(item["mtime_ns"]))
                        except (ValueError, KeyError, TypeError):
                            continue  # the folder's own mark, or a line cut short
            except OSError:
                pass
            self._ledgers[folder] = listed
        return self._ledgers[folder]

    def owned(self, path: Path) -> bool:
        """Whether mlsubmit made `path`: a real folder holding its mark (a regular file), or a file its folder's
        ledger lists with this very inode and modification time. A symbolic link is never mlsubmit's."""
        try:
            if path.is_symlink():
                return False
            if path.is_dir():
                return (path / MARK).is_file() and not (path / MARK).is_symlink()
            info = path.stat()
            return self._ledger(path.parent).get(path.name) == (info.st_ino, info.st_mtime_ns)
        except OSError:
            return False


def owned(path: Path) -> bool:
    """Whether mlsubmit made `path` (see `Marks.owned`)."""
    return Marks().owned(Path(path))
