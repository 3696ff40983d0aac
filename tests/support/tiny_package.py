"""A tiny real user project for the packaging tests: `<root>/setup.py` and the package `<root>/tinypkg/`.

tinypkg has a `task` module with an argument parser (what the pre-flight runs with `--help`), a subpackage,
a package-data file and an executable script, so the sdist's layout, modes and installability are all real.
"""

from __future__ import annotations

import os
from pathlib import Path

SETUP_PY = '''\
"""tinypkg's distribution (read by mlsubmit with ast; never run by it)."""
from setuptools import find_packages, setup

NAME = "tinypkg"
VERSION = "1.2.0"
REQUIRED_PACKAGES = ["requests>=2", "numpy"]
PYTHON_REQUIRES = @PYREQ@

if __name__ == "__main__":
    setup(name=NAME, version=VERSION, install_requires=REQUIRED_PACKAGES, packages=find_packages(),
          python_requires=PYTHON_REQUIRES)
'''

TASK_PY = '''\
import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tinypkg.task")
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args(argv)
    print("training into", args.job_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def write(path: Path, text: str | bytes, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    if mode is not None:
        os.chmod(path, mode)
    return path


def make_project(root: Path, *, python_requires: str = ">=3.8", task: str = TASK_PY) -> Path:
    """Create the project under `root`; returns the package directory (`root/tinypkg`)."""
    write(root / "setup.py", SETUP_PY.replace("@PYREQ@", repr(python_requires)))
    package = root / "tinypkg"
    write(package / "__init__.py", '"""tinypkg."""\n__version__ = "1.2.0"\n')
    write(package / "task.py", task)
    write(package / "sub" / "__init__.py", "")
    write(package / "sub" / "mod.py", "VALUE = 42\n")
    write(package / "data" / "config.json", '{"learning_rate": 0.1}\n')
    write(package / "run.sh", "#!/bin/sh\nexec python -m tinypkg.task \"$@\"\n", mode=0o755)
    return package


# A fake service-account key: the shape of a real one, with a key that is not a key.
FAKE_SERVICE_ACCOUNT = '''{
  "type": "service_account",
  "project_id": "demo-project",
  "private_key_id": "0123456789abcdef",
  "private_key": "-----BEGIN PRIVATE KEY-----\\nnot-a-real-key\\n-----END PRIVATE KEY-----\\n",
  "client_email": "trainer@demo-project.iam.gserviceaccount.com"
}
'''
