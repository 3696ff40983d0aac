"""A job's environment on its image's environment, sharing it instead of copying it.

A job's environment holds the job's packages alone (its sdists, `pip install --no-deps`). What they require and
the image's environment lacks is installed once into a *requirements environment*, kept by the exact list of those
requirements and shared by every package that needs the same ones (every edit of a trainer whose setup.py did not
change). Each sees the next through a `.pth` file, so a job's Python finds, in this order:

    <image>/jobs/<sha256 of the sdists>-env-<key>    the package itself (tens of kB)
    <image>/deps/<sha256 of the requirements>-env-<key>   tabulate; or matplotlib, google-cloud-storage, tf-keras…
    <image>/env-<key>                                the image's TensorFlow (mlsubmit.images.envs)

Requirements that replace a distribution of the image's (`tensorflow==2.8.0` on an image carrying tensorflow-cpu
2.8.4, `numpy==1.22.4`) are a requirements environment of their own, kept by just those pins, and the rest of the
requirements a small one above it (its `.pth` names the replacing layer, then the image's): two requirement lists
that differ by `tabulate` share one 1.2 GB TensorFlow 2.8.0 layer (368 kB more) instead of holding two. What the
job then imports, and what it replaces, is said (mlsubmit.images.imported).

The packages Google's table lists for the image beside its framework (pandas, scikit-learn, xgboost,
cloudml-hypertune) that the package imports go to its requirements environment with its own requirements
(mlsubmit.images.listed), and are said ("from the image's listed packages: ...").

Neither has a pip or setuptools of its own (`venv --without-pip`): the image environment's pip installs into them.
A package whose requirements the image satisfies has no requirements environment. What pip resolves is what it
resolved before, when it installed the package with its requirements on top of the image: the same requirements,
the same image, the same constraints (the image's pins).

**One TensorFlow.** The image's TensorFlow satisfies a requirement of TensorFlow under its other names where the
versions agree: on an image that carries `tensorflow-cpu` 2.15.1, each environment gets a `tensorflow` 2.15.1 entry
that installs nothing (metadata only, with the real distribution's requirements; `INSTALLER` says
`mlsubmit-alias`), so a `tensorflow>=2.15` requirement, or tf-keras 2.15 (which requires `tensorflow`), never
installs a second TensorFlow over the image's — 1.4 GB per edit before. The image's environment holds such entries
itself (`stand_in`): its tf-keras finds `tensorflow` there, and so does everything else where it installed a CPU
build in place of the image's distribution (mlsubmit.images.envs: tensorflow-cpu for the public image's
`tensorflow`, xgboost-cpu for `xgboost`). A version the image does not carry is
refused by its pins (and before that by mlsubmit.images.check). As in the cloud, a requirement that names the image's
own distribution is satisfied by it.

Every environment is built aside and renamed into place, and held by the process that runs on it
(mlsubmit.cache.entries): pruning never removes one under a running job, and removes a job's environment with the
requirements or image environment it was built on.
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import mlsubmit.cache.entries as entries
from mlsubmit.errors import UsageError
from mlsubmit.images import envs
from mlsubmit.images.catalog import Image
from mlsubmit.images.missing import missing_requirements

TENSORFLOW_NAMES = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu")  # one `tensorflow` import package, three names
XGBOOST_NAMES = ("xgboost", "xgboost-cpu")  # one `xgboost` import package: the CUDA build and the CPU build
ALIAS_INSTALLER = "mlsubmit-alias"
_BRIDGE = "_mlsubmit_image.pth"
REQUIREMENTS = "requirements.json"  # in a requirements environment: the requirements it was built for



def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_tensorflow(site: Path) -> tuple[str, str, tuple[str, ...]] | None:
    """(name, version, Requires-Dist) of the TensorFlow distribution installed in `site`, or None (no TensorFlow)."""
    return installed(site, TENSORFLOW_NAMES)


def installed(site: Path, names: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]] | None:
    """(name, version, Requires-Dist) of the distribution of `names` (one import package's) installed in `site`, not
    an alias, or None."""
    for info in sorted(site.glob(f"{names[0].split('-')[0]}*.dist-info")):
        try:
            head = email.parser.HeaderParser().parsestr((info / "METADATA").read_text(errors="replace"))
            installer = (info / "INSTALLER").read_text().strip() if (info / "INSTALLER").exists() else ""
        except OSError:
            continue
        if _canonical(head["Name"] or "") in names and installer != ALIAS_INSTALLER:
            return _canonical(head["Name"]), head["Version"], tuple(head.get_all("Requires-Dist") or ())
    return None


def alias_files(name: str, version: str, requires: tuple[str, ...], of: str) -> dict[str, str]:
    """The files (relative path → text) of a distribution `name` `version` that stands for the installed `of`:
    metadata only, with `of`'s requirements, so pip and `pip check` see `name` satisfied by it."""
    folder = f"{name.replace('-', '_')}-{version}.dist-info"
    metadata = "\n".join(["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                          f"Summary: {name} {version} as {of} {version} (metadata only, by mlsubmit)",
                          *(f"Requires-Dist: {requirement}" for requirement in requires)]) + "\n"
    files = {f"{folder}/METADATA": metadata, f"{folder}/INSTALLER": f"{ALIAS_INSTALLER}\n"}
    files[f"{folder}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{folder}/RECORD"])
    return files


