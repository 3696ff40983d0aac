"""What ran is what is said: a job whose requirements replace a framework package of its image (`tensorflow==2.8.0`
on tf-cpu.2-8.py310, which carries tensorflow-cpu 2.8.4; `numpy==1.22.4` beside its numpy 1.23.5) reports the
versions it imports, and says the replacement; the replacing pins are a requirements layer of their own, so two
requirement lists that differ by one small package share it instead of installing it twice.

Heavy: the tf-cpu.2-8.py310 environment (kept in the session's images dir), pip installing the replacements.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TASK = '''\
import numpy, tensorflow as tf
print("replaced:", "tensorflow", tf.__version__, "numpy", numpy.__version__)
'''


def _package(root: Path, *requires: str) -> Path:
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text(TASK)
    (root / "setup.py").write_text("from setuptools import find_packages, setup\n\n"
                                   f"setup(name='replacer', version='0.1', install_requires={list(requires)!r}, "
                                   "packages=find_packages())\n")
    return root / "trainer"


def _train(package: Path, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "mlsubmit", "train", "--local", "--package-path", str(package),
                           "--runtime-version", "2.8", "--python-module", "trainer.task"], cwd=cwd,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "NO_COLOR": "1", "MLSUBMIT_IMAGE_ENV": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _layers(stdout: str) -> list[Path]:
    """The requirements environments the job's environment sees, in order."""
    venv = Path(re.search(r"\(venv (/\S+)\)$", stdout, re.M).group(1))
    bridge = next(venv.glob("lib/python*/site-packages/_mlsubmit_image.pth")).read_text()
    return [Path(site).parents[2] for site in re.findall(r"addsitedir\('([^']+)'\)", bridge)][:-1]


def test_a_numpy_pin_replaces_the_images_numpy_is_said_and_shared_by_a_list_one_line_longer(tmp_path, images_home):
    done = _train(_package(tmp_path / "a", "numpy==1.22.4"), tmp_path)
    assert re.search(r"installed on image tf-cpu\.2-8\.py310: Python 3\.10\.\d+, tensorflow-cpu 2\.8\.4, .*"
                     r"numpy 1\.22\.4 \(venv", done.stdout), done.stdout
    assert "note: requirement numpy==1.22.4 replaces the image's numpy 1.23.5 (as pip install does on the image)" \
        in done.stdout, done.stdout
    assert "replaced: tensorflow 2.8.4 numpy 1.22.4" in done.stdout
    (numpy_layer,) = _layers(done.stdout)
    # one line more: the numpy layer is shared, tabulate is a small layer above it
    more = _train(_package(tmp_path / "b", "numpy==1.22.4", "tabulate"), tmp_path)
    assert "note: requirement numpy==1.22.4 replaces the image's numpy 1.23.5" in more.stdout, more.stdout
    assert "replaced: tensorflow 2.8.4 numpy 1.22.4" in more.stdout
    small, shared = _layers(more.stdout)
    assert shared == numpy_layer and not list(small.glob("lib/python*/site-packages/numpy"))
    assert list(small.glob("lib/python*/site-packages/tabulate*"))


def test_a_tensorflow_pin_on_the_28_runtime_says_it_replaces_the_images_tensorflow_cpu(tmp_path, images_home):
    done = _train(_package(tmp_path / "tf", "tensorflow==2.8.0"), tmp_path)
    assert re.search(r"installed on image tf-cpu\.2-8\.py310: Python 3\.10\.\d+, tensorflow 2\.8\.0, keras 2\.8",
                     done.stdout), done.stdout
    assert "tensorflow-cpu 2.8.4" not in done.stdout.split("installed on image")[1].split("\n")[0]
    assert "note: requirement tensorflow==2.8.0 replaces the image's tensorflow-cpu 2.8.4 (as pip install does on " \
           "the image)" in done.stdout, done.stdout
    assert "replaced: tensorflow 2.8.0" in done.stdout
    (tensorflow_layer,) = _layers(done.stdout)
    # one line more: the 1.2 GB TensorFlow layer is shared, not installed again beside tabulate
    more = _train(_package(tmp_path / "tf2", "tensorflow==2.8.0", "tabulate"), tmp_path)
    assert "note: requirement tensorflow==2.8.0 replaces the image's tensorflow-cpu 2.8.4" in more.stdout, more.stdout
    small, shared = _layers(more.stdout)
    assert shared == tensorflow_layer and not list(small.glob("lib/python*/site-packages/tensorflow"))
