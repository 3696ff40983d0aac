"""The suite's image environments are kept between runs and bounded (a pytest plugin, loaded by tests/conftest.py).

`$MLSUBMIT_TEST_IMAGES` (default ~/.cache/mlsubmit/test-images) is the suite's `MLSUBMIT_IMAGES`: image, requirements
and job environments built once by content hash, like pip's own cache, so a run finds them warm. A content hash is a
new folder whenever an image's pins move or a test moves to another image, and the old one would stay for good: at
the end of a session (at most once a day: it costs about 2 s) the controller runs `mlsubmit cache prune --older-than
14d` on it, as a user would on theirs. Everything a run uses it stamps, so only what no run has used for two weeks
goes; what mlsubmit did not make there (the venv without TensorFlow that tests/test_trainer_without_tensorflow.py
builds) is never touched. What it removed is named at the end of the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from support.leftovers import controller

MAX_AGE = "14d"
EVERY = 24 * 3600.0  # seconds between two prunes
_STAMP = ".pruned"  # in the images home: its mtime is the last prune
_PRUNED = pytest.StashKey[list]()


def images_home() -> Path:
    """The suite's image cache: $MLSUBMIT_TEST_IMAGES, default ~/.cache/mlsubmit/test-images (made if missing)."""
    kept = Path(os.environ.get("MLSUBMIT_TEST_IMAGES") or Path.home() / ".cache" / "mlsubmit" / "test-images")
    kept.mkdir(parents=True, exist_ok=True)
    return kept


def prune(home: Path) -> list[str]:
    """`mlsubmit cache prune --older-than MAX_AGE` on `home`, one line per item it removed."""
    with tempfile.TemporaryDirectory(prefix="mlsubmit-prune-") as state:  # the user state of that one command
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLSUBMIT_CACHE_")}
        env.update(MLSUBMIT_IMAGES=str(home), MLSUBMIT_HOME=str(Path(state, "home")), NO_COLOR="1")
        done = subprocess.run([sys.executable, "-m", "mlsubmit", "cache", "prune", "--older-than", MAX_AGE,
                               "--output", "json"], capture_output=True, text=True, timeout=300, env=env,
                              stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        return [f"mlsubmit cache prune failed (exit code {done.returncode}): {done.stderr.strip()[-500:]}"]
    return [f"{item['what']} ({item.get('image') or '-'}, {item['size_bytes'] / 1e6:,.1f} MB, last used "
            f"{item['last_use']}): {item['path']}" for item in json.loads(done.stdout)["removed"]]


def due(home: Path, now: float) -> bool:
    """Whether the last prune of `home` was EVERY or longer ago (or never)."""
    try:
        return now - (home / _STAMP).stat().st_mtime >= EVERY
    except FileNotFoundError:
        return True


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    if not controller(session.config):
        return
    home = images_home()
    if due(home, time.time()):
        session.config.stash[_PRUNED] = prune(home)
        (home / _STAMP).touch()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    pruned = config.stash.get(_PRUNED, [])
    if pruned:
        terminalreporter.write_sep("-", f"unused for {MAX_AGE}, removed from the suite's image environments")
        for line in pruned:
            terminalreporter.write_line(line)
