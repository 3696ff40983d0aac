"""Which files of a package directory go into its sdist: `.gitignore` / `.mlsubmitignore` rules and the
directories that never go in (VCS metadata, virtual environments, caches, build output).

Ignore files use gitignore syntax and git's precedence: a file's patterns are relative to its directory, a
deeper file overrides a shallower one, a later pattern overrides an earlier one, `!` re-includes, and nothing
inside an excluded directory can be re-included. `.mlsubmitignore` is read after `.gitignore` in the same
directory, so it can override it. Ignore files are read from the package directory, its subdirectories and
its ancestors up to the root of the enclosing git work tree (or the package's parent when there is none).
The walk that applies them is `selection.py`; credentials are a separate filter (`credentials.py`) that no ignore
file can switch off.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

IGNORE_FILES = (".gitignore", ".mlsubmitignore")

# Never in a package, whatever the ignore files say.
_ALWAYS_EXCLUDED_DIRS = {
    ".git": "VCS metadata", ".hg": "VCS metadata", ".svn": "VCS metadata",
    "__pycache__": "bytecode cache", ".pytest_cache": "test cache", ".mypy_cache": "type-checker cache",
    ".ruff_cache": "linter cache", ".ipynb_checkpoints": "notebook checkpoints", ".tox": "test environments",
    ".nox": "test environments", ".venv": "virtual environment",
}
# Excluded unless the directory is a Python package (an RL `env/` subpackage is code, not a venv).
_EXCLUDED_UNLESS_PACKAGE = {"venv": "virtual environment", "env": "virtual environment",
                            "build": "build output", "dist": "build output"}
_EXCLUDED_FILE_SUFFIXES = {".pyc": "bytecode", ".pyo": "bytecode"}
_EXCLUDED_FILE_NAMES = {".DS_Store": "Finder metadata", **{name: "ignore rules" for name in IGNORE_FILES}}


@dataclass(frozen=True)
class Rule:
    """One compiled ignore pattern."""

    regex: re.Pattern
    negate: bool
    dir_only: bool
    source: str  # "path/.gitignore:LINE" for messages


@dataclass(frozen=True)
class IgnoreFile:
    """The rules of one ignore file; `base` is its directory relative to the walk's root ("" for the root)."""

    base: str
    rules: tuple[Rule, ...]


@dataclass(frozen=True)
class Skipped:
    """A file or directory left out, and why (directories stand for everything below them)."""

    path: str
    reason: str


def _translate(glob: str) -> str:
    """A gitignore glob (no leading `!`, no trailing `/`) as a regex body over '/'-separated paths."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*" and glob.startswith("**", i):
            end = i + 2
            whole_segment = (i == 0 or glob[i - 1] == "/") and (end == n or glob[end] == "/")
            if whole_segment and end == n:
                out.append(".*")
            elif whole_segment:
                out.append("(?:.*/)?")
                end += 1  # the "/" after "**/" is part of the optional group
            else:
                out.append("[^/]*")
            i = end
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
            continue
        elif c == "[" and (close := glob.find("]", i + 2 if glob[i + 1:i + 2] in ("!", "^") else i + 1)) > 0:
            body = glob[i + 1:close]
            negated = body[:1] in ("!", "^")
            body = body[1:] if negated else body
            out.append("[" + ("^" if negated else "") + body.replace("\\", "\\\\") + "]")
            i = close
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_line(line: str, source: str) -> Rule | None:
    """Compile one line of an ignore file; None for blank lines and comments."""
    line = line.rstrip("\n").rstrip("\r")
    line = re.sub(r"(?<!\\) +$", "", line)
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    dir_only = line.endswith("/") and not line.endswith("\\/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    body = _translate(line.lstrip("/"))
    pattern = body if anchored else "(?:.*/)?" + body
    return Rule(re.compile(f"^{pattern}$", re.DOTALL), negate, dir_only, source)


def read_ignore_file(path: Path, base: str, label: str) -> IgnoreFile:
    """Parse an ignore file; unreadable bytes are replaced rather than failing the build."""
    text = path.read_text(encoding="utf-8", errors="replace")
    rules = tuple(rule for number, line in enumerate(text.splitlines(), 1)
                  if (rule := compile_line(line, f"{label}:{number}")) is not None)
    return IgnoreFile(base, rules)


def ignored_by(path: str, is_dir: bool, files: list[IgnoreFile]) -> str | None:
    """The rule ("file:line") that excludes `path` (relative to the walk root), or None if it is kept."""
    decision: Rule | None = None
    for ignore in files:
        if ignore.base and not path.startswith(ignore.base + "/"):
            continue
        rel = path[len(ignore.base) + 1:] if ignore.base else path
        for rule in ignore.rules:
            if (is_dir or not rule.dir_only) and rule.regex.match(rel):
                decision = rule
    return decision.source if decision is not None and not decision.negate else None


def always_excluded(name: str, path: str, is_dir: bool) -> str | None:
    """Why the file or directory `name` (at `path`) never goes into a package, whatever the ignore files say."""
    if is_dir:
        if name in _ALWAYS_EXCLUDED_DIRS:
            return _ALWAYS_EXCLUDED_DIRS[name]
        if name.endswith(".egg-info"):
            return "build output"
        if os.path.exists(os.path.join(path, "pyvenv.cfg")):
            return "virtual environment"
        if name in _EXCLUDED_UNLESS_PACKAGE and not os.path.exists(os.path.join(path, "__init__.py")):
            return _EXCLUDED_UNLESS_PACKAGE[name]
        return None
    return _EXCLUDED_FILE_NAMES.get(name) or _EXCLUDED_FILE_SUFFIXES.get(os.path.splitext(name)[1])


def ignore_root(package_dir: Path) -> Path:
    """The top of the ignore-file hierarchy: the enclosing git work tree, else the package's parent."""
    for parent in package_dir.parents:
        if (parent / ".git").exists():
            return parent
    return package_dir.parent


def load_dir(directory: Path, root: Path, files: list[IgnoreFile]) -> list[IgnoreFile]:
    """`files` plus the ignore files found in `directory` (which lies under `root`)."""
    base = directory.relative_to(root).as_posix()
    base = "" if base == "." else base
    found = [read_ignore_file(directory / name, base, f"{base + '/' if base else ''}{name}")
             for name in IGNORE_FILES if (directory / name).is_file()]
    return files + found if found else files


def walk(package_dir: Path) -> tuple[list[tuple[str, Path]], list[Skipped]]:
    """The files `selection.select_files` lets into a package, as sorted (path relative to the package's parent,
    real file) pairs, and what the rules left out. Credentials and links that leave the directory are never
    among them (`select_files` also says which those were)."""
    from mlsubmit.packaging.selection import select_files  # (selection builds on this module)

    selection = select_files(Path(package_dir).resolve())
    return [(f.path, f.source) for f in selection.files], list(selection.skipped)
