"""Isolated venvs holding a job's packages, kept under $MLSUBMIT_HOME/venvs/ and named by the packages' sha256.

The same bytes are installed once: a later job with identical packages (`mlsubmit train --local`, the emulator)
reuses the venv. A venv is built in a temporary directory and renamed into place only once it is complete (and,
when asked, checked), so a failed or concurrent install never leaves a venv that looks ready.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path


def mlsubmit_home() -> Path:
    """$MLSUBMIT_HOME, default ~/.mlsubmit."""
    return Path(os.environ.get("MLSUBMIT_HOME") or Path.home() / ".mlsubmit")


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
    building = Path(tempfile.mkdtemp(prefix=".installing-", dir=venv_dir.parent))
    try:
        for path in packages:
            installing(Path(path))
            built = install_into_venv(path, building)
        if check is not None:
            check(built, building)
        try:
            os.rename(building, venv_dir)
        except OSError:
            pass  # an identical job finished first: use its venv
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return python, False
