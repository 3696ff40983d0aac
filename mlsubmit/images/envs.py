"""The software of a prebuilt image, here: its framework packages, and local environments built from them.

- `image_packages(image)`: what the image's framework distributions are (tensorflow-cpu 2.17.1, tf-keras 2.17.0)
  and what they require (tensorboard<2.18,>=2.17, ...), read from their wheel metadata by pip
  (`pip install --dry-run --no-deps --report`, for the image's Python) and kept in
  $MLSUBMIT_HOME/images/<image>/packages.json: asked once per image.
- `image_python(image)`: a venv holding those versions (TensorFlow, tf-keras, Keras, TensorBoard, protobuf and numpy
  within the image's pins; torch and numpy for a PyTorch image), made with a Python of the image's version when
  this machine has one (mlsubmit.images.interpreters), kept in $MLSUBMIT_HOME/images/<image>/env-<key>, key = sha256
  of the exact package list and the interpreter: built once (aside, renamed into place: mlsubmit.cache.entries),
  and held by the process that uses it. No CUDA image runs here: TensorFlow and torch run on the CPU, and where the
  package index has the CPU build of the image's distribution at its version (tensorflow-cpu for `tensorflow`,
  xgboost-cpu for `xgboost`: the same code without CUDA kernels, 0.6-0.9 GB less per environment) that is what
  is installed, standing in under the image's name (mlsubmit.images.job_envs.stand_in), and said as the image's
  ("tensorflow 2.21.0 (its CPU build, tensorflow-cpu)": mlsubmit.images.imported).
- `job_python(image, sdist)`: a job's environment on the image's, sharing it: the package alone, its requirements
  the image lacks in a requirements environment shared by every package that needs the same ones
  (mlsubmit.images.job_envs).

All of it lives under $MLSUBMIT_IMAGES (default $MLSUBMIT_HOME/images). Turned off with MLSUBMIT_IMAGE_ENV=0
(then local runs and emulator jobs use mlsubmit's own environment, as before).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import mlsubmit.cache.entries as entries
from mlsubmit.errors import UsageError
from mlsubmit.home import mlsubmit_home
from mlsubmit.images.catalog import Image
from mlsubmit.images.interpreters import find_python

_MARKERS = {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
            "implementation_name": "cpython", "platform_python_implementation": "CPython"}


_OFFLINE = ("NewConnectionError", "Max retries exceeded", "ConnectTimeoutError", "Temporary failure in name "
            "resolution", "Name or service not known", "Network is unreachable", "ProxyError", "Could not fetch URL",
            "Connection refused", "ReadTimeoutError")
def tensorflow_package(image: Image) -> str:
    """The distribution that carries TensorFlow on this image: `tensorflow-cpu` on Vertex AI's CPU images of TF 2.1+,
    `tensorflow` on the public tensorflow/tensorflow images (tensorflow/tools/dockerfiles: TF_PACKAGE=tensorflow)."""
    if image.carrier:  # TensorFlow's own Dockerfiles install `tensorflow` (TF_PACKAGE=tensorflow, the default)
        return "tensorflow"
    if image.framework == "tensorflow" and image.accelerator == "cpu" and image.version not in ("1.15", "2.0"):
        return "tensorflow-cpu"
    return "tensorflow"


# pinned as constraints, installed as dependencies
_SUPPORTING = ("keras", "tensorboard", "protobuf", "numpy", "ml-dtypes", "jax")


def image_requirements(image: Image, *, lookup: bool = False) -> list[str]:
    """The image's framework packages as pip requirements ("tensorflow-cpu==2.17.*", "tf-keras==2.17.*"); the
    packages they bring (Keras, TensorBoard, protobuf, numpy) are held to the image's pins by `constraints`.
    `lookup`: the distribution to read metadata from (tensorflow-cpu's wheel is a third of tensorflow's, with the
    same requirements)."""
    cpu = lookup and image.framework == "tensorflow" and image.version not in ("1.15", "2.0")
    names = {"tensorflow": "tensorflow-cpu" if cpu else tensorflow_package(image)}
    framework = [(package, pin) for package, pin in image.pins if package not in _SUPPORTING]
    return [f"{names.get(package, package)}{pin}" for package, pin in framework or image.pins]


OPT_OUT_HINT = ("MLSUBMIT_IMAGE_ENV=0 runs the job on mlsubmit's own environment instead (not the image's "
                "software: what passes then may still fail in the cloud)")


def enabled() -> bool:
    """Local runs use image environments unless MLSUBMIT_IMAGE_ENV is 0/off/false/no."""
    return os.environ.get("MLSUBMIT_IMAGE_ENV", "1").strip().lower() not in ("0", "off", "false", "no")


@dataclass(frozen=True)
class Carried:
    """One framework distribution on an image: its name, version and requirements (markers already applied)."""

    name: str
    version: str
    requires: tuple[str, ...]


def images_home() -> Path:
    """$MLSUBMIT_IMAGES, default $MLSUBMIT_HOME/images: image metadata, image environments, pre-flight results."""
    return Path(os.environ.get("MLSUBMIT_IMAGES") or mlsubmit_home() / "images")


def image_dir(image: Image) -> Path:
    """Where one image's metadata and environments are kept: $MLSUBMIT_IMAGES/<image key>."""
    return images_home() / image.key


