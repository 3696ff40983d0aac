"""Package once, check once, stage once: the path `mlsubmit package` and `mlsubmit train` share.

The sdist is written to a temporary directory first and moves into the dist directory only after the
pre-flight passed, so a package that does not install never sits in `dist/` looking complete.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.packaging.preflight import BaseEnv, PreflightResult, checked_once, module_missing
from mlsubmit.packaging.sdist import Sdist, SdistPlan, archive_digest, copy_sdist, plan_sdist, write_sdist
from mlsubmit.packaging.extras import ExtraPackage
from mlsubmit.packaging.stage import StagedPackage, check_destination, content_uri, stage, stage_extra
from mlsubmit.cloud.storage import RetryPolicy


@dataclass(frozen=True)
class PackageResult:
    """The built sdist, how it was checked (None: skipped) and where it was staged (None: not staged)."""

    sdist: Sdist
    preflight: PreflightResult | None
    staged: StagedPackage | None
    build: str = ""  # how the sdist was built, one line
    extras: tuple[StagedPackage, ...] = ()  # the job's other packages, staged beside it


def package(package_path: str | os.PathLike = "trainer", *, setup_py: str | os.PathLike | None = None,
            dist_dir: str | os.PathLike | None = None, module: str | None = None, check: bool = True,
            stage_to: str | None = None, retry: RetryPolicy | None = None,
            show_progress: bool = False, requirements: tuple[str, ...] = (),
            extras: tuple[ExtraPackage, ...] = ()) -> PackageResult:
    """Build the sdist of `package_path`, pre-flight it (unless `check` is False), stage it to `stage_to`.

    Raises:
        UsageError: bad input (package, setup.py, destination, bucket, access) or a package that does not
            install or import (exit 2).
        OperationFailed: the upload failed after retries (exit 1).
    """
    if stage_to is not None:
        check_destination(stage_to)  # before any work
    return package_plan(plan_sdist(package_path, setup_py, requirements), dist_dir=dist_dir, module=module,
                        check=check, stage_to=stage_to, retry=retry, show_progress=show_progress, extras=extras)


def package_plan(plan: SdistPlan, *, dist_dir: str | os.PathLike | None = None, module: str | None = None,
                 check: bool = True, stage_to: str | None = None, retry: RetryPolicy | None = None,
                 show_progress: bool = False, extras: tuple[ExtraPackage, ...] = (),
                 base: BaseEnv | None = None) -> PackageResult:
    """`package()` for an existing plan (so a caller can report its exclusions before the slow steps). `base`: the
    environment the pre-flight runs on (default: preflight.base_env(), the default image's)."""
    if stage_to is not None:
        check_destination(stage_to)
    target = Path(dist_dir) if dist_dir is not None else plan.package_dir.parent / "dist"
    checked = None
    if check:
        with tempfile.TemporaryDirectory(prefix="mlsubmit-sdist-") as tmp:
            built = write_sdist(plan, tmp)
            local_extras = tuple(extra.path for extra in extras if extra.path is not None)
            checked = checked_once(built, module, extra_packages=local_extras, base=base)
            sdist = copy_sdist(built, target)
    else:
        sdist = write_sdist(plan, target)
    staged, staged_extras = None, ()
    if stage_to is not None:
        staged = stage(sdist, stage_to, retry=retry, show_progress=show_progress)
        staged_extras = tuple(stage_extra(extra, stage_to, retry=retry, show_progress=show_progress)
                              for extra in extras)
    return PackageResult(sdist, checked, staged, plan.build, staged_extras)


def planned_module(plan: SdistPlan, module: str) -> bool:
    """Whether `module` is known to be in the planned package (True), or lies outside it, in another package or
    a requirement, so only the venv pre-flight can tell (False). Offline, instant.

    Raises:
        UsageError: the module is under the package's name but the package has no such file.
    """
    if module.split(".")[0] != plan.package:
        return False
    base = module.replace(".", "/")
    paths = {f.path for f in plan.files} if plan.prebuilt is None else \
        {member.removeprefix("src/") for member in plan.prebuilt_members}
    if f"{base}.py" in paths or f"{base}/__init__.py" in paths:
        return True
    raise module_missing(module, plan.package)


@dataclass(frozen=True)
class DryRun:
    """What `package` would build and where it would stage it; nothing written."""

    plan: SdistPlan
    sha256: str
    size: int
    uri: str | None


def dry_run(package_path: str | os.PathLike = "trainer", *, setup_py: str | os.PathLike | None = None,
            stage_to: str | None = None, requirements: tuple[str, ...] = ()) -> DryRun:
    """Plan the sdist and compute its sha256 in memory (so the staged URI is known) without writing beside the
    package (a project built by its own backend is built into mlsubmit's cache)."""
    destination = check_destination(stage_to) if stage_to is not None else None
    plan = plan_sdist(package_path, setup_py, requirements)
    sha256, size = archive_digest(plan)
    uri = content_uri(destination, sha256, plan.filename) if destination is not None else None
    return DryRun(plan, sha256, size, uri)
