"""`mlsubmit train --local`: the job spec run here as the cloud would run it.

1. check the cluster shape and reserve the ports (bad input stops here: nothing was started);
2. build the trainer's sdist (mlsubmit.packaging) — and mlsubmit-runtime's when the trainer uses it — and install
   them into a job environment on the job's image's environment (mlsubmit.images.job_envs), or into an isolated
   venv over mlsubmit's own (kept under $MLSUBMIT_HOME/venvs/<sha256 of the sdists>), as the cloud installs the
   packages on its image — never the working tree. An unchanged trainer is installed once; after a build adds
   something, what mlsubmit keeps is pruned under MLSUBMIT_CACHE_MAX_SIZE / MLSUBMIT_CACHE_MAX_AGE
   (mlsubmit.cache.inventory), never an environment a running job holds;
3. plan the replicas (mlsubmit.local.local_job) and run them (mlsubmit.local.runner), each through the one replica
   launcher every cluster target uses (mlsubmit.launcher.replica): it sets TF_CONFIG / CLUSTER_SPEC / AIP_* and
   starts `python -m MODULE ARGS` with the venv's Python in the replica's private working directory.

Everything the user reads goes through `say`; the CLI decides how it looks.
"""

from __future__ import annotations

import os
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mlsubmit.launcher import PATH as LAUNCHER
from mlsubmit.launcher import replica as launcher
from mlsubmit.local import local_job, workdir
from mlsubmit.errors import invalid_value
from mlsubmit.local.runner import Outcome, Replica, Runner
from mlsubmit.jobspec.spec import JobSpec
from mlsubmit_runtime import EMULATE_DEVICES_VARIABLE


@dataclass(frozen=True)
class LocalRun:
    job: local_job.LocalJob
    outcome: Outcome
    python: Path  # the isolated venv's interpreter the replicas ran
    logs: Mapping[str, Path] = field(default_factory=dict)  # each replica's whole output


def isolated_python(package_path: str, setup_py: str | None, module: str, say: Callable[[str], None],
                    requirements: tuple[str, ...] = (), extras: tuple = ()) -> tuple[Path, str]:
    """The sdist of `package_path` (after the job's `extras`, and mlsubmit-runtime's when the package uses it)
    installed with its missing requirements into its own venv (reused while the packages are unchanged); returns
    the venv's python and the package's distribution name."""
    from mlsubmit import packaging
    from mlsubmit.packaging.preflight import check_module
    from mlsubmit.packaging.runtime_dist import build_runtime, needs_runtime
    from mlsubmit.local.venvs import cached_venv

    local_extras = [extra.path for extra in extras if extra.path is not None]
    if len(local_extras) != len(extras):
        raise invalid_value("--extra-packages", ", ".join(e.given for e in extras if e.path is None),
                            "local archives or package directories for --local", hint="download it first")
    plan = packaging.plan_sdist(package_path, setup_py, requirements)
    say(f"package {plan.filename}: {plan.build}")
    for item in plan.excluded_secrets:  # as `package` and cloud `train` name them
        say(f"warning: {item.warning()}")
    with tempfile.TemporaryDirectory(prefix="mlsubmit-sdist-") as dist:
        sdist = packaging.write_sdist(plan, dist)
        runtime = [build_runtime(dist)] if needs_runtime(plan) else []
        python, reused = cached_venv([*(r.path for r in runtime), *local_extras, sdist.path],
                                     check=lambda python, venv: check_module(python, venv, module, cwd=venv,
                                                                             package=sdist.package))
    beside = f" with {runtime[0].filename}" if runtime else ""
    say(f"trainer {sdist.filename}{beside} (sha256 {sdist.sha256[:12]}…) "
        f"{'already installed in' if reused else 'installed with its requirements into'} {python.parent.parent}")
    if not reused:
        _prune_after_build(say)
    return python, plan.metadata.name


def _prune_after_build(say: Callable[[str], None]) -> None:
    from mlsubmit.cache.inventory import after_build

    after_build(say)


