"""JobSpec -> request documents, and back: pure functions, no network, no printing.

Forward: `vertex_job_spec` (a CustomJobSpec, what `gcloud ai custom-jobs create --config` reads),
`vertex_custom_job` (the CustomJob create body), `legacy_training_input`, `legacy_config` (the Job resource
`gcloud ai-platform jobs submit training --config` reads) and `legacy_job` (the Job create body).
`config_document` picks one by format and returns the notes a user should see (what changed on the way).

Backward, for migration: `draft_from_legacy` and `draft_from_vertex` turn a document into a SpecDraft and
list every setting that could not be mapped.

Counts that the APIs declare int64 (legacy counts, Vertex replicaCount) are written as decimal strings, as
the discovery documents require; Vertex acceleratorCount is int32 and stays a number.
"""

from __future__ import annotations

import re
from typing import Any

from mlsubmit.jobspec import images

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
_UNSPECIFIED = "ACCELERATOR_TYPE_UNSPECIFIED"
_WHY = {"hyperparameters": "hyperparameter tuning is not part of a JobSpec (mlsubmit config writes it as a "
                           "HyperparameterTuningJob)",
        "containerArgs": "per-pool container arguments are not part of a JobSpec (trainingInput.args are)",
        "tpuTfVersion": "Vertex AI picks the TPU software from the executor image"}
_DISK_KEYS = {"bootDiskType", "bootDiskSizeGb"}


# -- forward: legacy AI Platform -------------------------------------------------------------------------------
def legacy_training_input(spec: JobSpec) -> dict[str, Any]:
    """The `trainingInput` of a legacy Job (ml.v1 GoogleCloudMlV1__TrainingInput)."""
    reject_env_for_legacy(spec)
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
    """(runtimeVersion, pythonVersion): the legacy API required pythonVersion with a runtime version (Python 3.7
    from runtime 1.15 on, 2.7 before); an executor image stands for its TensorFlow and Python versions."""
    if spec.executor_image is None:
        runtime = spec.runtime_version or machines.DEFAULT_RUNTIME_VERSION
        major, _, minor = runtime.partition(".")
        return runtime, spec.python_version or ("3.7" if (int(major), int(minor)) >= (1, 15) else "2.7")
    found = images.runtime_of(spec.executor_image)
    if found is None:
        raise invalid_value("--executor-image", spec.executor_image, "a Vertex AI prebuilt TensorFlow image to "
                            "express it as a legacy runtime version", hint="pass --runtime-version instead")
    return found


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
    tpu = pools.get("worker")
    if tpu and machines.MACHINES[tpu[0]].family == "tpu":
        notes.append(f"chief: Vertex AI runs the program on the TPU VM (pool 0); the legacy master "
                     f"{pools['chief'][0]} is dropped")
        pools["chief"] = pools.pop("worker")
    return pools, notes


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
        if accelerator:
            machine_spec.update(acceleratorType=accelerator, acceleratorCount=count)
        pool: dict[str, Any] = {"machineSpec": machine_spec, "replicaCount": str(replicas)}
        if _boot_disk(spec, role):
            pool["diskSpec"] = _boot_disk(spec, role)
        container = _container(spec, role)
        if container:
            pool["containerSpec"] = container
        else:
            pool["pythonPackageSpec"] = _python_package(
                spec, kind=machines.ACCELERATORS[accelerator].kind if accelerator else "cpu")
        specs.append(pool)
    while specs and not specs[-1]:
        specs.pop()
    document: dict[str, Any] = {"workerPoolSpecs": specs}
    if spec.job_dir:
        document["baseOutputDirectory"] = {"outputUriPrefix": spec.job_dir}
    if spec.timeout:
        document["scheduling"] = {"timeout": spec.timeout}
    if spec.network:
        document["network"] = spec.network
    return document


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


