"""An image environment's venv on an old Python leaves nothing in the temporary folder: ensurepip on Python 3.7-3.9
(tf-cpu.1-15 runs 3.7) copies pip's CA bundle out of the bundled wheel into a temporary file it never removes."""

from __future__ import annotations

import os
import subprocess

import pytest

from mlsubmit.images.envs import make_venv
from mlsubmit.images.interpreters import find_python


def test_a_venv_made_for_an_old_image_python_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    version = "3.7"  # without a folder of its own, `python3.7 -m venv` leaves one 265,969-byte file (measured)
    python = find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    outer = tmp_path / "tmp"
    outer.mkdir()
    monkeypatch.setenv("TMPDIR", str(outer))
    make_venv(python, tmp_path / "venv")
    assert list(outer.iterdir()) == []
    pip = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-m", "pip", "--version"], capture_output=True,
                         text=True, env={**os.environ, "TMPDIR": str(outer)})
    assert pip.returncode == 0 and f"(python {version})" in pip.stdout, pip.stdout + pip.stderr