def image_python(spec: JobSpec, package_path: str, setup_py: str | None, module: str, say: Callable[[str], None],
                 requirements: tuple[str, ...] = (), extras: tuple = (), *, api: str = "vertex") -> tuple[Path, str] | None:
    """`train --local`: the package checked against the job's image (mlsubmit.images: the image `choose` gives, the
    same refusal as before an upload) and installed on that image's environment, or None (image environments off,
    the user's own container, an image the table does not know: mlsubmit's own environment is used).

    Raises:
        UsageError: the image cannot take the package (one line).
    """
    from mlsubmit.images import envs
    from mlsubmit.images.check import check, describe
    from mlsubmit.images.imported import imported
    from mlsubmit.packaging.extras import staged_names
    from mlsubmit.packaging.preflight import check_module
    from mlsubmit.packaging.runtime_dist import DISTRIBUTION, build_runtime, needs_runtime
    from mlsubmit.packaging.sdist import plan_sdist, write_sdist

    image = envs.runnable_image(spec, say, api=api)
    if image is None:
        return None
    with tempfile.TemporaryDirectory(prefix="mlsubmit-sdist-") as dist:
        plan = plan_sdist(package_path, setup_py, requirements)
        sdist = write_sdist(plan, dist)
        # installed before the package, as the job's package URIs list them
        before = [build_runtime(dist).path] if needs_runtime(plan) else []
        before += [extra.path for extra in extras if extra.path is not None]
        checked = check(plan.metadata.requires, [(f.path, f.source) for f in plan.files], sdist.sha256, image,
                        staged=(DISTRIBUTION, *staged_names(extras)), project=plan.package_dir.parent)
        for warning in checked.warnings:
            say(f"warning: {warning}")
        say(describe(checked, image))
        python, reused = envs.job_python(image, [*before, sdist.path], say,
                                         check=lambda python, venv: check_module(python, venv, module, cwd=venv,
                                                                                 package=sdist.package))
    beside = f" after {', '.join(path.name for path in before)}" if before else ""
    ran = imported(python)  # what the job imports: a requirement may replace the image's framework
    say(f"trainer {sdist.filename} (sha256 {sdist.sha256[:12]}…){beside} "
        f"{'already installed' if reused else 'installed'} on image {image.name}: {ran.line()} "
        f"(venv {python.parent.parent})")
    for note in ran.replaced():
        say(f"note: {note}")
    if not reused:
        _prune_after_build(say)
    return python, plan.metadata.name


def job_python(spec: JobSpec, *, package_path: str, setup_py: str | None, say: Callable[[str], None],
               requirements: tuple[str, ...] = (), extras: tuple = (), image_env: bool = True,
               api: str = "vertex") -> tuple[Path, str]:
    """(python, distribution name): the package installed on its image's environment (mlsubmit.images.envs),
    or, without one or with `image_env` False, into an isolated venv over mlsubmit's own environment.

    Raises:
        UsageError: MLSUBMIT_CACHE_MAX_SIZE or MLSUBMIT_CACHE_MAX_AGE is not a size or an age (before anything is
            built), or see `image_python` and `isolated_python`.
    """
    from mlsubmit.cache.limits import from_environment

    from_environment()
    found = image_python(spec, package_path, setup_py, spec.python_module, say, requirements, extras, api=api) \
        if image_env else None
    return found or isolated_python(package_path, setup_py, spec.python_module, say, requirements, extras)


def local_workdirs(job: local_job.LocalJob, root: Path | None = None) -> dict[str, workdir.Workdir]:
    """One private working directory per replica of `job` under `root` (default $MLSUBMIT_HOME/replicas/<job id>),
    each a mirror of the user's working directory (mlsubmit.local.workdir: reads of existing files resolve, new
    relative writes stay private)."""
    root = root if root is not None else workdir.runs_root(job.job_id)
    return workdir.replica_dirs(root, [r.name for r in job.replicas], Path.cwd())


def launcher_spec(job: local_job.LocalJob, replica: local_job.ReplicaPlan, python: Path, workdir_path: Path,
                  env: Mapping[str, str] | None = None) -> dict:
    """The launcher's spec (mlsubmit.launcher.replica) of one replica of `job`: the interpreter installed already,
    its private working directory, the job's own variables (`--env`, and the devices a replica emulates) set last.
    No JAX/torch coordinator variables: Vertex AI sets none, and `--local` stands in for it."""
    emulated = {EMULATE_DEVICES_VARIABLE: str(replica.emulate_devices)} if replica.emulate_devices else {}
    return {"job_id": job.job_id, "api": job.api, "tier": job.tier, "roles": job.counts,
            "addresses": [r.address for r in job.replicas], "role": replica.role, "index": replica.index,
            "job_dir": job.job_dir or "", "module": job.module, "args": list(job.args),
            "env": {**emulated, **(env or {})}, "coordinator": False, "python": str(python),
            "workdir": str(workdir_path), "watch_chief": False, "quiet": True, "same_group": True}


