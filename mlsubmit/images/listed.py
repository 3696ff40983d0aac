"""The packages Google's table lists for an image beside its framework, given to the jobs whose package imports them.

A prebuilt image carried pandas, scikit-learn, xgboost and cloudml-hypertune (catalog.Image.listed): a trainer that
imports `hypertune` in its model.py, or pandas, never declared them and ran there. The environments standing in for the
images hold the framework only (so their content hash, and every environment already built, stays as it is); a job
gets the listed packages its package imports, by top-level module name (`MODULES`), where its other requirements go,
before its package, as the image had them before its package was installed:

- here, in the job's requirements environment (mlsubmit.images.job_envs) and the pre-flight's venv;
- in the cloud, on a carrier (a public image run as a custom container, mlsubmit.images.carried), in the container
  command's first `pip install`, beside what the carrier adds (TensorBoard), so the cloud run matches this one.

What counts as imported: every absolute `import x` / `from x import y` of the package's `.py` files, at module level
or inside a function, but not one inside a `try:` that catches ImportError (the package runs without it). Only what is
imported, because a carrier container installs them at every start of every replica (`pip install --no-cache-dir`).
Measured 2026-12-07 on a fresh environment over tensorflow/tensorflow:2.21.0's (Python 3.11, pip 26, a 2-core machine
under load, packages from a local index mirror): cloudml-hypertune 9 s (an sdist, built); pandas 2.2.3 30 s, 74 MiB
(with python-dateutil, pytz, tzdata); xgboost 2.1.3 59 s, 844 MiB (its Linux wheel brings nvidia-nccl-cu12 and
scipy); pandas and xgboost together 142 s, 918 MiB. Always installing all of them would add over two minutes and
nearly 1 GB to every replica's start; a job whose package imports none of them gets none. Here the job's
requirements environment is built once and shared, so only the first job pays it. Pure functions but for reading
files.
"""

from __future__ import annotations

import ast
import base64
import binascii
import io
import tarfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.images.catalog import Image

# top-level import name -> the distribution that provides it, for every package the table lists
MODULES = {"pandas": "pandas", "sklearn": "scikit-learn", "xgboost": "xgboost", "hypertune": "cloudml-hypertune"}
_OPTIONAL = ("ImportError", "ModuleNotFoundError", "Exception", "BaseException")


@dataclass(frozen=True)
class Given:
    """One listed package a job gets: the distribution, the table's version ("" where it names none), the module
    the package imports and the first file that imports it."""

    distribution: str
    version: str
    module: str
    imported_by: str

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}" if self.version else self.distribution


def _catches_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        caught = handler.type
        names = [] if caught is None else caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if caught is None or any(isinstance(name, ast.Name) and name.id in _OPTIONAL for name in names):
            return True
    return False


