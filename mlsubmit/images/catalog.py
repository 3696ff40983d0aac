"""The one table of Vertex AI prebuilt training images, and the lookups that pick one.

Each entry is a real image of `us-docker.pkg.dev/vertex-ai/training/` (the same images are served from
`europe-docker.pkg.dev` and `asia-docker.pkg.dev`), with its Python version and the framework packages it carries.
A legacy `runtimeVersion` ("2.11") + `pythonVersion` ("3.7") maps through this table to the TensorFlow image of that
version; a version with no image is one line naming the nearest that exists. Pure data plus small lookups.

Facts and their sources:
- Names, framework versions, Python versions, CUDA and accelerator kind: the Vertex AI page "Prebuilt containers
  for custom training" (cloud.google.com/vertex-ai/docs/training/pre-built-containers; its 2026 copy lives at
  docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/pre-built-containers). The
  naming changed over time: `tf-cpu.2-6` (Python 3.7) before `tf-cpu.2-8.py310`; 2.8, 2.9 and 2.11 exist in both
  spellings; there is no TensorFlow 2.10 or 2.0 training image; TPU images are `tf-tpu.2-15.cp310` and
  `tf-tpu.2-12` (Python 3.8), PyTorch's are `pytorch-xla` (CPU), `pytorch-gpu` and `pytorch-tpu.*.cp310`.
- Pins of TensorFlow images: TensorFlow's own wheel metadata (`Requires-Dist` of tensorflow X.Y.last on PyPI,
  read with `pip install --dry-run --no-deps --report`), e.g. tensorflow 2.17.1 requires `tensorboard<2.18,>=2.17`,
  `keras>=3.2.0`, `protobuf<5.0.0dev,>=3.20.3` and `numpy<2.0.0,>=1.23.5`. Where the page lists the exact
  version an image ships (numpy in the 1.15 and 2.1-2.4 images, every package of scikit-learn/XGBoost images),
  that version is the pin. `tf-keras` is not a TensorFlow requirement: for TensorFlow 2.16+ the entry names the
  tf-keras release made for that TensorFlow (tf-keras 2.17.0 requires `tensorflow<2.18,>=2.17`), which Keras-2
  code (`TF_USE_LEGACY_KERAS=1`) needs installed on top.
- Python of the TensorFlow wheels agrees: tensorflow 2.12+ requires Python >= 3.8, 2.14+ >= 3.9.
- PyTorch images: torch X.Y (its newest patch on the index, e.g. 2.4.1, whose Requires-Dist brings the NVIDIA CUDA
  libraries and triton on Linux x86_64) and a numpy 1 (see _TORCH_NUMPY); scikit-learn and XGBoost images: the
  versions the Vertex AI page lists.

Example:
    >>> tensorflow_image("2.11", "gpu", python="3.7").uri
    'us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-11:latest'

Which image a job runs and how is decided in one place, mlsubmit.images.choose; this module only holds the facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import date

from mlsubmit.errors import UsageError

REGISTRY = "us-docker.pkg.dev/vertex-ai/training/"
MIRRORS = ("us-docker.pkg.dev", "europe-docker.pkg.dev", "asia-docker.pkg.dev")
DEFAULT_TENSORFLOW = "2.21"  # a Vertex AI job that names neither --runtime-version nor --executor-image: a carrier
DEFAULT_TPU_TENSORFLOW = "2.15"  # the newest TensorFlow TPU training image (retired 2025-10-23: see choose)
LEGACY_DEFAULT_RUNTIME = "2.11"  # the last runtime version legacy AI Platform Training offered (its default here)
# registries that serve Docker Hub's images under another name: a carrier is the same image there
_DOCKER_HUB_NAMES = ("docker.io/", "index.docker.io/", "registry-1.docker.io/", "mirror.gcr.io/")
ACCELERATORS = ("cpu", "gpu", "tpu")


@dataclass(frozen=True)
class Image:
    """One prebuilt training image.

    Attributes:
        name: the image's path under the registry without the tag ("tf-cpu.2-17.py310").
        framework: "tensorflow", "pytorch", "scikit-learn" or "xgboost".
        version: the framework's MAJOR.MINOR ("2.17").
        accelerator: "cpu", "gpu" or "tpu".
        python: the image's Python MAJOR.MINOR ("3.10").
        pins: (package, requirement) for the framework packages it carries, e.g. ("tensorboard", ">=2.17,<2.18").
        end_of_patch, end_of_availability: ISO dates from Google's "Supported frameworks" table (after the second,
            Vertex AI no longer runs the image); None where no source gives one.
        lifecycle_source: where the dates come from (or why an image without dates counts as retired/served).
        carrier: a public image (not Vertex AI's) that runs the Python package as a custom container
            (mlsubmit.images.carried); its `name` is the whole image reference.
        adds: (requirement, why) for what the prebuilt images this one replaces carried and trainers import, but
            it lacks: installed before the job's packages, here and in the cloud (TensorBoard on TensorFlow 2.21).
        listed: (distribution, version) for the packages beside the framework that Google's table lists for the
            image (pandas, scikit-learn, xgboost, cloudml-hypertune; "" where it names no version); a carrier lists
            those of the image it replaces. Not in the image's environment here: a job gets the ones its package
            imports (mlsubmit.images.listed), in its requirements environment and its container command.
    """

    name: str
    framework: str
    version: str
    accelerator: str
    python: str
    pins: tuple[tuple[str, str], ...] = ()
    end_of_patch: str | None = None
    end_of_availability: str | None = None
    lifecycle_source: str = ""
    carrier: bool = False
    adds: tuple[tuple[str, str], ...] = ()
    listed: tuple[tuple[str, str], ...] = ()

    @property
    def module(self) -> str:
        """The framework's import name ("tensorflow", "torch", "sklearn", "xgboost")."""
        return {"pytorch": "torch", "scikit-learn": "sklearn"}.get(self.framework, self.framework)

    @property
    def uri(self) -> str:
        return self.name if self.carrier else f"{REGISTRY}{self.name}:latest"

    @property
    def key(self) -> str:
        """The image's name as one path component ("tf-cpu.2-17.py310", "tensorflow_tensorflow_2.21.0")."""
        return self.name.replace("/", "_").replace(":", "_")

    def pin(self, package: str) -> str | None:
        """The requirement this image carries for `package` ("keras" -> ">=3.2.0"), or None."""
        return dict(self.pins).get(package)

    def describe(self) -> str:
        return f"{self.name} ({self.framework} {self.version}, Python {self.python})"


# TensorFlow 2.8-2.11 declare `numpy>=1.20` with no upper bound, but were built against numpy 1.x (numpy 2 fails
# `import tensorflow`; numpy 1.24 removed the aliases they use, and TensorFlow 2.12 itself caps numpy<=1.24.3): their
# images carry a numpy 1 below 1.24, so the table caps what the metadata leaves open.
_NUMPY1 = ">=1.20,<1.24"
_PB5 = "!=4.21.0,!=4.21.1,!=4.21.2,!=4.21.3,!=4.21.4,!=4.21.5,<5.0.0dev,>=3.20.3"
# TensorFlow version -> (python versions with an image, requirement pins from tensorflow X.Y.last's metadata)
_TENSORFLOW: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "2.17": (("3.10",), {"tensorflow": "==2.17.*", "keras": ">=3.2.0", "tf-keras": "==2.17.*",
                         "tensorboard": ">=2.17,<2.18", "protobuf": _PB5, "numpy": ">=1.23.5,<2.0.0",
                         "ml-dtypes": ">=0.3.1,<0.5.0"}),
    "2.16": (("3.10",), {"tensorflow": "==2.16.*", "keras": ">=3.0.0", "tf-keras": "==2.16.*",
                         "tensorboard": ">=2.16,<2.17", "protobuf": _PB5, "numpy": ">=1.23.5,<2.0.0",
                         "ml-dtypes": "~=0.3.1"}),
    "2.15": (("3.10",), {"tensorflow": "==2.15.*", "keras": ">=2.15.0,<2.16", "tensorboard": ">=2.15,<2.16",
                         "protobuf": _PB5, "numpy": ">=1.23.5,<2.0.0", "ml-dtypes": "~=0.3.1"}),
    "2.14": (("3.10",), {"tensorflow": "==2.14.*", "keras": ">=2.14.0,<2.15", "tensorboard": ">=2.14,<2.15",
                         "protobuf": _PB5, "numpy": ">=1.23.5,<2.0.0", "ml-dtypes": "==0.2.0"}),
    "2.13": (("3.10",), {"tensorflow": "==2.13.*", "keras": ">=2.13.1,<2.14", "tensorboard": ">=2.13,<2.14",
                         "protobuf": _PB5, "numpy": ">=1.22,<=1.24.3"}),
    # tensorflow 2.12 also requires jax>=0.3.15 (unbounded): on the 2.12 TPU image's Python 3.8 pip's full
    # resolve picks a jax whose jaxlib has no 3.8 wheel (seen 2026-11-25); a cap before jax 0.4.14 leaves only
    # sdists, which the --only-binary check cannot take, so no jax pin yet (known gap)
    "2.12": (("3.10",), {"tensorflow": "==2.12.*", "keras": ">=2.12.0,<2.13", "tensorboard": ">=2.12,<2.13",
                         "protobuf": _PB5, "numpy": ">=1.22,<=1.24.3"}),
    "2.11": (("3.10", "3.7"), {"tensorflow": "==2.11.*", "keras": ">=2.11.0,<2.12", "tensorboard": ">=2.11,<2.12",
                               "protobuf": ">=3.9.2,<3.20", "numpy": _NUMPY1}),
    "2.9": (("3.10", "3.7"), {"tensorflow": "==2.9.*", "keras": ">=2.9.0rc0,<2.10.0", "tensorboard": ">=2.9,<2.10",
                              "protobuf": ">=3.9.2,<3.20", "numpy": _NUMPY1}),
    "2.8": (("3.10", "3.7"), {"tensorflow": "==2.8.*", "keras": ">=2.8.0rc0,<2.9", "tensorboard": ">=2.8,<2.9",
                              "protobuf": ">=3.9.2,<3.20", "numpy": _NUMPY1}),
    "2.7": (("3.7",), {"tensorflow": "==2.7.*", "keras": ">=2.7.0rc0,<2.8", "tensorboard": "~=2.6",
                       "protobuf": ">=3.9.2,<3.20", "numpy": ">=1.14.5,<1.24"}),
    "2.6": (("3.7",), {"tensorflow": "==2.6.*", "keras": ">=2.6.0,<2.7", "tensorboard": ">=2.6.0,<2.7",
                       "protobuf": ">=3.9.2,<3.20", "numpy": "~=1.19.2"}),
    "2.5": (("3.7",), {"tensorflow": "==2.5.*", "keras-nightly": "~=2.5.0.dev", "tensorboard": "~=2.5",
                       "protobuf": ">=3.9.2", "numpy": "~=1.19.2"}),
    "2.4": (("3.7",), {"tensorflow": "==2.4.*", "tensorboard": "~=2.4", "protobuf": ">=3.9.2", "numpy": "==1.19.4"}),
    "2.3": (("3.7",), {"tensorflow": "==2.3.*", "tensorboard": ">=2.3.0,<3", "protobuf": ">=3.9.2",
                       "numpy": "==1.18.5"}),
    "2.2": (("3.7",), {"tensorflow": "==2.2.*", "tensorboard": ">=2.2.0,<2.3.0", "protobuf": ">=3.8.0",
                       "numpy": "==1.18.5"}),
    "2.1": (("3.7",), {"tensorflow": "==2.1.0", "tensorboard": ">=2.1.0,<2.2.0", "protobuf": ">=3.8.0",
                       "numpy": "==1.18.0"}),
    # tensorflow 1.15.0 declares protobuf>=3.6.1 unbounded, but its generated code fails `import tensorflow` under
    # protobuf 4 ("Descriptors cannot be created directly", protobuf 4.21.0's breaking change): its image carried a
    # protobuf 3, so the table caps it as the 2.x entries are capped
    "1.15": (("3.7",), {"tensorflow": "==1.15.0", "tensorboard": ">=1.15.0,<1.16.0", "protobuf": ">=3.6.1,<3.20",
                        "numpy": "==1.16.5"}),
}
_TPU = {"2.15": ("tf-tpu.2-15.cp310", "3.10"), "2.12": ("tf-tpu.2-12", "3.8")}


