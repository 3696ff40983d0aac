"""The Keras 3 backend this predicting process runs (the table of backends: mlsubmit.jobspec.keras_backends).

Keras reads KERAS_BACKEND once, when it is first imported, so a process picks its backend before anything imports
`keras`: `activate` sets the variable, or says why it cannot (an unknown name, a backend that is not installed, a
Keras already imported under another backend). Light: no Keras, no TensorFlow, no numpy here.
"""

from __future__ import annotations

import os
import sys

from mlsubmit.errors import UsageError, did_you_mean, invalid_value
from mlsubmit.jobspec.keras_backends import BACKENDS, DEFAULT, installed


def parse_backend(text: str | None, *, field: str = "--backend") -> str:
    """`--backend` as typed, else $KERAS_BACKEND, else tensorflow → a known backend name.

    Raises:
        UsageError: a name that is not a Keras backend, naming where it came from.
    """
    if text is None:
        text, field = os.environ.get("KERAS_BACKEND") or DEFAULT, "KERAS_BACKEND"
    name = text.strip().lower()
    if name not in BACKENDS:
        raise invalid_value(field, text, "one of " + ", ".join(BACKENDS), hint=did_you_mean(name, BACKENDS))
    return name


def keras_imported_under() -> str | None:
    """The backend of the Keras this process already imported, or None while Keras is not imported."""
    keras = sys.modules.get("keras")
    backend = getattr(getattr(keras, "backend", None), "backend", None)
    return backend() if callable(backend) else None


def keras_version() -> str | None:
    """The version of the Keras this process would import (tf-keras under TF_USE_LEGACY_KERAS=1), read from its
    metadata without importing it; None when none is installed."""
    import importlib.metadata  # here, not at import: `mlsubmit --help` loads this module (≈ 20 ms)

    from mlsubmit_runtime.kerasmod import legacy_keras_requested

    try:
        return importlib.metadata.version("tf-keras" if legacy_keras_requested() else "keras")
    except importlib.metadata.PackageNotFoundError:
        return None


def keras_major() -> int:
    """The major version of the Keras found here (0 when none is)."""
    version = keras_version() or "0"
    return int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0


_TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tensorflow-macos")


def _unmet_tensorflow_requirements() -> tuple[str, list[str]]:
    """The installed TensorFlow's version and those of its requirements the installed packages do not meet
    ("protobuf<3.20,>=3.9.2 (7.36.2 installed)"), read from metadata: nothing is imported."""
    import importlib.metadata

    from packaging.requirements import InvalidRequirement, Requirement

    for name in _TENSORFLOW_DISTRIBUTIONS:
        try:
            found = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        unmet = []
        for text in found.requires or ():
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            try:
                have = importlib.metadata.version(requirement.name)
            except importlib.metadata.PackageNotFoundError:
                continue  # TensorFlow's own import error names a missing one
            if not requirement.specifier.contains(have, prereleases=True):
                unmet.append(f"{requirement.name}{requirement.specifier} ({have} installed)")
        return found.version, unmet
    return "", []


def tensorflow_import_failed(exc: BaseException) -> UsageError:
    """The one line for a TensorFlow that is installed but fails to import: most often a package it pins (protobuf)
    that a later install lifted — pip's resolver does not weigh what is already installed."""
    version, unmet = _unmet_tensorflow_requirements()
    first = (str(exc).strip().splitlines() or [""])[0][:160]
    found = f"TensorFlow {version}" if version else "TensorFlow"
    if unmet:
        wanted = " ".join(f"'{item.split(' (')[0]}'" for item in unmet)
        return UsageError(f"{found} found here ({sys.executable}) fails to import ({type(exc).__name__}: {first}): it "
                          f"requires {', '.join(unmet)}",
                          hint=f"pip install 'mlsubmit[predict]' {wanted} (pip then picks the versions of the other "
                          "packages that accept them)")
    return UsageError(f"{found} found here ({sys.executable}) fails to import ({type(exc).__name__}: {first})",
                      hint="repair the TensorFlow install (pip check lists what does not fit), or predict in a venv of "
                      "its own: pipx install 'mlsubmit[tensorflow]'")


def check_installed(name: str) -> None:
    """Raises UsageError, with the command that installs it, when the backend's package cannot be imported, when no
    Keras is installed beside it, or when the Keras found (2.x: TensorFlow 2.15 and older) cannot run `name`."""
    if not installed(name):
        raise UsageError(f"invalid value for --backend: received {name!r}, but {name} is not installed",
                         hint=BACKENDS[name].install)
    version = keras_version()
    if version is None:
        raise UsageError(f"mlsubmit predict needs Keras beside {name}, and this Python ({sys.executable}) has none",
                         hint=BACKENDS["tensorflow"].install if name == "tensorflow" else "pip install 'keras>=3'")
    if keras_major() < 3 and name != "tensorflow":
        raise UsageError(f"invalid value for --backend: received {name!r}, but the Keras here is {version}, which "
                         "runs on TensorFlow only (Keras 3 brought the jax and torch backends)",
                         hint="predict with --backend tensorflow, or in a venv with Keras 3: pip install "
                         f"'mlsubmit[{BACKENDS[name].extra}]' keras")


def activate(name: str) -> None:
    """Make `name` the backend Keras is imported under in this process.

    Raises:
        UsageError: the backend is not installed, or Keras was already imported here under another backend
            (a process has one backend for good).
    """
    current = keras_imported_under()
    if current is not None:
        if current != name:
            raise UsageError(f"cannot use --backend {name}: Keras is already imported in this process under "
                             f"{current}, and a process keeps the backend it started with",
                             hint=f"run mlsubmit in a fresh process, or pass --backend {current}")
        return
    check_installed(name)
    os.environ["KERAS_BACKEND"] = name


def version_of(name: str) -> str:
    """The installed version of a backend that is already imported ('' when it is not)."""
    module = sys.modules.get(name)
    return str(getattr(module, "__version__", "")) if module else ""
