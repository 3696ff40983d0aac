"""Run `python -m mlsubmit …` as if only some of its extras were installed.

The test venv holds every extra (engines, Keras backends, Kubernetes, pytest). A venv holding only `mlsubmit[emulator]`
is its base install (TensorFlow included, about 2 GB) plus two wheels, too slow to build in the suite; what such a
venv proves is that nothing mlsubmit runs imports a distribution its install does not bring. That is checked here on
the real interpreter: the closure of the requirements of `mlsubmit[<extras>]` is read from the installed metadata,
and every top-level module that belongs only to distributions outside it is refused at import, as it would be in
that venv (ModuleNotFoundError). Only the mlsubmit process itself is held to it: the job's replicas run in the job's
own environment, as they would on the service.

    argv = only_declared.command({"emulator"}, "emulator", "--port", "0")   # [python, -c, <bootstrap>, …]
"""

from __future__ import annotations

import json
import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def closure(extras: set[str], root: str = "mlsubmit") -> set[str]:
    """Canonical names of every distribution `root[extras]` brings, following markers as pip would here."""
    seen: set[str] = set()
    pending: list[tuple[str, frozenset[str]]] = [(root, frozenset(extras))]
    done: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, wanted = pending.pop()
        key = (canonicalize_name(name), wanted)
        if key in done:
            continue
        done.add(key)
        seen.add(key[0])
        for line in metadata.distribution(name).requires or ():
            req = Requirement(line)
            if req.marker is not None and not any(req.marker.evaluate({"extra": extra})
                                                  for extra in ("", *sorted(wanted))):
                continue
            pending.append((req.name, frozenset(req.extras)))
    return seen


def refused_modules(extras: set[str]) -> list[str]:
    """Top-level modules installed here whose distributions are all outside the closure of `mlsubmit[extras]`
    and pip (which `python3 -m venv` puts in every venv)."""
    allowed = closure(extras) | {"pip"}
    return sorted(module for module, dists in metadata.packages_distributions().items()
                  if not any(canonicalize_name(dist) in allowed for dist in dists))


_BOOTSTRAP = """\
import importlib.abc, runpy, sys
REFUSED = frozenset({refused})
class OnlyDeclared(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in REFUSED:
            raise ModuleNotFoundError("No module named %r" % fullname, name=fullname)
        return None
sys.meta_path.insert(0, OnlyDeclared())
sys.argv = ["mlsubmit", *sys.argv[1:]]
runpy.run_module("mlsubmit", run_name="__main__", alter_sys=True)
"""


def command(extras: set[str], *args: str, also_refuse: tuple[str, ...] = ()) -> list[str]:
    """argv that runs `mlsubmit args…` with only `mlsubmit[extras]` importable (and never `also_refuse`)."""
    refused = json.dumps(refused_modules(extras) + list(also_refuse))
    return [sys.executable, "-c", _BOOTSTRAP.format(refused=refused), *args]
