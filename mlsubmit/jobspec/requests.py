"""JobSpec -> request documents: pure functions, no network, no printing.

Forward: `vertex_job_spec` (a CustomJobSpec, what `gcloud ai custom-jobs create --config` reads),
`vertex_custom_job` (the CustomJob create body), `legacy_training_input`, `legacy_config` (the Job resource
`gcloud ai-platform jobs submit training --config` reads) and `legacy_job` (the Job create body).
`config_document` picks one by format and returns the notes a user should see (what changed on the way).

Backward, for migration, is `mlsubmit.jobspec.drafts` (documents -> SpecDraft).

Counts that the APIs declare int64 (legacy counts, Vertex replicaCount) are written as decimal strings, as
the discovery documents require; Vertex acceleratorCount is int32 and stays a number.
"""

from __future__ import annotations

import re
from typing import Any

from mlsubmit.images import carried, choose, listed

from mlsubmit.jobspec import machines
from mlsubmit.errors import UsageError, invalid_value
from mlsubmit.jobspec.spec import LEGACY_JOB_ID, JobSpec, Pool
from mlsubmit.jobspec.spec_input import RoleDraft, SpecDraft

FORMATS = ("vertex", "legacy")
# role -> (machine type key, config key, count key) in a legacy trainingInput
LEGACY_KEYS = {"chief": ("masterType", "masterConfig", None),
               "worker": ("workerType", "workerConfig", "workerCount"),
               "ps": ("parameterServerType", "parameterServerConfig", "parameterServerCount"),
               "evaluator": ("evaluatorType", "evaluatorConfig", "evaluatorCount")}
# -- forward: legacy AI Platform -------------------------------------------------------------------------------
def legacy_training_input(spec: JobSpec) -> dict[str, Any]:
    """The `trainingInput` of a legacy Job (ml.v1 GoogleCloudMlV1__TrainingInput)."""
    reject_env_for_legacy(spec)
    reject_spot_for_legacy(spec)
    document: dict[str, Any] = {"scaleTier": spec.tier}
    for role, pool in spec.pools.items():
        _legacy_accelerator(role, pool)
        type_key, config_key, count_key = LEGACY_KEYS[role]
        config = _legacy_replica_config(spec, role)
        if spec.tier == "CUSTOM":
            if count_key:
                document[count_key] = str(pool.replica_count)
            document[type_key] = pool.machine.legacy_name or pool.machine_type
            if pool.accelerator_type:
                config = {"acceleratorConfig": {"count": str(pool.accelerator_count), "type": pool.accelerator_type},
                          **config}
        if config:
            document[config_key] = config
    document["region"] = spec.region
    if spec.container_image is None:  # the legacy API took exactly one of runtimeVersion and masterConfig.imageUri
        document["runtimeVersion"], document["pythonVersion"] = _legacy_runtime(spec)
        document["pythonModule"] = spec.python_module
    if spec.args:
        document["args"] = list(spec.args)
    if spec.job_dir:
        document["jobDir"] = spec.job_dir
    if spec.package_uris:
        document["packageUris"] = list(spec.package_uris)
    if spec.timeout:
        document["scheduling"] = {"maxRunningTime": spec.timeout}
    if spec.network:
        document["network"] = spec.network
    return document


def reject_spot_for_legacy(spec: JobSpec) -> None:
    if spec.spot:
        raise UsageError("invalid option for legacy AI Platform: --spot (it has no spot capacity; Vertex AI runs "
                         "custom jobs on spot VMs with scheduling.strategy SPOT)", hint="drop --spot, or use --api vertex")
    given = spec.capacity.given()
    if given:
        raise UsageError(f"invalid option for legacy AI Platform: {given[0]} (it has no FLEX_START, reservations or "
                         "retry settings; Vertex AI's scheduling and machineSpec have them)",
                         hint=f"drop {given[0]}, or use --api vertex")


def reject_env_for_legacy(spec: JobSpec) -> None:
    """Legacy AI Platform has no environment variables for a Python package: --env is one line, exit 2."""
    if spec.env:
        raise UsageError(f"invalid option for legacy AI Platform: --env {spec.env[0][0]}=…; a legacy job sets no "
                         "environment variables for its Python package, so the trainer would not see them",
                         hint="drop --env, or submit to Vertex AI (pythonPackageSpec.env)")