def run_pip(python: str | Path, args: list[str], timeout: float = 900.0) -> subprocess.CompletedProcess:
    """pip in its own process group (stopped with whoever asked: Ctrl-C, SIGTERM, an emulator stopping; a thread's
    children.Group), its temporary files in a folder of its own that is removed whatever happens."""
    import mlsubmit.local.children as children

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
                                                           "PIP_REQUIRE_VIRTUALENV")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PYTHONNOUSERSITE="1")
    with tempfile.TemporaryDirectory(prefix="mlsubmit-pip-") as scratch:
        env["TMPDIR"] = scratch  # what a killed pip leaves (pip-unpack-*, pip-install-*) goes with this folder
        return children.run([str(python), "-m", "pip", *args], capture_output=True, text=True, timeout=timeout,
                            env=env, stdin=subprocess.DEVNULL)


def foreign_python_args(image: Image, scratch: str | Path) -> list[str]:
    """pip options that resolve for the image's Python rather than the one pip runs on, accepted by every pip from
    22.2 (the first with `--report`) on: pip before 24 refuses `--python-version` unless installing `--target` a
    directory ("Can not use any platform or abi specific options unless installing via '--target'"), so a
    `--target` under `scratch` is given; with `--dry-run` nothing is written there. `--target` implies
    `--ignore-installed`, which these look-ups want anyway (the image's packages, not this environment's)."""
    # pip reads "3.7" as 3.7.0, which a `Requires-Python >=3.7.1` (pandas 1.3.5) rejects; the images ran a late
    # patch release of their Python, so any patch release is what is asked for
    return ["--target", str(Path(scratch) / "target"), "--ignore-installed", "--python-version", f"{image.python}.99",
            "--only-binary=:all:"]


def _applies(requirement: str, python: str) -> str | None:
    """The requirement without its marker if it applies on Linux x86_64 under `python`, else None (extras too)."""
    from packaging.requirements import Requirement

    parsed = Requirement(requirement)
    if parsed.marker is not None and not parsed.marker.evaluate({**_MARKERS, "python_version": python,
                                                                 "python_full_version": f"{python}.0", "extra": ""}):
        return None
    if parsed.extras or parsed.url:
        return None
    return f"{parsed.name}{parsed.specifier}"