def executor_image(spec: JobSpec, kind: str) -> str:
    """The executorImageUri of a pool whose accelerators are of `kind` ("cpu", "gpu" or "tpu"): the image given,
    else the TensorFlow image of the runtime (and Python) version from mlsubmit.jobspec.images."""
    if spec.executor_image:
        return spec.executor_image
    default = images.DEFAULT_TPU_TENSORFLOW if kind == "tpu" else images.DEFAULT_TENSORFLOW
    return images.tensorflow_image(spec.runtime_version or default, kind, python=spec.python_version).uri


def vertex_custom_job(spec: JobSpec) -> dict[str, Any]:
    """The body of projects.locations.customJobs.create: {displayName, labels, jobSpec}."""
    if not spec.job_name:
        raise invalid_value("--job-name", None, "a display name for a Vertex AI job", hint="add --job-name")
    return {"displayName": spec.job_name, "labels": spec.labels_dict, "jobSpec": vertex_job_spec(spec)}


def _python_package(spec: JobSpec, kind: str) -> dict[str, Any]:
    image = executor_image(spec, kind)
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
    if spec.labels or spec.job_name:
        notes.append("a CustomJobSpec has no display name or labels: pass them to gcloud as --display-name "
                     "and --labels (mlsubmit train sends them)")
    return vertex_job_spec(spec), notes


def vertex_command_comment(spec: JobSpec, command: str = "gcloud ai custom-jobs create") -> str:
    """A Vertex AI config file has no region (nor display name): the YAML comment line that carries them, naming
    the command that takes the file."""
    name = spec.job_name or "NAME"
    labels = f" --labels {','.join(f'{k}={v}' for k, v in spec.labels)}" if spec.labels else ""
    return f"# {command} --region {spec.region} --display-name {name}{labels} --config FILE\n"


def legacy_command_comment(spec: JobSpec) -> str:
    """A legacy config file has no job id (gcloud takes it as an argument): the comment line that carries it."""
    return f"# gcloud ai-platform jobs submit training {_legacy_job_id(spec) or 'JOB'} --config FILE\n"


def to_yaml(document: dict[str, Any]) -> str:
    """YAML as gcloud reads it: block style, keys in the order built, int64 counts quoted."""
    import yaml

    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=120)


