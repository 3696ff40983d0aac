"""`mlsubmit train --local`: the job spec run here as the cloud would run it.

1. check the cluster shape and reserve the ports (bad input stops here: nothing was started);
2. build the trainer's sdist (mlsubmit.packaging) and install it offline into an isolated venv, as the cloud
   installs the package on its image — never the working tree. The venv is kept under
   $MLSUBMIT_HOME/venvs/<sha256 of the sdist>, so an unchanged trainer is installed once;
3. plan every replica's environment (mlsubmit.local_job) and run them (mlsubmit.runner).

Everything the user reads goes through `say`; the CLI decides how it looks.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mlsubmit import local_job
from mlsubmit.errors import invalid_value
from mlsubmit.runner import Outcome, Replica, Runner
from mlsubmit.spec import JobSpec

# Variables of the calling shell that would make a replica something other than what the service starts.
_SERVICE_VARIABLES = ("TF_CONFIG", "CLUSTER_SPEC", "AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR",
                      "CLOUD_ML_JOB_ID", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")


@dataclass(frozen=True)
class LocalRun:
    job: local_job.LocalJob
    outcome: Outcome
    python: Path  # the isolated venv's interpreter the replicas ran


def default_job_id() -> str:
    return time.strftime("local_%Y%m%d_%H%M%S_") + secrets.token_hex(2)


def isolated_python(package_path: str, setup_py: str | None, module: str, say: Callable[[str], None]) -> Path:
    """The sdist of `package_path` installed into its own venv (reused while the sdist is unchanged)."""
    from mlsubmit import packaging
    from mlsubmit.packaging.preflight import check_module
    from mlsubmit.venvs import cached_venv

    with tempfile.TemporaryDirectory(prefix="mlsubmit-sdist-") as dist:
        sdist = packaging.build_sdist(package_path, setup_py, dist_dir=dist)
        python, reused = cached_venv([sdist.path], check=lambda python, venv: check_module(python, venv, module,
                                                                                            cwd=venv))
    say(f"trainer {sdist.filename} (sha256 {sdist.sha256[:12]}…) "
        f"{'already installed in' if reused else 'installed offline into'} {python.parent.parent}")
    return python


def _safe_path(python: Path) -> bool:
    """PYTHONSAFEPATH works from Python 3.11 on: the replicas' Python (its venv's pyvenv.cfg) decides."""
    cfg = python.parent.parent / "pyvenv.cfg"
    found = re.search(r"^version(?:_info)?\s*=\s*(\d+)\.(\d+)", cfg.read_text(), re.M) if cfg.exists() else None
    return (int(found[1]), int(found[2])) >= (3, 11) if found else sys.version_info >= (3, 11)


def replicas_to_start(job: local_job.LocalJob, python: Path) -> list[Replica]:
    base = {k: v for k, v in os.environ.items() if k not in _SERVICE_VARIABLES}
    base.update(PYTHONUNBUFFERED="1", PYTHONSAFEPATH="1")  # safe path: the working tree never shadows the package
    base.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Python < 3.11 ignores PYTHONSAFEPATH, and `-m` would import from the working directory first.
    cwd = os.getcwd() if _safe_path(python) else str(python.parent.parent)
    return [Replica(r.name, r.role, (str(python), "-m", job.module, *r.args), {**base, **r.env}, cwd)
            for r in job.replicas]


def run_local(spec: JobSpec, *, api: str = "vertex", package_path: str = "trainer", setup_py: str | None = None,
              start_port: int | None = None, say: Callable[[str], None], color: bool = False) -> LocalRun:
    """Run `spec` here to the end. Raises UsageError (nothing started) for input this machine cannot run."""
    local_job.check_runnable(spec)
    if api not in local_job.APIS:
        raise invalid_value("--api", api, " or ".join(local_job.APIS))
    ports = local_job.reserve_ports(len(local_job.roles(spec)), start_port)
    job_id = spec.job_name or default_job_id()
    job_dir = spec.job_dir or f"jobs/{job_id}"
    job_dir = job_dir if job_dir.startswith("gs://") else os.path.abspath(job_dir)
    from mlsubmit.image_env import local_python
    python = (local_python(spec, package_path, setup_py, spec.python_module, say)
              or isolated_python(package_path, setup_py, spec.python_module, say))
    job = local_job.plan(spec, api=api, job_id=job_id, job_dir=job_dir, ports=ports,
                         gpus_here=local_job.gpus_on_this_machine())
    if job.emulated_devices:
        say(f"this machine has {job.gpus_here} GPU(s), the job asks for {job.emulated_devices}: each replica runs "
            f"with {job.emulated_devices} emulated devices (--emulate-devices {job.emulated_devices})")
    chief = "master" if api == "legacy" else "chief"
    say(f"job {job_id}: {', '.join(f'{r.name} {r.address}' for r in job.replicas)} "
        f"(TF_CONFIG names the chief {chief!r}, as {'legacy AI Platform' if api == 'legacy' else 'Vertex AI'} does)")
    outcome = Runner(replicas_to_start(job, python), sink=say, color=color).run()
    return LocalRun(job, outcome, python)