def _new_venv(base: Path, path: Path, below: list[str], tensorflow) -> tuple[Path, Path]:
    """A venv without pip at `path` that sees the site directories `below` (in that order) and the image's
    TensorFlow under its other names; (its python, its site-packages)."""
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(path)], check=True, capture_output=True, text=True,
                   timeout=300)
    python = path / "bin" / "python"
    site = Path(envs.site_packages(python))
    see(site, below)
    _alias(site, tensorflow)
    return python, site


def _alias(site: Path, tensorflow, names: tuple[str, ...] = TENSORFLOW_NAMES) -> None:
    """`site`'s stand-ins for `tensorflow` (name, version, requires: the TensorFlow its layers import) under its
    other `names`, replacing those it had (a requirements layer below may replace the image's TensorFlow)."""
    for info in site.glob(f"{names[0].split('-')[0]}*.dist-info"):
        if (info / "INSTALLER").is_file() and (info / "INSTALLER").read_text().strip() == ALIAS_INSTALLER:
            for item in info.iterdir():
                item.unlink()
            info.rmdir()
    if tensorflow is not None:
        name, version, requires = tensorflow
        for other in names:
            if other != name:
                for relative, text in alias_files(other, version, requires, name).items():
                    (site / relative).parent.mkdir(exist_ok=True)
                    (site / relative).write_text(text)


def stand_in(site: Path) -> None:
    """In an image's environment (`site`): its TensorFlow and its XGBoost, where installed, under each of their other
    names as well (the CPU build tensorflow-cpu as the image's `tensorflow`, which tf-keras requires; xgboost-cpu as
    `xgboost`)."""
    for names in (TENSORFLOW_NAMES, XGBOOST_NAMES):
        found = installed(site, names)
        if found is not None:
            _alias(site, found, names)


def _tensorflow_below(below: list[str]):
    """The TensorFlow the first of the site directories `below` that holds one imports (see image_tensorflow)."""
    return next((found for found in map(image_tensorflow, map(Path, below)) if found is not None), None)


def layered_venv(image: Image, image_python: Path, path: Path) -> Path:
    """The python of a new venv at `path` with nothing of its own that sees the image environment of `image_python`
    (its pip too): what `python -m pip install` does there stays in it, as in a container started from the image."""
    base, _ = envs.interpreter(image)
    site = envs.site_packages(image_python)
    return _new_venv(base, path, [site], image_tensorflow(Path(site)))[0]


def see(site: Path, below: list[str]) -> None:
    """Make the venv of `site` see the site directories `below`, in that order, after its own."""
    (site / _BRIDGE).write_text("".join(f"import site; site.addsitedir({path!r})\n" for path in below))


def _built_on(environment: Path) -> list[Path]:
    """The environments `environment`'s bridge names (their roots), in order."""
    bridges = list(environment.glob(f"lib/python*/site-packages/{_BRIDGE}"))
    text = bridges[0].read_text() if bridges else ""
    return [Path(site).parents[2] for site in re.findall(r"addsitedir\('([^']+)'\)", text)]


def _packages_key(packages: list[Path]) -> str:
    digests = [hashlib.sha256(Path(path).read_bytes()).hexdigest() for path in packages]
    return digests[0] if len(digests) == 1 else hashlib.sha256("".join(digests).encode()).hexdigest()


def _last_line(text: str) -> str:
    """pip's reason (mlsubmit.images.pip_errors), not its closing `hint: See above for details.`"""
    from mlsubmit.images.pip_errors import pip_reason

    return pip_reason(text)


