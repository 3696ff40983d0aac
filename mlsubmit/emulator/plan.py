"""From an accepted job body to the replicas the emulator starts, each with the environment its service sets.

The cluster shape comes from the reverse mappings of `mlsubmit.jobspec.drafts` (`draft_from_vertex`,
`draft_from_legacy`) and `build_spec`, so machine types, counts and accelerators are checked exactly as
`mlsubmit config` checks them; a problem is a 400 INVALID_ARGUMENT naming the body's field. The program each
replica runs is taken from the body as the service would run it:

- Vertex AI runs each worker pool's own `pythonPackageSpec` (module, args, env) unchanged; it does not add
  `--job-dir` (the program reads AIP_MODEL_DIR). Task names: `workerpool0-0`, `workerpool1-0`, …
- Legacy AI Platform runs `trainingInput.pythonModule` with `args` followed by `--job-dir <jobDir>` on every
  replica. Task names: `master-replica-0`, `worker-replica-0`, `ps-replica-0`, `evaluator-replica-0`.

The environment each service sets (TF_CONFIG, CLUSTER_SPEC, AIP_*, CLOUD_ML_JOB_ID) is added when the replicas
start (`launch`), from `mlsubmit.local.local_job.plan`, once the ports are known.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from mlsubmit.images import carried, catalog, choose
from mlsubmit.jobspec import machines
from mlsubmit.emulator.errors import field_error
from mlsubmit.errors import UsageError
from mlsubmit.jobspec.spec import LEGACY_JOB_ID, JobSpec

TRIAL_ENV = "mlsubmitTrialEnv"  # key of an internal legacy trial body: its hypertune environment
LEGACY_TASK_TYPES = {"chief": "master", "worker": "worker", "ps": "ps", "evaluator": "evaluator"}


@dataclass(frozen=True)
class Replica:
    role: str  # chief, worker, ps or evaluator
    index: int
    task: str  # the task name the API shows in logs
    module: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()  # set by the job body (Vertex pythonPackageSpec.env)
    command: tuple[str, ...] = ()  # a containerSpec's command + args, as sent (run by emulator.container_run)


@dataclass(frozen=True)
class JobPlan:
    api: str  # "vertex" or "legacy"
    job_id: str
    project: str
    spec: JobSpec
    replicas: tuple[Replica, ...]
    package_uris: tuple[str, ...]
    base_output_dir: str | None = None  # Vertex baseOutputDirectory.outputUriPrefix
    carried: bool = False  # pool 0 is a package run on a public image as a custom container (images.carried)
    tpu: str | None = None  # pool 0 is this Cloud TPU machine (the emulator runs it on the CPU)

    @property
    def chief(self) -> Replica:
        return self.replicas[0]


def _spec(draft: Any, fallback_field: str, region_field: str) -> JobSpec:
    from mlsubmit.jobspec.spec_input import build_spec

    try:
        spec = build_spec(draft)
    except UsageError as err:
        match = re.match(r"invalid value for ([^:;]+?):", err.message)
        named = match.group(1) if match else ""
        field = region_field if named == "--region" else named if named and not named.startswith("-") \
            else fallback_field
        message = err.message.replace(f"invalid value for {named}:", f"invalid value for {field}:") if named \
            else err.message  # the request's field, not the CLI flag that sets it
        raise field_error(field, message) from None
    return spec


def vertex_plan(body: dict[str, Any], project: str, location: str, job_id: str) -> JobPlan:
    """The plan of a checked CustomJob body. Raises ApiError 400 for what the service would refuse."""
    from mlsubmit.jobspec.drafts import draft_from_vertex

    # a package on a public image (mlsubmit.images.carried) runs as the Python package its command installs
    sent = body["jobSpec"].get("workerPoolSpecs") or []
    pools = [carried.as_package_pool(pool) for pool in sent]
    container = bool(sent and sent[0] and sent[0].get("containerSpec"))
    for index, pool in enumerate(sent):
        _check_executor_image(pool, f"jobSpec.workerPoolSpecs[{index}]")
    for index, pool in enumerate(pools):
        at = f"jobSpec.workerPoolSpecs[{index}]"
        if index >= len(machines.ROLES) and pool:
            raise field_error(at, "only pools 0-3 exist (chief, workers, parameter servers, evaluators)")
        if pool and pool.get("containerSpec"):
            raise field_error(f"{at}.containerSpec", "the emulator runs Python packages only: use "
                                                     "pythonPackageSpec, or a public image whose command installs "
                                                     "the package as mlsubmit writes it (other custom containers "
                                                     "are not emulated)")
        if pool and not pool.get("pythonPackageSpec"):
            raise field_error(at, "a worker pool needs pythonPackageSpec (or containerSpec)")
        if pool and not (pool.get("machineSpec") or {}).get("machineType"):
            raise field_error(f"{at}.machineSpec.machineType", "required field is missing")
    body = {**body, "jobSpec": {**body["jobSpec"], "workerPoolSpecs": pools}}
    try:
        draft, _ = draft_from_vertex(body)
    except UsageError as err:
        raise field_error("jobSpec.workerPoolSpecs[0]", err.message) from None
    spec = _spec(dataclasses.replace(draft, region=location), "jobSpec.workerPoolSpecs", "parent")
    tpu = None
    if choose.vertex_roles(spec).get("chief") != "chief":  # Vertex AI runs the program on the TPU VM (pool 0) alone
        tpu = spec.pools["worker"].machine_type
        spec = spec.replace(worker=None)  # one replica, the chief of its cluster (TF_CONFIG, CLUSTER_SPEC)
    replicas = []
    for index, (role, pool) in enumerate(zip(machines.ROLES, pools)):
        if not pool:
            continue
        package = pool["pythonPackageSpec"]
        env = tuple((str(e.get("name", "")), str(e.get("value", ""))) for e in package.get("env") or ())
        container = sent[index].get("containerSpec") or {}
        command = tuple(str(part) for part in (*(container.get("command") or ()), *(container.get("args") or ())))
        for replica in range(int(pool.get("replicaCount") or 1)):
            replicas.append(Replica(role, replica, f"workerpool{index}-{replica}", package["pythonModule"],
                                    tuple(package.get("args") or ()), env, command))
    uris = tuple(dict.fromkeys(uri for pool in pools if pool for uri in pool["pythonPackageSpec"]["packageUris"]))
    base = (body["jobSpec"].get("baseOutputDirectory") or {}).get("outputUriPrefix")
    return JobPlan("vertex", job_id, project, spec, tuple(replicas), uris, base, carried=container, tpu=tpu)


def _check_executor_image(pool: dict[str, Any] | None, at: str) -> None:
    """Vertex AI runs a pythonPackageSpec only on one of its prebuilt training images, before that image's end of
    availability (mlsubmit.images.catalog): anything else is refused at create, as the service refuses it."""
    package = (pool or {}).get("pythonPackageSpec")
    if not isinstance(package, dict) or not package.get("executorImageUri"):
        return
    uri = str(package["executorImageUri"])
    image = catalog.find(uri)
    if image is None or image.carrier:
        raise field_error(f"{at}.pythonPackageSpec.executorImageUri",
                          f"{uri} is not a Vertex AI prebuilt training container image; pythonPackageSpec runs only "
                          "on those (any other image goes in containerSpec.imageUri)")
    gone = catalog.retired(image)
    if gone is not None:
        raise field_error(f"{at}.pythonPackageSpec.executorImageUri",
                          f"{uri} is no longer available for training: its end of availability was "
                          f"{image.end_of_availability}")


def legacy_plan(body: dict[str, Any], project: str) -> JobPlan:
    """The plan of a checked legacy Job body. Raises ApiError 400 for what the service would refuse."""
    from mlsubmit.jobspec.drafts import draft_from_legacy

    job_id, training = body["jobId"], body.get("trainingInput") or {}
    if not LEGACY_JOB_ID.fullmatch(job_id):
        raise field_error("jobId", f"{job_id!r} is not a valid job id: a letter, then letters, digits or "
                                   f"underscores, at most 128 characters")
    if (training.get("masterConfig") or {}).get("imageUri"):
        raise field_error("trainingInput.masterConfig.imageUri", "the emulator runs Python packages only: use "
                                                                 "runtimeVersion (custom containers are not emulated)")
    draft, _ = draft_from_legacy(body)
    spec = _spec(draft, "trainingInput", "trainingInput.region")
    try:  # the runtimeVersion/pythonVersion pairs ml.v1 offered
        choose.legacy_runtime(spec)
    except UsageError as err:
        field = "trainingInput.pythonVersion" if "--python-version" in err.message else "trainingInput.runtimeVersion"
        raise field_error(field, err.message.replace("--python-version", "pythonVersion")
                          .replace("--runtime-version", "runtimeVersion")) from None
    args = tuple(training.get("args") or ())
    if training.get("jobDir"):
        args += ("--job-dir", training["jobDir"])
    env = tuple((body.get(TRIAL_ENV) or {}).items())  # a tuning trial's (set by the emulator, never by a request)
    replicas = tuple(Replica(role, index, f"{LEGACY_TASK_TYPES[role]}-replica-{index}", training["pythonModule"],
                             args, env)
                     for role, pool in spec.pools.items() for index in range(pool.replica_count))
    return JobPlan("legacy", job_id, project, spec, replicas, tuple(training["packageUris"]))

