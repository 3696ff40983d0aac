"""Request documents -> SpecDraft, for migration: `draft_from_legacy` (a legacy Job / `trainingInput` config) and
`draft_from_vertex` (a CustomJob / CustomJobSpec) turn what gcloud reads back into the draft a JobSpec is built
from, and name every setting that could not be mapped. Pure functions, no network, no printing; the forward
direction is `mlsubmit.jobspec.requests`.
"""

from __future__ import annotations

from typing import Any

from mlsubmit.images import catalog as images
from mlsubmit.jobspec import machines
from mlsubmit.jobspec import scheduling as scheduling_spec
from mlsubmit.errors import UsageError, invalid_value
from mlsubmit.images import carried
from mlsubmit.jobspec.requests import LEGACY_KEYS, executor_image
from mlsubmit.jobspec.spec import JobSpec
from mlsubmit.jobspec.spec_input import RoleDraft, SpecDraft

_UNSPECIFIED = "ACCELERATOR_TYPE_UNSPECIFIED"
_WHY = {"hyperparameters": "hyperparameter tuning is not part of a JobSpec (mlsubmit config writes it as a "
                           "HyperparameterTuningJob)",
        "containerArgs": "per-pool container arguments are not part of a JobSpec (trainingInput.args are)",
        "tpuTfVersion": "Vertex AI picks the TPU software from the executor image"}
_DISK_KEYS = {"bootDiskType", "bootDiskSizeGb"}


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
    master = roles["chief"]
    kind = master.accelerator_type if master.accelerator_type in (machines.TPU_V2, machines.TPU_V3) else machines.TPU_V2
    roles = {**roles, "chief": RoleDraft(machine_type="standard"),
             "worker": RoleDraft(count="1", machine_type=machines.TPU_MACHINE, accelerator_type=kind,
                                 accelerator_count=machines.TPU_CORES)}
    notes = ["trainingInput.masterType: standard_tpu (a master with one Cloud TPU, from Cloud ML Engine's TPU "
             f"beta) becomes masterType standard + one cloud_tpu worker with {kind} x {machines.TPU_CORES}"]
    if master.accelerator_count not in (None, machines.TPU_CORES, str(machines.TPU_CORES)):
        notes.append(f"trainingInput.masterConfig.acceleratorConfig.count: {master.accelerator_count} becomes "
                     f"{machines.TPU_CORES}: a cloud_tpu worker is one Cloud TPU of {machines.TPU_CORES} cores, the "
                     "only count both services take")
    return roles, notes


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
    # a package run on a public image as a custom container reads as the Python package it is
    pools = [carried.as_package_pool(pool) for pool in document.get("workerPoolSpecs") or []]
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
        notes += _unmapped(machine, f"{at}.machineSpec.", {"machineType", "acceleratorType", "acceleratorCount",
                                                           "reservationAffinity"})
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
    tpu = machines.MACHINES.get(machines.canonical_name(chief.machine_type or ""))
    if tpu is not None and tpu.family == "tpu":
        notes.append(f"{prefix}workerPoolSpecs[0]: a TPU pool 0 becomes a chief {machines.DEFAULT_CPU_MACHINE} "
                     f"and one {tpu.name} worker")
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
    strategy = scheduling.get("strategy")
    notes += _unmapped(scheduling, f"{prefix}scheduling.",
                       {"timeout", "maxWaitDuration", "disableRetries", "restartJobOnWorkerRestart"}
                       | ({"strategy"} if strategy in ("SPOT", "ON_DEMAND", "STANDARD", "FLEX_START") else set()))
    names.update({"flex_start": f"{prefix}scheduling.strategy", "max_wait": f"{prefix}scheduling.maxWaitDuration",
                  "disable_retries": f"{prefix}scheduling.disableRetries",
                  "restart_job_on_worker_restart": f"{prefix}scheduling.restartJobOnWorkerRestart",
                  "reservation": f"{prefix}workerPoolSpecs[0].machineSpec.reservationAffinity"})
    image, runtime = package.get("executorImageUri"), _prebuilt_runtime(pools)
    draft = SpecDraft(
        tier="CUSTOM", **roles, runtime_version=runtime[0] if runtime else None,
        python_version=runtime[1] if runtime else None, executor_image=None if runtime else image,
        python_module=package.get("pythonModule"), args=tuple(args), job_dir=job_dir, job_name=job_name,
        labels=_labels(labels), package_uris=_tuple(package.get("packageUris")),
        max_runtime=scheduling.get("timeout"), env=env, names=names, container_image=container.get("imageUri"),
        container_command=_tuple(container.get("command")), pool_images=pool_images or None,
        boot_disks=_disks({role: pool.get("diskSpec") for role, pool in zip(machines.ROLES, pools) if pool}),
        network=document.get("network"), spot=True if strategy == "SPOT" else None,
        flex_start=True if strategy == "FLEX_START" else None, max_wait=scheduling.get("maxWaitDuration"),
        disable_retries=scheduling.get("disableRetries") or None,
        restart_job_on_worker_restart=scheduling.get("restartJobOnWorkerRestart") or None,
        reservation=scheduling_spec.reservation_from_body(_reservation_of(pools)))
    return draft, notes


def _reservation_of(pools: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The reservationAffinity the pools draw from (the first pool that names one)."""
    for pool in pools[:len(machines.ROLES)]:
        affinity = ((pool or {}).get("machineSpec") or {}).get("reservationAffinity")
        if affinity:
            return affinity
    return None


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
