"""Everything mlsubmit keeps under $MLSUBMIT_HOME and $MLSUBMIT_IMAGES: what it is, its size, its last use, whether
a running process uses it; and pruning it (`mlsubmit cache list|prune`, and after every build that adds something).

An environment is in use when a process holds it (mlsubmit.cache.entries.hold: local jobs, pre-flights, emulator
jobs), when a running process was started from it or has one of its files mapped (an older mlsubmit's job, a
Python started by hand), or when an environment built on it is in use (a job environment's requirements and image
environments). Those are never removed; everything a removed environment's dependents need goes with them (a job
environment is useless without its image's).

Only what mlsubmit made (its mark: mlsubmit.cache.ownership) and can rebuild is pruned (`Kind.prunable`); job
records, replica directories (already kept to the 10 newest jobs), image metadata are listed, never removed. What is
under these folders without mlsubmit's mark (another program's files in a shared home, a project beside the images,
what an mlsubmit before the marks built) is listed as not mlsubmit's and never removed, whatever its name.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from mlsubmit.cache import entries, ownership
from mlsubmit.cache.limits import AGE_VARIABLE, SIZE_VARIABLE, Limits, from_environment, show_size


@dataclass(frozen=True)
class Kind:
    label: str
    prunable: bool
    grouped: bool = False  # many small items: one line per kind in the table (each item in JSON)


# The one table of what mlsubmit keeps (README "Disk" says the same, with where each lives).
KINDS = {
    "image-env": Kind("image environment", True),
    "requirements-env": Kind("requirements environment", True),
    "job-env": Kind("job environment", True),
    "venv": Kind("isolated venv", True),
    "launcher-venv": Kind("launcher venv", True),
    "unfinished": Kind("unfinished build", True),
    "sdist": Kind("built sdists", True, grouped=True),
    "preflight": Kind("pre-flight results", True, grouped=True),
    "image-check": Kind("image checks", True, grouped=True),
    "download": Kind("predict downloads", True, grouped=True),
    "image-metadata": Kind("image metadata", False, grouped=True),
    "replicas": Kind("replica directories", False, grouped=True),
    "cluster-record": Kind("cluster job records", False, grouped=True),
    "other": Kind("not mlsubmit's", False),  # no mark: never removed, whatever its name
}
_ENVIRONMENTS = ("image-env", "requirements-env", "job-env", "venv", "launcher-venv")
_ADDSITEDIR = re.compile(r"addsitedir\((['\"])(.+?)\1\)")


@dataclass(frozen=True)
class Entry:
    """One thing kept: its kind (a key of KINDS), where, its size on disk (None: not measured), its last use (epoch
    seconds), what it is built on, a note (the image it belongs to), and for what is not mlsubmit's, what its place
    would make it (`looks_like`: a kind's label)."""

    kind: str
    path: Path
    size: int | None
    last_use: float
    parents: tuple[Path, ...] = ()
    note: str = ""
    looks_like: str = ""


def roots() -> tuple[Path, tuple[Path, ...]]:
    """($MLSUBMIT_HOME, the image directories: $MLSUBMIT_IMAGES and, when that is elsewhere, $MLSUBMIT_HOME/images)."""
    from mlsubmit.home import mlsubmit_home
    from mlsubmit.images.envs import images_home

    home, images = mlsubmit_home(), images_home()
    found = [images] + ([home / "images"] if (home / "images").resolve() != images.resolve() else [])
    return home, tuple(path for path in found if path.is_dir())


def disk_usage(path: Path) -> int:
    """Bytes `path` takes on disk (allocated blocks, as du), a file linked twice counted once."""
    seen, total = set(), 0
    stack = [path]
    while stack:
        current = stack.pop()
        try:
            info = current.lstat()
        except OSError:
            continue
        if (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            total += getattr(info, "st_blocks", 0) * 512 or info.st_size
        if current.is_dir() and not current.is_symlink():
            try:
                stack.extend(current.iterdir())
            except OSError:
                continue
    return total


def _env_last_use(path: Path) -> float:
    """An environment's last use: its stamp, or when a Python last started from it (its pyvenv.cfg's access time,
    kept by the default `relatime` to within a day: what an older mlsubmit, or a Python started by hand, used
    without stamping). Listing never reads that file, so it does not count as a use."""
    times = [entries.last_use(path)]
    try:
        times.append((path / "pyvenv.cfg").stat().st_atime)
    except OSError:
        pass
    return max(times)


def _parents(path: Path) -> tuple[Path, ...]:
    """The environments `path` sees through .pth files (`site.addsitedir('…/site-packages')`), as their roots."""
    found = []
    for pth in path.glob("lib/python*/site-packages/*.pth"):
        try:
            text = pth.read_text(errors="replace")
        except OSError:
            continue
        for match in _ADDSITEDIR.finditer(text):
            site = Path(match.group(2))
            root = site.parents[2] if len(site.parts) > 3 and site.parent.name.startswith("python") else site
            found.append(root)
    return tuple(dict.fromkeys(found))


def _children(path: Path) -> list[Path]:
    try:
        return sorted(child for child in path.iterdir() if child.name != ownership.MARK)
    except OSError:
        return []


def _item(kind: str, path: Path, sizes: bool, note: str = "") -> Entry:
    environment = kind in _ENVIRONMENTS
    last = _env_last_use(path) if environment else entries.last_use(path)
    return Entry(kind, path, disk_usage(path) if sizes else None, last,
                 _parents(path) if environment else (), note)


def _files(kind: str, folder: Path, sizes: bool, note: str = "") -> list[Entry]:
    found = []
    for path in _children(folder):
        if path.is_dir() and not path.is_symlink() and kind == "download":
            found += _files(kind, path, sizes, note)
        else:
            found.append(_item(kind, path, sizes, note))
    return found


def _image_dir(path: Path) -> bool:
    return any((path / name).exists() for name in ("packages.json", "jobs", "deps", "checks")) or \
        any(path.glob("env-*"))


def _scan_images(images: Path, sizes: bool) -> list[Entry]:
    found = []
    for image in _children(images):
        if not (image.is_dir() and _image_dir(image)):
            found.append(_item("other", image, sizes))
            continue
        note = image.name
        for path in _children(image):
            name = path.name
            if name.startswith(entries.BUILDING) and not name.endswith(".lock"):
                found.append(_item("unfinished", path, sizes, note))
            elif name.startswith("env-") and path.is_dir():
                found.append(_item("image-env", path, sizes, note))
            elif name in ("jobs", "deps"):
                kind = "job-env" if name == "jobs" else "requirements-env"
                for entry in _children(path):
                    if entry.name.startswith(entries.BUILDING):
                        if not entry.name.endswith(".lock"):
                            found.append(_item("unfinished", entry, sizes, note))
                    elif entry.is_dir():
                        found.append(_item(kind, entry, sizes, note))
            elif name == "checks":
                found += _files("image-check", path, sizes, note)
            elif name in ("packages.json", "backend-pins") or name.endswith(".lock"):
                found.append(_item("image-metadata", path, sizes, note))
            else:
                found.append(_item("other", path, sizes, note))
    return found


_HOME = {"venvs": "venv", "launcher": "launcher-venv", "sdists": "sdist", "preflight": "preflight",
         "cache": "download", "replicas": "replicas", "cluster-jobs": "cluster-record"}


# what mlsubmit removes (or, for replica directories, keeps to the newest) is what carries its mark
_CLAIMED = {name for name, kind in KINDS.items() if kind.prunable} | {"replicas"}


def _claimed(found: list[Entry]) -> list[Entry]:
    """`found`, each entry of a kind mlsubmit removes that lacks mlsubmit's mark made "other" (not mlsubmit's)."""
    marks = ownership.Marks()
    return [entry if entry.kind not in _CLAIMED or marks.owned(entry.path) else
            replace(entry, kind="other", parents=(), note="", looks_like=KINDS[entry.kind].label) for entry in found]


def scan(*, sizes: bool = True) -> list[Entry]:
    """Everything kept, environments with what they are built on, what lacks mlsubmit's mark as not mlsubmit's;
    `sizes` False leaves sizes unmeasured (None)."""
    return _claimed(_scan(sizes))


def _scan(sizes: bool) -> list[Entry]:
    home, images = roots()
    found = [entry for folder in images for entry in _scan_images(folder, sizes)]
    skip = {path.resolve() for path in images}
    for folder in _children(home):
        if folder.resolve() in skip:
            continue
        kind = _HOME.get(folder.name)
        if kind is None or not folder.is_dir():
            found.append(_item("other", folder, sizes))
        elif kind in ("venv", "launcher-venv"):
            for path in _children(folder):
                if path.name.startswith(entries.BUILDING) or (kind == "launcher-venv" and path.name.startswith(".")):
                    if not path.name.endswith(".lock"):
                        found.append(_item("unfinished", path, sizes))
                elif path.is_dir():
                    found.append(_item(kind, path, sizes))
        elif kind == "sdist":
            found += [entry for path in _children(folder)
                      for entry in (_files(kind, path, sizes) if path.name == "extra" else [_item(kind, path, sizes)])]
        else:
            found += _files(kind, folder, sizes)
    return found


def with_sizes(found: Iterable[Entry]) -> list[Entry]:
    return [entry if entry.size is not None else replace(entry, size=disk_usage(entry.path)) for entry in found]


# -- in use -------------------------------------------------------------------------------------------------------
def process_paths() -> list[str]:
    """What running processes were started from (argv[0]) and have mapped (their shared libraries): Linux /proc."""
    paths = set()
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        try:
            with open(proc / pid / "cmdline", "rb") as handle:
                paths.add(handle.read().split(b"\0", 1)[0].decode(errors="replace"))
            with open(proc / pid / "maps", errors="replace") as handle:
                paths.update(line[line.index("/"):].rstrip("\n") for line in handle if "/" in line)
        except (OSError, ValueError):
            continue
    return sorted(paths)


def busy(found: list[Entry], running: Iterable[str] | None = None) -> frozenset[Path]:
    """The entries in use: held, or used by a running process, or below an environment that is."""
    running = process_paths() if running is None else list(running)
    used = set()
    for entry in found:
        if entry.kind not in _ENVIRONMENTS and entry.kind != "unfinished":
            continue
        prefixes = (f"{entry.path}/", f"{entry.path.resolve()}/")
        if entry.kind == "unfinished":
            if not entries.is_stale(entry.path):  # being built right now
                used.add(entry.path)
        elif entries.in_use_by_lock(entry.path) or any(path.startswith(prefixes) for path in running):
            used.add(entry.path)
    by_path = {entry.path: entry for entry in found}
    pending = list(used)
    while pending:  # what an environment in use is built on is in use
        current = by_path.get(pending.pop())
        for parent in current.parents if current else ():
            if parent in by_path and parent not in used:
                used.add(parent)
                pending.append(parent)
    return frozenset(used)


# -- the plan (pure) and the removal ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Removal:
    entry: Entry
    reason: str


@dataclass(frozen=True)
class Plan:
    """What a prune removes and why, what it would have removed but is in use, and the size that counts (what can
    be rebuilt: `Kind.prunable`) before and after."""

    removals: tuple[Removal, ...]
    in_use: tuple[Entry, ...]
    size_before: int
    size_after: int


def _days(seconds: float) -> str:
    return f"{seconds / 86400:.0f} days" if seconds >= 2 * 86400 else f"{seconds / 3600:.0f} hours"


def plan(found: list[Entry], limits: Limits, *, now: float, in_use: frozenset[Path]) -> Plan:
    """Which entries to remove: unfinished builds; those unused for longer than `limits.max_age`; then, least
    recently used first, until what can be rebuilt fits `limits.max_size`; with each, what is built on it. Never
    an entry `in_use`. Sizes must be measured when there is a size limit."""
    dependents: dict[Path, list[Entry]] = {}
    for entry in found:
        for parent in entry.parents:
            dependents.setdefault(parent, []).append(entry)
    removed: dict[Path, Removal] = {}
    kept: dict[Path, Entry] = {}

    def take(entry: Entry, reason: str) -> None:
        if entry.path in removed or not KINDS[entry.kind].prunable:
            return
        if entry.path in in_use:
            kept[entry.path] = entry
            return
        removed[entry.path] = Removal(entry, reason)
        for child in dependents.get(entry.path, []):
            take(child, f"built on a removed {KINDS[entry.kind].label}")

    for entry in found:
        if entry.kind == "unfinished":
            take(entry, "unfinished (its build was stopped)")
    if limits.max_age is not None:
        for entry in found:
            if now - entry.last_use > limits.max_age:
                take(entry, f"unused for {_days(now - entry.last_use)} (more than {_days(limits.max_age)})")
    counted = [entry for entry in found if KINDS[entry.kind].prunable]
    before = sum(entry.size or 0 for entry in counted)
    if limits.max_size is not None:
        for entry in sorted(counted, key=lambda e: e.last_use):
            if before - sum(r.entry.size or 0 for r in removed.values()) <= limits.max_size:
                break
            take(entry, f"least recently used, over the limit of {show_size(limits.max_size)}")
    removals = sorted(removed.values(), key=lambda r: -len(r.entry.parents))  # what is built on another first
    after = before - sum(r.entry.size or 0 for r in removals)
    return Plan(tuple(removals), tuple(kept.values()), before, after)


def remove(removal: Removal) -> bool:
    """Remove one entry unless someone took it up since the plan (or it is no longer mlsubmit's); False if it was
    kept."""
    path = removal.entry.path
    if not ownership.owned(path):  # replaced since the scan by what is not mlsubmit's
        return False
    launcher_lock = None
    if removal.entry.kind == "launcher-venv":  # the launcher checks its venvs under this lock
        launcher_lock = entries.try_lock(path.with_name(f"{path.name}.lock"))
        if launcher_lock is None:
            return False
    try:
        if removal.entry.kind == "unfinished":
            return entries.remove_build(path)
        with entries.removing(path) as aside:
            return aside is not None
    finally:
        if launcher_lock is not None:
            os.close(launcher_lock)


@dataclass(frozen=True)
class Outcome:
    plan: Plan
    removed: tuple[Removal, ...]  # what was removed (a dry run: what would be)
    dry_run: bool


def unwritable(folders: Iterable[Path]) -> Path | None:
    """The first of `folders` this process cannot change (read-only: its mode, or a read-only mount), if any."""
    for folder in folders:
        if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
            return folder
    return None


def prune(limits: Limits, *, dry_run: bool = False, sizes: bool = True) -> Outcome:
    """Plan and carry out a prune of what mlsubmit keeps (see `plan`).

    Raises:
        UsageError: (unless `dry_run`) a folder holding what would be removed is read-only here (a read-only
            $MLSUBMIT_HOME or $MLSUBMIT_IMAGES): nothing is removed.
    """
    found = scan(sizes=sizes)
    chosen = plan(found, limits, now=time.time(), in_use=busy(found))
    locked = None if dry_run else unwritable(dict.fromkeys(r.entry.path.parent for r in chosen.removals))
    if locked is not None:
        from mlsubmit.errors import UsageError

        freeing = show_size(sum(r.entry.size or 0 for r in chosen.removals)) if sizes else "what it would free"
        raise UsageError(f"cannot prune what mlsubmit keeps: {locked} is read-only here ({len(chosen.removals)} "
                         f"item(s), {freeing}, would be removed); nothing was removed",
                         hint="run it as the user who can write there, or make it writable; `mlsubmit cache prune "
                              "--dry-run` lists what would go")
    if not sizes:  # measured only for what goes, to say what was freed
        removals = tuple(Removal(with_sizes([r.entry])[0], r.reason) for r in chosen.removals)
        chosen = replace(chosen, removals=removals)
    done = chosen.removals if dry_run else tuple(r for r in chosen.removals if remove(r))
    return Outcome(chosen, done, dry_run)


def after_build(say: Callable[[str], None]) -> None:
    """The prune after a build added something, under MLSUBMIT_CACHE_MAX_SIZE / MLSUBMIT_CACHE_MAX_AGE; says what
    it removed in one line. A failure to remove, or a setting that is not a size or an age, is said, never raised:
    the job goes on (`mlsubmit train --local` refuses such a setting before it builds anything)."""
    from mlsubmit.errors import UsageError

    try:
        limits = from_environment()
    except UsageError as err:
        say(f"warning: the cache was not pruned: {err.one_line()}")
        return
    if limits.max_size is None and limits.max_age is None:
        return
    try:
        outcome = prune(limits, sizes=limits.max_size is not None)
    except OSError as err:
        say(f"warning: the cache was not pruned: {err}")
        return
    except UsageError as err:  # read-only: the job goes on
        say(f"warning: the cache was not pruned: {err.one_line()}")
        return
    if outcome.removed:
        freed = sum(r.entry.size or 0 for r in outcome.removed)
        kinds = sorted({KINDS[r.entry.kind].label for r in outcome.removed})
        say(f"cache: removed {len(outcome.removed)} unused item(s) ({', '.join(kinds)}; {show_size(freed)} freed) "
            f"under {SIZE_VARIABLE}/{AGE_VARIABLE}; `mlsubmit cache list` shows what is kept")
    if limits.max_size is not None and outcome.plan.size_after > limits.max_size:
        say(f"warning: what mlsubmit keeps ({show_size(outcome.plan.size_after)}) is over {SIZE_VARIABLE} "
            f"({show_size(limits.max_size)}): the rest is in use")