def _legacy_replica_config(spec: JobSpec, role: str) -> dict[str, Any]:
    """A legacy ReplicaConfig's container and boot disk for `role` (its acceleratorConfig is added by the caller)."""
    config: dict[str, Any] = {}
    image = spec.container_image if role == "chief" else dict(spec.pool_images).get(role)
    if image:
        config["imageUri"] = image
    if role == "chief" and spec.container_command:
        config["containerCommand"] = list(spec.container_command)
    disk = _boot_disk(spec, role)
    if disk:
        config["diskConfig"] = disk
    return config


def _boot_disk(spec: JobSpec, role: str) -> dict[str, Any]:
    """{bootDiskType, bootDiskSizeGb} of `role`, the same shape in legacy diskConfig and Vertex diskSpec."""
    for disk_role, disk_type, size in spec.boot_disks:
        if disk_role == role:
            return {k: v for k, v in (("bootDiskType", disk_type), ("bootDiskSizeGb", size)) if v is not None}
    return {}


def require_python_package(spec: JobSpec) -> None:
    """`mlsubmit train` stages and runs a Python package: a custom-container spec is refused, not half-run."""
    image = spec.container_image or next((image for _, image in spec.pool_images), None)
    if image:
        raise UsageError(f"invalid job: mlsubmit train runs a Python package, and this job names the custom "
                         f"container {image}", hint="create it with `mlsubmit config … -o job.yaml` and `gcloud ai "
                                                    "custom-jobs create --config job.yaml`, or drop the imageUri")


def legacy_config(spec: JobSpec) -> dict[str, Any]:
    """The Job resource YAML that `gcloud ai-platform jobs submit training --config` reads."""
    _legacy_job_id(spec)
    document: dict[str, Any] = {"labels": spec.labels_dict} if spec.labels else {}
    document["trainingInput"] = legacy_training_input(spec)
    return document


def legacy_job(spec: JobSpec) -> dict[str, Any]:
    """The body of projects.jobs.create: {jobId, labels, trainingInput}."""
    if not spec.job_name:
        raise invalid_value("--job-name", None, "a job id for a legacy job", hint="add --job-name")
    return {"jobId": _legacy_job_id(spec), "labels": spec.labels_dict, "trainingInput": legacy_training_input(spec)}


def _legacy_job_id(spec: JobSpec) -> str | None:
    if spec.job_name is not None and not LEGACY_JOB_ID.fullmatch(spec.job_name):
        fixed = re.sub(r"\W", "_", spec.job_name)
        fixed = fixed if fixed[:1].isalpha() else f"job_{fixed}"
        raise invalid_value("--job-name", spec.job_name, "a legacy job id: a letter, then letters, digits or _, "
                            "at most 128 characters", hint=f"use --job-name {fixed[:128]}")
    return spec.job_name


def _legacy_accelerator(role: str, pool: Pool) -> None:
    accelerator = pool.accelerator
    if accelerator and not machines.ACCELERATORS[accelerator[0]].legacy:
        offered = ", ".join(a.name for a in machines.ACCELERATORS.values() if a.legacy)
        raise UsageError(f"invalid value for --format legacy: {accelerator[0]} ({role} {pool.machine_type}) is "
                         f"not available on legacy AI Platform; it offers {offered}", hint="use --format vertex")


def _legacy_runtime(spec: JobSpec) -> tuple[str, str]:
    """(runtimeVersion, pythonVersion): the pair ml.v1 takes, decided with the image (mlsubmit.images.choose)."""
    return choose.legacy_runtime(spec)


# -- forward: Vertex AI ---------------------------------------------------------------------------------------
def vertex_pools(spec: JobSpec) -> tuple[dict[str, tuple[str, str | None, int, int]], list[str]]:
    """{role: (machine, accelerator, accelerator count, replicas)} as Vertex AI runs them, and notes.

    Legacy machine types become their Compute Engine equivalents; accelerators Vertex AI no longer offers
    (K80) become the nearest it does; a TPU worker becomes pool 0 (Vertex runs the program on the TPU VM).
    """
    pools, notes = {}, []
    for role, pool in spec.pools.items():
        machine, (accelerator, count) = pool.machine, pool.accelerator or (None, 0)
        name, why = machine.equivalent or machine.name, ""
        if accelerator and not machines.ACCELERATORS[accelerator].vertex:
            substitute = machines.vertex_accelerator(machines.MACHINES[name], accelerator, count)
            if spec.region not in machines.ACCELERATORS[substitute].regions:
                raise invalid_value("--region", spec.region, f"a region offering {substitute} on Vertex AI: "
                                    + ", ".join(machines.ACCELERATORS[substitute].regions))
            why = f" ({accelerator} reached end of support on Vertex AI)"
            accelerator = substitute
        if machine.is_legacy or why:
            was = f"legacy machine type {machine.name}" if machine.is_legacy \
                else f"{name} + {count} {pool.accelerator[0]}"
            carried = f" + {count} {accelerator}" if accelerator else ""
            notes.append(f"{role}: {was} becomes {name}{carried} on Vertex AI{why}")
        pools[role] = (name, accelerator, count, pool.replica_count)
    roles = choose.vertex_roles(spec)  # the one place that says which pool becomes pool 0
    if roles.get("chief") != "chief":
        notes.append(f"chief: Vertex AI runs the program on the TPU VM (pool 0); the chief's "
                     f"{pools['chief'][0]} is dropped")
    return {role: pools[source] for role, source in roles.items()}, notes