def _install_package(python: Path, sdist: Path, image: Image, say: Callable[[str], None]) -> None:
    """`pip install --no-deps` of one sdist into `python`'s venv (built in isolation as the cloud builds it; offline,
    with the image environment's setuptools)."""
    done = envs.run_pip(python, ["install", "--no-input", "--no-deps", str(sdist)])
    if done.returncode != 0 and any(word in done.stderr for word in envs._OFFLINE):
        say(f"warning: offline: {sdist.name} was built with the setuptools of {image.name}'s environment")
        done = envs.run_pip(python, ["install", "--no-input", "--no-deps", "--no-build-isolation", str(sdist)])
    if done.returncode != 0:
        raise UsageError(f"{sdist.name} does not install on {image.name}'s environment: pip: "
                         f"{_last_line(done.stderr)}")


def _replacing(missing: list[str], image_site: str) -> list[str]:
    """The requirements of `missing` that name a distribution the image's environment holds (tensorflow==2.8.0 on an
    image carrying tensorflow-cpu 2.8.4, numpy==1.22.4): they replace the image's, as pip install does there."""
    from packaging.requirements import InvalidRequirement, Requirement

    held = {_canonical(info.name.split("-")[0]) for info in Path(image_site).glob("*.dist-info")}
    if image_tensorflow(Path(image_site)) is not None:
        held |= set(TENSORFLOW_NAMES)
    found = []
    for text in missing:
        try:
            name = _canonical(Requirement(text).name)
        except InvalidRequirement:
            continue
        if name in held:
            found.append(text)
    return found


def _site_of(root: Path, like: Path) -> Path:
    return root.joinpath(*like.parts[-3:])  # lib/pythonX.Y/site-packages


def layers(environment: Path) -> list[str]:
    """The site directories a job environment built on `environment` (a requirements environment) sees, in order:
    its own, then those its bridge names."""
    site = _site_of(environment, Path(envs.site_packages(environment / "bin" / "python")))
    return [str(site), *(str(_site_of(root, site)) for root in _built_on(environment))]


def requirements_env(image: Image, image_env: Path, missing: list[str], say: Callable[[str], None]) -> Path | None:
    """The requirements environment holding `missing` on the image's environment, held, or None when offline (said:
    the job then runs without them). Requirements that replace the image's own distributions (a TensorFlow, a numpy:
    `_replacing`) are a layer of their own, kept by just those, and the rest a small layer above it: a one-line
    change of the rest does not install a second TensorFlow (1.4 GB per requirements list before)."""
    image_site = envs.site_packages(image_env / "bin" / "python")
    replacing = sorted(_replacing(missing, image_site))
    below = [image_site]
    if replacing:
        base = _requirements_layer(image, image_env, replacing, below, say)
        if base is None or len(replacing) == len(missing):
            return base
        below = layers(base)
    return _requirements_layer(image, image_env, missing, below, say)


def _requirements_layer(image: Image, image_env: Path, missing: list[str], below: list[str],
                        say: Callable[[str], None]) -> Path | None:
    """One requirements environment: `missing` installed on the site directories `below` (built once for that
    exact list on those, held)."""
    pins_text = envs.constraints(image, envs.image_packages(image))
    on = [Path(site).parents[2].name for site in below[:-1]]  # the layers between it and the image's (none: as before)
    key = hashlib.sha256(json.dumps([image_env.name, missing, pins_text, *([on] if on else [])]).encode()).hexdigest()
    target = envs.image_dir(image) / "deps" / f"{key[:16]}-{image_env.name}"
    listed = ", ".join(missing)
    if (target / "bin" / "python").exists() and all(path.is_dir() and entries.hold(path)
                                                    for path in _built_on(target)) and entries.hold(target):
        say(f"Requirements {listed}: already installed in {target}")
        return target
    base, _ = envs.interpreter(image)
    entries.remove_stale(target.parent)
    with entries.building(target.parent, f"the requirements environment of {listed}") as building:
        python, _ = _new_venv(base, building, below, _tensorflow_below(below))
        say(f"Installing what the package requires and {image.name}'s environment lacks ({listed}) once, for every "
            "package that requires the same (pip install, the image's packages kept)")
        pins = building / "image-constraints.txt"
        pins.write_text(pins_text)
        (building / REQUIREMENTS).write_text(json.dumps(missing))
        done = envs.run_pip(python, ["install", "--no-input", "-c", str(pins), *missing])
        if done.returncode != 0 and any(word in done.stderr for word in envs._OFFLINE):
            say(f"warning: offline: the package's requirements ({listed}) were not installed on {image.name}'s "
                "environment")
            return None
        if done.returncode != 0:
            raise UsageError(f"the package's requirements ({listed}) do not install on {image.name}'s environment: "
                             f"pip: {_last_line(done.stderr)}")
        entries.place(building, target)  # or an identical build finished first: use it
    entries.hold(target)
    return target


