"""The `mlsubmit-runtime` distribution, staged beside a trainer package that uses it.

mlsubmit's wheel carries the `mlsubmit_runtime` package (a second top-level package, so no path dependency is
needed on PyPI). A trainer that lists `mlsubmit-runtime` among its requirements, or imports `mlsubmit_runtime`,
gets the runtime's own small sdist — built here from the installed package with the same reproducible writer as
any trainer — installed beside it by `train --local` and the emulator, and listed before it in the job's package
URIs (Vertex AI `pythonPackageSpec.packageUris`, legacy `packageUris`), so `pip install` in the cloud finds the
requirement already satisfied. Nothing of the runtime is staged for a trainer that does not use it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
from pathlib import Path
from typing import Any

DISTRIBUTION = "mlsubmit-runtime"
PACKAGE = "mlsubmit_runtime"
_IMPORT = re.compile(rb"^\s*(?:import|from)\s+mlsubmit_runtime\b", re.MULTILINE)


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def needs_runtime(plan: Any) -> bool:
    """Whether the trainer of this SdistPlan declares `mlsubmit-runtime` or imports `mlsubmit_runtime`."""
    from packaging.requirements import InvalidRequirement, Requirement

    for requirement in plan.metadata.requires:
        try:
            if _normalised(Requirement(requirement).name) == DISTRIBUTION:
                return True
        except InvalidRequirement:
            continue
    return any(f.path.endswith(".py") and _IMPORT.search(Path(f.source).read_bytes()) for f in plan.files)


def sdist_needs_runtime(path: str | os.PathLike) -> bool:
    """`needs_runtime` for a built sdist: its PKG-INFO's Requires-Dist, else its modules' imports."""
    import email.parser
    import tarfile

    from packaging.requirements import InvalidRequirement, Requirement

    with tarfile.open(path, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        info = next((m for m in members if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")), None)
        if info is not None:
            text = tar.extractfile(info).read().decode("utf-8", "replace")
            for requirement in email.parser.Parser().parsestr(text).get_all("Requires-Dist") or ():
                try:
                    if _normalised(Requirement(requirement).name) == DISTRIBUTION:
                        return True
                except InvalidRequirement:
                    continue
        return any(m.name.endswith(".py") and _IMPORT.search(tar.extractfile(m).read()) for m in members)


def runtime_dir() -> Path:
    """Where the installed `mlsubmit_runtime` package lives (the repository's folder in a development install)."""
    found = importlib.util.find_spec(PACKAGE)
    if found is None or not found.submodule_search_locations:
        raise RuntimeError("mlsubmit_runtime is not installed beside mlsubmit; reinstall mlsubmit")
    return Path(list(found.submodule_search_locations)[0])


def runtime_plan() -> Any:
    """The SdistPlan of `mlsubmit-runtime` (metadata from the package itself, not from any setup.py)."""
    from mlsubmit.packaging import plan_sdist
    from mlsubmit.packaging.setup_meta import ProjectMetadata
    from mlsubmit_runtime import __version__

    plan = plan_sdist(runtime_dir())
    # every image mlsubmit runs, legacy runtimes' Python 3.7 included (tests/test_runtime_package.py parses and
    # imports it there); no framework requirement: the image brings its own
    meta = ProjectMetadata(name=DISTRIBUTION, version=__version__, python_requires=">=3.7", source=PACKAGE,
                           summary="mlsubmit's runtime for trainer packages: multi_gpu_model, artifacts with a "
                           "manifest, emulated devices, tuning metrics")
    return dataclasses.replace(plan, metadata=meta)


def build_runtime(dist_dir: str | os.PathLike) -> Any:
    """Write the runtime's sdist into `dist_dir`; returns the Sdist."""
    from mlsubmit.packaging import write_sdist

    return write_sdist(runtime_plan(), dist_dir)


def planned_runtime(plan: Any, stage_to: str | None) -> Any | None:
    """The runtime's mlsubmit.packaging.DryRun (sha256, size, content-addressed URI under `stage_to`) when the
    trainer of `plan` uses it, else None. Nothing is written."""
    if not needs_runtime(plan):
        return None
    from mlsubmit.packaging import DryRun, archive_digest, check_destination
    from mlsubmit.packaging.stage import content_uri

    runtime = runtime_plan()
    sha256, size = archive_digest(runtime)
    uri = content_uri(check_destination(stage_to), sha256, runtime.filename) if stage_to is not None else None
    return DryRun(runtime, sha256, size, uri)


def package_runtime(plan: Any, *, dist_dir: str | os.PathLike | None, stage_to: str | None,
                    retry: Any = None) -> Any | None:
    """`mlsubmit package` for a trainer that uses the runtime: the runtime's sdist written beside the trainer's
    (in `dist_dir`, default dist/ beside the package) and staged to the same place; None for other trainers.
    Returns mlsubmit.packaging.PackageResult (never pre-flighted: it is mlsubmit's own code)."""
    if not needs_runtime(plan):
        return None
    from mlsubmit.packaging import package_plan

    target = Path(dist_dir) if dist_dir is not None else plan.package_dir.parent / "dist"
    return package_plan(runtime_plan(), dist_dir=target, check=False, stage_to=stage_to, retry=retry)
