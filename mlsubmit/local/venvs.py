"""Isolated venvs holding a job's packages, kept under $MLSUBMIT_HOME/venvs/ and named by the packages' sha256.

The same bytes are installed once: a later job with identical packages (`mlsubmit train --local`, the emulator)
reuses the venv. A venv is built aside and renamed into place only once it is complete (and, when asked, checked),
so a failed, concurrent or out-of-disk install never leaves a venv that looks ready (mlsubmit.cache.entries: its
installer locks `.installing-<id>.lock`; a building directory whose lock nobody holds was left by an installer that
was killed, and is removed by the next install, `remove_stale`). The process that uses a venv holds it, so
`mlsubmit cache prune` never removes it under a running job.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from mlsubmit.cache import entries
from mlsubmit.cache.entries import remove_stale  # noqa: F401 - the next install removes a killed one's leftovers
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
    if python.exists() and entries.hold(venv_dir):
        return python, True
    venv_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(venv_dir.parent)
    with entries.building(venv_dir.parent, f"the venv of {Path(packages[-1]).name}") as building:
        for path in packages:
            installing(Path(path))
            built = install_into_venv(path, building)
        if check is not None:
            check(built, building)
        entries.place(building, venv_dir)  # or an identical job finished first: use its venv
    entries.hold(venv_dir)
    return python, False


def _building(venvs: Path):
    """A locked `.installing-<id>` directory under `venvs` (mlsubmit.cache.entries.building), removed after unless
    renamed into place."""
    return entries.building(venvs, "a venv")