def vertex_job_spec(spec: JobSpec) -> dict[str, Any]:
    """The CustomJobSpec (aiplatform.v1 GoogleCloudAiplatformV1CustomJobSpec): pool 0 chief, 1 workers, 2 ps,
    3 evaluators; skipped pools are {} and trailing empty pools are left out."""
    pools, _ = vertex_pools(spec)
    specs: list[dict[str, Any]] = []
    for role in machines.ROLES:
        if role not in pools:
            specs.append({})
            continue
        machine, accelerator, count, replicas = pools[role]
        machine_spec: dict[str, Any] = {"machineType": machine}
        topology = machines.MACHINES[machine].tpu_topology
        if topology:  # a TPU VM names its slice, not an accelerator ("Configure compute resources": TPU v5e)
            machine_spec["tpuTopology"] = topology
        elif accelerator:
            machine_spec.update(acceleratorType=accelerator, acceleratorCount=count)
        if spec.capacity.reservation is not None and _reserved(spec, pools, role):
            machine_spec["reservationAffinity"] = spec.capacity.reservation.body()
        pool: dict[str, Any] = {"machineSpec": machine_spec, "replicaCount": str(replicas)}
        if _boot_disk(spec, role):
            pool["diskSpec"] = _boot_disk(spec, role)
        container = _container(spec, role)
        choice = choose.choose(spec, role)
        if container:
            pool["containerSpec"] = container
        elif choice.how == choose.PACKAGE:
            pool["pythonPackageSpec"] = _python_package(spec, choice.uri)
        else:  # any other image: a custom container whose command installs the package (mlsubmit.images.carried)
            adds = [*(r for r, _ in choice.adds), *listed.requirements(choice.image, spec.package_imports)]
            pool["containerSpec"] = carried.container_spec(choice.uri, spec.package_uris, spec.python_module,
                                                           spec.args, spec.env, adds=adds)
        specs.append(pool)
    while specs and not specs[-1]:
        specs.pop()
    document: dict[str, Any] = {"workerPoolSpecs": specs}
    if spec.job_dir:
        document["baseOutputDirectory"] = {"outputUriPrefix": spec.job_dir}
    scheduling = {"timeout": spec.timeout} if spec.timeout else {}
    if spec.spot:
        scheduling["strategy"] = "SPOT"
    scheduling.update(spec.capacity.scheduling())
    if scheduling:
        document["scheduling"] = scheduling
    if spec.network:
        document["network"] = spec.network
    return document


def _reserved(spec: JobSpec, pools: dict[str, tuple[str, str | None, int, int]], role: str) -> bool:
    """Whether `role`'s pool draws from the reservation: the pools with accelerators (a reservation holds the GPU
    machines), or every pool when none has any."""
    with_accelerators = [r for r, (_, accelerator, _, _) in pools.items() if accelerator]
    return role in with_accelerators or not with_accelerators


def _container(spec: JobSpec, role: str) -> dict[str, Any] | None:
    """The Vertex containerSpec {imageUri, command, args} of `role`'s pool, or None for a Python package pool."""
    own = dict(spec.pool_images).get(role)
    image = own or spec.container_image
    if not image:
        return None
    container: dict[str, Any] = {"imageUri": image}
    if spec.container_command and image == spec.container_image:
        container["command"] = list(spec.container_command)
    if spec.args:
        container["args"] = list(spec.args)
    return container


def executor_image(spec: JobSpec, role: str = "chief") -> str:
    """The image URI of a Vertex AI pool (mlsubmit.images.choose decides it)."""
    return choose.choose(spec, role).uri


