"""What a job's environment imports: the framework distributions its Python finds first, and those of the image's
they replace.

A job's environment sees its own site directory, then its requirements environments, then the image's
(mlsubmit.images.job_envs): a requirement pinning `tensorflow==2.8.0` on tf-cpu.2-8 installs TensorFlow 2.8.0 in a
requirements environment, and `import tensorflow` finds it there before the image's tensorflow-cpu 2.8.4, as
`pip install` of the package on the image would have replaced it. The job's Python is asked once, without importing
anything: for each framework module, the site directories on its `sys.path` that hold it, in order, and the
(non-alias) distribution there that names it.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.images.conflict import name as _project

# the import package of each framework distribution said, in the order said
MODULES = (("tensorflow", ("tensorflow-cpu", "tensorflow", "tensorflow-gpu")), ("keras", ("keras",)),
           ("tf_keras", ("tf-keras",)), ("tensorboard", ("tensorboard",)), ("sklearn", ("scikit-learn",)),
           ("xgboost", ("xgboost", "xgboost-cpu")), ("torch", ("torch",)), ("google/protobuf", ("protobuf",)),
           ("numpy", ("numpy",)))

# runs on the job's Python (3.7 too): reads directories and METADATA files, imports nothing of the job's
_SCRIPT = """\
import json, os, re, sys
def canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()
def head(info):
    found = {}
    try:
        with open(os.path.join(info, "METADATA"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                found.setdefault(key.strip().lower(), value.strip())
        with open(os.path.join(info, "INSTALLER")) as f:
            found["installer"] = f.read().strip()
    except OSError:
        pass
    return found
out = []
for module, names in json.loads(sys.argv[1]):
    providers = []
    for entry in sys.path:
        where = os.path.join(entry or ".", *module.split("/"))
        if not entry or not (os.path.isdir(where) or os.path.isfile(where + ".py")):
            continue
        for info in sorted(os.listdir(entry)):
            if info.endswith(".dist-info"):
                meta = head(os.path.join(entry, info))
                if canon(meta.get("name", "")) in names and meta.get("installer") != "mlsubmit-alias":
                    providers.append([entry, canon(meta["name"]), meta.get("version", "")])
                    break
    out.append([module, providers])
print(json.dumps(["Python " + sys.version.split()[0], out]))
"""


@dataclass(frozen=True)
class Provider:
    site: str  # the site directory it is imported from
    name: str  # its distribution (the image's name for it in an image's environment)
    version: str
    build: str = ""  # the CPU build installed in its place in the image's environment (tensorflow-cpu), if any

    @property
    def root(self) -> Path:  # the environment (…/lib/pythonX.Y/site-packages)
        return Path(self.site).parents[2]

    def __str__(self) -> str:
        return f"{self.name} {self.version}"

    def said(self) -> str:
        """"tensorflow 2.21.0", or "tensorflow 2.21.0 (its CPU build, tensorflow-cpu)"."""
        return f"{self} (its CPU build, {self.build})" if self.build else str(self)


@dataclass(frozen=True)
class Imported:
    python: str  # "Python 3.10.13", or "" when the environment did not answer
    found: tuple[tuple[Provider, ...], ...]  # per framework module: where it is found, first the one imported

    def line(self) -> str:
        """"Python 3.10.13, tensorflow 2.8.0, keras 2.8.0, ...": the versions imported."""
        said = [self.python] if self.python else []
        said += [providers[0].said() for providers in self.found if providers]
        return ", ".join(dict.fromkeys(said)) or "versions unknown"

    def replaced(self) -> list[str]:
        """One note per framework distribution of the image's environment that a requirements environment replaces:
        "requirement tensorflow==2.8.0 replaces the image's tensorflow-cpu 2.8.4 (as pip install does on the
        image)"."""
        notes = []
        for providers in self.found:
            imported, image = (providers[0], providers[-1]) if providers else (None, None)
            if image is None or not image.root.name.startswith("env-") or (imported.name, imported.version) == \
                    (image.name, image.version):
                continue
            notes.append(replaces(_requirement(imported), str(image)))
        return notes


def replaces(requirement: str, image_has: str) -> str:
    """The one wording, on every path (`train --local`, the emulator, the pre-flight), of a requirement that replaces
    a framework distribution of the image: "requirement tensorflow==2.8.0 replaces the image's tensorflow-cpu 2.8.4
    (as pip install does on the image)"."""
    return f"{requirement} replaces the image's {image_has} (as pip install does on the image)"


def provided(carried, python: Path | None = None) -> dict[str, tuple[str, str]]:
    """{framework module: (distribution, version)} the image provides: its framework distributions (`carried`,
    mlsubmit.images.envs.Carried), and what the image's environment `python` imports where it is built already
    (numpy, protobuf, Keras: versions pip chose when it built it)."""
    found = {}
    if python is not None:
        for (module, _), providers in zip(MODULES, imported(python).found):
            if providers:
                found[module] = (providers[0].name, providers[0].version)
    for item in carried:
        for module, names in MODULES:
            if _project(item.name) in names:
                found[module] = (item.name, item.version)
    return found


def names_framework(requirements) -> bool:
    """Whether any of `requirements` names a framework distribution (`MODULES`)."""
    names = {name for _, group in MODULES for name in group}
    return any(_project(text) in names for text in requirements)


def planned(requirements, chosen: dict[str, str], image_has: dict[str, tuple[str, str]]) -> list[str]:
    """The pre-flight's notes (`replaces`): each requirement of a framework distribution whose version pip chose
    (`chosen`: {canonical name: version}) differs from the image's distribution of that module (`image_has`, from
    `provided`). Versions alone are compared: a `tensorflow` 2.8.4 requirement on an image carrying tensorflow-cpu 2.8.4
    is the image's own (mlsubmit.images.job_envs gives it an alias), not a replacement."""
    notes = []
    for text in requirements:
        name = _project(text)
        for module, names in MODULES:
            if name in names and module in image_has and chosen.get(name, image_has[module][1]) != image_has[module][1]:
                notes.append(replaces(f"requirement {text.strip()}", " ".join(image_has[module])))
    return notes


def _requirement(provider: Provider) -> str:
    """The requirement that installed `provider` ("requirement tensorflow==2.8.0"), or what it is when it came with
    another one ("numpy 1.22.4 (required by the package's requirements)")."""
    from mlsubmit.images.job_envs import REQUIREMENTS

    try:
        listed = json.loads((provider.root / REQUIREMENTS).read_text())
    except (OSError, ValueError):
        listed = []
    for text in listed:
        if _project(text) == _project(provider.name):
            return f"requirement {text}"
    return f"{provider} (required by the package's requirements)"


def imported(python: Path) -> Imported:
    """What `python`'s environment imports of the framework distributions (one process, nothing imported)."""
    done = subprocess.run([str(python), "-I", "-c", _SCRIPT, json.dumps([[m, list(n)] for m, n in MODULES])],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    try:
        version, found = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return Imported("", ())
    builds: dict[str, dict[str, str]] = {}
    return Imported(version, tuple(tuple(_as_image_names(Provider(*item), builds) for item in providers)
                                   for _, providers in found))


def _as_image_names(provider: Provider, builds: dict[str, dict[str, str]]) -> Provider:
    """`provider` under the image's name where it is a CPU build its image's environment installed in place of the
    image's distribution (mlsubmit.images.envs.cpu_builds, kept in the environment's image.json)."""
    from mlsubmit.images.envs import IMAGE_JSON

    root = str(provider.root)
    if root not in builds:
        try:
            builds[root] = json.loads((provider.root / IMAGE_JSON).read_text()).get("builds", {})
        except (OSError, ValueError, AttributeError):
            builds[root] = {}
    image_name = builds[root].get(provider.name)
    return Provider(provider.site, image_name, provider.version, provider.name) if image_name else provider
