"""CLI commands, one module each, found by name: every module here defines `register(app)`.

Keep module-level imports light (typer, the standard library, mlsubmit's own light modules): heavy imports
(TensorFlow, google-cloud-storage, googleapiclient) go inside the command functions.
"""

from __future__ import annotations

import importlib
import pkgutil

# Commands appear in `mlsubmit --help` in this order; modules not named here follow alphabetically.
ORDER = ("train", "config", "package", "jobs", "emulator", "predict")


def register(app) -> None:
    names = sorted((m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")),
                   key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    for name in names:
        importlib.import_module(f"{__name__}.{name}").register(app)
