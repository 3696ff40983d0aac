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
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

# the import package of each framework distribution said, in the order said
MODULES = (("tensorflow", ("tensorflow-cpu", "tensorflow", "tensorflow-gpu")), ("keras", ("keras",)),
           ("tf_keras", ("tf-keras",)), ("tensorboard", ("tensorboard",)), ("sklearn", ("scikit-learn",)),
           ("xgboost", ("xgboost",)), ("torch", ("torch",)), ("google/protobuf", ("protobuf",)),
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
    name: str  # its distribution
    version: str

    @property
    def root(self) -> Path:  # the environment (…/lib/pythonX.Y/site-packages)
        return Path(self.site).parents[2]

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True)
class Imported:
    python: str  # "Python 3.10.13", or "" when the environment did not answer
    found: tuple[tuple[Provider, ...], ...]  # per framework module: where it is found, first the one imported

    def line(self) -> str:
        """"Python 3.10.13, tensorflow 2.8.0, keras 2.8.0, ...": the versions imported."""
        said = [self.python] if self.python else []
        said += [str(providers[0]) for providers in self.found if providers]
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
            notes.append(f"{_requirement(imported)} replaces the image's {image} (as pip install does on the image)")
        return notes


def _requirement(provider: Provider) -> str:
    """The requirement that installed `provider` ("requirement tensorflow==2.8.0"), or what it is when it came with
    another one ("numpy 1.22.4 (required by the package's requirements)")."""
    from mlsubmit.images.job_envs import REQUIREMENTS

    try:
        listed = json.loads((provider.root / REQUIREMENTS).read_text())
    except (OSError, ValueError):
        listed = []
    canonical = re.sub(r"[-_.]+", "-", provider.name).lower()
    for text in listed:
        if re.sub(r"[-_.]+", "-", re.split(r"[\s\[<>=!~;@]", text, maxsplit=1)[0]).lower() == canonical:
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
    return Imported(version, tuple(tuple(Provider(*item) for item in providers) for _, providers in found))
