"""TensorFlow-only test files start their processes without the test venv's other frameworks (#41).

The test venv carries JAX, torch, scikit-learn, pandas and SciPy for the tests that train or predict with them. When
they are installed, TensorFlow and Keras import them at start-up whether or not a program uses them (TF Lite's util
imports jax, Keras's scikit-learn wrapper sklearn, its array slicing pandas, TensorFlow's legacy Keras engine
scipy.sparse): `import tensorflow, keras, matplotlib.pyplot` took 6.5 CPU-s with them and 4.9 without (measured
2026-12-07 on this project's 2-core machine, three runs each), and the suite starts hundreds of such processes. The
image a job runs on by default (tensorflow/tensorflow:2.21.0 and the trainer's requirements) carries none of them.

So, for the files in FILES (their subprocesses need TensorFlow and the trainer's requirements only), every process
the file starts runs as it would where those frameworks are not installed: `import jax` raises ModuleNotFoundError
and `importlib.util.find_spec("jax")` is None. How: `_mlsubmit_test_without.pth` in the test venv's site-packages
(written here, idempotently) reads MLSUBMIT_TEST_WITHOUT at each Python's start and, when it is set, stops the path
finder from finding the modules it names. The pytest workers themselves started without it (the digits data comes
from scikit-learn in-process); a module fixture sets it while a listed file runs, so the mlsubmit processes, replicas
and servers that file's fixtures and tests start inherit it. A file that needs one of the frameworks in a subprocess
is simply not listed (a missing framework fails loudly there, never silently).

The files in WITHOUT_GOOGLE_API (their processes call no Google API: no emulator, no submission, GCS through
google-cloud-storage only) also start them without googleapiclient, which `import tensorflow` imports where it is
installed (gce_cluster_resolver, which does without it where it is not, as on the default image): 0.15-0.2 CPU-s a
TensorFlow process (measured 2026-12-07, `from googleapiclient import discovery` after numpy and protobuf).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

import pytest

VARIABLE = "MLSUBMIT_TEST_WITHOUT"
HIDDEN = ("jax", "jaxlib", "torch", "sklearn", "pandas", "scipy")
FILES = frozenset({
    "test_trainer_training.py", "test_local_training.py", "test_trainer_hostile.py", "test_chatter.py",
    "test_submit_train.py", "test_cost_preemption.py", "test_tuning_submit.py", "test_jobs_cli.py",
    "test_jobs_follow.py", "test_kube_cluster.py", "test_container_command.py", "test_submit_idempotent.py",
    "test_capacity.py", "test_predict_ensemble.py", "test_engine_spark.py", "test_engine_dask.py",
    "test_engine_ray.py", "test_runtime_package.py", "test_byo_trainers.py", "test_gpu_scaling.py",
})
WITHOUT_GOOGLE_API = frozenset({
    "test_trainer_training.py", "test_local_training.py", "test_trainer_hostile.py", "test_chatter.py",
    "test_runtime_package.py", "test_gpu_scaling.py",
})
# Files whose jobs each run on the Keras backend their KERAS_BACKEND names: those processes start without the other
# backends (Keras imports them at start-up where installed: 7.2 -> 5.9 CPU-s for a small fit on JAX, 9.3 -> 7.7 on
# torch), and without what else the file's processes never need (scikit-learn and pandas; the examples' backends
# recipe writes its digits with scikit-learn); the processes without KERAS_BACKEND (mlsubmit, the emulator, the
# recipe itself) see every backend.
ONE_KERAS_BACKEND = {"test_train_backends.py": ("sklearn", "pandas"), "test_trainer_backends.py": ("sklearn", "pandas"),
                     "test_backends_job.py": ()}
_MODULE = "_mlsubmit_test_without"
_SOURCE = '''\
"""Written by mlsubmit's test suite (tests/support/without_frameworks.py): with MLSUBMIT_TEST_WITHOUT set, the
modules it names are not found, as where they are not installed."""
import os
import sys
from importlib.machinery import PathFinder

_NAMES = {name for name in os.environ.get("MLSUBMIT_TEST_WITHOUT", "").split(",") if name}
# "other-keras-backends": in a process whose KERAS_BACKEND names a backend, the others (JAX needs SciPy)
_OTHERS = {"tensorflow": ("jax", "jaxlib", "torch", "scipy"), "jax": ("torch",), "torch": ("jax", "jaxlib", "scipy")}
if "other-keras-backends" in _NAMES:
    _NAMES |= set(_OTHERS.get(os.environ.get("KERAS_BACKEND", ""), ()))
_HIDDEN = frozenset(_NAMES - {"other-keras-backends"})


class _Without(PathFinder):
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in _HIDDEN:
            return None
        return PathFinder.find_spec(fullname, path, target)


if _HIDDEN:
    sys.meta_path[:] = [_Without if finder is PathFinder else finder for finder in sys.meta_path]
'''
_PTH = f"import os; os.environ.get({VARIABLE!r}) and __import__({_MODULE!r})\n"


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        part = path.with_name(f".{path.name}.{os.getpid()}")
        part.write_text(text)
        part.replace(path)


def pytest_configure(config) -> None:
    if sys.prefix == sys.base_prefix:  # not a virtual environment: nothing of the user's Python is touched
        return
    site = Path(sysconfig.get_paths()["purelib"])
    _write(site / f"{_MODULE}.py", _SOURCE)
    _write(site / f"{_MODULE}.pth", _PTH)


@pytest.fixture(scope="module", autouse=True)
def _without_other_frameworks(request):
    name = Path(str(request.node.path)).name
    if name in FILES:
        hidden = HIDDEN + (("googleapiclient",) if name in WITHOUT_GOOGLE_API else ())
    elif name in ONE_KERAS_BACKEND:
        hidden = (*ONE_KERAS_BACKEND[name], "other-keras-backends")
    else:
        yield
        return
    before = os.environ.get(VARIABLE)
    os.environ[VARIABLE] = ",".join(hidden)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(VARIABLE, None)
        else:
            os.environ[VARIABLE] = before