def _tensorflow_images() -> list[Image]:
    images = []
    for version, (pythons, pins) in _TENSORFLOW.items():
        major, minor = version.split(".")
        pinned = tuple(pins.items())
        for python in pythons:
            suffix = ".py310" if python == "3.10" else ""
            images += [Image(f"tf-{kind}.{major}-{minor}{suffix}", "tensorflow", version, kind, python, pinned)
                       for kind in ("cpu", "gpu")]
        if version in _TPU:
            name, python = _TPU[version]
            images.append(Image(name, "tensorflow", version, "tpu", python, pinned))
    return images


_SKLEARN_16 = (("scikit-learn", "==1.6.1"), ("numpy", "==1.26.4"), ("xgboost", "==2.1.3"))
_SKLEARN_10 = (("scikit-learn", "==1.0"), ("numpy", "==1.18.5"), ("xgboost", "==1.6.2"))
# PyTorch images: torch X.Y's newest patch from the index (the Linux x86_64 wheel is the CUDA 12 build; it runs on the
# CPU here) and a numpy 1 beside it: torch 2.2 and 2.3 were built against numpy 1 (numpy 2 support came with 2.4),
# and the images of that time carry numpy 1.26. The XLA/TPU images' torch_xla is not installed here (known gap).
_TORCH_NUMPY = ("numpy", ">=1.21,<2")
IMAGES: tuple[Image, ...] = (*_tensorflow_images(),
    *(Image(f"pytorch-{kind}.{version.replace('.', '-')}.py310", "pytorch", version, "cpu" if kind == "xla" else kind,
            "3.10", (("torch", f"=={version}.*"), _TORCH_NUMPY))
      for version in ("2.4", "2.3", "2.2") for kind in ("xla", "gpu")),
    Image("pytorch-tpu.2-2.cp310", "pytorch", "2.2", "tpu", "3.10", (("torch", "==2.2.*"), _TORCH_NUMPY)),
    Image("sklearn-cpu.1-6", "scikit-learn", "1.6", "cpu", "3.10", _SKLEARN_16),
    Image("sklearn-gpu.1-6", "scikit-learn", "1.6", "gpu", "3.10", _SKLEARN_16),
    Image("sklearn-cpu.1-0", "scikit-learn", "1.0", "cpu", "3.7", _SKLEARN_10),  # numpy 1.18.5: no wheel for 3.10
    Image("sklearn-gpu.1-0", "scikit-learn", "1.0", "gpu", "3.7", _SKLEARN_10),
    Image("xgboost-cpu.2-1", "xgboost", "2.1", "cpu", "3.10", (("xgboost", "==2.1.3"), ("numpy", "==1.26.4"))),
    Image("xgboost-gpu.2-1", "xgboost", "2.1", "gpu", "3.10", (("xgboost", "==2.1.3"), ("numpy", "==1.26.4"))),
    Image("xgboost-cpu.1-6", "xgboost", "1.6", "cpu", "3.7", (("xgboost", "==1.6.2"), ("numpy", "==1.18.5"))),
    Image("xgboost-gpu.1-6", "xgboost", "1.6", "gpu", "3.7", (("xgboost", "==1.6.2"), ("numpy", "==1.18.5"))),
)
# Carriers: public TensorFlow images (Docker Hub, `tensorflow/tensorflow`, built from TensorFlow's own Dockerfiles:
# Ubuntu 22.04, Python 3.11 at /usr/local/bin/python, pip) on which mlsubmit runs a Python package as a custom
# container (mlsubmit.images.carried) now that Vertex AI serves no TensorFlow prebuilt training image. Pins: tensorflow
# 2.21.0's Requires-Dist (keras>=3.12.0, protobuf<8.0.0,>=6.31.1, numpy>=1.26.0, ml_dtypes<1.0.0,>=0.5.1; TensorBoard
# is no longer a requirement). The image carries no tf-keras: Keras-2 code declares it.
_TF221 = (("tensorflow", "==2.21.*"), ("keras", ">=3.12.0"), ("protobuf", ">=6.31.1,<8.0.0"), ("numpy", ">=1.26.0"),
          ("ml-dtypes", ">=0.5.1,<1.0.0"))
