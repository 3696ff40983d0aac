"""RUNNING a custom container's command as it was sent: the image's environment standing in for the image.

A package run on a public framework image (mlsubmit.images.carried) is a `containerSpec` whose command installs
the staged packages and runs the module. The emulator does not install them itself: each replica runs that
command, byte for byte (`sh -c '<script>' python-package <args>`), so an ordering or quoting mistake in what a
client sent fails here as it fails in the cloud (pip's own error, in the replica's log). What stands in for the
container:

- **the image**: a fresh environment per replica, with no pip or packages of its own, that sees the image's
  environment (mlsubmit.images.envs: the image's Python, TensorFlow and pip) beneath it, first on PATH as `python`;
  what the command's `python -m pip install` installs goes into it alone (a package the image carries is replaced
  there, never in the shared image environment), and it is removed with the job;
- **Cloud Storage FUSE**: Vertex AI mounts buckets at `/gcs/<bucket>/<object>`; here the objects the command reads
  (the package URIs) are downloaded from the emulated Cloud Storage to `<job>/gcs/<bucket>/<object>`, and `/gcs/`
  in the command and its arguments names that folder — the one change made to what was sent. A path under `/gcs/`
  the job writes stays in that folder (it is not uploaded).

Only with image environments on (MLSUBMIT_IMAGE_ENV, the default) and a TensorFlow Keras backend: otherwise the
emulator installs the packages into mlsubmit's own environment as before (image_prepare).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.images import carried

_SHELL_SAFE = re.compile(r"[A-Za-z0-9_./@%+=:,-]+")


@dataclass(frozen=True)
class Container:
    """What stands in for a job's container image: the image, its environment's python, the mounted bucket folder."""

    image: object  # mlsubmit.images.catalog.Image
    image_python: Path
    mount: Path

    def argv(self, command: tuple[str, ...]) -> tuple[str, ...]:
        """The command and args as sent, with Cloud Storage FUSE's `/gcs/` naming the mounted folder."""
        return tuple(part.replace(carried.MOUNT, f"{self.mount}/") for part in command)

    def environment(self, into: Path, env: dict[str, str]) -> dict[str, str]:
        """`env` for a replica whose container is a fresh environment at `into` on the image's (what a new container
        starts with): its `python` first on PATH."""
        from mlsubmit.images.job_envs import layered_venv

        shutil.rmtree(into, ignore_errors=True)  # a preempted job starts again on new machines
        python = layered_venv(self.image, self.image_python, into)
        return {**env, "PATH": f"{python.parent}:{env.get('PATH') or '/usr/bin:/bin'}"}


def mount(uris: tuple[str, ...], packages: list[Path], folder: Path) -> Path:
    """Put each fetched package where the container reads it: `folder/<bucket>/<object>` for `gs://bucket/object`.

    Raises:
        ValueError: `folder` holds a character a shell would read (the command is run by `sh`, unchanged).
    """
    if not _SHELL_SAFE.fullmatch(str(folder)):
        raise ValueError(f"the emulator's work folder {folder} has characters a shell reads; set TMPDIR to a plain "
                         "path")
    for uri, path in zip(uris, packages, strict=True):
        target = folder / carried.mounted(uri)[len(carried.MOUNT):]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return folder
