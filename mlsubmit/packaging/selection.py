"""The walk that decides which files of a package directory enter its sdist.

Nothing outside the package directory ever goes in: a symbolic link is followed only when it resolves inside
the package (its files go in under the link's name); a link that points outside is left out and named in a
warning. A link that never resolves (a loop) or that points back to one of its own parent directories, and a
file or directory that cannot be read, stop the build with one line: a package is never built with silently
missing files. Then the ignore rules (`ignore.py`) and the credential filter (`credentials.py`, by name and by
the whole content of every file) decide; no ignore file can let a credential in.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.errors import UsageError
from mlsubmit.packaging.credentials import content_reason, name_reason
from mlsubmit.packaging.ignore import IgnoreFile, Skipped, always_excluded, ignore_root, ignored_by, load_dir

_LEAVE_OUT = "or leave it out with a line in .mlsubmitignore"


@dataclass(frozen=True)
class PackageFile:
    """One file of the package: its path relative to the package's parent (`trainer/task.py`) and the real file
    (links resolved, always inside the package directory) its bytes come from."""

    path: str
    source: Path
    size: int
    executable: bool
    signature: tuple[int, ...] = ()  # device, inode, size and mtime when its content was scanned


def signature(info: os.stat_result) -> tuple[int, ...]:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


@dataclass(frozen=True)
class ExcludedFile:
    """A file or link kept out of the package with a warning: a credential, or a link that leaves the package."""

    path: str
    reason: str
    kind: str = "credential"  # or "link"

    def warning(self) -> str:
        why = ("credentials never go into a package" if self.kind == "credential"
               else "nothing outside the package directory goes into a package")
        return f"left out {self.path}: {self.reason} ({why})"


@dataclass(frozen=True)
class Selection:
    """What goes in, what the rules left out (listed by --dry-run) and what was left out with a warning."""

    files: tuple[PackageFile, ...]
    skipped: tuple[Skipped, ...]
    excluded: tuple[ExcludedFile, ...]


def is_inside(real: str, directory: str) -> bool:
    """Whether the resolved path `real` is `directory` or below it (both resolved)."""
    return real == directory or real.startswith(directory.rstrip(os.sep) + os.sep)


def unreadable(rel: str, err: OSError, hint: str = f"make it readable (chmod), {_LEAVE_OUT}") -> UsageError:
    return UsageError(f"cannot read {rel}: {(err.strerror or str(err)).lower()}", hint=hint)


def _link_loop(rel: str, target: str, detail: str) -> UsageError:
    return UsageError(f"symbolic link {rel} -> {target} {detail}", hint=f"fix or remove the link, {_LEAVE_OUT}")


class _Walk:
    def __init__(self, package_dir: Path):
        self.package = str(package_dir)
        self.prefix = package_dir.parent
        self.root = ignore_root(package_dir)
        self.files: list[PackageFile] = []
        self.skipped: list[Skipped] = []
        self.excluded: list[ExcludedFile] = []
        self.inherited: list[IgnoreFile] = []  # the ignore files above the package directory

    def rules_reason(self, rel: str, is_dir: bool, rules: list[IgnoreFile]) -> str | None:
        source = ignored_by((self.prefix / rel).relative_to(self.root).as_posix(), is_dir, rules)
        return f"ignored by {source}" if source else None

    def target_reason(self, real: str, is_dir: bool) -> str | None:
        """Why a link's target inside the package would be left out where it lies (by a directory above it, or
        itself), so a link never lets in what the rules keep out."""
        directory, rules = Path(self.package), self.load_rules(Path(self.package), self.inherited)
        *parts, name = Path(real).relative_to(self.package).parts
        for part in parts:
            directory = directory / part
            reason = always_excluded(part, str(directory), True) or self.rules_reason(
                directory.relative_to(self.prefix).as_posix(), True, rules)
            if reason is not None:
                return reason
            rules = self.load_rules(directory, rules)
        return always_excluded(name, real, is_dir) or self.rules_reason(
            Path(real).relative_to(self.prefix).as_posix(), is_dir, rules)

    def load_rules(self, directory: Path, rules: list[IgnoreFile]) -> list[IgnoreFile]:
        try:
            return load_dir(directory, self.root, rules)
        except OSError as err:
            name = Path(err.filename or directory)
            shown = name.relative_to(self.prefix).as_posix() if Path(self.package) in name.parents else str(name)
            raise unreadable(shown, err, hint="make it readable (chmod) or remove it") from None

    def visit(self, real_dir: str, rel_dir: str, rules: list[IgnoreFile], parents: tuple[str, ...]) -> None:
        try:
            with os.scandir(real_dir) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as err:
            raise unreadable(rel_dir + "/", err) from None
        rules = self.load_rules(self.prefix / rel_dir, rules)
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}"
            try:
                self.entry(entry, rel, rules, (*parents, real_dir))
            except OSError as err:
                raise unreadable(rel, err) from None

    def entry(self, entry: os.DirEntry, rel: str, rules: list[IgnoreFile], parents: tuple[str, ...]) -> None:
        link = entry.is_symlink()
        real, problem = entry.path, None
        if link:
            try:
                real = os.path.realpath(entry.path, strict=True)
            except OSError as err:
                problem = "loop" if err.errno == errno.ELOOP else "broken"
        info = os.stat(real) if problem is None else None
        mode = info.st_mode if info is not None else 0
        is_dir = stat.S_ISDIR(mode)
        reason = always_excluded(entry.name, real, is_dir) or self.rules_reason(rel, is_dir, rules)
        if reason is not None:
            self.skipped.append(Skipped(rel + ("/" if is_dir else ""), reason))
            return
        target = os.readlink(entry.path) if link else ""
        if problem == "loop":
            raise _link_loop(rel, target, "loops: it never resolves to a file or directory")
        if problem == "broken":
            self.skipped.append(Skipped(rel, f"broken symbolic link to {target}"))
            return
        if not is_inside(real, self.package):
            self.excluded.append(ExcludedFile(rel, f"symbolic link to {real}, outside the package", "link"))
            return
        real_rel = Path(real).relative_to(self.prefix).as_posix()
        if link and real != self.package and (reason := self.target_reason(real, is_dir)) is not None:
            self.skipped.append(Skipped(rel, f"symbolic link to {real_rel}, which is left out ({reason})"))
            return
        # (names are judged below the package directory: a package may be called `legacy_credentials`)
        credential = name_reason(rel.partition("/")[2], is_dir) or (
            name_reason(real_rel.partition("/")[2], is_dir) if link else None)
        if credential is None and stat.S_ISREG(mode):
            credential = content_reason(Path(real), entry.name)
        if credential is not None and is_dir:
            self.credential_dir(real, rel, credential)
        elif credential is not None:
            self.excluded.append(ExcludedFile(rel, credential))
        elif is_dir and real in parents:
            raise _link_loop(rel, target, f"points back to {real_rel}/, a directory that contains it (a loop)")
        elif is_dir:
            self.visit(real, rel, rules, parents)
        elif stat.S_ISREG(mode):
            self.files.append(PackageFile(rel, Path(real), info.st_size, bool(mode & 0o111), signature(info)))
        else:
            self.skipped.append(Skipped(rel, "not a regular file (socket, pipe or device)"))

    def credential_dir(self, real: str, rel: str, reason: str) -> None:
        """Name each file of a credential directory as left out (read by name only: no content, no links
        followed); the directory itself when it is empty or cannot be listed."""
        found = [f"{rel}/{Path(top, name).relative_to(real).as_posix()}"
                 for top, dirs, files in os.walk(real)
                 for name in sorted([*files, *(d for d in dirs if os.path.islink(os.path.join(top, d)))])]
        for path in sorted(found) or [rel + "/"]:
            self.excluded.append(ExcludedFile(path, reason if path.endswith("/") else f"inside {reason}"))


def select_files(package_dir: Path) -> Selection:
    """Walk `package_dir` (resolved) and decide what goes into its sdist; paths are relative to its parent.

    Raises:
        UsageError: a file or directory that cannot be read, or a symbolic-link loop.
    """
    walk = _Walk(package_dir)
    for ancestor in reversed([package_dir.parent, *package_dir.parent.parents]):
        if ancestor == walk.root or walk.root in ancestor.parents:
            walk.inherited = walk.load_rules(ancestor, walk.inherited)
    walk.visit(walk.package, package_dir.name, walk.inherited, ())
    return Selection(tuple(sorted(walk.files, key=lambda f: f.path)), tuple(walk.skipped), tuple(walk.excluded))
