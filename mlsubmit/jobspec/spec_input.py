"""From what the user gave (flags, a YAML file, or both) to a validated JobSpec.

A `SpecDraft` holds raw values, each optional, with the name the user knows each one by (`--workers` or
`trainingInput.workerCount`) so errors point at what they typed. Flags override YAML (`merge`); `build_spec`
fills defaults from `mlsubmit.jobspec.machines` and builds the JobSpec, which validates the whole.

Example:
    >>> build_spec(SpecDraft(tier="CUSTOM", chief=RoleDraft(accelerator_count=4))).pools["chief"]
    Pool(role='chief', machine_type='n1-standard-16', replica_count=1, accelerator_type='NVIDIA_TESLA_T4', …)
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlsubmit.jobspec import machines
from mlsubmit.errors import UsageError, did_you_mean, invalid_value
from mlsubmit.jobspec.scheduling import Capacity, parse_wait
from mlsubmit.jobspec.spec import JobSpec, Pool, whole_number

_DURATION = re.compile(r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")  # ASCII digits only
MAX_DURATION_SECONDS = 315_576_000_000  # google.protobuf.Duration's limit (10,000 years), for timeout fields


@dataclass(frozen=True)
class RoleDraft:
    """One role as given: replica count, machine type, accelerator type and count (each may be None)."""

    count: Any = None
    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: Any = None

    @property
    def has_accelerators(self) -> bool:
        return self.accelerator_type is not None or self.accelerator_count is not None


@dataclass(frozen=True)
class SpecDraft:
    """Everything a JobSpec can be built from, unvalidated. `names` maps a key ("worker.count") to its label."""

    tier: str | None = None
    chief: RoleDraft = RoleDraft()
    worker: RoleDraft = RoleDraft()
    ps: RoleDraft = RoleDraft()
    evaluator: RoleDraft = RoleDraft()
    region: str | None = None
    runtime_version: str | None = None
    executor_image: str | None = None
    python_module: str | None = None
    args: tuple[str, ...] | None = None
    job_dir: str | None = None
    job_name: str | None = None
    labels: tuple[tuple[str, str], ...] | None = None
    package_uris: tuple[str, ...] | None = None
    max_runtime: Any = None
    python_version: str | None = None
    container_image: str | None = None
    container_command: tuple[str, ...] | None = None
    pool_images: tuple[tuple[str, str], ...] | None = None
    boot_disks: tuple[tuple[str, str | None, int | None], ...] | None = None
    network: str | None = None
    env: tuple[tuple[str, str], ...] | None = None
    spot: bool | None = None  # scheduling.strategy SPOT / --spot
    flex_start: bool | None = None  # scheduling.strategy FLEX_START / --flex-start
    max_wait: Any = None  # scheduling.maxWaitDuration / --max-wait-duration
    reservation: Any = None  # a scheduling.Reservation (machineSpec.reservationAffinity)
    disable_retries: bool | None = None
    restart_job_on_worker_restart: bool | None = None
    names: dict[str, str] = field(default_factory=dict)

    def name(self, key: str, default: str) -> str:
        return self.names.get(key, default)

    def roles(self) -> dict[str, RoleDraft]:
        return {role: getattr(self, role) for role in machines.ROLES}


# The flag each scalar of a draft is given by (JobSpec's errors name them), and the YAML field it is read from,
# by document kind, for errors about a value that came from --config.
SCALAR_FLAGS = {"region": "--region", "runtime_version": "--runtime-version", "python_version": "--python-version",
                "python_module": "--python-module", "job_dir": "--job-dir", "job_name": "--job-name",
                "network": "--network", "executor_image": "--executor-image", "package_uris": "--package-uris",
                "container_image": "--container-image", "labels": "--labels", "env": "--env"}
_LEGACY_FIELDS = {"region": "trainingInput.region", "runtime_version": "trainingInput.runtimeVersion",
                  "python_version": "trainingInput.pythonVersion", "python_module": "trainingInput.pythonModule",
                  "job_dir": "trainingInput.jobDir", "job_name": "jobId", "network": "trainingInput.network",
                  "package_uris": "trainingInput.packageUris", "labels": "labels",
                  "container_image": "trainingInput.masterConfig.imageUri"}
_VERTEX_FIELDS = {"python_module": "workerPoolSpecs[0].pythonPackageSpec.pythonModule",
                  "runtime_version": "workerPoolSpecs[0].pythonPackageSpec.executorImageUri",
                  "python_version": "workerPoolSpecs[0].pythonPackageSpec.executorImageUri",
                  "executor_image": "workerPoolSpecs[0].pythonPackageSpec.executorImageUri",
                  "package_uris": "workerPoolSpecs[0].pythonPackageSpec.packageUris",
                  "env": "workerPoolSpecs[0].pythonPackageSpec.env", "job_dir": "baseOutputDirectory.outputUriPrefix",
                  "container_image": "workerPoolSpecs[0].containerSpec.imageUri", "network": "network",
                  "job_name": "displayName", "labels": "labels"}


def _with_field_names(draft: SpecDraft, fields: dict[str, str], prefix: str = "") -> SpecDraft:
    """`draft` with the YAML field of each scalar it holds in `names` (those the reader did not name already)."""
    named = {key: f"{prefix}{field}" for key, field in fields.items()
             if getattr(draft, key) is not None and key not in draft.names}
    return dataclasses.replace(draft, names={**named, **draft.names})


FLAG_NAMES = {"tier": "--tier", "chief.machine_type": "--machine-type", "chief.accelerator_count": "--gpus",
              "chief.accelerator_type": "--gpu-type", "worker.count": "--workers",
              "worker.machine_type": "--worker-machine-type", "ps.count": "--ps",
              "ps.machine_type": "--ps-machine-type", "evaluator.count": "--evaluators",
              "max_runtime": "--max-runtime", "max_wait": "--max-wait-duration", "flex_start": "--flex-start",
              "reservation": "--reservation-affinity", "disable_retries": "--disable-retries",
              "restart_job_on_worker_restart": "--restart-job-on-worker-restart"}


def merge(base: SpecDraft, override: SpecDraft) -> SpecDraft:
    """`override`'s values where given, else `base`'s. A role's machine type given in `override` drops the
    accelerators `base` set for that role (they belonged to the other machine) unless `override` sets them too.
    """
    changes: dict[str, Any] = {}
    names = dict(base.names)
    if override.tier is not None and override.tier != "CUSTOM":  # a fixed tier replaces the YAML's cluster
        base = dataclasses.replace(base, **{role: RoleDraft() for role in machines.ROLES})
    if override.runtime_version is not None or override.executor_image is not None \
            or override.container_image is not None:  # one replaces the other
        base = dataclasses.replace(base, runtime_version=None, executor_image=None, container_image=None,
                                   container_command=None, python_version=None)
    if override.labels is not None and base.labels:  # labels add up, the flag's value winning
        override = dataclasses.replace(override, labels=tuple({**dict(base.labels), **dict(override.labels)}.items()))
    if override.env is not None and base.env:  # so do environment variables
        override = dataclasses.replace(override, env=tuple({**dict(base.env), **dict(override.env)}.items()))
    for spec_field in dataclasses.fields(SpecDraft):
        key = spec_field.name
        if key == "names":
            continue
        old, new = getattr(base, key), getattr(override, key)
        if isinstance(new, RoleDraft):
            if new.machine_type is not None and not new.has_accelerators:
                old = dataclasses.replace(old, accelerator_type=None, accelerator_count=None)
            values = {f.name: getattr(new, f.name) if getattr(new, f.name) is not None else getattr(old, f.name)
                      for f in dataclasses.fields(RoleDraft)}
            changes[key] = RoleDraft(**values)
            for f in dataclasses.fields(RoleDraft):  # a value given by `override` is named as `override` names it
                if getattr(new, f.name) is not None:
                    names.pop(f"{key}.{f.name}", None)
            names.update({k: v for k, v in override.names.items() if k.startswith(key + ".")
                          and getattr(new, k.split(".", 1)[1]) is not None})
        elif new is not None:
            changes[key] = new
            names.pop(key, None)
            if key in override.names:
                names[key] = override.names[key]
        else:
            changes[key] = old
    return SpecDraft(**changes, names=names)


def parse_duration(value: Any, field_name: str) -> int:
    """Seconds from "7200", "7200s", "2h", "90m" or "1h30m"."""
    text = str(value).strip().lower()
    if isinstance(value, int) and not isinstance(value, bool) or re.fullmatch(r"[0-9]+", text):
        seconds = int(text)
    else:
        found = _DURATION.fullmatch(text)
        if not text or not found or not any(found.groups()):
            raise invalid_value(field_name, value, "a duration such as 7200s, 90m, 2h or 1h30m")
        days, hours, minutes, secs = (int(g or 0) for g in found.groups())
        seconds = ((days * 24 + hours) * 60 + minutes) * 60 + secs
    if seconds <= 0:
        raise invalid_value(field_name, value, "a duration longer than 0 seconds")
    if seconds > MAX_DURATION_SECONDS:
        raise invalid_value(field_name, value, f"a duration of at most {MAX_DURATION_SECONDS}s (the API's limit)")
    return seconds


def build_spec(draft: SpecDraft, *, target: str = "cloud") -> JobSpec:
    """Fill defaults from the table and build the validated JobSpec.

    Without --tier, any machine or count option means CUSTOM; nothing at all means BASIC.
    Raises:
        UsageError: one line naming the first invalid field.
    """
    roles = draft.roles()
    custom_keys = [f"{role}.{f.name}" for role, r in roles.items() for f in dataclasses.fields(RoleDraft)
                   if getattr(r, f.name) is not None]
    tier = draft.tier if draft.tier is not None else ("CUSTOM" if custom_keys else "BASIC")
    given_tier, tier = tier, str(tier).strip().upper().replace("-", "_")  # gcloud's: basic-gpu, standard-1
    if tier not in machines.TIERS:
        raise invalid_value(draft.name("tier", "--tier"), given_tier, "one of " + ", ".join(machines.TIERS),
                            hint=did_you_mean(tier, machines.TIERS))
    pools: dict[str, Pool | None] = {}
    if tier != "CUSTOM":
        if custom_keys:
            given = ", ".join(draft.name(k, FLAG_NAMES.get(k, k)) for k in custom_keys)
            named = draft.name("tier", "--tier")
            said = f"{named} CUSTOM" if named.startswith("--") else f"{named}: CUSTOM"
            raise UsageError(f"invalid value for {given}: machine types and counts are only allowed with "
                             f"{said}; received {named}{' ' if named.startswith('--') else ': '}{tier}",
                             hint=f"use {said}, or drop those {'options' if given.startswith('--') else 'fields'}")
    else:
        if draft.chief.machine_type is None and draft.name("tier", "--tier") == "trainingInput.scaleTier":
            raise UsageError("invalid trainingInput: scaleTier CUSTOM requires masterType (the legacy API refused "
                             "such a job); received no masterType",
                             hint="add masterType (e.g. n1-standard-4) to the YAML, or pass --machine-type")
        pools = _custom_pools(draft)
    labels = draft.labels or ()
    try:
        spec = _job_spec(draft, tier, pools, labels, target)
        from mlsubmit.images.catalog import LEGACY_RUNTIMES

        if "runtime_version" in draft.names and spec.container_image is None and spec.executor_image is None \
                and spec.runtime_version not in LEGACY_RUNTIMES:  # a legacy runtime: legacy output keeps it
            from mlsubmit.jobspec.requests import vertex_job_spec

            vertex_job_spec(spec)  # a YAML runtime version without an image is refused here, named by its field
        return spec
    except UsageError as err:  # JobSpec names flags; a value read from the YAML is named by its field
        raise _renamed(err, draft) from None


def _renamed(err: UsageError, draft: SpecDraft) -> UsageError:
    message, hint = err.message, err.hint
    for key, flag in SCALAR_FLAGS.items():
        field_name = draft.names.get(key)
        if field_name and f"for {flag}:" in message:
            message = message.replace(f"for {flag}:", f"for {field_name}:")
            hint = hint.replace(f"{flag} ", f"{field_name}: ") if hint else hint
    return UsageError(message, hint=hint, exit_code=err.exit_code)


def _job_spec(draft: SpecDraft, tier: str, pools: dict, labels: tuple, target: str) -> JobSpec:
    return JobSpec(
        tier=tier, **pools,
        region=draft.region or machines.DEFAULT_REGION,
        runtime_version=draft.runtime_version, executor_image=draft.executor_image,
        python_module=draft.python_module or "trainer.task", args=tuple(draft.args or ()),
        job_dir=draft.job_dir, job_name=draft.job_name, labels=tuple(labels),
        package_uris=tuple(draft.package_uris or ()), env=tuple(draft.env or ()),
        max_runtime_seconds=None if draft.max_runtime is None
        else parse_duration(draft.max_runtime, draft.name("max_runtime", "--max-runtime")),
        target=target, python_version=draft.python_version, container_image=draft.container_image,
        container_command=tuple(draft.container_command or ()), pool_images=tuple(draft.pool_images or ()),
        boot_disks=tuple(draft.boot_disks or ()), network=draft.network, spot=bool(draft.spot),
        capacity=_capacity(draft),
    )


def _capacity(draft: SpecDraft) -> Capacity:
    names = {key: draft.name(key, FLAG_NAMES[key]) for key in ("flex_start", "reservation", "disable_retries",
                                                               "restart_job_on_worker_restart")}
    names["max_wait_seconds"] = draft.name("max_wait", "--max-wait-duration")
    return Capacity(flex_start=bool(draft.flex_start),
                    max_wait_seconds=None if draft.max_wait is None else parse_wait(draft.max_wait,
                                                                                    names["max_wait_seconds"]),
                    reservation=draft.reservation, disable_retries=bool(draft.disable_retries),
                    restart_job_on_worker_restart=bool(draft.restart_job_on_worker_restart), names=names)


def _custom_pools(draft: SpecDraft) -> dict[str, Pool | None]:
    if draft.chief.count is not None and whole_number(draft.chief.count, draft.name("chief.count", "chief count")) != 1:
        raise invalid_value(draft.name("chief.count", "chief count"), draft.chief.count, "1 (the chief is one machine)")
    chief = _pool(draft, "chief", 1, draft.chief.machine_type, draft.chief)
    pools: dict[str, Pool | None] = {"chief": chief}
    for role in ("worker", "ps", "evaluator"):
        given = getattr(draft, role)
        count = whole_number(given.count, draft.name(f"{role}.count", FLAG_NAMES.get(f"{role}.count", role)))\
            if given.count is not None else 0
        if count == 0:
            pools[role] = None
        elif given.machine_type is None and role != "ps" and not given.has_accelerators:
            pools[role] = Pool(role, chief.machine_type, count, chief.accelerator_type, chief.accelerator_count)
        else:
            default = ("standard" if chief.machine.is_legacy else machines.DEFAULT_CPU_MACHINE) if role == "ps" \
                else chief.machine_type
            pools[role] = _pool(draft, role, count, given.machine_type or default, given)
    return pools


def _pool(draft: SpecDraft, role: str, count: int, machine_name: str | None, given: RoleDraft) -> Pool:
    """One pool with defaults: --gpus picks the GPU type and machine; a2/a3/g2 and TPU machines bring theirs."""
    accelerator, accelerators = given.accelerator_type, given.accelerator_count
    if accelerators is not None:
        accelerators = whole_number(accelerators, draft.name(f"{role}.accelerator_count", f"{role} accelerator count"))
    machine = None if machine_name is None else \
        machines.machine(machine_name, draft.name(f"{role}.machine_type", f"{role} machine type"))
    built_in = None
    if machine is not None and not machine.is_legacy:
        built_in = machine.implicit or ((machines.TPU_V2, machines.TPU_CORES) if machine.family == "tpu" else None)
    if accelerator is None and accelerators is None and built_in:
        accelerator, accelerators = built_in
    elif accelerator is not None or accelerators:
        accelerator = accelerator or (built_in[0] if built_in else machines.DEFAULT_GPU_TYPE)
        if accelerators is None:  # the one count this machine takes of that type, else 1
            counts = machine.accelerators.get(accelerator, ()) if machine is not None else ()
            accelerators = counts[0] if len(counts) == 1 else 1
    if machine is None:
        machine = machines.MACHINES[_default_machine(draft, role, str(accelerator), accelerators)
                                    if accelerators else machines.DEFAULT_CPU_MACHINE]
    return Pool(role, machine.name, count, accelerator if accelerators else None, accelerators or 0)


def _default_machine(draft: SpecDraft, role: str, accelerator: str, count: int) -> str:
    machines.accelerator(accelerator, draft.name(f"{role}.accelerator_type", "--gpu-type"))
    chosen = machines.default_gpu_machine(accelerator, count)
    if chosen:
        return chosen
    counts = ", ".join(map(str, machines.possible_counts(accelerator)))
    others = [a for a in machines.GPU_TYPES if machines.ACCELERATORS[a].vertex and machines.carriers(a, count)]
    hint = f"or use --gpu-type {others[0]} for {count}" if others else None
    raise invalid_value(draft.name(f"{role}.accelerator_count", "--gpus"), count,
                        f"a count of {accelerator} one machine can carry: {counts}", hint=hint)


def load_yaml(path: str | Path) -> tuple[SpecDraft, list[str]]:
    """Read a legacy `trainingInput:` document or a Vertex CustomJobSpec (or CustomJob) from a YAML file.

    Returns:
        (draft, notes): what was read, and one note per setting that has no place in a JobSpec.
    Raises:
        UsageError: unreadable, oversized or malformed YAML (see mlsubmit.jobspec.safe_yaml), unknown keys (with
            did-you-mean), wrong types.
    """
    from mlsubmit.jobspec import discovery
    from mlsubmit.jobspec import drafts
    from mlsubmit.jobspec.safe_yaml import load_file

    document = load_file(path, "--config")  # only `--config` pays for the YAML parser
    if not isinstance(document, dict):
        raise invalid_value(f"--config {path}", type(document).__name__, "a YAML mapping (trainingInput: or "
                            "workerPoolSpecs:)")
    from mlsubmit.tuning import requests as tuning_requests

    document = tuning_requests.normalize(document)  # discrete values [False, True] are 0 and 1, as gcloud reads them
    if "trialJobSpec" in document or "studySpec" in document:  # a Vertex HyperparameterTuningJob: its trials' job
        api, schema = "aiplatform.v1", "GoogleCloudAiplatformV1HyperparameterTuningJob"
        reader = tuning_requests.trial_job_draft
    elif "trainingInput" in document:
        api, schema, reader = "ml.v1", "GoogleCloudMlV1__Job", drafts.draft_from_legacy
    elif "jobSpec" in document:
        api, schema, reader = "aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", drafts.draft_from_vertex
    elif "workerPoolSpecs" in document:
        api, schema, reader = "aiplatform.v1", "GoogleCloudAiplatformV1CustomJobSpec", drafts.draft_from_vertex
    else:
        keys = ", ".join(map(str, document)) or "none"
        hint = did_you_mean(str(next(iter(document), "")), ("trainingInput", "workerPoolSpecs", "jobSpec"))
        raise UsageError(f"invalid --config {path}: expected a top-level trainingInput: (legacy) or "
                         f"workerPoolSpecs: (Vertex AI) key; received keys: {keys}", hint=hint)
    violations = discovery.validate(api, schema, document, lenient_numbers=True)
    if violations:
        first = violations[0]
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        hint = "quote values such as '2.11' in YAML" if "expected a string; received the number" in \
            first.description else None
        raise UsageError(f"invalid --config {path}: {first.field}: {first.description}{more}", hint=hint)
    draft, notes = reader(document)
    if reader is drafts.draft_from_legacy:
        return _with_field_names(draft, _LEGACY_FIELDS), notes
    prefix = "trialJobSpec." if "trialJobSpec" in document else "jobSpec." if "jobSpec" in document else ""
    return _with_field_names(draft, _VERTEX_FIELDS, prefix), notes
