"""The replica launcher on stock nodes (#32): Pythons as python.org and pyenv build them (pip as it comes; setuptools
65.5 without wheel, or no setuptools at all), not the test venv. Packages are built as the cloud's `pip install`
builds them, in isolation with setuptools fetched from the node's index; a node that cannot fetch it builds with its
own setuptools when that can build a wheel, and otherwise fails in one line saying why. The engines run stock nodes in
tests/test_engine_{spark,dask,ray}.py (`test_stock_nodes`); emulated Kubernetes pods on a stock image are here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlsubmit.launcher import replica, source
from tests.support.engine_clusters import StockPython, pyenv_pythons, stock_python

pytestmark = pytest.mark.slow

FACTS = '''\
import importlib.metadata, importlib.util, json, sys
try:
    setuptools = importlib.metadata.version("setuptools")
except importlib.metadata.PackageNotFoundError:
    setuptools = None
print(json.dumps({"python": "%d.%d" % sys.version_info[:2], "base": sys.base_prefix, "setuptools": setuptools,
                  "wheel": importlib.util.find_spec("wheel") is not None}), flush=True)
'''
OFFLINE = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "", "PIP_INDEX_URL": "", "PIP_EXTRA_INDEX_URL": ""}


def _stock(version: str) -> StockPython:
    found = stock_python(version)
    if found is None:
        pytest.skip(f"no stock Python {version} (pyenv) on this machine")
    return found


def _sdist(root: Path, requirements: str) -> str:
    """tinypkg (python_requires >=3.8) whose task prints FACTS, with `requirements` (a Python list's text)."""
    from mlsubmit.packaging import build_sdist
    from tests.support.tiny_package import make_project

    package = make_project(root / "project", task=FACTS)
    setup = root / "project" / "setup.py"
    setup.write_text(setup.read_text().replace('["requests>=2", "numpy"]', requirements))
    return str(build_sdist(package, dist_dir=root / "dist").path)


def _launch(python: str, sdist: str, tmp: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The launcher as a node runs it (its source alone, on that node's Python) for a one-replica job."""
    spec = {"job_id": "stock", "roles": [["chief", 1]], "role": "chief", "index": 0, "addresses": ["127.0.0.1:1"],
            "module": "tinypkg.task", "packages": [sdist], "cache_dir": str(tmp / "cache"), "work_root": str(tmp)}
    return subprocess.run([python, "-c", source(), "--spec", json.dumps(spec)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})}, cwd=tmp)


def _facts(out: str) -> dict:
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


@pytest.mark.parametrize("version", ["3.8", "3.12", "3.13"])
def test_packages_install_on_a_stock_python(version, tmp_path):
    """3.8 (setuptools 56), 3.12 and 3.13 (no setuptools): the sdist and its requirement from the index install,
    into a venv made by that Python. 3.10 and 3.11 (setuptools 65.5, no wheel: bdist_wheel unknown without
    isolation) install the same package, with the same checks, end to end: 3.10 on Dask's nodes and 3.11 on Spark's
    and in the Kubernetes pods below (`test_stock_nodes` in tests/test_engine_{dask,spark}.py)."""
    stock = _stock(version)
    done = _launch(stock.path, _sdist(tmp_path, '["tabulate"]'), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _facts(done.stdout) == stock.facts()
    assert "[launcher] packages installed with their requirements into" in done.stdout
    assert "--no-build-isolation" not in done.stdout


@pytest.mark.parametrize("version", ["3.11", "3.12"])
def test_a_node_without_an_index_that_cannot_build_says_why_in_one_line(version, tmp_path):
    """3.11: setuptools 65.5 without wheel; 3.12: no setuptools. Neither can build a wheel with nothing fetched."""
    stock = _stock(version)
    if replica.builds_without_isolation(stock.setuptools, False):
        pytest.skip(f"this machine's Python {version} has setuptools {stock.setuptools}, which builds on its own")
    has = f"setuptools {stock.setuptools} without the wheel package" if stock.setuptools else "no setuptools"
    done = _launch(stock.path, _sdist(tmp_path, "[]"), tmp_path, OFFLINE)
    assert done.returncode == replica.INSTALL_FAILED, done.stdout + done.stderr
    said = [line for line in done.stdout.splitlines() if line.startswith("[launcher]")]
    assert len(said) == 1 and done.stderr == "", done.stdout + done.stderr
    assert said[0].startswith("[launcher] pip could not install tinypkg-1.2.0.tar.gz: it could not fetch the build "
                              "requirements from this node's package index (ERROR: ")
    assert f"this node's Python {version} ({stock.path}) cannot build without them (it has {has};" in said[0]
    assert said[0].endswith("give the nodes a package index they can reach (pip.conf, PIP_INDEX_URL), or install "
                            "setuptools>=70.1 into that Python")
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")] == []  # nothing half-made


def test_a_node_without_an_index_builds_with_its_own_setuptools_when_it_can(tmp_path):
    """This venv's Python has setuptools >= 70.1: offline, the sdist is built with it, and the launcher says so."""
    done = _launch(sys.executable, _sdist(tmp_path, "[]"), tmp_path, OFFLINE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[launcher] no build requirements from a package index (ERROR: " in done.stdout
    assert "building with this node's setuptools" in done.stdout and "(--no-build-isolation)" in done.stdout


def test_a_python_older_than_3_8_is_named(tmp_path):
    found = pyenv_pythons("3.7")
    if not found:
        pytest.skip("no Python 3.7 (pyenv) on this machine")
    done = _launch(str(found[0]), "unused.tar.gz", tmp_path)
    assert done.returncode == replica.BAD_SPEC and done.stdout == ""
    assert done.stderr == f"[launcher] error: the launcher needs Python 3.8 or later; this node's is 3.7 " \
                          f"({found[0]})\n"


def test_the_node_python_a_job_names_runs_the_launcher(tmp_path):
    """`node_python` (MLSUBMIT_NODE_PYTHON on the submitting side) is what an engine's task starts the launcher
    with; one the node does not have is named in one line."""
    stock = _stock("3.10")
    spec = {"job_id": "np", "roles": [["chief", 1]], "role": "chief", "index": 0, "addresses": ["127.0.0.1:1"],
            "module": "tinypkg.task", "packages": [_sdist(tmp_path, "[]")], "cache_dir": str(tmp_path / "cache"),
            "work_root": str(tmp_path), "node_python": stock.path}
    assert replica.run_in_subprocess(spec) == 0
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")][0].endswith("-py310")
    with pytest.raises(RuntimeError, match=r"^the job's node Python '/nowhere/python3' \(MLSUBMIT_NODE_PYTHON\) is "
                                           r"not an executable on "):
        replica.run_in_subprocess({**spec, "node_python": "/nowhere/python3"})


def test_kubernetes_pods_on_a_stock_image(tmp_path, monkeypatch):
    """`train --target kubernetes` on the emulated cluster whose image's python3 is a stock Python 3.11: the pods'
    launchers install the runtime's sdist and the trainer's (tabulate from the index) with that Python's pip."""
    from mlsubmit.emulator.kube_api import KubeServer
    from mlsubmit.emulator.kube_pods import IMAGE_PYTHON_VARIABLE
    from tests.support.engine_checks import lines, node_facts, stock_project

    stock = _stock("3.11")
    monkeypatch.setenv(IMAGE_PYTHON_VARIABLE, stock.path)  # the emulator runs in this process: its pods' python3
    server = KubeServer().start()  # server.kubeconfig: its address, certificate and token
    try:
        env = {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": str(tmp_path / "home"),
               "KUBECONFIG": str(server.kubeconfig)}
        done = subprocess.run(
            [sys.executable, "-m", "mlsubmit", "train", "--target", "kubernetes", "--executor-image",
             "python:3.11-slim", "--package-path", str(stock_project(tmp_path / "stock")), "--module-name",
             "tinypkg.task", "--workers", "1", "--job-name", "stock-job"], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=400)
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    for replica_name in ("chief-0", "worker-0"):
        assert node_facts(done.stdout, replica_name) == stock.facts(), done.stdout[-3000:]
        assert any("packages" in line and "installed" in line for line in lines(done.stdout, replica_name))
