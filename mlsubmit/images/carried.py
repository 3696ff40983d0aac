"""A Python package run on a public framework image as a Vertex AI custom container.

Vertex AI runs a Python package (`pythonPackageSpec`) only on its own prebuilt training images, and every TensorFlow
one of those is past its end of availability (mlsubmit.images.catalog). A custom container has no such limit: a
public image that carries TensorFlow and pip (`tensorflow/tensorflow:2.21.0`, Docker Hub) runs the very same
package when its command does what a prebuilt image does at start: `pip install` each staged package in order,
then `python -m <module> <args>`. The packages are read where Vertex AI mounts Cloud Storage in every training
container (Cloud Storage FUSE at `/gcs/<bucket>/<object>`), so nothing is built or pushed.

The pool this module writes:

    containerSpec:
      imageUri: tensorflow/tensorflow:2.21.0
      command: [sh, -c, 'set -e; python -m pip install ... tensorboard~=2.21.0; python -m pip install ...
                /gcs/b/p/trainer-0.1.tar.gz; exec python -m trainer.task "$@"', python-package]
      args: [--epochs, '3']          # the user's, exactly; Vertex AI appends a tuning trial's `--name=value` here
      env: [{name: ..., value: ...}]

`program(pool)` reads either kind of pool as one Python program (executor image, package URIs, module, args, env),
so what edits a program (a tuning trial's arguments, a Keras backend's environment) and what reads it (the emulator,
`jobs describe`, a config read back) work on both; a containerSpec of any other shape is not a Python program
(None). Pure functions, no I/O.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from mlsubmit.errors import invalid_value

MOUNT = "/gcs/"
SCRIPT_NAME = "python-package"  # $0 of the script: what `ps` shows for the shell
_PIP = "python -m pip install --no-cache-dir --disable-pip-version-check"
_STEP = re.compile(re.escape(_PIP) + r" (?P<path>\S+)")
_ADDS = re.compile(re.escape(_PIP) + r" (?P<path>.+)")
_RUN = re.compile(r'exec python -m (?P<module>\S+) "\$@"')


def mounted(uri: str) -> str:
    """gs://bucket/object -> /gcs/bucket/object (where Vertex AI mounts Cloud Storage in a training container)."""
    if not str(uri).startswith("gs://") or len(str(uri)) <= len("gs://"):
        raise invalid_value("--package-uris", uri, "gs:// URIs (a custom container reads them under /gcs/)")
    return MOUNT + str(uri)[len("gs://"):]


def unmounted(path: str) -> str:
    """/gcs/bucket/object -> gs://bucket/object."""
    return "gs://" + path[len(MOUNT):] if path.startswith(MOUNT) else path


def script(package_uris: tuple[str, ...] | list[str], module: str, adds: tuple[str, ...] | list[str] = ()) -> str:
    """The shell line a carrier container runs: what the image lacks that prebuilt images carried (`adds`, one
    `pip install` of requirements), one `pip install` per package, in order, then the module."""
    steps = [f"{_PIP} {' '.join(shlex.quote(r) for r in adds)}"] if adds else []
    steps += [f"{_PIP} {shlex.quote(mounted(uri))}" for uri in package_uris]
    return "; ".join(["set -e", *steps, f'exec python -m {shlex.quote(module)} "$@"'])


def container_spec(image_uri: str, package_uris: tuple[str, ...] | list[str], module: str,
                   args: tuple[str, ...] | list[str] = (), env: tuple[tuple[str, str], ...] = (),
                   adds: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """The containerSpec that installs `adds` and `package_uris` on `image_uri` and runs `python -m module args`."""
    container: dict[str, Any] = {"imageUri": image_uri,
                                 "command": ["sh", "-c", script(package_uris, module, adds), SCRIPT_NAME]}
    if args:
        container["args"] = list(args)
    if env:
        container["env"] = [{"name": key, "value": value} for key, value in env]
    return container


def parse(container: dict[str, Any]) -> dict[str, Any] | None:
    """The Python program (pythonPackageSpec shape) a containerSpec written by `container_spec` runs, or None."""
    command = container.get("command") or []
    if len(command) != 4 or command[:2] != ["sh", "-c"] or command[3] != SCRIPT_NAME:
        return None
    parts = [part.strip() for part in str(command[2]).split(";")]
    if not parts or parts[0] != "set -e":
        return None
    uris = []
    for index, part in enumerate(parts[1:-1]):
        found = _STEP.fullmatch(part) or _ADDS.fullmatch(part)
        if not found:
            return None
        path = shlex.split(found.group("path"))
        if index == 0 and path and not any(p.startswith(MOUNT) or p.startswith("-") for p in path):
            continue  # requirements the image lacks (catalog.Image.adds, read by `added`), installed first
        if len(path) != 1 or not path[0].startswith(MOUNT):
            return None
        uris.append(unmounted(path[0]))
    run = _RUN.fullmatch(parts[-1]) if len(parts) > 1 else None
    if not run:
        return None
    program: dict[str, Any] = {"executorImageUri": container.get("imageUri"), "packageUris": uris,
                               "pythonModule": shlex.split(run.group("module"))[0]}
    if container.get("args"):
        program["args"] = list(container["args"])
    if container.get("env"):
        program["env"] = list(container["env"])
    return program


def added(container: dict[str, Any]) -> list[str]:
    """The requirements a carrier containerSpec installs before its packages (none for any other container)."""
    command = container.get("command") or []
    if parse(container) is None:
        return []
    first = [part.strip() for part in str(command[2]).split(";")][1]
    found = _ADDS.fullmatch(first)
    path = shlex.split(found.group("path")) if found else []
    return [] if not path or path[0].startswith(MOUNT) else path


def program(pool: dict[str, Any] | None) -> dict[str, Any] | None:
    """A pool's Python program: its pythonPackageSpec, or what a carrier containerSpec runs; None otherwise."""
    if not pool:
        return None
    if pool.get("pythonPackageSpec") is not None:
        return pool["pythonPackageSpec"]
    container = pool.get("containerSpec")
    return parse(container) if container else None


def set_program(pool: dict[str, Any], package: dict[str, Any]) -> None:
    """Write `package` (pythonPackageSpec shape) back into `pool` in the pool's own kind."""
    if pool.get("pythonPackageSpec") is not None:
        pool["pythonPackageSpec"] = package
        return
    env = tuple((str(item.get("name", "")), str(item.get("value", ""))) for item in package.get("env") or ())
    pool["containerSpec"] = container_spec(package["executorImageUri"], package.get("packageUris") or (),
                                           package["pythonModule"], package.get("args") or (), env,
                                           adds=added(pool.get("containerSpec") or {}))


def as_package_pool(pool: dict[str, Any] | None) -> dict[str, Any] | None:
    """`pool` with a carrier containerSpec replaced by the pythonPackageSpec it runs (any other pool unchanged)."""
    if not pool or pool.get("pythonPackageSpec") is not None or not pool.get("containerSpec"):
        return pool
    package = parse(pool["containerSpec"])
    if package is None:
        return pool
    return {**{k: v for k, v in pool.items() if k != "containerSpec"}, "pythonPackageSpec": package}
