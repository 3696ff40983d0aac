"""mlsubmit's wheel, built from this checkout as a release is (pip's PEP 517 build, isolated), once per session.

Every test that installs mlsubmit as a user does (tests/test_install.py, tests/test_predict_keras2.py) takes this one
wheel: building it costs tens of seconds on 2 cores.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIP_QUIET = ["--disable-pip-version-check", "--no-input"]
_built: dict[Path, Path] = {}  # the session's base temp dir -> its wheel


def mlsubmit_wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built on the first call of the session (pytest's tmp_path_factory)."""
    session = tmp_path_factory.getbasetemp()
    if session not in _built:
        out = tmp_path_factory.mktemp("wheel")
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", *PIP_QUIET, "-q", "--no-deps", "-w", str(out),
                               str(ROOT)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        (_built[session],) = out.glob("mlsubmit-*.whl")
    return _built[session]