# -- backward: documents -> SpecDraft (migration) --------------------------------------------------------------
def draft_from_legacy(job: dict[str, Any]) -> tuple[SpecDraft, list[str]]:
    """A legacy Job resource ({trainingInput, labels, jobId}) as a SpecDraft, and what could not be mapped."""
    notes = _unmapped(job, "", {"trainingInput", "labels", "jobId"})
    training = job.get("trainingInput") or {}
    names: dict[str, str] = {"tier": "trainingInput.scaleTier", "max_runtime": "trainingInput.scheduling"}
    roles: dict[str, RoleDraft] = {}
    containers = _legacy_containers(training)
    for role, (type_key, config_key, count_key) in LEGACY_KEYS.items():
        config = training.get(config_key) or {}
        accelerator = config.get("acceleratorConfig") or {}
        notes += _unmapped(config, f"trainingInput.{config_key}.",
                           {"acceleratorConfig", "imageUri", "diskConfig"} | ({"containerCommand"} if role == "chief"
                                                                               else set()))
        notes += _unmapped(accelerator, f"trainingInput.{config_key}.acceleratorConfig.", {"count", "type"})
        notes += _unmapped(config.get("diskConfig") or {}, f"trainingInput.{config_key}.diskConfig.", _DISK_KEYS)
        kind = accelerator.get("type")
        roles[role] = RoleDraft(count=training.get(count_key) if count_key else None,
                                machine_type=training.get(type_key),
                                accelerator_type=None if kind == _UNSPECIFIED else kind,
                                accelerator_count=accelerator.get("count"))
        names.update({f"{role}.machine_type": f"trainingInput.{type_key}",
                      f"{role}.accelerator_count": f"trainingInput.{config_key}.acceleratorConfig.count",
                      f"{role}.accelerator_type": f"trainingInput.{config_key}.acceleratorConfig.type"})
        if count_key:
            names[f"{role}.count"] = f"trainingInput.{count_key}"
    mapped = {"scaleTier", "region", "runtimeVersion", "pythonVersion", "pythonModule", "args", "jobDir",
              "packageUris", "scheduling", "network"} | {k for keys in LEGACY_KEYS.values() for k in keys if k}
    if containers:  # a custom container runs its own entrypoint: a package and module have no place
        notes += [f"trainingInput.{key}: a custom container job runs its image ({containers['chief']}), not a "
                  f"Python package; not mapped" for key in ("pythonModule", "packageUris") if training.get(key)]
    notes += _unmapped(training, "trainingInput.", mapped)
    scheduling = training.get("scheduling") or {}
    notes += _unmapped(scheduling, "trainingInput.scheduling.", {"maxRunningTime"})
    roles, tpu_notes = _legacy_tpu_master(training, roles)
    draft = SpecDraft(
        tier=training.get("scaleTier"), **roles, region=training.get("region"),
        runtime_version=training.get("runtimeVersion"), python_version=_text(training.get("pythonVersion")),
        python_module=None if containers else training.get("pythonModule"),
        args=_tuple(training.get("args")), job_dir=training.get("jobDir"), job_name=job.get("jobId"),
        labels=_labels(job.get("labels")), package_uris=None if containers else _tuple(training.get("packageUris")),
        max_runtime=scheduling.get("maxRunningTime"), names=names,
        container_image=containers.get("chief"),
        container_command=_tuple((training.get("masterConfig") or {}).get("containerCommand")),
        pool_images=tuple((r, i) for r, i in containers.items() if r != "chief" and i != containers.get("chief"))
        or None,
        boot_disks=_disks({role: (training.get(keys[1]) or {}).get("diskConfig") for role, keys in LEGACY_KEYS.items()}),
        network=training.get("network"))
    return draft, notes + tpu_notes


def _legacy_containers(training: dict[str, Any]) -> dict[str, str]:
    """{role: imageUri} of a legacy custom-container job; workers without their own image ran the master's."""
    images_by_role = {role: (training.get(keys[1]) or {}).get("imageUri") for role, keys in LEGACY_KEYS.items()}
    chief = images_by_role.get("chief")
    return {role: image or chief for role, image in images_by_role.items() if image or (chief and role == "chief")}


def _legacy_tpu_master(training: dict[str, Any], roles: dict[str, RoleDraft]) -> tuple[dict[str, RoleDraft], list[str]]:
    """Cloud ML Engine's TPU beta `masterType: standard_tpu` (a master with one Cloud TPU attached) as today's shape:
    a `standard` master and one cloud_tpu worker with TPU_V2 x 8 (what BASIC_TPU stands for)."""
    if training.get("masterType") != "standard_tpu":
        return roles, []
    if roles["worker"].count not in (None, 0, "0"):
        raise UsageError("invalid trainingInput.masterType: standard_tpu carries its own Cloud TPU; received "
                         f"workerCount {roles['worker'].count} too", hint="drop workerCount, or use masterType "
                         "standard with workerType cloud_tpu and workerCount 1")
    roles = {**roles, "chief": RoleDraft(machine_type="standard"),
             "worker": RoleDraft(count="1", machine_type=machines.TPU_MACHINE, accelerator_type=machines.TPU_V2,
                                 accelerator_count=machines.TPU_CORES)}
    return roles, ["trainingInput.masterType: standard_tpu (a master with one Cloud TPU, from Cloud ML Engine's TPU "
                   "beta) becomes masterType standard + one cloud_tpu worker with TPU_V2 x 8"]


def _disks(configs: dict[str, Any]) -> tuple[tuple[str, str | None, int | None], ...] | None:
    """(role, bootDiskType, bootDiskSizeGb) from {role: diskConfig or diskSpec}."""
    disks = tuple((role, disk.get("bootDiskType"), disk.get("bootDiskSizeGb")) for role, disk in configs.items()
                  if disk and (disk.get("bootDiskType") or disk.get("bootDiskSizeGb") is not None))
    return disks or None


