"""The Keras 3 backends a job can train on: one table, and what is derived from it (pure).

`--backends tensorflow,jax,torch` runs the same job once per backend, with `KERAS_BACKEND=<name>` in every
replica's environment. Each backend's row says which module must be importable for `train --local`, which pip extra
of mlsubmit provides it, what the cloud's `pip install` needs per pool kind (the prebuilt TensorFlow images carry
TensorFlow only), and how Keras spreads one replica over several devices with it.

Example:
    >>> parse_backends(["jax,torch", "jax"])
    ('jax', 'torch')
    >>> requirements("jax", "gpu")
    ('jax[cuda12]',)
"""

from __future__ import annotations

from dataclasses import dataclass

from mlsubmit.errors import UsageError, did_you_mean, invalid_value
from mlsubmit.extras import found

VARIABLE = "KERAS_BACKEND"
DEFAULT = "tensorflow"  # what Keras runs when KERAS_BACKEND is not set
KINDS = ("cpu", "gpu", "tpu")


@dataclass(frozen=True)
class KerasBackend:
    name: str  # KERAS_BACKEND's value
    module: str  # imported by Keras for this backend; must be importable where the job runs
    extra: str  # the mlsubmit extra that installs it (the core carries no framework)
    cloud: dict[str, tuple[str, ...]]  # pool kind -> requirements the cloud's pip install adds
    data_parallel: str  # how one replica uses several devices with this backend

    @property
    def install(self) -> str:
        return f"pip install 'mlsubmit[{self.extra}]'"


BACKENDS: dict[str, KerasBackend] = {b.name: b for b in (
    KerasBackend("tensorflow", "tensorflow", "tensorflow", {kind: () for kind in KINDS},
                 "tf.distribute.MirroredStrategy over the replica's GPUs (the prebuilt images carry TensorFlow)"),
    KerasBackend("jax", "jax", "jax", {"cpu": ("jax",), "gpu": ("jax[cuda12]",), "tpu": ("jax[tpu]",)},
                 "keras.distribution.DataParallel over jax.devices()"),
    KerasBackend("torch", "torch", "torch", {"cpu": ("torch",), "gpu": ("torch",), "tpu": ("torch",)},
                 "one device per process: Keras 3 does not spread a torch model over several GPUs"),
)}


def parse_backends(values: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """`--backends a,b --backends c` → ('a', 'b', 'c'), in order, duplicates dropped, any case.

    Raises:
        UsageError: an unknown name (listing the known ones), or an empty list.
    """
    names: list[str] = []
    for value in values or ():
        for item in value.split(","):
            name = item.strip().lower()
            if not name:
                raise invalid_value("--backends", value, f"comma-separated names from {', '.join(BACKENDS)}")
            if name not in BACKENDS:
                raise invalid_value("--backends", item.strip(), f"one of {', '.join(BACKENDS)}",
                                    hint=did_you_mean(name, BACKENDS))
            names.append(name)
    return tuple(dict.fromkeys(names))


def requirements(backend: str, kind: str) -> tuple[str, ...]:
    """What the cloud must pip-install for `backend` on a pool whose accelerators are of `kind`."""
    return BACKENDS[backend].cloud[kind]


def installed(name: str) -> bool:
    """Whether the backend's module can be imported here (found, not imported)."""
    return found(BACKENDS[name].module)


def require_installed(backends: tuple[str, ...], *, where: str = "mlsubmit's environment") -> None:
    """Every backend's module importable here (found, not imported).

    Raises:
        UsageError: the first missing one, naming the extra that installs it.
    """
    for name in backends:
        backend = BACKENDS[name]
        if not installed(name):
            raise UsageError(f"invalid value for --backends: {name} needs the {backend.module} package, which is not "
                             f"installed in {where}", hint=f"install it with {backend.install}")


def refuse_for_legacy(backends: tuple[str, ...]) -> None:
    """Legacy AI Platform sets no environment variable for a Python package, so KERAS_BACKEND cannot reach it."""
    others = [name for name in backends if name != "tensorflow"]
    if others:
        raise UsageError(f"invalid value for --backends with --api legacy: {others[0]}; a legacy job sets no "
                         "environment variables (KERAS_BACKEND) for its Python package",
                         hint="use --api vertex, or --backends tensorflow")
