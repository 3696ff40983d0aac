"""The Keras backends the trainer runs on, in one table, and the environment each needs before Keras is imported.

    tensorflow  tf.distribute: MirroredStrategy over every local device (the cluster route too)
    jax         keras.distribution.DataParallel over every local device (emulated: XLA host-platform devices)
    torch       one device: Keras 3.15 distributes only on JAX and TensorFlow

Keras reads KERAS_BACKEND once, when it is first imported, so `activate` runs in trainer.task before anything
imports Keras. JAX and torch need no TensorFlow: their input pipeline is numpy (trainer.batches), their TensorBoard
logs are written without it (trainer.event_log), and only the SavedModel export (jax2tf) is skipped where it is
missing.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from trainer.errors import TrainerError, invalid, suggest

BACKEND_VARIABLE = "KERAS_BACKEND"
DEFAULT_BACKEND = "tensorflow"


@dataclass(frozen=True)
class Backend:
    name: str
    package: str  # the module Keras imports for it
    install: str  # what to run when it is missing
    distributes: bool  # whether Keras 3.15 trains data-parallel over several local devices on it
    cannot_export: str | None  # why `model.export` (SavedModel) does not work on it, None when it does


BACKENDS: dict[str, Backend] = {
    "tensorflow": Backend("tensorflow", "tensorflow", "pip install tensorflow", True, None),
    "jax": Backend("jax", "jax", "pip install jax", True, None),  # exported through jax2tf, where TF is installed
    "torch": Backend("torch", "torch", "pip install torch", False,
                     "model.export fails on the torch backend in Keras 3.15 (torch.export rejects the serving "
                     "signature's dynamic batch size); model.keras and model.h5 hold the model"),
}

ONE_DEVICE_REASON = "Keras 3.15 distributes only on JAX and TensorFlow"


def resolve(flag: str | None, env: Mapping[str, str]) -> str:
    """The backend to train with: --backend, else $KERAS_BACKEND, else tensorflow. Raises TrainerError if unknown."""
    name, source = (flag, "--backend") if flag else (env.get(BACKEND_VARIABLE, "").strip(), BACKEND_VARIABLE)
    if not name:
        return DEFAULT_BACKEND
    if name not in BACKENDS:
        raise invalid(source, name, "one of " + ", ".join(BACKENDS), hint=suggest(name, BACKENDS).strip(" ()") or None)
    return name


def check_cluster(name: str, shape: Mapping[str, int]) -> None:
    """Cluster jobs (workers, parameter servers, evaluators) train with tf.distribute: TensorFlow only."""
    if name != "tensorflow":
        roles = ", ".join(f"{role}×{count}" for role, count in shape.items())
        raise TrainerError(f"invalid value for --backend: received {name!r} in a cluster job ({roles}), but cluster "
                           f"training needs --backend tensorflow (tf.distribute); train on one machine to use {name}")


def check_installed(name: str) -> None:
    """Raise TrainerError naming what to install when the backend's package is missing."""
    backend = BACKENDS[name]
    if importlib.util.find_spec(backend.package) is None:
        others = [b for b in BACKENDS if b != name and importlib.util.find_spec(BACKENDS[b].package)]
        alternative = f", or choose --backend {' or '.join(others)}" if others else ""
        raise TrainerError(f"the {name} backend needs the {backend.package} package, which is not installed; run "
                           f"`{backend.install}`{alternative}")


def environment(name: str, emulate: int, gpus: int | None, env: Mapping[str, str]) -> dict[str, str]:
    """The variables to set before Keras (and the backend) are imported: a pure function of the choice.

    JAX emulates N devices as XLA host-platform devices (appended to any XLA_FLAGS) on the CPU platform only;
    `--gpus 0` hides the GPUs from JAX and torch the same way.
    """
    changes = {BACKEND_VARIABLE: name}
    if name == "jax" and emulate:
        from mlsubmit_runtime.devices import jax_emulation_environment

        changes.update(jax_emulation_environment(emulate, env))
    elif name == "jax" and gpus == 0:
        changes["JAX_PLATFORMS"] = "cpu"
    elif name == "torch" and (gpus == 0 or emulate):  # emulating: the CPU, as on the other backends
        changes["CUDA_VISIBLE_DEVICES"] = ""
    return changes


def activate(name: str, emulate: int, gpus: int | None, env: MutableMapping[str, str] | None = None) -> None:
    """Check the backend is installed and set its environment. Call before Keras is first imported."""
    env = os.environ if env is None else env
    check_installed(name)
    env.update(environment(name, emulate, gpus, env))


def cannot_export(name: str) -> str | None:
    """Why this machine cannot write a SavedModel on backend `name`, None when it can: the backend cannot (torch), or
    TensorFlow, which every SavedModel needs (jax exports through jax2tf), is not installed."""
    if BACKENDS[name].cannot_export:
        return BACKENDS[name].cannot_export
    if importlib.util.find_spec("tensorflow") is None:
        return ("a SavedModel export needs TensorFlow, which is not installed here; model.keras and model.h5 hold "
                "the model (install tensorflow beside the trainer to get the export)")
    return None


def installed_version(package: str) -> str | None:
    """The version of `package` (e.g. tensorflow) this process imported, else the installed distribution's, else
    None; never imports it (the JAX and torch routes run without TensorFlow)."""
    import sys
    from importlib import metadata

    module = sys.modules.get(package)
    if module is not None and getattr(module, "__version__", None):
        return str(module.__version__)
    for distribution in (package, f"{package}-cpu"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def version(name: str) -> str:
    """The installed version of the backend's package (import it only after `activate`)."""
    module = __import__(BACKENDS[name].package)
    return str(module.__version__)