def _imports(tree: ast.AST, optional: bool = False):
    """(top-level module, line) of each absolute import that is not optional (see the module docstring)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.Import) and not optional:
            yield from ((alias.name.split(".")[0], child.lineno) for alias in child.names)
        elif isinstance(child, ast.ImportFrom) and not optional and child.module and not child.level:
            yield child.module.split(".")[0], child.lineno
        elif isinstance(child, ast.Try):
            guarded = optional or _catches_import_error(child)
            for statement in child.body:
                yield from _imports(ast.Module(body=[statement], type_ignores=[]), guarded)
            for part in (*child.handlers, *child.orelse, *child.finalbody):
                yield from _imports(ast.Module(body=[part], type_ignores=[]), optional)
        else:
            yield from _imports(child, optional)


def imports(files: Iterable[tuple[str, bytes | str | Path]]) -> dict[str, str]:
    """{top-level module: "where.py, line N"} of the imports of the listed modules in (name, source or file) pairs;
    a file that does not parse is skipped (the pre-flight names it)."""
    found: dict[str, str] = {}
    for name, source in files:
        if not str(name).endswith(".py"):
            continue
        text = Path(source).read_bytes() if isinstance(source, Path) else source
        try:
            tree = ast.parse(text, str(name))
        except (SyntaxError, ValueError):
            continue
        for module, line in _imports(tree):
            if module in MODULES:
                found.setdefault(module, f"{name}, line {line}")
    return found


MAX_SOURCE = 4 << 20  # bytes of one .py file read from an extra package's archive; a larger one is not a module


def archive_sources(path: Path, data: bytes | None = None) -> list[tuple[str, bytes]]:
    """(path inside the package, source) of each `.py` file of an sdist (its top folder dropped) or a wheel; none
    for an archive that cannot be read (what installs it says why: pip, the pre-flight). `data`: the archive's bytes
    where it is no file (an sdist a Kubernetes launcher spec carries inline), `path` then only its name."""
    path = Path(path)
    archive = io.BytesIO(data) if data is not None else None
    try:
        if path.name.endswith(".whl"):
            with zipfile.ZipFile(archive or path) as wheel:
                return [(info.filename, wheel.read(info)) for info in wheel.infolist()
                        if info.filename.endswith(".py") and info.file_size <= MAX_SOURCE]
        sources = []
        with tarfile.open(None if archive else path, "r:gz", fileobj=archive) as tar:
            for member in tar.getmembers():
                wanted = member.isfile() and member.name.endswith(".py") and member.size <= MAX_SOURCE
                handle = tar.extractfile(member) if wanted else None
                if handle is not None and member.name.count("/") >= 1:
                    inside = member.name.split("/", 1)[1].removeprefix("src/")
                    if inside != "setup.py":
                        sources.append((inside, handle.read()))
        return sources
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError, ValueError):
        return []


def shipped_imports(packages: Iterable) -> tuple[str, ...]:
    """The listed packages' modules (`MODULES`) that the inline sdists of a launcher spec's packages ({"name",
    "data": base64}, mlsubmit.targets.cluster_run.build_packages) import; a URI is not read (nothing is fetched)."""
    sources = []
    for package in packages:
        if isinstance(package, dict) and "data" in package:
            try:
                data = base64.b64decode(package["data"], validate=True)
            except (binascii.Error, ValueError):
                continue
            sources += archive_sources(Path(package.get("name", "package.tar.gz")), data)
    return tuple(sorted(imports(sources)))


def given(image: Image | None, imported: dict[str, str], declared: Iterable[str] = ()) -> list[Given]:
    """The listed packages of `image` that the package imports (`imports`), less those the image's environment
    carries (its framework: scikit-learn on sklearn-cpu.1-6) and those a `declared` requirement of the package
    replaces (one the listed version does not satisfy, or any where the table names no version: pip installs the
    package's own, as it did on the image)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    if image is None:
        return []
    pinned = {canonicalize_name(package) for package, _ in image.pins}
    own: dict[str, list] = {}
    for text in declared:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        own.setdefault(canonicalize_name(requirement.name), []).append(requirement.specifier)
    out = []
    for distribution, version in image.listed:
        module = next(m for m, d in MODULES.items() if d == distribution)
        name = canonicalize_name(distribution)
        if module not in imported or name in pinned:
            continue
        if name in own and (not version or not all(s.contains(version, prereleases=True) for s in own[name])):
            continue
        out.append(Given(distribution, version, module, imported[module]))
    return out


def for_packages(image: Image | None, packages: Iterable[Path]) -> list[Given]:
    """`given` for a job's packages (sdists or wheels, read without installing them): their imports, their declared
    requirements (a requirement only an extra asks for is not one)."""
    from mlsubmit.images.sdists import requires

    packages = [Path(path) for path in packages]
    if image is None or not image.listed:
        return []
    declared = [r for path in packages for r in requires(path) if "extra ==" not in r.replace("extra==", "extra ==")]
    return given(image, imports(source for path in packages for source in archive_sources(path)), declared)


def requirements(image: Image | None, imported: Iterable[str]) -> list[str]:
    """The requirements a carrier's container command installs before the package: the listed packages of `image`
    whose modules are in `imported` (JobSpec.package_imports), as `given` names them."""
    return [item.requirement for item in given(image, {module: "" for module in imported})]


def said(items: list[Given], versions: dict[str, str] | None = None) -> str:
    """"from the image's listed packages: cloudml-hypertune 0.1.0.dev6 (trainer/model.py, line 2 imports
    hypertune)"; `versions`: what was installed, where the table names none."""
    from packaging.utils import canonicalize_name

    versions = {canonicalize_name(name): version for name, version in (versions or {}).items()}
    parts = []
    for item in items:
        version = item.version or versions.get(canonicalize_name(item.distribution), "?")
        chose = "" if item.version else "; the table names no version: pip's choice for the image"
        parts.append(f"{item.distribution} {version} ({item.imported_by} imports {item.module}{chose})")
    return "from the image's listed packages: " + "; ".join(parts)
