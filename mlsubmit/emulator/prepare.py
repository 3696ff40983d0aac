"""PREPARING: fetch a job's package URIs from Cloud Storage and install them into an isolated venv.

The packages are installed as the service installs them: offline `pip install` of each sdist into a fresh venv
(`mlsubmit.packaging.install_into_venv`), never the working tree, into the venvs `mlsubmit.local.venvs` keeps under
`$MLSUBMIT_HOME/venvs/<sha256 of the packages>-pyXY` — the ones `mlsubmit train --local` uses, so both share the
install of an unchanged trainer; a venv is renamed into place only when complete.
"""

from __future__ import annotations

import threading
from pathlib import Path

from mlsubmit.cloud import storage
from mlsubmit.emulator.errors import field_error
from mlsubmit.emulator.plan import JobPlan
from mlsubmit.errors import MlsubmitError

# Checks at create time answer within a few seconds even when the GCS endpoint is down.
CHECK_RETRY = storage.RetryPolicy(initial=0.05, maximum=0.5, deadline=5.0, probe_deadline=3.0)


_INSTALLING: dict[Path, threading.Lock] = {}
_INSTALLING_LOCK = threading.Lock()


class PrepareError(Exception):
    """A job cannot start: the message is what the job's error says."""


def package_field(plan: JobPlan, index: int) -> str:
    if plan.api == "legacy":
        return f"trainingInput.packageUris[{index}]"
    if plan.carried:  # the URIs are in the command that installs them
        return "jobSpec.workerPoolSpecs[0].containerSpec.command"
    return f"jobSpec.workerPoolSpecs[0].pythonPackageSpec.packageUris[{index}]"


def check_packages(plan: JobPlan) -> None:
    """Every package URI names an object that exists; else ApiError 400 naming the URI's field."""
    for index, uri in enumerate(plan.package_uris):
        if not uri.endswith((".tar.gz", ".zip", ".whl")):
            raise field_error(package_field(plan, index), f"{uri!r} is not a Python package (expected an sdist "
                                                          ".tar.gz, a .zip or a wheel)")
        try:
            found = storage.stat(uri, retry=CHECK_RETRY)
        except MlsubmitError as err:
            raise field_error(package_field(plan, index), f"{uri} cannot be read: {err.message}") from None
        if found is None:
            raise field_error(package_field(plan, index), f"the package {uri} does not exist")


def fetch(plan: JobPlan, into: Path) -> list[Path]:
    """Download every package URI into `into`, in order. Raises PrepareError."""
    paths = []
    for index, uri in enumerate(plan.package_uris):
        target = into / f"{index:02d}" / uri.rsplit("/", 1)[-1]
        try:
            paths.append(storage.get_file(uri, target))
        except MlsubmitError as err:
            raise PrepareError(f"Unable to fetch the package {uri}: {err.one_line()}") from None
    return paths


def venv_python(packages: list[Path], say=lambda text: None) -> Path:
    """The python of a venv holding `packages` (installed now, or earlier by an identical job). Raises PrepareError."""
    from mlsubmit.local.venvs import cached_venv, venv_dir_for

    current: list[Path] = []

    def installing(path: Path) -> None:
        current[:] = [path]
        say(f"Installing {path.name}.")

    with _INSTALLING_LOCK:
        lock = _INSTALLING.setdefault(venv_dir_for(packages), threading.Lock())
    try:
        with lock:  # jobs of the same packages wait for one install instead of each making its own
            python, reused = cached_venv(packages, installing=installing)
    except MlsubmitError as err:
        raise PrepareError(f"The package {current[0].name} could not be installed: {err.message}") from None
    if reused:
        say(f"Packages already installed ({', '.join(p.name for p in packages)}).")
    return python
