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

from mlsubmit import machines
from mlsubmit.errors import UsageError, invalid_value
from mlsubmit.spec import LEGACY_JOB_ID, JobSpec, Pool
from mlsubmit.spec_input import RoleDraft, SpecDraft

FORMATS = ("vertex", "legacy")
# role -> (machine type key, config key, count key) in a legacy trainingInput
LEGACY_KEYS = {"chief": ("masterType", "masterConfig", None),
               "worker": ("workerType", "workerConfig", "workerCount"),
               "ps": ("parameterServerType", "parameterServerConfig", "parameterServerCount"),
               "evaluator": ("evaluatorType", "evaluatorConfig", "evaluatorCount")}
_UNSPECIFIED = "ACCELERATOR_TYPE_UNSPECIFIED"
_WHY = {"hyperparameters": "hyperparameter tuning is not part of a JobSpec",
        "imageUri": "custom containers are not supported: mlsubmit runs a Python package",
        "containerSpec": "custom containers are not supported: mlsubmit runs a Python package",
        "diskSpec": "mlsubmit uses the default boot disk", "diskConfig": "mlsubmit uses the default boot disk",
        "pythonVersion": "the runtime or executor image fixes the Python version"}


# -- forward: legacy AI Platform -------------------------------------------------------------------------------
def legacy_training_input(spec: JobSpec) -> dict[str, Any]:
    """The `trainingInput` of a legacy Job (ml.v1 GoogleCloudMlV1__TrainingInput)."""
    reject_env_for_legacy(spec)
    document: dict[str, Any] = {"scaleTier": spec.tier}
    for role, pool in spec.pools.items():
        _legacy_accelerator(role, pool)
        if spec.tier != "CUSTOM":
            continue
        type_key, config_key, count_key = LEGACY_KEYS[role]
        if count_key:
            document[count_key] = str(pool.replica_count)
        document[type_key] = pool.machine.legacy_name or pool.machine_type
        if pool.accelerator_type:
            document[config_key] = {"acceleratorConfig": {"count": str(pool.accelerator_count),
                                                          "type": pool.accelerator_type}}
    document["region"] = spec.region
    document["runtimeVersion"] = _legacy_runtime(spec)
    document["pythonModule"] = spec.python_module
    if spec.args:
        document["args"] = list(spec.args)
    if spec.job_dir:
        document["jobDir"] = spec.job_dir
    if spec.package_uris:
        document["packageUris"] = list(spec.package_uris)
    if spec.timeout:
        document["scheduling"] = {"maxRunningTime": spec.timeout}
    return document


def reject_env_for_legacy(spec: JobSpec) -> None:
    """Legacy AI Platform has no environment variables for a Python package: --env is one line, exit 2."""
    if spec.env:
        raise UsageError(f"invalid option for legacy AI Platform: --env {spec.env[0][0]}=…; a legacy job sets no "
                         "environment variables for its Python package, so the trainer would not see them",
                         hint="drop --env, or submit to Vertex AI (pythonPackageSpec.env)")


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


def _legacy_runtime(spec: JobSpec) -> str:
    if spec.executor_image is None:
        return spec.runtime_version or machines.DEFAULT_RUNTIME_VERSION
    runtime = machines.runtime_of_image(spec.executor_image)
    if runtime is None:
        raise invalid_value("--executor-image", spec.executor_image, "a Vertex AI prebuilt TensorFlow image to "
                            "express it as a legacy runtime version", hint="pass --runtime-version instead")
    return runtime


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
        specs.append({"machineSpec": machine_spec, "replicaCount": str(replicas),
                      "pythonPackageSpec": _python_package(spec, gpu=bool(accelerator)
                                                           and machines.ACCELERATORS[accelerator].kind == "gpu")})
    while specs and not specs[-1]:
        specs.pop()
    document: dict[str, Any] = {"workerPoolSpecs": specs}
    if spec.job_dir:
        document["baseOutputDirectory"] = {"outputUriPrefix": spec.job_dir}
    if spec.timeout:
        document["scheduling"] = {"timeout": spec.timeout}
    return document


def vertex_custom_job(spec: JobSpec) -> dict[str, Any]:
    """The body of projects.locations.customJobs.create: {displayName, labels, jobSpec}."""
    if not spec.job_name:
        raise invalid_value("--job-name", None, "a display name for a Vertex AI job", hint="add --job-name")
    return {"displayName": spec.job_name, "labels": spec.labels_dict, "jobSpec": vertex_job_spec(spec)}


