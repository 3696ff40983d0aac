"""Reproducible, secret-free sdists of a trainer package: build, check installable, stage once.

The API `mlsubmit package`, `mlsubmit train` and the local runner share:
`build_sdist(package_path, setup_py=None, dist_dir=None) -> Sdist`, `preflight(sdist, module=None)`,
`install_into_venv(sdist, venv_dir) -> python`, `stage(sdist, destination) -> StagedPackage`, and
`package(...)`, which chains them the way the CLI does. Importing this package is light (standard library
only); google-cloud-storage is loaded when something is staged to gs://.
"""

from mlsubmit.packaging.extras import ExtraPackage, resolve_extras, staged_names
from mlsubmit.packaging.pipeline import DryRun, PackageResult, dry_run, package, package_plan, planned_module
from mlsubmit.packaging.preflight import (PreflightResult, check_module, default_module, install_into_venv,
                                          preflight)
from mlsubmit.packaging.sdist import (ExcludedFile, PackageFile, Sdist, SdistPlan, archive_digest, build_sdist,
                                      plan_sdist, write_sdist)
from mlsubmit.packaging.stage import StagedPackage, check_destination, extra_uri, package_uri, stage, stage_extra

__all__ = ["DryRun", "ExcludedFile", "ExtraPackage", "extra_uri", "planned_module", "resolve_extras", "stage_extra", "staged_names", "PackageFile", "PackageResult", "PreflightResult", "Sdist", "SdistPlan",
           "StagedPackage", "archive_digest", "build_sdist", "check_destination", "check_module",
           "default_module", "dry_run", "install_into_venv", "package", "package_plan", "package_uri",
           "plan_sdist", "preflight", "stage", "write_sdist"]
