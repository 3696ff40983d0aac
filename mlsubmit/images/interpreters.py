"""Find a Python interpreter of a given MAJOR.MINOR on this machine (an image's Python, e.g. "3.10").

Looked for, in order: `$MLSUBMIT_PYTHON_3_10` (a path), `python3.10` on PATH, then pyenv's versions
(`$PYENV_ROOT`, default ~/.pyenv, `versions/3.10.*/bin/python3.10`, newest patch first). A candidate counts only
if it runs and reports that version (a pyenv shim for a version that is not selected fails, and is skipped).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path


def _runs_as(path: str, version: str) -> bool:
    try:
        done = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == version


def _patch(path: Path) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in path.parent.parent.name.split("."))
    except ValueError:
        return ()


@functools.lru_cache(maxsize=None)
def find_python(version: str) -> Path | None:
    """A Python interpreter of `version` ("3.10") on this machine, or None."""
    if "%d.%d" % sys.version_info[:2] == version:
        return Path(sys.executable)
    candidates = [os.environ.get("MLSUBMIT_PYTHON_" + version.replace(".", "_")), shutil.which(f"python{version}")]
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates += [str(p) for p in sorted(root.glob(f"versions/{version}.*/bin/python{version}"), key=_patch,
                                          reverse=True)]
    for candidate in candidates:
        if candidate and _runs_as(candidate, version):
            return Path(candidate)
    return None