def _python_package(spec: JobSpec, gpu: bool) -> dict[str, Any]:
    image = spec.executor_image or machines.executor_image(spec.runtime_version or machines.DEFAULT_EXECUTOR_TF,
                                                           gpu)
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
    for role, (type_key, config_key, count_key) in LEGACY_KEYS.items():
        config = training.get(config_key) or {}
        accelerator = config.get("acceleratorConfig") or {}
        notes += _unmapped(config, f"trainingInput.{config_key}.", {"acceleratorConfig"})
        notes += _unmapped(accelerator, f"trainingInput.{config_key}.acceleratorConfig.", {"count", "type"})
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
    mapped = {"scaleTier", "region", "runtimeVersion", "pythonModule", "args", "jobDir", "packageUris",
              "scheduling"} | {k for keys in LEGACY_KEYS.values() for k in keys if k}
    notes += _unmapped(training, "trainingInput.", mapped)
    scheduling = training.get("scheduling") or {}
    notes += _unmapped(scheduling, "trainingInput.scheduling.", {"maxRunningTime"})
    draft = SpecDraft(
        tier=training.get("scaleTier"), **roles, region=training.get("region"),
        runtime_version=training.get("runtimeVersion"), python_module=training.get("pythonModule"),
        args=_tuple(training.get("args")), job_dir=training.get("jobDir"), job_name=job.get("jobId"),
        labels=_labels(job.get("labels")), package_uris=_tuple(training.get("packageUris")),
        max_runtime=scheduling.get("maxRunningTime"), names=names)
    return draft, notes


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
        notes += _unmapped(pool, f"{at}.", {"machineSpec", "replicaCount", "pythonPackageSpec"})
        notes += _unmapped(machine, f"{at}.machineSpec.", {"machineType", "acceleratorType", "acceleratorCount"})
        kind = machine.get("acceleratorType")
        roles[role] = RoleDraft(count=pool.get("replicaCount", "1"), machine_type=machine.get("machineType"),
                                accelerator_type=None if kind == _UNSPECIFIED else kind,
                                accelerator_count=machine.get("acceleratorCount"))
        names.update({f"{role}.count": f"{at}.replicaCount", f"{role}.machine_type": f"{at}.machineSpec.machineType",
                      f"{role}.accelerator_type": f"{at}.machineSpec.acceleratorType",
                      f"{role}.accelerator_count": f"{at}.machineSpec.acceleratorCount"})
        if index and _program(pool) != _program(pools[0]):
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
    job_dir = (document.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    args = list(package.get("args") or ())
    env = tuple((str(e.get("name", "")), str(e.get("value", ""))) for e in package.get("env") or ()) or None
    scheduling = document.get("scheduling") or {}
    notes += _unmapped(document, prefix, {"workerPoolSpecs", "baseOutputDirectory", "scheduling"})
    notes += _unmapped(scheduling, f"{prefix}scheduling.", {"timeout"})
    image, runtime = package.get("executorImageUri"), _prebuilt_runtime(pools)
    draft = SpecDraft(
        tier="CUSTOM", **roles, runtime_version=runtime, executor_image=None if runtime else image,
        python_module=package.get("pythonModule"), args=tuple(args), job_dir=job_dir, job_name=job_name,
        labels=_labels(labels), package_uris=_tuple(package.get("packageUris")),
        max_runtime=scheduling.get("timeout"), env=env, names=names)
    return draft, notes


def _program(pool: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (pool.get("pythonPackageSpec") or {}).items() if k != "executorImageUri"}


def _prebuilt_runtime(pools: list[dict[str, Any]]) -> str | None:
    """The runtime version when every pool runs the prebuilt TensorFlow image mlsubmit would pick for it."""
    runtimes = set()
    for pool in pools[:len(machines.ROLES)]:
        if not pool:
            continue
        image = (pool.get("pythonPackageSpec") or {}).get("executorImageUri") or ""
        runtime = machines.runtime_of_image(image)
        kind = (pool.get("machineSpec") or {}).get("acceleratorType") or ""
        if runtime is None or image != machines.executor_image(runtime, gpu=kind.startswith("NVIDIA")):
            return None
        runtimes.add(runtime)
    return runtimes.pop() if len(runtimes) == 1 else None


def _unmapped(document: dict[str, Any], prefix: str, mapped: set[str]) -> list[str]:
    return [f"{prefix}{key}: {_WHY.get(key, 'has no place in a JobSpec')}; not mapped"
            for key, value in document.items() if key not in mapped and value not in (None, {}, [], "")]


def _tuple(values: Any) -> tuple[str, ...] | None:
    return None if values is None else tuple(str(v) for v in values)


def _labels(labels: Any) -> tuple[tuple[str, str], ...] | None:
    return None if not labels else tuple((str(k), str(v)) for k, v in labels.items())