# What the prebuilt TensorFlow images carried that trainers import and TensorFlow 2.21 no longer brings: TensorBoard
# (tensorflow/tensorflow PR #110709 "Remove TensorBoard as hard dependency from r2.21"; tensorflow 2.20 still required
# tensorboard~=2.20.0, so every prebuilt TensorFlow image had it). Keras' TensorBoard callback and tf.summary raise
# TBNotInstalledError without it. tensorboard 2.21.0 requires protobuf<8.0.0,>=6.31.1, the same range as
# tensorflow 2.21.0. Nothing else is added: no other package of the prebuilt images is documented.
TENSORBOARD_WHY = ("TensorFlow 2.21 no longer installs TensorBoard (tensorflow/tensorflow PR #110709); the prebuilt "
                   "TensorFlow images carried it, and Keras' TensorBoard callback and tf.summary need it")
_TF221_ADDS = (("tensorboard~=2.21.0", TENSORBOARD_WHY),)
CARRIERS: tuple[Image, ...] = (
    Image("tensorflow/tensorflow:2.21.0", "tensorflow", "2.21", "cpu", "3.11", _TF221, carrier=True,
          adds=_TF221_ADDS),
    Image("tensorflow/tensorflow:2.21.0-gpu", "tensorflow", "2.21", "gpu", "3.11", _TF221, carrier=True,
          adds=_TF221_ADDS),
)
IMAGES = (*CARRIERS, *IMAGES)
# -- lifecycle ----------------------------------------------------------------------------------------------------
_STORED = ("Vertex AI 'Supported frameworks' table for custom training, stored copy quoted in issue #21 and "
           "/work/shared/REFERENCE.md (docs.cloud.google.com/gemini-enterprise-agent-platform/...)")