def job_python(image: Image, packages: list[Path], say: Callable[[str], None] = lambda text: None,
               check: Callable[[Path, Path], object] | None = None) -> tuple[Path, bool]:
    """(the python of the job's environment holding `packages` (sdists, in order) on the image's, whether reused),
    with what it is built on held by this process. `check(python, venv_dir)` runs on a new one before it is put in
    place.

    Raises:
        UsageError: a package or its requirements do not install (pip's last line).
        OperationFailed: the disk filled up (nothing of the new environments is kept).
    """
    from mlsubmit.images import listed
    from mlsubmit.images.sdists import distribution_name

    base_python, _ = envs.image_python(image, say)
    image_env = base_python.parent.parent
    given = listed.for_packages(image, packages)  # what the image's table lists and the packages import
    key = _packages_key(packages)
    if given:  # (a job environment of packages that import none keeps its name)
        key = hashlib.sha256(json.dumps([key, [item.requirement for item in given]]).encode()).hexdigest()
    target = envs.image_dir(image) / "jobs" / f"{key[:16]}-{image_env.name}"
    python = target / "bin" / "python"
    if python.exists():
        below = _built_on(target)
        if all(path.is_dir() and entries.hold(path) for path in below) and entries.hold(target):
            _say_listed(given, python, say)
            return python, True
        with entries.removing(target):  # what it was built on was removed: build it again
            pass
    base, _ = envs.interpreter(image)
    image_site = envs.site_packages(base_python)
    entries.remove_stale(target.parent)
    with entries.building(target.parent, f"the job environment of {Path(packages[-1]).name}") as building:
        built, site = _new_venv(base, building, [image_site], image_tensorflow(Path(image_site)))
        for sdist in packages:
            say(f"Installing {sdist.name} on {image.name}'s environment (the package alone; what it requires and the "
                "image lacks goes to a requirements environment shared by every package that requires the same).")
            _install_package(built, sdist, image, say)
        missing = missing_requirements(built, [distribution_name(Path(sdist)) for sdist in packages])
        missing += [item.requirement for item in given]  # with the package's own: one resolution, as on the image
        layer = requirements_env(image, image_env, missing, say) if missing else None
        if layer is not None:
            see(site, layers(layer))
            _alias(site, _tensorflow_below(layers(layer)))  # the TensorFlow it imports: a requirement may replace it
        if layer is not None:
            _say_listed(given, built, say)
        if check is not None:
            check(built, building)
        entries.place(building, target)  # or an identical job finished first: use its environment
    entries.hold(target)
    return python, False


_VERSIONS = """\
import json, sys
try:
    from importlib.metadata import version
except ImportError:  # Python 3.7 images
    import pkg_resources
    version = lambda name: pkg_resources.get_distribution(name).version
out = {}
for name in json.loads(sys.argv[1]):
    try:
        out[name] = version(name)
    except Exception:
        pass
print(json.dumps(out))
"""


def installed_versions(python: Path, names: list[str]) -> dict[str, str]:
    """{distribution: version} of `names` as `python`'s environment has them (those it lacks left out)."""
    done = subprocess.run([str(python), "-I", "-c", _VERSIONS, json.dumps(names)], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {}


def _say_listed(given: list, python: Path, say: Callable[[str], None]) -> None:
    """The line naming the listed packages the job got, with the versions its environment holds."""
    from mlsubmit.images.listed import said

    versions = installed_versions(python, [item.distribution for item in given]) if given else {}
    got = [item for item in given if item.distribution in versions]  # (offline when it was built: none)
    if got:
        say(said(got, versions))


def see_listed(image: Image, image_python: Path, python: Path, packages: list[Path],
               say: Callable[[str], None] = lambda text: None) -> list:
    """For a venv made from the image's environment (`image_python`'s) that holds `packages` (the pre-flight's): the
    listed packages they import (mlsubmit.images.listed), installed once into the requirements environment of
    exactly those (the one a job of the same packages gets when they require nothing else) and seen by the venv
    before the image's own; returns them (listed.Given). Offline: said, and none."""
    from mlsubmit.images import listed

    given = listed.for_packages(image, packages)
    if not given:
        return []
    layer = requirements_env(image, Path(image_python).parent.parent, [item.requirement for item in given], say)
    if layer is None:
        return []
    site = Path(envs.site_packages(python))
    (site / "_mlsubmit_listed.pth").write_text(  # read before the bridge to the image (.pth files go by name)
        f"import site; site.addsitedir({str(layer.joinpath(*site.parts[-3:]))!r})\n")
    return given
