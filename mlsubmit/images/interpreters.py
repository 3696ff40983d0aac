"""Find a Python interpreter of a given MAJOR.MINOR on this machine (an image's Python, e.g. "3.10").

Looked for, in order: `$MLSUBMIT_PYTHON_3_10` (a path), `python3.10` on PATH, then pyenv's versions
(`$PYENV_ROOT`, default ~/.pyenv, `versions/3.10.*/bin/python3.10`, newest patch first). A candidate counts only
if it runs and reports that version (a pyenv shim for a version that is not selected fails, and is skipped); what is
returned is the interpreter it runs as (a venv's base interpreter, a shim's target), so that one interpreter has one
name.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path


_BASE = "import os, sys; print(os.path.realpath(getattr(sys, '_base_executable', sys.executable)))"


def _base(path: str, version: str) -> Path | None:
    """The interpreter `path` runs as (a venv's base, a pyenv shim's target), if it reports `version`; else None.

    One interpreter is one name wherever it was found (a venv of it, a shim, a link on PATH), so the environments
    keyed by it are built once, not once per way of reaching it."""
    try:
        done = subprocess.run([path, "-c", f"import sys; print('%d.%d' % sys.version_info[:2]); {_BASE}"],
                              capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split()
    return Path(lines[1]) if done.returncode == 0 and len(lines) == 2 and lines[0] == version else None


def _patch(path: Path) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in path.parent.parent.name.split("."))
    except ValueError:
        return ()


@functools.lru_cache(maxsize=None)
def find_python(version: str) -> Path | None:
    """A Python interpreter of `version` ("3.10") on this machine, or None."""
    if "%d.%d" % sys.version_info[:2] == version:
        return Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    candidates = [os.environ.get("MLSUBMIT_PYTHON_" + version.replace(".", "_")), shutil.which(f"python{version}")]
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates += [str(p) for p in sorted(root.glob(f"versions/{version}.*/bin/python{version}"), key=_patch,
                                          reverse=True)]
    for candidate in candidates:
        found = _base(candidate, version) if candidate else None
        if found is not None:
            return found
    return None