_ZH = "cloud.google.com/vertex-ai/docs/supported-frameworks-list?hl=zh-cn (stored copy)"
_UNLISTED = ("not in the stored copies of Google's table; counted as ended by the date of the next older or newer "
             "listed version (older versions leave first): 2024-09-01 below 2.11, 2026-07-11 for 2.15/2.16")
# (framework version, "tpu" or "cpu/gpu") -> (end of patch, end of availability, source); TensorFlow only
_LIFECYCLE: dict[tuple[str, str], tuple[str | None, str, str]] = {
    **{(v, "cpu/gpu"): (None, "2024-09-01", _STORED) for v in ("1.15", "2.1", "2.2", "2.4")},
    ("2.11", "cpu/gpu"): (None, "2024-11-15", _STORED),
    ("2.12", "cpu/gpu"): ("2024-06-30", "2025-06-30", _ZH),
    ("2.12", "tpu"): (None, "2025-06-30", _STORED),
    ("2.13", "cpu/gpu"): ("2024-07-05", "2025-07-05", _ZH),
    ("2.14", "cpu/gpu"): ("2024-09-26", "2025-09-26", _ZH),
    ("2.15", "tpu"): (None, "2025-10-23", _STORED),
    ("2.17", "cpu/gpu"): (None, "2026-07-11", _STORED),
}
_CARRIED = ("a public image run as a custom container: Vertex AI's end of availability of prebuilt images does not "
            "apply")