def image_packages(image: Image) -> tuple[Carried, ...]:
    """The image's framework distributions with their versions and requirements (asked once per image).

    Raises:
        UsageError: the index could not be asked (offline), or has no such release.
    """
    saved = image_dir(image) / "packages.json"
    tensorflow = {"tensorflow-cpu": tensorflow_package(image), "tensorflow": tensorflow_package(image)}
    if saved.exists():  # (kept by an earlier mlsubmit under the other TensorFlow name: the same requirements)
        return tuple(Carried(tensorflow.get(d["name"], d["name"]), d["version"], tuple(d["requires"]))
                     for d in json.loads(saved.read_text()))
    with tempfile.TemporaryDirectory(prefix="mlsubmit-image-") as tmp:
        report = Path(tmp, "report.json")
        done = run_pip(sys.executable, ["install", "--dry-run", "--no-deps", *foreign_python_args(image, tmp),
                                        "--report", str(report), "--timeout", "15", "--retries", "1",
                                        *image_requirements(image, lookup=True)])
        if done.returncode != 0:
            tail = [line for line in done.stderr.splitlines() if line.startswith("ERROR")][-1:] or ["no answer"]
            why = "offline" if any(word in done.stderr for word in _OFFLINE) else "pip"
            raise UsageError(f"the packages of {image.name} could not be looked up on the package index ({why}: "
                             f"{tail[0]})")
        answer = json.loads(report.read_text())["install"]
    from packaging.utils import canonicalize_name

    names = {"tensorflow-cpu": tensorflow_package(image)}  # the same requirements under either name
    carried = []
    for item in answer:
        name = canonicalize_name(item["metadata"]["name"])
        requires = (_applies(req, image.python) for req in item["metadata"].get("requires_dist", []))
        carried.append(Carried(names.get(name, name), item["metadata"]["version"], tuple(r for r in requires if r)))
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps([vars(c) | {"requires": list(c.requires)} for c in carried], indent=1))
    return tuple(carried)


def interpreter(image: Image) -> tuple[Path, str | None]:
    """(the Python to build the image's environments with, a note when it is not the image's version)."""
    found = find_python(image.python)
    if found is not None:
        return found, None
    here = "%d.%d" % sys.version_info[:2]
    return Path(sys.executable), (f"{image.name} runs Python {image.python}; this machine has no Python "
                                  f"{image.python}, so its environment runs Python {here} (set "
                                  f"MLSUBMIT_PYTHON_{image.python.replace('.', '_')} to an interpreter)")


