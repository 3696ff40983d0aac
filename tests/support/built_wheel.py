"""mlsubmit's wheel, built from this checkout as a release is (pip's PEP 517 build, isolated), once per content.

Every test that installs mlsubmit as a user does (tests/test_install.py, tests/test_predict_keras2.py) takes this one
wheel. It is kept in the suite's cache (~/.cache/mlsubmit/test-wheels, beside the image environments) under the
sha256 of what goes into it (mlsubmit/, mlsubmit_runtime/, pyproject.toml, README.md): the suite's workers, and the
next run of unchanged sources, install the wheel the first one built instead of building it again. Built aside and
renamed into place under a lock; the few most recently used builds are kept.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIP_QUIET = ["--disable-pip-version-check", "--no-input"]
CACHE = Path.home() / ".cache" / "mlsubmit" / "test-wheels"
KEPT = 4  # builds kept (most recently used first): a few checkouts or branches side by side
SOURCES = ("mlsubmit", "mlsubmit_runtime", "pyproject.toml", "README.md")


def sources_digest() -> str:
    """sha256 over the names and bytes of every file the wheel is built from (bytecode left out)."""
    digest = hashlib.sha256()
    for top in SOURCES:
        path = ROOT / top
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            digest.update(f"{file.relative_to(ROOT).as_posix()}\0{file.stat().st_size}\0".encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _build(into: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", *PIP_QUIET, "-q", "--no-deps", "-w", str(into),
                           str(ROOT)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def _prune() -> None:
    """All but the KEPT most recently used builds (their folders' times: touched at each use) go, and what a killed
    build left (the lock is held: nobody else is building)."""
    for left in CACHE.glob(".building-*"):
        shutil.rmtree(left, ignore_errors=True)
    builds = sorted((p for p in CACHE.iterdir() if p.is_dir() and not p.name.startswith(".")),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for old in builds[KEPT:]:
        shutil.rmtree(old, ignore_errors=True)


def mlsubmit_wheel() -> Path:
    """The wheel of this checkout's sources as they are now, built by the first caller that needs it."""
    CACHE.mkdir(parents=True, exist_ok=True)
    kept = CACHE / sources_digest()
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; the others wait and take it
        if not any(kept.glob("mlsubmit-*.whl")):
            with tempfile.TemporaryDirectory(dir=CACHE, prefix=".building-") as building:
                _build(Path(building) / "wheel")
                os.replace(Path(building) / "wheel", kept)
        os.utime(kept)
        _prune()
    (wheel,) = kept.glob("mlsubmit-*.whl")
    return wheel
