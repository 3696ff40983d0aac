"""One disk per replica: a private working directory for every replica of a job run on this machine.

On Vertex AI each replica runs on its own machine: what it writes by a relative path (`model.save('./model/1')`,
`open('out.csv', 'w')`) lands on its own disk. Run side by side in one directory, two replicas writing the same
relative path corrupt each other (a MultiWorkerMirroredStrategy chief and worker both saving `./model/1` end in
`MergeV2Checkpoints … not found`), and the user's directory fills with what replicas wrote. So each replica gets
its own directory, and:

- `replica_dir(root, name, mirror=cwd)` (`train --local`, local tuning trials, other engines' launchers): the
  directory *mirrors* the user's working directory — every directory of it is a real directory here and every
  file a symbolic link to the user's file — so relative paths to the user's EXISTING files resolve
  (`--data jobs/digits.npz`, the Quickstart) while anything NEW written by a relative path, at any depth, stays in
  the replica's directory. Why a mirror of links and not a copy or the user's directory itself: a copy costs the
  data's size per replica; the user's directory is shared; an overlay filesystem needs privileges. Limits, said
  in `Workdir.note()`: a replica that opens an existing file for writing writes through the link into the user's
  file (on Vertex AI that file would not exist at all); a tree larger than `budget` entries, and version-control,
  virtual-environment and cache directories (`_WHOLE`), are linked whole, so new files written below them do reach
  the user's directory.
- `replica_dir(root, name)` (the emulator, which stands in for the cloud): an empty private directory, as a
  Vertex AI replica starts with none of the user's files.

Absolute paths are untouched: a job dir (`--job-dir`, AIP_MODEL_DIR) is absolute and shared by all replicas, as a
Cloud Storage path is. Pure functions of the filesystem; nothing here starts processes.
"""

from __future__ import annotations

import os
import shutil
from collections import deque
from dataclasses import dataclass
from pathlib import Path

BUDGET = 2000  # entries mirrored per replica before the rest is linked whole
_WHOLE = frozenset({".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "node_modules", "__pycache__",
                    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints"})


@dataclass(frozen=True)
class Workdir:
    """A replica's private working directory and what of the mirrored directory was linked whole."""

    path: Path
    mirrored: Path | None  # the user's directory it mirrors (None: an empty directory)
    linked_whole: tuple[str, ...] = ()  # relative paths of directories linked as a whole

    def note(self) -> str:
        """One line for the user: where replicas write and what is shared."""
        if self.mirrored is None:
            return f"each replica works in its own empty directory under {self.path.parent}"
        whole = (f"; linked whole, so new files below them reach your directory: {', '.join(self.linked_whole[:5])}"
                 f"{' …' if len(self.linked_whole) > 5 else ''}") if self.linked_whole else ""
        return (f"each replica works in its own directory under {self.path.parent}, a mirror of {self.mirrored} "
                f"(your files are linked there, so relative reads resolve; what a replica writes by a relative path "
                f"stays in its own directory, as on Vertex AI each replica has its own disk){whole}")


def _inside(path: Path, other: Path) -> bool:
    return path == other or other in path.parents


def mirror(source: Path, target: Path, budget: int = BUDGET) -> tuple[str, ...]:
    """Recreate `source`'s tree under the empty directory `target`: real directories, symbolic links to the files
    (and to whatever cannot be descended into). Returns the relative paths of directories linked whole."""
    source, target = source.resolve(), target.resolve()
    whole: list[str] = []
    queue = deque([Path(".")])
    left = budget
    while queue:
        relative = queue.popleft()
        try:
            entries = sorted(os.scandir(source / relative), key=lambda entry: entry.name)
        except OSError:
            continue  # unreadable (the root only: subdirectories are checked before they are queued)
        if relative != Path(".") and len(entries) > left:  # too big to mirror: linked whole instead
            (target / relative).rmdir()
            (target / relative).symlink_to(source / relative, target_is_directory=True)
            whole.append(str(relative))
            continue
        for entry in entries:
            name = relative / entry.name
            here, there = target / name, source / name
            if _inside(target, there):
                continue  # holds the replicas' own directories (mlsubmit's home inside the mirrored one)
            left -= 1
            descend = entry.is_dir(follow_symlinks=False) and entry.name not in _WHOLE and left > 0 \
                and os.access(there, os.R_OK | os.X_OK)
            if descend:
                here.mkdir()
                queue.append(name)
            else:
                here.symlink_to(there, target_is_directory=entry.is_dir())
                if entry.is_dir(follow_symlinks=False):
                    whole.append(str(name))
    return tuple(whole)


def replica_dir(root: Path, name: str, mirror_of: Path | None = None, budget: int = BUDGET) -> Workdir:
    """A fresh private directory `root/name` for replica `name`, mirroring `mirror_of` when given (see above).
    An existing `root/name` (a re-run with the same job id) is replaced."""
    path = Path(root) / name
    if path.exists() or path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    if mirror_of is None:
        return Workdir(path, None)
    return Workdir(path, Path(mirror_of).resolve(), mirror(Path(mirror_of), path, budget))


def replica_dirs(root: Path, names: list[str], mirror_of: Path | None = None) -> dict[str, Workdir]:
    """`replica_dir` for each of `names`."""
    return {name: replica_dir(root, name, mirror_of) for name in names}


def runs_root(job_id: str, keep: int = 10) -> Path:
    """$MLSUBMIT_HOME/replicas/<job_id>: where a local job's replica directories live (kept after the job, so what
    a replica wrote can be looked at; only the `keep` newest jobs' are kept)."""
    from mlsubmit.local.venvs import mlsubmit_home

    from mlsubmit.cache import ownership

    parent = mlsubmit_home() / "replicas"
    parent.mkdir(parents=True, exist_ok=True)
    marks = ownership.Marks()  # only what mlsubmit made (its mark) is removed: the home may be shared
    older = sorted((p for p in parent.iterdir() if p.name != job_id and marks.owned(p) and p.is_dir()),
                   key=lambda p: p.stat().st_mtime)
    for stale in older[:max(0, len(older) - (keep - 1))]:
        shutil.rmtree(stale, ignore_errors=True)
    return ownership.make_folder(parent / job_id, "replicas")
