"""Which build a trainer package gets, decided from its project's files (the directory holding the package).

- `setup.py` whose metadata can be read statically → the fast in-process reproducible build (`sdist.py`);
- no `setup.py` and no `pyproject.toml` build → the in-process build with a generated setup.py, as gcloud does,
  carrying `requirements.txt` (beside the package, else inside it) as its install requirements;
- a `setup.py` that computes its metadata, or a `pyproject.toml` project (`[project]` or `[build-system]`)
  → pypa/build in an isolated environment (`frontend.py`), whatever the backend.

`--requirements` are added to the package's install requirements (so the cloud installs them too); a package
built by its own backend states its own requirements, and adding to them there is refused.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.errors import UsageError
from mlsubmit.packaging.frontend import FrontendSdist, build_sdist_with_frontend
from mlsubmit.packaging.requirements_txt import find_requirements_txt, read_requirements_txt
from mlsubmit.packaging.setup_meta import ComputedMetadata, ProjectMetadata, default_metadata, read_setup_py

IN_PROCESS = "in-process reproducible build"


@dataclass(frozen=True)
class BuildChoice:
    """The package's metadata, how it is built (one line for the output) and the frontend's sdist if any."""

    metadata: ProjectMetadata
    how: str
    prebuilt: FrontendSdist | None = None


def _declares_build(project_dir: Path) -> bool:
    pyproject = project_dir / "pyproject.toml"
    if not pyproject.is_file():
        return False
    from mlsubmit.packaging.toml import TOMLDecodeError, loads

    try:
        table = loads(pyproject.read_text(encoding="utf-8"))
    except (TOMLDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read {pyproject}: {err}", hint="fix the TOML") from None
    return "project" in table or "build-system" in table


def _with(meta: ProjectMetadata, requirements: tuple[str, ...]) -> ProjectMetadata:
    if not requirements:
        return meta
    return dataclasses.replace(meta, requires=tuple(dict.fromkeys((*meta.requires, *requirements))))


def _frontend(project_dir: Path, why: str, requirements: tuple[str, ...]) -> BuildChoice:
    if requirements:
        raise UsageError(f"--requirements cannot be added to {project_dir}: {why}, so its own build backend states "
                         "its requirements", hint="list them in the project's dependencies instead")
    built = build_sdist_with_frontend(project_dir)
    reused = ", cached" if built.cached else ""
    where = "isolated" if built.isolated else "mlsubmit's setuptools"
    return BuildChoice(built.metadata, f"pypa/build, {where}, backend {built.backend} ({why}{reused})", built)


def choose_build(package_dir: Path, setup_py: str | os.PathLike | None = None,
                 requirements: tuple[str, ...] = ()) -> BuildChoice:
    """Decide and prepare the build of the package at `package_dir` (a resolved directory).

    Raises:
        UsageError: unreadable metadata, a bad requirements.txt, or a project no frontend can build.
    """
    project_dir = package_dir.parent
    chosen = Path(setup_py) if setup_py is not None else project_dir / "setup.py"
    if setup_py is not None or chosen.exists():
        try:
            meta = read_setup_py(chosen)
        except ComputedMetadata as err:
            return _frontend(chosen.resolve().parent, f"{chosen.name} computes its metadata: {err.message}",
                             requirements)
        except UsageError:
            if setup_py is None and _declares_build(project_dir):  # a `setup()` shim; pyproject.toml holds it all
                return _frontend(project_dir, "pyproject.toml project with a setup.py shim", requirements)
            raise
        return BuildChoice(_with(meta, requirements), f"{IN_PROCESS} (metadata read from {chosen.name} without "
                                                      "running it)")
    if _declares_build(project_dir):
        return _frontend(project_dir, "pyproject.toml project", requirements)
    meta = default_metadata(package_dir.name)
    listed = find_requirements_txt(package_dir)
    if listed is None:
        return BuildChoice(_with(meta, requirements), f"{IN_PROCESS} (no setup.py: one generated, as gcloud does)")
    meta = dataclasses.replace(meta, requires=read_requirements_txt(listed),
                               source=f"defaults and {listed.name} (no setup.py)")
    # gcloud 528's generated setup.py (command_lib/ml_engine/jobs_prep.py, DEFAULT_SETUP_FILE) names the package and
    # lists it, nothing else: it does not read requirements.txt, so gcloud's job gets none of them. Said, not hidden.
    return BuildChoice(_with(meta, requirements), f"{IN_PROCESS} (no setup.py: one generated, as gcloud does, "
                                                  f"with the requirements of {listed.name}, which gcloud's generated "
                                                  f"setup.py does not read: {', '.join(meta.requires) or 'none'})")
