"""pip's own reason for a failed install, in one line (mlsubmit.images.pip_errors): what `train --local`, the image
environments and the emulator say when a package does not install, never only `hint: See above for details.`"""

from __future__ import annotations

import subprocess
import sys

from mlsubmit.images.pip_errors import pip_reason


def _pip_install(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
                           "--target", str(tmp_path / "target"), *args], capture_output=True, text=True, timeout=300)


def test_a_build_that_fails_is_said_with_the_builds_own_error(tmp_path):
    project = tmp_path / "broken"
    project.mkdir()
    (project / "setup.py").write_text("raise RuntimeError('this package needs numpy to build')\n")
    done = _pip_install(tmp_path, "--no-deps", "--no-build-isolation", str(project))
    assert done.returncode != 0 and "See above for details" in done.stderr  # what pip ends with
    assert "RuntimeError: this package needs numpy to build" in pip_reason(done.stderr), done.stderr


def test_a_requirement_no_index_has_is_said_with_pips_error(tmp_path):
    done = _pip_install(tmp_path, "--no-index", "helperpkg==0.3")
    assert pip_reason(done.stderr).endswith("No matching distribution found for helperpkg==0.3"), done.stderr
