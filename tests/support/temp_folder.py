"""Nothing a test run starts leaves anything in the temporary folder (a pytest plugin, loaded by tests/conftest.py).

The session gets a temporary folder of its own, `$TMPDIR/mlsubmit-tests-*`, as TMPDIR: the workers and every process
they start (mlsubmit, pip, replicas, emulators, engines) inherit it. pytest's own folder (tmp_path) stays where pytest
keeps it, with its last three sessions for reading a failure. At the end what is left in the session's folder is
named, fails the session, and is removed with it: the check sees what `ls /tmp` alone would miss (a file pip's
certifi copied out of a zip and never removed).

Two things are expected there and not reported, the frameworks' own and kept on purpose (so in the cloud):
TensorFlow's autograph writes `__autograph_generated_file*.py` and never removes them (it needs them for the life of
the function it converted), and torch keeps its compiler cache in `torchinductor_<user>` between runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from support.leftovers import controller, fail_session

_EXPECTED = ("__autograph_generated_file", "torchinductor_")
_FOLDER = pytest.StashKey[Path]()


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if not controller(config):
        return
    config._tmp_path_factory.getbasetemp()  # pytest's own folder first, in the usual temporary folder
    folder = Path(tempfile.mkdtemp(prefix="mlsubmit-tests-"))
    config.stash[_FOLDER] = folder
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # this process's tempfile asks again


def _left(folder: Path) -> list[str]:
    names = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(_EXPECTED):
            continue
        kind = "folder" if path.is_dir() and not path.is_symlink() else f"{path.lstat().st_size} bytes"
        head = ""
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as handle:
                first = handle.read(60).decode(errors="replace").strip().splitlines()[:1]
            head = f": {first[0]!r}" if first else ""
        names.append(f"{path.name} ({kind}){head}")
    return names


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    folder = session.config.stash.get(_FOLDER, None)
    if folder is None:
        return
    left = _left(folder) if folder.is_dir() else []
    shutil.rmtree(folder, ignore_errors=True)
    fail_session(session, "left in the temporary folder by the tests", left)