def replicas_to_start(job: local_job.LocalJob, python: Path, env: Mapping[str, str] | None = None,
                      workdirs: Mapping[str, workdir.Workdir] | None = None,
                      temp_dirs: Mapping[str, Path] | None = None) -> list[Replica]:
    """Each replica's process: the one launcher (mlsubmit.launcher.replica, as on every cluster) given its spec in
    its environment; it sets the service's variables, then the job's own (`--env`), over this shell's, and starts
    `python -m MODULE ARGS` in the replica's own working directory (`workdirs`, default `local_workdirs(job)`)."""
    workdirs = workdirs if workdirs is not None else local_workdirs(job)
    # The launcher itself needs only the standard library: mlsubmit's own Python runs it, isolated (-I: no
    # PYTHON* variables, no working directory on sys.path; -S: no site start-up), whatever Python the job uses.
    argv = (sys.executable, "-I", "-S", str(LAUNCHER))
    base = {k: v for k, v in os.environ.items() if k != launcher.SPEC_VARIABLE}
    replicas = []
    for r in job.replicas:
        spec = launcher_spec(job, r, python, workdirs[r.name].path, env)
        temp = {"TMPDIR": str(temp_dirs[r.name])} if temp_dirs and r.name in temp_dirs else {}
        replicas.append(Replica(r.name, r.role, argv, {**base, **temp, launcher.SPEC_VARIABLE: json.dumps(spec)},
                                str(workdirs[r.name].path)))
    return replicas


def run_local(spec: JobSpec, *, api: str = "vertex", package_path: str = "trainer", setup_py: str | None = None,
              start_port: int | None = None, say: Callable[[str], None], color: bool = False,
              requirements: tuple[str, ...] = (), extras: tuple = (),
              installed: tuple[Path, str] | None = None,
              on_runner: Callable[[Runner], None] | None = None) -> LocalRun:
    """Run `spec` here to the end. Raises UsageError (nothing started) for input this machine cannot run.

    `installed`: (python, distribution name) of an environment `job_python` prepared already (else prepared here);
    `on_runner`: called with the Runner before it starts (so another thread can `cancel()` it).
    """
    from mlsubmit.jobspec.job_names import generate_job_name

    local_job.check_runnable(spec)
    if api not in local_job.APIS:
        raise invalid_value("--api", api, " or ".join(local_job.APIS))
    if api == "legacy":
        from mlsubmit.jobspec.requests import reject_env_for_legacy

        reject_env_for_legacy(spec)
    ports = local_job.reserve_ports(len(local_job.roles(spec)), start_port)
    # a legacy job runs the software its request names (runtimeVersion, pythonVersion: mlsubmit.images.choose)
    python, name = installed or job_python(spec, package_path=package_path, setup_py=setup_py, say=say,
                                           requirements=requirements, extras=extras, api=api)
    job_id = spec.job_name or generate_job_name(name)
    # Vertex AI: the base output directory (AIP_*) defaults below jobs/ as a staging bucket's would;
    # legacy AI Platform has a job dir only when one was given.
    job_dir = spec.job_dir or (f"jobs/{job_id}" if api == "vertex" else None)
    if job_dir and not job_dir.startswith("gs://"):
        job_dir = os.path.abspath(job_dir)
    job = local_job.plan(spec, api=api, job_id=job_id, job_dir=job_dir, ports=ports,
                         gpus_here=local_job.gpus_on_this_machine())
    if job.emulated_devices:
        say(f"this machine has {job.gpus_here} GPU(s), the job asks for {job.emulated_devices}: each replica gets "
            f"{EMULATE_DEVICES_VARIABLE}={job.emulated_devices} (a trainer that reads it, as the bundled one does "
            f"through mlsubmit_runtime, splits the CPU into {job.emulated_devices} devices; others run on the CPU)")
    chief = "master" if api == "legacy" else "chief"
    say(f"job {job_id}: {', '.join(f'{r.name} {r.address}' for r in job.replicas)} "
        f"(TF_CONFIG names the chief {chief!r}, as {'legacy AI Platform' if api == 'legacy' else 'Vertex AI'} does)")
    workdirs = local_workdirs(job)
    say(next(iter(workdirs.values())).note())
    logs = {name: found.path.parent / f"{name}.log" for name, found in workdirs.items()}
    # each replica's temporary files in a folder of its own, removed when the job ends however it ends (a replica
    # killed by SIGTERM or SIGKILL removes nothing itself)
    temp_dirs = {name: found.path.parent / f"{name}.tmp" for name, found in workdirs.items()}
    try:
        for folder in temp_dirs.values():
            folder.mkdir(parents=True, exist_ok=True)
        runner = Runner(replicas_to_start(job, python, spec.env_dict, workdirs, temp_dirs), sink=say, color=color,
                        logs=logs)
        if on_runner is not None:
            on_runner(runner)
        outcome = runner.run()
    finally:
        for folder in temp_dirs.values():
            shutil.rmtree(folder, ignore_errors=True)
    return LocalRun(job, outcome, python, logs)
