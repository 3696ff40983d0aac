"""Which image each pool of a job runs on, and how: the one decision, asked by every path.

`package`, `config` (both formats), `train` (here, in the emulator, on Vertex AI, legacy, Kubernetes, the Spark/Dask/
Ray clusters), the pre-flight and the cost estimate all ask `choose` (a pool) or `job_image` (the software a package
is checked and run on here); none picks an image alone. The rules, and where they come from:

- **package**: Vertex AI runs a `pythonPackageSpec` only on one of its prebuilt training images ("Configure container
  settings": specify one of the prebuilt container image's URIs in `pythonPackageSpec.executorImageUri`), and only
  before the image's end of availability (mlsubmit.images.catalog).
- **container**: any other image (the default `tensorflow/tensorflow:2.21.0` included, and any `--executor-image` that
  is not a prebuilt image) runs as a custom container: Vertex AI takes those from Artifact Registry or Docker Hub
  ("Custom containers overview"). Its command pip-installs what the image lacks that the prebuilt images carried
  (`Image.adds`), then the staged packages, then runs the module (mlsubmit.images.carried).
- **custom**: the user's own container (`--container-image`, a pool's imageUri) runs as it is.
- **runtime**: a legacy AI Platform job names a runtimeVersion and pythonVersion; its software is the TensorFlow image of
  that runtime. Legacy AI Platform shut down on 2025-01-31, so Vertex AI's image lifecycle does not apply: mlsubmit runs
  such jobs here and in the emulator, on the pairs ml.v1 offered.
- **TPU**: Vertex AI serves no TensorFlow TPU training image since tf-tpu.2-15.cp310's end of availability
  (2025-10-23), and no public TensorFlow image carries Cloud TPU support: a TPU pool runs an image the user names.

Pure: no I/O. The spec is read by duck typing (`pools`, `runtime_version`, ...) so this package never imports
mlsubmit.jobspec (which imports it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlsubmit.errors import UsageError
from mlsubmit.images import catalog
from mlsubmit.images.catalog import Image

PACKAGE, CONTAINER, CUSTOM, RUNTIME = "package", "container", "custom", "runtime"
APIS = ("vertex", "legacy")
# the GPU way out replaces the TPU worker too, so it is accepted on a TPU file or a TPU command line as it stands
_TPU_HINT = ("name an image that carries TensorFlow for Cloud TPU VMs with --executor-image URI (mlsubmit runs it as "
             "a custom container that pip-installs your package), or train on one GPU instead (--tier CUSTOM "
             "--machine-type g2-standard-4 --gpus 1 --workers 0)")
_TPU_GONE = ("Vertex AI serves no TensorFlow TPU training image any more (tf-tpu.2-15.cp310, the last, ended "
             "2025-10-23)")


@dataclass(frozen=True)
class Choice:
    """The image of one pool and how it runs it.

    Attributes:
        uri: what the request names (executorImageUri / containerSpec.imageUri; for "runtime", the runtime version).
        how: "package", "container", "custom" or "runtime" (see the module's docstring).
        image: the table's entry (its software: framework, Python, pins), or None for an image mlsubmit does not know.
        api: "vertex" or "legacy".
        kind: the pool's accelerator kind ("cpu", "gpu", "tpu").
    """

    uri: str
    how: str
    image: Image | None
    api: str = "vertex"
    kind: str = "cpu"

    @property
    def adds(self) -> tuple[tuple[str, str], ...]:
        """(requirement, why) installed before the packages: only where mlsubmit's command installs them."""
        return self.image.adds if self.image is not None and self.how == CONTAINER else ()

    @property
    def runs_package(self) -> bool:
        """Whether the pool runs the staged Python package (every kind but the user's own container)."""
        return self.how != CUSTOM

    def describe(self) -> str:
        """One phrase: "tensorflow/tensorflow:2.21.0 (tensorflow 2.21, Python 3.11; a custom container that
        pip-installs tensorboard~=2.21.0 and the package)"."""
        software = f"{self.image.framework} {self.image.version}, Python {self.image.python}; " if self.image else ""
        how = {PACKAGE: "a Vertex AI prebuilt image (pythonPackageSpec)",
               CONTAINER: "a custom container that pip-installs "
                          + " and ".join([*(r for r, _ in self.adds), "the package"]),
               CUSTOM: "your container, run as it is",
               RUNTIME: "legacy AI Platform's runtime"}[self.how]
        name = self.image.name if self.how == RUNTIME and self.image else self.uri
        return f"{name} ({software}{how})"


def vertex_roles(spec: Any) -> dict[str, str]:
    """{Vertex AI pool role: the spec's role it comes from}: a legacy TPU worker becomes pool 0 (Vertex AI runs the
    program on the TPU VM; the master is dropped), as mlsubmit.jobspec.requests.vertex_pools writes it."""
    pools = spec.pools
    tpu = pools.get("worker")
    if tpu is not None and tpu.machine.family == "tpu":
        return {"chief": "worker", **{role: role for role in pools if role not in ("chief", "worker")}}
    return {role: role for role in pools}


def _kind(spec: Any, role: str) -> str:
    pool = spec.pools.get(role)
    return pool.accelerator_kind if pool is not None else "cpu"


def legacy_runtime(spec: Any) -> tuple[str, str]:
    """(runtimeVersion, pythonVersion) of a legacy job: the runtime given (AI Platform's last, 2.11, by default),
    with its Python (3.7), or the TensorFlow and Python of a prebuilt executor image.

    Raises:
        UsageError: a runtime legacy AI Platform never offered, or a Python it did not pair with that runtime.
    """
    if spec.executor_image is not None:
        found = catalog.runtime_of(spec.executor_image)
        if found is None:
            raise UsageError(f"invalid value for --executor-image: received {spec.executor_image!r}; a legacy job "
                             "names a runtime version, and only a Vertex AI prebuilt TensorFlow image maps to one",
                             hint="pass --runtime-version instead, or --api vertex")
        runtime, python = found
    else:
        runtime = str(spec.runtime_version or catalog.LEGACY_DEFAULT_RUNTIME)
        python = spec.python_version
    offered = catalog.LEGACY_RUNTIMES
    if runtime not in offered:
        raise UsageError(f"invalid value for --runtime-version: received {runtime!r}; legacy AI Platform offered "
                         f"runtime versions up to {catalog.LEGACY_DEFAULT_RUNTIME} (mlsubmit runs these: "
                         f"{', '.join(offered)})", hint=f"use --runtime-version {catalog.LEGACY_DEFAULT_RUNTIME}, "
                                                        f"or --api vertex for TensorFlow {runtime}")
    pythons = catalog.legacy_pythons(runtime)
    if python is None:
        return runtime, pythons[0]
    if str(python) not in pythons:
        raise UsageError(f"invalid value for --python-version: received {python!r}; legacy AI Platform ran runtime "
                         f"{runtime} with Python {' or '.join(pythons)}", hint=f"use --python-version {pythons[0]}")
    return runtime, str(python)


def _legacy(spec: Any, kind: str) -> Choice:
    """A legacy runtime's software: the table's image of that TensorFlow and Python (the nearest Python the table
    has for it otherwise: `python_notes` says so)."""
    runtime, python = legacy_runtime(spec)
    accelerator = kind if kind == "tpu" and runtime == "2.12" else "gpu" if kind == "gpu" else "cpu"
    images = [i for i in catalog.IMAGES if i.framework == "tensorflow" and not i.carrier and i.version == runtime
              and i.accelerator == accelerator]
    if not images:  # e.g. 1.14 or 2.10: the runtime existed, no image of it does
        have = sorted({i.version for i in catalog.IMAGES if i.framework == "tensorflow" and not i.carrier
                       and i.version in catalog.LEGACY_RUNTIMES and i.accelerator == accelerator}, key=catalog.version_key)
        raise UsageError(f"invalid value for --runtime-version: received {runtime!r}; mlsubmit has no image of legacy "
                         f"runtime {runtime} to check and run the job on here (it has {', '.join(have)})",
                         hint=f"use --runtime-version {have[-1]}, or submit the legacy config as it is")
    image = next((i for i in images if i.python == python), max(images, key=lambda i: catalog.version_key(i.python)))
    return Choice(runtime, RUNTIME, image, "legacy", kind)


def choose(spec: Any, role: str = "chief", *, api: str = "vertex") -> Choice:
    """The image of the pool `role` of a Vertex AI job (pool roles: see `vertex_roles`) or of a legacy job.

    Raises:
        UsageError: an image or runtime that does not exist (one line naming the nearest that does).
    """
    if api not in APIS:
        raise ValueError(f"api {api!r} not in {APIS}")
    source = vertex_roles(spec).get(role, role) if api == "vertex" else role
    kind = _kind(spec, source)
    own = dict(spec.pool_images).get(source) or spec.container_image
    if own:
        return Choice(own, CUSTOM, None, api, kind)
    if api == "legacy":
        return _legacy(spec, kind)
    if spec.executor_image:
        found = catalog.find(spec.executor_image)
        if found is not None and not found.carrier:
            return Choice(spec.executor_image, PACKAGE, found, api, kind)
        return Choice(spec.executor_image, CONTAINER, found, api, kind)
    default = catalog.DEFAULT_TPU_TENSORFLOW if kind == "tpu" else catalog.DEFAULT_TENSORFLOW
    image = catalog.tensorflow_image(spec.runtime_version or default, kind, python=spec.python_version)
    return Choice(image.uri, CONTAINER if image.carrier else PACKAGE, image, api, kind)


def pools(spec: Any, *, api: str = "vertex") -> dict[str, Choice]:
    """{pool role: its Choice} for every pool of the job."""
    roles = vertex_roles(spec) if api == "vertex" else {role: role for role in spec.pools}
    return {role: choose(spec, role, api=api) for role in roles}


def job_image(spec: Any, *, api: str = "vertex") -> Image | None:
    """The software a package is checked and run on here: the table's image of the job's pool 0 (a legacy job's
    runtime image), or None (the user's own container, or an image the table does not know)."""
    return choose(spec, "chief", api=api).image


def chosen(spec: Any) -> bool:
    """Whether the job's image was named by the user (a runtime version or an executor image), not mlsubmit's."""
    return spec.runtime_version is not None or spec.executor_image is not None


def refusal(choice: Choice) -> UsageError | None:
    """Why Vertex AI would refuse the pool's image, or None: a prebuilt image past its end of availability (a TPU one
    with the TPU way out). A custom container and a legacy runtime have no such limit."""
    if choice.how != PACKAGE or choice.image is None:
        return None
    gone = catalog.retired(choice.image)
    if gone is not None and choice.kind == "tpu":
        return UsageError(f"{gone.message}; Vertex AI serves no TensorFlow TPU training image any more",
                          hint=_TPU_HINT)
    return gone


def served(spec: Any, say: Callable[[str], None], *, api: str = "vertex", sending: bool = True) -> None:
    """Every pool's image, checked before anything is uploaded or written: one that Vertex AI would refuse is
    refused (`sending`: a job or a config from flags), or said in a warning (a local run: the software still runs
    here). A legacy job's runtime/Python pair is checked by `choose`.

    Raises:
        UsageError: the first pool whose image Vertex AI would refuse.
    """
    for choice in pools(spec, api=api).values():
        gone = refusal(choice)
        if gone is None:
            continue
        if sending:
            raise gone
        say(f"warning: {gone.message}; {gone.hint}")
        return


def migrated(spec: Any, *, named_by_flag: bool) -> tuple[Any, list[str]]:
    """(the spec a Vertex AI config is written for, warnings). An image Vertex AI would refuse is refused when a flag
    named it; when it came from a file being migrated (a legacy runtimeVersion, an old executorImageUri), the document
    is written for the nearest image that still runs, with a warning (and another when the file's Python version
    cannot be kept there); where nothing runs in its place (TPU), the file's image is kept with a warning, and a TPU
    file that names no image, or a runtime no TPU image ever had, is refused (the README's "a TPU pool without an
    image").

    Raises:
        UsageError: a retired image named by --runtime-version or --executor-image; a TPU file with no image.
    """
    try:
        choice = choose(spec)
    except UsageError:  # no such image: refused where the document is built, unless a legacy file's runtime
        if named_by_flag or spec.runtime_version not in catalog.LEGACY_RUNTIMES or spec.executor_image is not None:
            return spec, []
        if _kind(spec, vertex_roles(spec).get("chief", "chief")) == "tpu":  # nothing runs in its place
            raise UsageError(f"the file's TPU runtime {spec.runtime_version} has no Vertex AI image, and {_TPU_GONE}",
                             hint=_TPU_HINT)
        moved = spec.replace(runtime_version=None, python_version=None)
        image = choose(moved).image
        notes = [f"the file's runtime {spec.runtime_version} has no Vertex AI image: written for {image.uri} "
                 f"({image.framework} {image.version}, Python {image.python}) instead"]
        if spec.python_version and spec.python_version != image.python:
            notes.append(f"Python {spec.python_version} cannot be kept: check the trainer on Python {image.python} "
                         f"first (mlsubmit train --local --runtime-version {image.version})")
        return moved, notes
    if choice.kind == "tpu" and not named_by_flag and not chosen(spec) and choice.how == PACKAGE:
        raise UsageError(f"the file names no image for its TPU pool (no runtimeVersion or imageUri), and {_TPU_GONE}",
                         hint=_TPU_HINT)
    gone = refusal(choice)
    if gone is None:
        return spec, []
    if named_by_flag:
        raise gone
    image = choice.image
    nearest = catalog.nearest_available(image)
    if nearest is None or choice.kind == "tpu":
        return spec, [f"{gone.message}: the file's image {image.uri} is kept, and the job would be refused; "
                      f"{gone.hint}"]
    notes = [f"the file's image {image.name} is no longer served by Vertex AI (end of availability "
             f"{image.end_of_availability}): written for {nearest.uri} ({nearest.framework} {nearest.version}, "
             f"Python {nearest.python}) instead"]
    if nearest.python != image.python:
        notes.append(f"Python {image.python} cannot be kept: no image Vertex AI still runs has {image.framework} on "
                     f"Python {image.python}; check the trainer on Python {nearest.python} first (mlsubmit train "
                     f"--local --runtime-version {nearest.version})")
    moved = spec.replace(runtime_version=nearest.version if image.framework == "tensorflow" else None,
                         python_version=None,
                         executor_image=None if image.framework == "tensorflow" else nearest.uri)
    return moved, notes


def python_notes(spec: Any, *, api: str = "vertex") -> list[str]:
    """A Python version the user named that the job's image does not run: said, never dropped silently."""
    wanted = legacy_runtime(spec)[1] if api == "legacy" else spec.python_version
    if wanted is None:
        return []
    image = job_image(spec, api=api)
    if image is None or image.python == str(wanted):
        return []
    return [f"Python {wanted} cannot be kept: mlsubmit has no image of that runtime with it, so the job is checked "
            f"and run here on {image.name}, which runs Python {image.python}"]
