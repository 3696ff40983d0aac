"""Package once, check once, stage once: the path `mlsubmit package` and `mlsubmit train` share.

The sdist is written to a temporary directory first and moves into the dist directory only after the
pre-flight passed, so a package that does not install never sits in `dist/` looking complete.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.packaging.preflight import PreflightResult, preflight
from mlsubmit.packaging.sdist import Sdist, SdistPlan, archive_digest, copy_sdist, plan_sdist, write_sdist
from mlsubmit.packaging.stage import StagedPackage, check_destination, content_uri, stage
from mlsubmit.storage import RetryPolicy


@dataclass(frozen=True)
class PackageResult:
    """The built sdist, how it was checked (None: skipped) and where it was staged (None: not staged)."""

    sdist: Sdist
    preflight: PreflightResult | None
    staged: StagedPackage | None
    build: str = ""  # how the sdist was built, one line


def package(package_path: str | os.PathLike = "trainer", *, setup_py: str | os.PathLike | None = None,
            dist_dir: str | os.PathLike | None = None, module: str | None = None, check: bool = True,
            stage_to: str | None = None, retry: RetryPolicy | None = None,
            show_progress: bool = False) -> PackageResult:
    """Build the sdist of `package_path`, pre-flight it (unless `check` is False), stage it to `stage_to`.

    Raises:
        UsageError: bad input (package, setup.py, destination, bucket, access) or a package that does not
            install or import (exit 2).
        OperationFailed: the upload failed after retries (exit 1).
    """
    if stage_to is not None:
        check_destination(stage_to)  # before any work
    return package_plan(plan_sdist(package_path, setup_py), dist_dir=dist_dir, module=module, check=check,
                        stage_to=stage_to, retry=retry, show_progress=show_progress)


def package_plan(plan: SdistPlan, *, dist_dir: str | os.PathLike | None = None, module: str | None = None,
                 check: bool = True, stage_to: str | None = None, retry: RetryPolicy | None = None,
                 show_progress: bool = False) -> PackageResult:
    """`package()` for an existing plan (so a caller can report its exclusions before the slow steps)."""
    if stage_to is not None:
        check_destination(stage_to)
    target = Path(dist_dir) if dist_dir is not None else plan.package_dir.parent / "dist"
    checked = None
    if check:
        with tempfile.TemporaryDirectory(prefix="mlsubmit-sdist-") as tmp:
            built = write_sdist(plan, tmp)
            checked = preflight(built, module)
            sdist = copy_sdist(built, target)
    else:
        sdist = write_sdist(plan, target)
    staged = stage(sdist, stage_to, retry=retry, show_progress=show_progress) if stage_to is not None else None
    return PackageResult(sdist, checked, staged, plan.build)


@dataclass(frozen=True)
class DryRun:
    """What `package` would build and where it would stage it; nothing written."""

    plan: SdistPlan
    sha256: str
    size: int
    uri: str | None


def dry_run(package_path: str | os.PathLike = "trainer", *, setup_py: str | os.PathLike | None = None,
            stage_to: str | None = None) -> DryRun:
    """Plan the sdist and compute its sha256 in memory (so the staged URI is known) without writing."""
    destination = check_destination(stage_to) if stage_to is not None else None
    plan = plan_sdist(package_path, setup_py)
    sha256, size = archive_digest(plan)
    uri = content_uri(destination, sha256, plan.filename) if destination is not None else None
    return DryRun(plan, sha256, size, uri)