_NO_DATE = ("no end of availability found in the stored copies of Google's table (searched 2026-11-25): counted as "
            "served")


def version_key(version: str) -> tuple[int, int]:
    """"2.11" -> (2, 11), for ordering versions. Raises ValueError for anything else."""
    major, _, minor = version.partition(".")
    return int(major), int(minor or 0)


_key = version_key


def _with_lifecycle(image: Image) -> Image:
    import dataclasses

    if image.carrier:
        return dataclasses.replace(image, lifecycle_source=_CARRIED)
    if image.framework != "tensorflow":
        return dataclasses.replace(image, lifecycle_source=_NO_DATE)
    patch, ends, source = _LIFECYCLE.get((image.version, "tpu" if image.accelerator == "tpu" else "cpu/gpu"),
                                         (None, "2026-07-11" if _key(image.version) > (2, 11) else
                                          "2024-09-01", _UNLISTED))
    return dataclasses.replace(image, end_of_patch=patch, end_of_availability=ends, lifecycle_source=source)


# -- what the table lists beside the framework ------------------------------------------------------------------
# Google's "Supported frameworks" page (docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/
# supported-frameworks, Vertex AI's page under its 2026 name; the same rows on .../training/pre-built-containers and
# in every stored copy: /work/shared/REFERENCE.md, "What each prebuilt training image carried") names, for some
# images, packages they carry beside the framework. Only those rows are recorded; an image the page names none for
# gets none. cloudml-hypertune is named without a version: 0.1.0.dev6 is its newest release (2019), what
# `pip install cloudml-hypertune` installs (a 3 kB pure-Python sdist, built at install). Every other listed version
# has a wheel for the image's Python (checked with `pip download --only-binary=:all: --python-version` on
# 2026-12-07: pandas 0.24.2, scikit-learn 0.20.4 and xgboost 0.82 for 3.7; pandas 2.2.3, scikit-learn 1.6.1 and
# xgboost 2.1.3 for 3.10 and 3.11, a carrier's), so each is installed as listed; none had to be replaced.
HYPERTUNE = ("cloudml-hypertune", "0.1.0.dev6")
_PY37 = (("pandas", "0.24.2"), ("scikit-learn", "0.20.4"), HYPERTUNE)  # the 2.1-2.4 rows: as 1.15's (same era)
_LISTED: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    ("tensorflow", "2.17"): (("pandas", "2.2.3"), ("xgboost", "2.1.3"), HYPERTUNE),
    ("tensorflow", "2.11"): (("xgboost", ""), HYPERTUNE),  # the page names no pandas, scikit-learn or versions
    ("tensorflow", "2.8"): (("xgboost", ""), HYPERTUNE),
    **{("tensorflow", version): _PY37 for version in ("2.1", "2.2", "2.3", "2.4")},
    ("tensorflow", "1.15"): (("pandas", "0.24.2"), ("scikit-learn", "0.20.4"), ("xgboost", "0.82"), HYPERTUNE),
    ("pytorch", "2.4"): (("pandas", "2.2.3"), ("scikit-learn", "1.6.1"), HYPERTUNE),
    ("scikit-learn", "1.6"): (("pandas", "2.2.3"), ("scikit-learn", "1.6.1"), ("xgboost", "2.1.3"), HYPERTUNE),
}
# a carrier stands in for the prebuilt TensorFlow images, the last of which was 2.17: it carries what 2.17 listed
REPLACED = "tf-cpu.2-17.py310"


