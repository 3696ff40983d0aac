"""The suite's temporary-folder check (tests/support/temp_folder.py): a run that leaves a file in the temporary folder,
even from a child process, fails and names it; TensorFlow's autograph files do not count; nothing stays behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

LEAVES = '''
import subprocess, sys, tempfile

def test_a_child_leaves_a_file():
    subprocess.run([sys.executable, "-c", "import tempfile; tempfile.mkstemp(prefix='leak-')"], check=True)

def test_autograph_leaves_its_file():
    tempfile.mkstemp(prefix="__autograph_generated_file", suffix=".py")
'''

CLEAN = '''
import tempfile

def test_cleans_up():
    with tempfile.TemporaryDirectory() as scratch:
        open(f"{scratch}/x", "w").close()
'''


def _pytest(tmp_path: Path, body: str) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
                                          "pytest_plugins = ['support.temp_folder']\n")
    (tmp_path / "test_it.py").write_text(body)
    outer = tmp_path / "tmp"
    outer.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MLSUBMIT_TEST"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "base"),
                           str(tmp_path / "test_it.py")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**env, "TMPDIR": str(outer)})
    return done, outer


def test_a_file_left_in_the_temporary_folder_fails_the_run_and_is_named(tmp_path):
    done, outer = _pytest(tmp_path, LEAVES)
    assert done.returncode == 1, done.stdout[-2000:]
    assert "2 passed" in done.stdout and "left in the temporary folder by the tests" in done.stdout, done.stdout
    named = [line for line in done.stdout.splitlines() if line.startswith("leak-")]
    assert len(named) == 1 and named[0].endswith("(0 bytes)"), done.stdout
    assert "__autograph_generated_file" not in done.stdout
    assert list(outer.iterdir()) == []  # the session's folder went, with what was left in it


def test_a_clean_run_passes_and_leaves_nothing(tmp_path):
    done, outer = _pytest(tmp_path, CLEAN)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "left in the temporary folder" not in done.stdout
    assert list(outer.iterdir()) == []