def _env_key(image: Image, carried: tuple[Carried, ...], python: Path) -> str:
    text = json.dumps([image.name, list(image.pins), [(c.name, c.version) for c in carried], str(python),
                       _framework_install(image, carried)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# a framework distribution's CPU build (the same Python code and version, without CUDA kernels), at the versions the
# package index has it (PyPI, 2026-12-07): tensorflow-cpu 1.15.0 and from 2.1.0 (none of 2.0, whose `tensorflow` is
# CPU-only); xgboost-cpu from 2.1.1
CPU_BUILDS = {"tensorflow": ("tensorflow-cpu", ">=1.15,!=2.0.*"), "xgboost": ("xgboost-cpu", ">=2.1.1")}


def cpu_builds(carried: tuple[Carried, ...]) -> dict[str, str]:
    """{CPU build: the image's distribution it is installed in place of}, e.g. {"tensorflow-cpu": "tensorflow"} for
    the public tensorflow/tensorflow images, whose `tensorflow` wheel carries CUDA kernels nothing runs here."""
    from packaging.specifiers import SpecifierSet

    return {CPU_BUILDS[item.name][0]: item.name for item in carried
            if item.name in CPU_BUILDS and item.version in SpecifierSet(CPU_BUILDS[item.name][1])}


def _install_steps(image: Image, carried: tuple[Carried, ...]) -> tuple[list[str], list[str]]:
    """The two pip runs an image's environment is built with: the image's framework distributions (each at its CPU
    build where there is one: `cpu_builds`), its supporting pins and what it adds (catalog.Image.adds: TensorBoard on
    2.21); then, once the CPU builds stand in under the image's names (job_envs.stand_in), the distributions that
    require one of those names (tf-keras requires `tensorflow`), which pip then finds satisfied: no second
    TensorFlow."""
    from packaging.requirements import Requirement

    from mlsubmit.images.job_envs import TENSORFLOW_NAMES, XGBOOST_NAMES

    builds = {image_name: build for build, image_name in cpu_builds(carried).items()}
    aliased = {*TENSORFLOW_NAMES, *XGBOOST_NAMES}
    first, then = [], []
    for item in carried:
        on_alias = any(Requirement(text).name in aliased for text in item.requires)
        (then if on_alias else first).append(f"{builds.get(item.name, item.name)}=={item.version}")
    pinned = [f"{package}{pin}" for package, pin in image.pins if package in _SUPPORTING]
    return first + pinned + [requirement for requirement, _ in image.adds], then


def _framework_install(image: Image, carried: tuple[Carried, ...]) -> list[str]:
    """What an image's environment is built from, in the order installed (`_install_steps`)."""
    first, then = _install_steps(image, carried)
    return first + then


def constraints(image: Image, carried) -> str:
    """A pip constraints file: the image's pins, its framework distributions at their versions, and what they
    require (tensorflow-cpu 2.17.1's `tensorboard<2.18,>=2.17`, ...)."""
    lines = [f"{package}{pin}" for package, pin in image.pins]
    lines += [requirement for requirement, _ in image.adds]  # installed before the package (catalog.Image.adds)
    lines += [f"tensorflow-cpu{pin}" for package, pin in image.pins if package == "tensorflow"]
    for item in carried:
        lines += [f"{item.name}=={item.version}", *item.requires]
    return "\n".join(lines) + "\n"


def make_venv(base: Path, path: Path) -> None:
    """`base -m venv path`, with pip. ensurepip on Python 3.7-3.9 (tf-cpu.1-15's is 3.7) leaves in the temporary
    folder the CA bundle its pip copied out of the bundled wheel: it is given a folder of its own, removed after."""
    with tempfile.TemporaryDirectory(prefix="mlsubmit-venv-") as scratch:
        subprocess.run([str(base), "-m", "venv", str(path)], check=True, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "TMPDIR": scratch})


def image_python(image: Image, say: Callable[[str], None] = lambda text: None) -> tuple[Path, bool]:
    """(the python of the image's environment, whether it was already built), held by this process (never pruned
    under it). Raises UsageError if pip fails, OperationFailed if the disk fills up (nothing is kept then)."""
    carried = image_packages(image)
    base, _ = interpreter(image)
    target = image_dir(image) / f"env-{_env_key(image, carried, base)}"
    python = target / "bin" / "python"
    if python.exists() and entries.hold(target):
        return python, True
    first, then = _install_steps(image, carried)
    builds = cpu_builds(carried)
    aside = (" (torch's Linux wheel is its CUDA build: about 5 GB with the NVIDIA libraries it requires, a minute or "
             "more)" if image.framework == "pytorch" else "")
    aside += "".join(f" ({build}: {image_name}'s CPU build)" for build, image_name in builds.items())
    say(f"building the environment of {image.name} once: {', '.join(first + then)}{aside}")
    entries.remove_stale(target.parent)
    with entries.building(target.parent, f"the environment of {image.name}", prefix=".building-") as building:
        make_venv(base, building)
        _build(image, building / "bin" / "python", first, then)
        _check_imports(image, building / "bin" / "python")
        Path(building, IMAGE_JSON).write_text(json.dumps({"image": image.name, "packages": first + then,
                                                          "builds": builds}))
        entries.place(building, target)  # or an identical build finished first: use it
    entries.hold(target)
    return python, False


IMAGE_JSON = "image.json"  # in an image's environment: its image, what it was built from, the CPU builds in it


def _build(image: Image, python: Path, first: list[str], then: list[str]) -> None:
    """pip installs `first`; the CPU builds then stand in under the image's names (job_envs.stand_in); pip installs
    `then` on them."""
    from mlsubmit.images.job_envs import stand_in

    for requirements in (first, then):
        if not requirements:
            continue
        done = run_pip(python, ["install", "--no-input", *requirements])
        if done.returncode != 0:
            from mlsubmit.images.pip_errors import pip_reason

            raise UsageError(f"the environment of {image.name} could not be built: pip: {pip_reason(done.stderr)}",
                             hint=OPT_OUT_HINT)
        stand_in(Path(site_packages(python)))


def built_python(image: Image, carried: tuple[Carried, ...]) -> Path | None:
    """The python of the image's environment if it is built already (nothing is built or held), else None."""
    python = image_dir(image) / f"env-{_env_key(image, carried, interpreter(image)[0])}" / "bin" / "python"
    return python if python.exists() else None


def _check_imports(image: Image, python: Path) -> None:
    """A new environment is put in place only if its framework imports (a numpy 2 under TensorFlow 2.8 fails here,
    with TensorFlow's own last line, not in the user's trainer)."""
    done = subprocess.run([str(python), "-I", "-c", f"import {image.module}"], capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        last = [line for line in done.stderr.splitlines() if line.strip()][-1:] or ["(no output)"]
        raise UsageError(f"the environment of {image.name} was built but `import {image.module}` fails in it: "
                         f"{last[0]}", hint=f"the image's pins in mlsubmit.images.catalog are wrong; {OPT_OUT_HINT}")


def site_packages(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def job_python(image: Image, packages: list[Path], say: Callable[[str], None] = lambda text: None,
               check: Callable[[Path, Path], object] | None = None) -> tuple[Path, bool]:
    """(the python of a job's environment: `packages` (sdists) on the image's environment, whether reused); see
    mlsubmit.images.job_envs."""
    from mlsubmit.images import job_envs

    return job_envs.job_python(image, packages, say, check)


def runnable_image(spec, say: Callable[[str], None], *, api: str = "vertex") -> Image | None:
    """The image (TensorFlow, PyTorch, scikit-learn or XGBoost) whose environment the job runs in here, as
    mlsubmit.images.choose decides it, or None (off, the user's own container, an image the table does not know).
    Says which image, what it adds, and the mismatches this machine cannot close (the image's Python, CUDA) and a
    retired image.

    Raises:
        UsageError: the image's packages cannot be looked up (offline before its environment was ever built): the
            job is not run on mlsubmit's own software instead unless MLSUBMIT_IMAGE_ENV=0 says so; a legacy
            runtime/Python pair ml.v1 never offered."""
    from mlsubmit.images import choose

    if not enabled():
        return None
    choice = choose.choose(spec, api=api)
    image = choice.image
    if image is None:
        return None
    choose.served(spec, say, api=api, sending=False)  # here it still runs: the software is on the package index
    say(f"image: {choice.describe()}")
    _, note = interpreter(image)
    notes = [note] if note else []
    notes += choose.python_notes(spec, api=api)
    notes += [f"{image.name} + {requirement}: {why}" for requirement, why in image.adds]
    if image.accelerator != "cpu":
        without = "CUDA" if image.accelerator == "gpu" else "a TPU"
        notes.append(f"{image.name} is a {image.accelerator.upper()} image; here its {image.module} runs on the CPU, "
                     f"without {without}")
    if image.framework == "pytorch" and ("-xla." in image.name or image.accelerator == "tpu"):
        notes.append(f"{image.name} also carries torch_xla, which its environment here does not: torch runs without "
                     "XLA")
    for text in notes:
        say(f"note: {text}")
    try:
        image_packages(image)
    except UsageError as err:  # offline before this image's environment was ever built: refused, not swapped
        raise UsageError(f"{err.message}, so {image.name}'s environment cannot be built here",
                         hint=OPT_OUT_HINT) from None
    return image


def versions_line(image: Image, python: Path) -> str:
    """What the environment imports: "tf-cpu.2-17.py310: Python 3.10.13, tensorflow 2.17.1, keras 3.12.0, ..."
    (a requirement's TensorFlow where it replaces the image's: mlsubmit.images.imported)."""
    from mlsubmit.images.imported import imported

    return f"{image.name}: {imported(python).line()}"