def _text(value: Any) -> str | None:
    """YAML reads `pythonVersion: 3.7` as a number: the string the user meant."""
    return None if value is None else str(value)


def draft_from_vertex(document: dict[str, Any]) -> tuple[SpecDraft, list[str]]:
    """A Vertex CustomJobSpec (or a CustomJob {displayName, labels, jobSpec}) as a SpecDraft, and what could
    not be mapped."""
    notes, job_name, labels, prefix = [], None, None, ""
    if "jobSpec" in document:
        notes += _unmapped(document, "", {"displayName", "labels", "jobSpec"})
        job_name, labels, prefix = document.get("displayName"), document.get("labels"), "jobSpec."
        document = document.get("jobSpec") or {}
    pools = document.get("workerPoolSpecs") or []
    if not pools or not pools[0]:
        raise invalid_value(f"{prefix}workerPoolSpecs[0]", pools[0] if pools else None, "the chief's pool "
                            "(machineSpec, replicaCount 1, pythonPackageSpec)")
    notes += [f"{prefix}workerPoolSpecs[{i}]: only pools 0-3 (chief, workers, ps, evaluators) exist; dropped"
              for i in range(len(machines.ROLES), len(pools))]
    names: dict[str, str] = {"max_runtime": f"{prefix}scheduling.timeout"}
    roles: dict[str, RoleDraft] = {}
    for index, (role, pool) in enumerate(zip(machines.ROLES, pools)):
        if not pool:
            continue
        at = f"{prefix}workerPoolSpecs[{index}]"
        machine = pool.get("machineSpec") or {}
        notes += _unmapped(pool, f"{at}.", {"machineSpec", "replicaCount", "pythonPackageSpec", "containerSpec",
                                            "diskSpec"})
        notes += _unmapped(machine, f"{at}.machineSpec.", {"machineType", "acceleratorType", "acceleratorCount"})
        notes += _unmapped(pool.get("diskSpec") or {}, f"{at}.diskSpec.", _DISK_KEYS)
        kind = machine.get("acceleratorType")
        roles[role] = RoleDraft(count=pool.get("replicaCount", "1"), machine_type=machine.get("machineType"),
                                accelerator_type=None if kind == _UNSPECIFIED else kind,
                                accelerator_count=machine.get("acceleratorCount"))
        names.update({f"{role}.count": f"{at}.replicaCount", f"{role}.machine_type": f"{at}.machineSpec.machineType",
                      f"{role}.accelerator_type": f"{at}.machineSpec.acceleratorType",
                      f"{role}.accelerator_count": f"{at}.machineSpec.acceleratorCount"})
        container = pool.get("containerSpec") or {}
        if index and container:
            first = pools[0].get("containerSpec") or pools[0].get("pythonPackageSpec") or {}
            notes += _unmapped(container, f"{at}.containerSpec.", {"imageUri"} | {
                key for key in ("command", "args") if container.get(key) == first.get(key)})
        elif index and _program(pool) != _program(pools[0]):
            notes.append(f"{at}.pythonPackageSpec: differs from pool 0; every role runs pool 0's program")
    chief = roles["chief"]
    if chief.machine_type in (machines.TPU_MACHINE, "cloud_tpu"):
        notes.append(f"{prefix}workerPoolSpecs[0]: a TPU pool 0 becomes a chief {machines.DEFAULT_CPU_MACHINE} "
                     "and one cloud-tpu worker")
        roles["worker"] = RoleDraft(count="1", machine_type=chief.machine_type,
                                    accelerator_type=chief.accelerator_type, accelerator_count=chief.accelerator_count)
        roles["chief"] = RoleDraft(count=chief.count, machine_type=machines.DEFAULT_CPU_MACHINE)
    package = pools[0].get("pythonPackageSpec") or {}
    notes += _unmapped(package, f"{prefix}workerPoolSpecs[0].pythonPackageSpec.",
                       {"executorImageUri", "packageUris", "pythonModule", "args", "env"})
    container = pools[0].get("containerSpec") or {}
    notes += _unmapped(container, f"{prefix}workerPoolSpecs[0].containerSpec.", {"imageUri", "command", "args"})
    package = package or {"args": container.get("args")}
    pool_images = tuple((role, (pool.get("containerSpec") or {})["imageUri"]) for role, pool in
                        zip(machines.ROLES[1:], pools[1:len(machines.ROLES)]) if pool
                        and (pool.get("containerSpec") or {}).get("imageUri") not in (None, container.get("imageUri")))
    job_dir = (document.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    args = list(package.get("args") or ())
    env = tuple((str(e.get("name", "")), str(e.get("value", ""))) for e in package.get("env") or ()) or None
    scheduling = document.get("scheduling") or {}
    notes += _unmapped(document, prefix, {"workerPoolSpecs", "baseOutputDirectory", "scheduling", "network"})
    notes += _unmapped(scheduling, f"{prefix}scheduling.", {"timeout"})
    image, runtime = package.get("executorImageUri"), _prebuilt_runtime(pools)
    draft = SpecDraft(
        tier="CUSTOM", **roles, runtime_version=runtime[0] if runtime else None,
        python_version=runtime[1] if runtime else None, executor_image=None if runtime else image,
        python_module=package.get("pythonModule"), args=tuple(args), job_dir=job_dir, job_name=job_name,
        labels=_labels(labels), package_uris=_tuple(package.get("packageUris")),
        max_runtime=scheduling.get("timeout"), env=env, names=names, container_image=container.get("imageUri"),
        container_command=_tuple(container.get("command")), pool_images=pool_images or None,
        boot_disks=_disks({role: pool.get("diskSpec") for role, pool in zip(machines.ROLES, pools) if pool}),
        network=document.get("network"))
    return draft, notes


def _program(pool: dict[str, Any]) -> dict[str, Any]:
    container = pool.get("containerSpec") or {}
    return {k: v for k, v in (pool.get("pythonPackageSpec") or container).items()
            if k not in ("executorImageUri", "imageUri")}


def _prebuilt_runtime(pools: list[dict[str, Any]]) -> tuple[str, str | None] | None:
    """(runtime version, Python version or None for the newest) when every Python pool runs the prebuilt
    TensorFlow image mlsubmit would pick for it; None otherwise."""
    runtimes = set()
    for pool in pools[:len(machines.ROLES)]:
        package = (pool or {}).get("pythonPackageSpec")
        if not package:
            continue
        image = package.get("executorImageUri") or ""
        found = images.runtime_of(image)
        accelerator = machines.ACCELERATORS.get((pool.get("machineSpec") or {}).get("acceleratorType") or "")
        kind = accelerator.kind if accelerator else "cpu"
        if found is None:
            return None
        try:
            chosen = images.tensorflow_image(found[0], kind, python=found[1])
        except UsageError:
            return None
        if image != chosen.uri:
            return None
        newest = images.tensorflow_image(found[0], kind)
        runtimes.add((found[0], None if newest.python == found[1] else found[1]))
    return runtimes.pop() if len(runtimes) == 1 else None


def _unmapped(document: dict[str, Any], prefix: str, mapped: set[str]) -> list[str]:
    return [f"{prefix}{key}: {_WHY.get(key, 'has no place in a JobSpec')}; not mapped"
            for key, value in document.items() if key not in mapped and value not in (None, {}, [], "")]


def _tuple(values: Any) -> tuple[str, ...] | None:
    return None if values is None else tuple(str(v) for v in values)


def _labels(labels: Any) -> tuple[tuple[str, str], ...] | None:
    return None if not labels else tuple((str(k), str(v)) for k, v in labels.items())