def vertex_custom_job(spec: JobSpec) -> dict[str, Any]:
    """The body of projects.locations.customJobs.create: {displayName, labels, jobSpec}."""
    if not spec.job_name:
        raise invalid_value("--job-name", None, "a display name for a Vertex AI job", hint="add --job-name")
    return {"displayName": spec.job_name, "labels": spec.labels_dict, "jobSpec": vertex_job_spec(spec)}


def _python_package(spec: JobSpec, image: str) -> dict[str, Any]:
    package: dict[str, Any] = {"executorImageUri": image}
    if spec.package_uris:
        package["packageUris"] = list(spec.package_uris)
    package["pythonModule"] = spec.python_module
    if spec.args:  # exactly the user's: Vertex AI adds nothing (the job dir reaches the program as AIP_*)
        package["args"] = list(spec.args)
    if spec.env:
        package["env"] = [{"name": key, "value": value} for key, value in spec.env]
    return package


def config_document(spec: JobSpec, fmt: str) -> tuple[dict[str, Any], list[str]]:
    """The `--config` document for `fmt` ("vertex" or "legacy") and the notes to show the user."""
    if fmt == "legacy":
        return legacy_config(spec), []
    if fmt != "vertex":
        raise invalid_value("--format", fmt, " or ".join(FORMATS))
    _, notes = vertex_pools(spec)
    notes += carrier_notes(spec, vertex_job_spec(spec))
    if spec.labels or spec.job_name:
        notes.append("a CustomJobSpec has no display name or labels: pass them to gcloud as --display-name "
                     "and --labels (mlsubmit train sends them)")
    return vertex_job_spec(spec), notes


def carrier_notes(spec: JobSpec, job_spec: dict[str, Any]) -> list[str]:
    """What a user reading a config should know when a pool runs the package on a public image as a custom
    container (mlsubmit.images.carried): why, and that the file itself must name the packages."""
    uris = {(pool.get("containerSpec") or {}).get("imageUri") for pool in job_spec.get("workerPoolSpecs") or ()
            if pool and carried.parse(pool.get("containerSpec") or {}) is not None and not pool.get("pythonPackageSpec")}
    if spec.container_image or spec.package_uris:
        return []
    if any((pool or {}).get("pythonPackageSpec") for pool in job_spec.get("workerPoolSpecs") or ()):
        return ["this file names no package, and Vertex AI refuses a pythonPackageSpec without one "
                "(pythonPackageSpec.packageUris: required field is missing): add --package-uris gs://…/PACKAGE.tar.gz "
                "(`mlsubmit package --stage` prints it; gcloud's --python-package-uris reaches only --worker-pool-spec "
                "pools, not a --config file's)"]
    if not uris:
        return []
    return [f"the package runs on {' and '.join(sorted(uris))} as a custom container that pip-installs it from "
            "/gcs/ (Vertex AI serves no prebuilt TensorFlow training image any more), but this file names no "
            "package: add --package-uris gs://…/PACKAGE.tar.gz (`mlsubmit package --stage` prints it; gcloud's "
            "--python-package-uris does not reach a container)"]


def vertex_command_comment(spec: JobSpec, command: str = "gcloud ai custom-jobs create") -> str:
    """A Vertex AI config file has no region (nor display name): the YAML comment line that carries them, naming
    the command that takes the file."""
    name = spec.job_name or "NAME"
    labels = f" --labels {','.join(f'{k}={v}' for k, v in spec.labels)}" if spec.labels else ""
    return f"# {command} --region {spec.region} --display-name {name}{labels} --config FILE\n"


# said with every legacy document: the file is still read by gcloud, the emulator and `train --api legacy --local`
LEGACY_SHUT_DOWN = ("legacy AI Platform Training shut down on 2025-01-31 (deprecated 2023-07-26): Google no longer runs "
                    "this file; mlsubmit runs it here (train --local --api legacy) and in its emulator, and --format "
                    "vertex writes it for Vertex AI")


def legacy_command_comment(spec: JobSpec) -> str:
    """A legacy config file has no job id (gcloud takes it as an argument): the comment line that carries it."""
    return f"# gcloud ai-platform jobs submit training {_legacy_job_id(spec) or 'JOB'} --config FILE\n"


def to_yaml(document: dict[str, Any]) -> str:
    """YAML as gcloud reads it: block style, keys in the order built, int64 counts quoted.

    Raises:
        UsageError: the document, as the JSON request gcloud makes of it, is over the API's 1.5 MiB limit
            (checked before the slow YAML dump).
    """
    import yaml

    from mlsubmit.jobspec.limits import check_request

    check_request(document, "the generated config, as the request gcloud sends,")

    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=120)