def _with_listed(image: Image) -> Image:
    import dataclasses

    listed = _LISTED.get(("tensorflow", "2.17") if image.carrier else (image.framework, image.version), ())
    return dataclasses.replace(image, listed=listed) if listed else image


IMAGES = tuple(_with_listed(_with_lifecycle(image)) for image in IMAGES)
_BY_NAME = {image.name: image for image in IMAGES}


def today() -> "date":
    """Today in UTC (the day Vertex AI's table is read against)."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).date()


def available(image: Image, on: "date | None" = None) -> bool:
    """Whether Vertex AI still runs `image` on the day `on` (default today): before its end of availability."""
    from datetime import date

    return image.end_of_availability is None or (on or today()) < date.fromisoformat(image.end_of_availability)


def nearest_available(image: Image, on: "date | None" = None) -> Image | None:
    """The still-available image of the same framework and accelerator nearest in version (the newer on a tie, the
    same Python preferred), or None where that framework has none left."""
    left = [i for i in IMAGES if i.framework == image.framework and i.accelerator == image.accelerator
            and available(i, on)]
    if not left:
        return None
    wanted = _key(image.version)
    return min(left, key=lambda i: (abs(_key(i.version)[0] * 100 + _key(i.version)[1] - wanted[0] * 100 - wanted[1]),
                                    -_key(i.version)[1], i.python != image.python))


def retired(image: Image, on: "date | None" = None) -> UsageError | None:
    """None while Vertex AI runs `image`; else the one-line refusal: when it ended (and the source), the nearest image
    still available, or, where none is, how to run the same software: a custom container."""
    if available(image, on):
        return None
    how = "inferred from" if image.lifecycle_source == _UNLISTED else "by"
    said = (f"{image.name} is no longer served by Vertex AI: its end of availability was "
            f"{image.end_of_availability} ({how} Google's 'Supported frameworks' table)")
    nearest = nearest_available(image, on)
    if nearest is not None:
        how = "; mlsubmit runs your package on it as a custom container" if nearest.carrier else ""
        return UsageError(said, hint=f"use {nearest.uri} ({nearest.framework} {nearest.version}, Python "
                                     f"{nearest.python}{how}): --runtime-version {nearest.version} or "
                                     f"--executor-image {nearest.uri}")
    carrier = (f"a tensorflow/tensorflow image of TensorFlow {image.version}" if image.framework == "tensorflow"
               else f"an image with {image.framework} {image.version}")
    return UsageError(said, hint=f"Vertex AI serves no prebuilt {image.framework} {image.accelerator.upper()} "
                                 f"training image any more: run it as a custom container (a config whose "
                                 f"workerPoolSpecs[].containerSpec.imageUri is e.g. {carrier})")
_URI = re.compile(r"(?:https://)?(?P<host>[a-z]+-docker\.pkg\.dev)/vertex-ai/training/(?P<name>[^:@]+)(?::latest)?")


def find(uri: str) -> Image | None:
    """The table's entry for a prebuilt image URI (any of the three registries, with or without `:latest`), or for a
    carrier (Docker Hub's name, with or without `docker.io/`, or Google's cache of it, `mirror.gcr.io/`)."""
    name = str(uri).strip()
    for prefix in _DOCKER_HUB_NAMES:
        name = name.removeprefix(prefix)
    carrier = _BY_NAME.get(name)
    if carrier is not None and carrier.carrier:
        return carrier
    found = _URI.fullmatch(str(uri).strip())
    if not found or found.group("host") not in MIRRORS:
        return None
    return _BY_NAME.get(found.group("name"))


def is_prebuilt_path(uri: str) -> bool:
    """True for any URI under a Vertex AI training registry path, whether the table knows the image or not."""
    found = _URI.fullmatch(str(uri).strip())
    return bool(found and found.group("host") in MIRRORS)


def tensorflow_versions(accelerator: str = "cpu") -> list[str]:
    """TensorFlow versions that have an image for this accelerator, oldest first."""
    return sorted({i.version for i in IMAGES if i.framework == "tensorflow" and i.accelerator == accelerator},
                  key=_key)


def tensorflow_image(version: str, accelerator: str = "cpu", *, python: str | None = None,
                     field: str = "--runtime-version", python_field: str = "--python-version") -> Image:
    """The TensorFlow training image for a runtime version ("2.11"), accelerator and optional Python version.

    Without `python`, the image with the newest Python for that version (tf-cpu.2-11.py310 before tf-cpu.2-11).
    Raises:
        UsageError: one line naming the nearest version (or Python) that has an image.
    """
    if accelerator not in ACCELERATORS:
        raise ValueError(f"accelerator {accelerator!r} not in {ACCELERATORS}")
    version = str(version).strip()
    candidates = [i for i in IMAGES if i.framework == "tensorflow" and i.accelerator == accelerator
                  and i.version == version]
    if not candidates:
        kind = {"cpu": "CPU", "gpu": "GPU", "tpu": "TPU"}[accelerator]
        raise UsageError(f"invalid value for {field}: received {version!r}; Vertex AI has no prebuilt TensorFlow "
                         f"{version} {kind} training image", hint=_nearest_hint(version, accelerator, field))
    if python is None:
        return max(candidates, key=lambda i: _key(i.python))
    for image in candidates:
        if image.python == str(python).strip():
            return image
    offered = ", ".join(i.python for i in candidates)
    raise UsageError(f"invalid value for {python_field}: received {python!r}; the TensorFlow {version} "
                     f"{accelerator.upper()} image has Python {offered}",
                     hint=f"use {python_field} {candidates[0].python}")


def _nearest_hint(version: str, accelerator: str, field: str) -> str:
    """The nearest versions whose image Vertex AI still serves (a retired image is never proposed), or, where none
    is left, the custom-container way."""
    served = [v for v in tensorflow_versions(accelerator)
              if any(available(i) for i in IMAGES if i.framework == "tensorflow" and i.version == v
                     and i.accelerator == accelerator)]
    if not served:
        return (f"Vertex AI serves no prebuilt TensorFlow {accelerator.upper()} training image any more: run the job "
                "as a custom container (a config whose workerPoolSpecs[].containerSpec.imageUri is an image with "
                "your TensorFlow, e.g. tensorflow/tensorflow)")
    try:
        wanted = _key(version)
    except ValueError:
        return "versions still served: " + ", ".join(served)
    below = [v for v in served if _key(v) < wanted]
    above = [v for v in served if _key(v) > wanted]
    nearest = [v for v in (below[-1] if below else None, above[0] if above else None) if v]
    named = " or ".join(f"{field} {v}" for v in nearest)
    return f"nearest that Vertex AI still runs: {named}"


def runtime_of(uri: str) -> tuple[str, str] | None:
    """(TensorFlow version, Python version) of a prebuilt TensorFlow image URI, or None for any other image."""
    image = find(uri)
    if image is None or image.framework != "tensorflow":
        return None
    return image.version, image.python


# legacy AI Platform Training's runtime versions (its "Runtime version list": 1.x up to 1.15, then 2.1-2.11; 2.12 only
# as a TPU runtime, kept for the real TPU configs that name it with Python 3.8)
LEGACY_RUNTIMES = (*(f"1.{minor}" for minor in range(16)), "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8",
                   "2.9", "2.10", "2.11", "2.12")


def legacy_pythons(runtime: str) -> tuple[str, ...]:
    """The Python versions legacy AI Platform paired with a runtime version, the default first, as ml.v1's
    `pythonVersion` (and gcloud's --python-version) ruled: 3.7 from 1.15 on, 3.5 from 1.4 through 1.14, 2.7 up to
    1.15 (so 1.0-1.3 ran 2.7 only); 3.8 with the 2.12 TPU runtime."""
    try:
        version = _key(runtime)
    except ValueError:
        return ()
    if version >= (2, 12):
        return ("3.8",)
    if version >= (2, 0):
        return ("3.7",)
    if version == (1, 15):
        return ("3.7", "2.7")
    return ("3.5", "2.7") if version >= (1, 4) else ("2.7",)


def legacy_pairs() -> str:
    """The runtime/Python pairs of `legacy_pythons` in words, for help text: "3.7 with runtimes 1.15-2.11, ..."."""
    by_python: dict[str, list[str]] = {}
    for runtime in LEGACY_RUNTIMES:
        for python in legacy_pythons(runtime):
            by_python.setdefault(python, []).append(runtime)
    spans = [f"{python} with runtime {runtimes[0]}" if len(runtimes) == 1 else
             f"{python} with runtimes {runtimes[0]}-{runtimes[-1]}"
             for python, runtimes in sorted(by_python.items(), key=lambda item: _key(item[1][0]))]
    return ", ".join(spans)
