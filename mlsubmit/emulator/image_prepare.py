"""PREPARING on the job's image: the packages installed on an environment built from its prebuilt image.

mlsubmit.images.envs does the work (TensorFlow, PyTorch, scikit-learn and XGBoost images); this only turns its
errors (an environment that cannot be built: the job fails with pip's cause) into the job's error, and returns None
(use `prepare.venv_python`, mlsubmit's own environment) for a custom container, an unknown image, a job
whose KERAS_BACKEND is not tensorflow (an image environment carries the image's TensorFlow only; jax or torch from
the registry would be GBs: mlsubmit's own environment holds them, as for `train --local --backends`), or with
MLSUBMIT_IMAGE_ENV=0. What ran goes to the job's logs: the versions the job imports, and a note for each
requirement that replaces a framework distribution of the image (mlsubmit.images.imported). A package run on a
public image as a custom container is not installed here: its replicas run the container command they were sent
(`container_stand_in`, emulator.container_run).
"""

from __future__ import annotations

from pathlib import Path

from mlsubmit.emulator.prepare import PrepareError
from mlsubmit.errors import MlsubmitError


def image_python(spec, packages: list[Path], say, *, api: str = "vertex") -> Path | None:
    """The python of a venv holding `packages` on the job's image environment (mlsubmit.images.choose: a legacy job's
    on its runtime), or None. Raises PrepareError."""
    from mlsubmit.images import envs as image_env

    backend = spec.env_dict.get("KERAS_BACKEND", "tensorflow")
    if backend != "tensorflow" and image_env.enabled():
        say(f"KERAS_BACKEND={backend}: the job runs in mlsubmit's own environment (an image's environment carries "
            "its TensorFlow only)")
        return None
    try:
        image = image_env.runnable_image(spec, say, api=api)
        if image is None:
            return None
        python, reused = image_env.job_python(image, packages, say)
    except MlsubmitError as err:  # out of disk too: the job fails with that line
        raise PrepareError(f"The packages could not be installed on the job's image: {err.message}") from None
    from mlsubmit.images.imported import imported

    ran = imported(python)  # what the job imports: a requirement may replace the image's framework
    say(f"Packages {'already installed' if reused else 'installed'} on image {image.name}: {ran.line()}.")
    for note in ran.replaced():  # as `train --local` and the pre-flight say it
        say(f"note: {note}")
    if not reused:  # what mlsubmit keeps, bounded (MLSUBMIT_CACHE_MAX_SIZE / _MAX_AGE); never what a job holds
        from mlsubmit.cache.inventory import after_build

        after_build(say)
    return python


def without_backend_requirements(packages: list[Path], say) -> list[Path]:
    """The job's packages less a Keras backend's requirements sdist (mlsubmit-keras-jax, -torch): its pins are for
    the cloud image (torch 2.14.1 for Python 3.10 is a CUDA build of several GB from the index), while a jax or torch
    job runs here on mlsubmit's own environment, which holds the backend (or says which extra installs it)."""
    import importlib.metadata

    from mlsubmit.jobspec.keras_backends import BACKENDS
    from mlsubmit.packaging.backend_dist import backend_of_archive

    kept = []
    for path in packages:
        backend = backend_of_archive(path)
        if backend is None:
            kept.append(path)
            continue
        try:
            here = f"{backend} {importlib.metadata.version(BACKENDS[backend].module)} of mlsubmit's environment"
        except importlib.metadata.PackageNotFoundError:
            here = f"mlsubmit's environment, which lacks {backend} ({BACKENDS[backend].install})"
        say(f"Not installing {path.name} (the backend's packages for the cloud image): the job runs on {here}.")
    return kept


def container_stand_in(plan, packages: list[Path], work: Path, say):
    """For a job whose every replica runs a containerSpec command on an image mlsubmit knows: the image's
    environment standing in for the image, and the packages where the command reads them (emulator.container_run);
    None when the packages are to be installed here instead (image environments off, a non-TensorFlow Keras backend,
    an image the table does not know, a pool without a command). Raises PrepareError."""
    from mlsubmit.emulator.container_run import Container, mount
    from mlsubmit.images import envs as image_env

    if not plan.carried or not all(replica.command for replica in plan.replicas) or not image_env.enabled():
        return None
    backend = plan.spec.env_dict.get("KERAS_BACKEND", "tensorflow")
    if backend != "tensorflow":
        say(f"KERAS_BACKEND={backend}: the job runs in mlsubmit's own environment (an image's environment carries "
            "its TensorFlow only); its packages are installed by the emulator, not by its container command")
        return None
    try:
        image = image_env.runnable_image(plan.spec, say, api=plan.api)
        if image is None:
            return None
        python, _ = image_env.image_python(image, say)
        folder = mount(plan.package_uris, packages, work / "gcs")
    except (MlsubmitError, ValueError) as err:
        raise PrepareError(f"The job's image could not be prepared: {getattr(err, 'message', err)}") from None
    say(f"Each replica runs the container command as sent, on image {image_env.versions_line(image, python)} "
        f"(a fresh environment per replica; /gcs/ is the emulated Cloud Storage, mounted at {folder}/)")
    return Container(image, python, folder)
