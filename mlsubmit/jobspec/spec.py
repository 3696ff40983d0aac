"""JobSpec: one training job, immutable and validated against the table in `mlsubmit.jobspec.machines` when built.

A JobSpec does not know which API it will be sent to: `mlsubmit.jobspec.requests` renders it as a Vertex AI
CustomJob or a legacy AI Platform Job, and the local runner reads its pools directly. Build one from flags
and/or YAML with `mlsubmit.jobspec.spec_input.build_spec`; change one with `spec.replace(**changes)` (validated
again).

Example:
    >>> spec = JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-16", 1, "NVIDIA_TESLA_T4", 4))
    >>> spec.pools["chief"].accelerator
    ('NVIDIA_TESLA_T4', 4)
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from mlsubmit.images import reference
from mlsubmit.jobspec import limits, machines
from mlsubmit.jobspec.scheduling import Capacity
from mlsubmit.errors import UsageError, did_you_mean, invalid_value

TARGETS = ("cloud", "local")  # cloud: Vertex AI / AI Platform (gs:// paths); local: this machine
MAX_NAME = 128  # Vertex AI displayName and legacy jobId
MAX_PACKAGE_URIS = 100
LEGACY_JOB_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_RUNTIME = re.compile(r"\d+\.\d+")
_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
INT64_MAX = 2**63 - 1  # the APIs' counts are int64
ROLE_WORDS = {"chief": "chief", "worker": "workers", "ps": "parameter servers", "evaluator": "evaluators"}


def whole_number(value: Any, field: str, minimum: int = 0) -> int:
    """`value` (int or decimal string, as YAML and flags give it) as an int ≥ minimum; UsageError otherwise.

    Only ASCII digits count (int() would also read "٣" as 3), and nothing beyond int64, what the APIs take.
    """
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value.strip()):
        number = int(value)
    if number is None or number < minimum:
        raise invalid_value(field, value, f"a whole number >= {minimum}")
    if number > INT64_MAX:
        raise invalid_value(field, value, f"a whole number from {minimum} to {INT64_MAX} (int64)")
    return number


def _check_prebuilt(image: str, python: str | None) -> None:
    """An image under a Vertex AI training registry must be one the table knows: a made-up name fails in the
    cloud only after the queue. A Python version given with an image must be the image's."""
    from mlsubmit.images import catalog as images

    known = images.find(image)
    if python is not None and (known is None or known.python != str(python)):
        has = f"carries Python {known.python}" if known else "fixes its own Python"
        raise UsageError(f"invalid value for --python-version: received {python!r}; the executor image {image} {has}",
                         hint="drop --python-version, or use --runtime-version with it")
    if images.is_prebuilt_path(image) and images.find(image) is None:
        name = image.rsplit("/", 1)[-1]
        found = re.match(r"tf-(cpu|gpu|tpu)\.(\d+)-(\d+)", name)
        hint = None
        if found:
            try:
                images.tensorflow_image(f"{found.group(2)}.{found.group(3)}", found.group(1))
            except UsageError as err:
                hint = err.hint
            else:  # the right spelling, unless Vertex AI no longer serves it (never propose a retired image)
                right = images.tensorflow_image(f"{found.group(2)}.{found.group(3)}", found.group(1))
                gone = images.retired(right)
                hint = gone.hint if gone else f"use {right.uri}"
        raise invalid_value("--executor-image", image, "a Vertex AI prebuilt training image that exists (see "
                            "mlsubmit.images.catalog)", hint=hint)


@dataclass(frozen=True)
class Pool:
    """The replicas of one role: how many, on which machine, with which accelerators.

    Attributes:
        role: "chief", "worker", "ps" or "evaluator".
        machine_type: a name from machines.MACHINES (cloud_tpu is stored as cloud-tpu).
        replica_count: number of replicas (the chief always has 1).
        accelerator_type, accelerator_count: attached accelerators; legacy machine types carry theirs
            implicitly and keep these empty, and machines whose name fixes them (a2/a3/a4/g2/g4, TPU v5e VMs)
            may (see `accelerator`). A TPU's count is its slice's chips or cores.
    """

    role: str
    machine_type: str
    replica_count: int = 1
    accelerator_type: str | None = None
    accelerator_count: int = 0

    def __post_init__(self) -> None:
        if self.role not in machines.ROLES:
            raise invalid_value("role", self.role, "one of " + ", ".join(machines.ROLES))
        words = ROLE_WORDS[self.role]
        machine = machines.machine(self.machine_type, f"{words} machine type")
        object.__setattr__(self, "machine_type", machine.name)
        whole_number(self.replica_count, f"{words} count", minimum=1)
        if self.role == "chief" and self.replica_count != 1:
            raise invalid_value("chief count", self.replica_count, "1 (Vertex AI pool 0 has exactly one replica)")
        if self.accelerator_type is None and not self.accelerator_count:
            if machine.family == "tpu" and not machine.fixed:  # cloud-tpu; a TPU VM type brings its chips
                raise UsageError(f"invalid {words} accelerators: {machine.name} needs TPU_V2 or TPU_V3 x "
                                 f"{machines.TPU_CORES}", hint="add --gpu-type TPU_V2 --gpus 8")
            return
        self._check_accelerators(machine, words)

    def _check_accelerators(self, machine: machines.MachineType, words: str) -> None:
        if machine.is_legacy:
            carried = f"with {machine.implicit[1]} {machine.implicit[0]} built in" if machine.fixed \
                else "without GPUs"
            raise UsageError(f"invalid {words} accelerators: {machine.name} is a legacy machine type {carried} "
                             "and never carries an acceleratorConfig",
                             hint=f"drop --gpus/--gpu-type, or use its Compute Engine equivalent "
                                  f"{machine.equivalent} to choose GPUs")
        accelerator = machines.accelerator(str(self.accelerator_type), f"{words} accelerator type")
        count = whole_number(self.accelerator_count, f"{words} accelerator count", minimum=1)
        allowed = machines.allowed_counts(machine, accelerator.name)
        if count in allowed:
            return
        if allowed:
            message = (f"invalid {words} accelerators: {machine.name} cannot carry {count} {accelerator.name}; "
                       f"allowed counts: {', '.join(map(str, allowed))}")
        else:
            kinds = ", ".join(machine.accelerators) or "none"
            message = (f"invalid {words} accelerators: {machine.name} cannot carry {accelerator.name}; "
                       f"accelerators it carries: {kinds}")
        fitting = machines.carriers(accelerator.name, count)[:3]
        slices = {m.name: m.accelerators[accelerator.name] for m in machines.MACHINES.values()
                  if accelerator.name in m.accelerators}
        if accelerator.kind == "tpu" and (fitting or len(slices) == 1):
            tpu = (fitting or list(slices))[0]
            hint = f"TPUs run on one {tpu} worker: --worker-machine-type {tpu} --workers 1"
        elif accelerator.kind == "tpu":
            hint = (f"{accelerator.name} slices mlsubmit runs, on one worker VM: "
                    + ", ".join(f"{m} {'/'.join(map(str, c))}" for m, c in slices.items()))
        else:
            hint = f"machines that carry {count} {accelerator.name}: {', '.join(fitting)}" if fitting else None
        raise UsageError(message, hint=hint)

    @property
    def accelerator(self) -> tuple[str, int] | None:
        """(type, count) of this pool's accelerators, attached or implicit in a legacy machine type."""
        if self.accelerator_type:
            return self.accelerator_type, self.accelerator_count
        return machines.MACHINES[self.machine_type].implicit

    @property
    def machine(self) -> machines.MachineType:
        return machines.MACHINES[self.machine_type]

    @property
    def tpu_topology(self) -> str | None:
        """The slice of a TPU VM pool ("2x2" on ct5lp-hightpu-4t): Vertex AI's machineSpec.tpuTopology; else None."""
        return self.machine.tpu_topology

    @property
    def accelerator_kind(self) -> str:
        """"cpu", "gpu" or "tpu": which kind of image the pool's machine needs (mlsubmit.images.choose)."""
        accelerator = self.accelerator
        if self.machine.family == "tpu" or (accelerator and machines.ACCELERATORS[accelerator[0]].kind == "tpu"):
            return "tpu"
        return machines.ACCELERATORS[accelerator[0]].kind if accelerator else "cpu"

    def replace(self, **changes: Any) -> "Pool":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class JobSpec:
    """A training job: cluster shape, program, and where it runs. Validated on construction.

    Attributes:
        tier: a key of machines.TIERS. Non-CUSTOM tiers take their pools from the table.
        chief, worker, ps, evaluator: the CUSTOM cluster's pools (None when absent).
        region, runtime_version, executor_image, python_module, args, job_dir, job_name, labels,
        package_uris, max_runtime_seconds: the program and job settings (None: the API's default).
        env: (NAME, VALUE) environment variables for every replica (Vertex AI `pythonPackageSpec.env`).
        python_version: the Python of the runtime ("3.7"); picks among a runtime version's images.
        container_image, container_command: a custom container every pool runs (instead of a Python package).
        pool_images: (role, image) for pools that run a container of their own.
        boot_disks: (role, disk type or None, size in GB or None) for pools with a boot disk of their own.
        network: the VPC network the job is peered with (projects/NUMBER/global/networks/NAME).
        spot: run on spot (preemptible) capacity: Vertex AI scheduling.strategy SPOT; on Kubernetes the pods get
            `spot_node_selector` (GKE spot nodes). The job resumes from its backup after a preemption.
        capacity: how the job waits for capacity or draws it from a reservation (mlsubmit.jobspec.scheduling).
        target: "cloud" (job dir and packages must be gs://) or "local".
        package_imports: the modules of an image's listed packages (pandas, sklearn, xgboost, hypertune) that the
            job's packages import: a carrier's container command installs them before the packages, as the image
            it replaces had them (mlsubmit.images.listed); set from the package when it is staged.
    """

    tier: str = "BASIC"
    chief: Pool | None = None
    worker: Pool | None = None
    ps: Pool | None = None
    evaluator: Pool | None = None
    region: str = machines.DEFAULT_REGION
    runtime_version: str | None = None
    executor_image: str | None = None
    python_module: str = "trainer.task"
    args: tuple[str, ...] = ()
    job_dir: str | None = None
    job_name: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    package_uris: tuple[str, ...] = ()
    max_runtime_seconds: int | None = None
    target: str = "cloud"
    python_version: str | None = None
    container_image: str | None = None
    container_command: tuple[str, ...] = ()
    pool_images: tuple[tuple[str, str], ...] = ()
    boot_disks: tuple[tuple[str, str | None, int | None], ...] = ()
    network: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    spot: bool = False
    capacity: Capacity = Capacity()
    package_imports: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("args", "labels", "package_uris", "container_command", "pool_images", "boot_disks", "env",
                     "package_imports"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.target not in TARGETS:
            raise invalid_value("target", self.target, "one of " + ", ".join(TARGETS))
        self._check_cluster()
        self._check_program()
        self._check_job()

    # -- cluster -------------------------------------------------------------------------------------------
    def _check_cluster(self) -> None:
        if self.tier not in machines.TIERS:
            raise invalid_value("--tier", self.tier, "one of " + ", ".join(machines.TIERS),
                                hint=did_you_mean(str(self.tier).upper(), machines.TIERS))
        given = {role: getattr(self, role) for role in machines.ROLES if getattr(self, role) is not None}
        for role, pool in given.items():
            if pool.role != role:
                raise invalid_value(role, pool.role, f"a Pool with role {role!r}")
        if self.tier != "CUSTOM" and given:
            raise UsageError(f"invalid cluster: machine types and counts are only allowed with --tier CUSTOM; "
                             f"received --tier {self.tier} with {', '.join(ROLE_WORDS[r] for r in given)}",
                             hint="use --tier CUSTOM, or drop the machine and count options")
        if self.tier == "CUSTOM" and self.chief is None:
            raise invalid_value("chief", None, "a chief machine with --tier CUSTOM", hint="add --machine-type")
        pools = self.pools
        families = {p.machine.is_legacy for p in pools.values() if p.machine.family != "tpu"}
        if len(families) > 1:
            described = ", ".join(f"{ROLE_WORDS[r]} {p.machine_type}" for r, p in pools.items())
            raise UsageError(f"invalid cluster: legacy machine types are never mixed with Compute Engine machine "
                             f"types; received {described}", hint="use one kind for every role")
        self._check_tpu(pools)
        if self.region not in machines.REGIONS:
            raise invalid_value("--region", self.region, "one of " + ", ".join(machines.REGIONS),
                                hint=did_you_mean(self.region, machines.REGIONS))
        for role, pool in pools.items():
            accelerator = pool.accelerator
            if accelerator and self.region not in machines.ACCELERATORS[accelerator[0]].regions:
                regions = machines.ACCELERATORS[accelerator[0]].regions
                raise UsageError(f"invalid value for --region: {accelerator[0]} ({ROLE_WORDS[role]}) is not "
                                 f"offered in {self.region}; regions that offer it: {', '.join(regions)}",
                                 hint=f"use --region {regions[0]}")

    @staticmethod
    def _check_tpu(pools: dict[str, Pool]) -> None:
        for role, pool in pools.items():
            if pool.machine.family != "tpu":
                continue
            if role != "worker":
                raise UsageError(f"invalid {ROLE_WORDS[role]} machine type: {pool.machine_type} only serves as "
                                 f"the one TPU worker; the chief is never a TPU",
                                 hint=f"use --worker-machine-type {pool.machine_type} --workers 1")
            if pool.replica_count != 1:
                raise invalid_value("workers count", pool.replica_count, f"1 with a {pool.machine_type} worker (one "
                                    "TPU worker per job)")
            others = [ROLE_WORDS[r] for r in pools if r not in ("chief", "worker")]
            if pool.tpu_topology and others:  # configure-compute: a TPU VM job has a single worker pool
                raise UsageError(f"invalid cluster: a {pool.machine_type} TPU VM job runs in one worker pool on "
                                 f"Vertex AI; received {' and '.join(others)} too",
                                 hint="drop --ps and --evaluators")

    # -- program and job -----------------------------------------------------------------------------------
    def _check_program(self) -> None:
        if self.runtime_version is not None and self.executor_image is not None:
            raise UsageError(f"invalid runtime: received both --runtime-version {self.runtime_version} and "
                             f"--executor-image {self.executor_image}; expected one of them",
                             hint="drop one of them")
        if self.runtime_version is not None and not _RUNTIME.fullmatch(str(self.runtime_version)):
            raise invalid_value("--runtime-version", self.runtime_version, "MAJOR.MINOR such as '2.11'")
        if self.executor_image is not None:
            reference.check(self.executor_image, "--executor-image")
            _check_prebuilt(str(self.executor_image), self.python_version)
        if self.python_version is not None and not _RUNTIME.fullmatch(str(self.python_version)):
            raise invalid_value("--python-version", self.python_version, "MAJOR.MINOR such as '3.7'")
        if self.container_image is not None:
            given = [f"{flag} {value}" for flag, value in (("--runtime-version", self.runtime_version),
                     ("--executor-image", self.executor_image), ("--python-version", self.python_version)) if value]
            if given:
                raise UsageError(f"invalid runtime: a custom container ({self.container_image}) fixes the software "
                                 f"a job runs; received also {', '.join(given)}",
                                 hint="drop the runtime version and Python version, or the container image")
            reference.check(self.container_image, "--container-image")
        for role, image in self.pool_images:
            if role not in machines.ROLES:
                raise invalid_value("pool image", f"{role}={image}", "a role and a container image URI")
            reference.check(image, f"the {role} pool's container image")
        for role, disk_type, size in self.boot_disks:
            if role not in machines.ROLES or disk_type not in (None, "pd-ssd", "pd-standard"):
                raise invalid_value(f"{ROLE_WORDS.get(role, role)} boot disk type", disk_type, "pd-ssd or pd-standard")
            if size is not None:
                whole_number(size, f"{ROLE_WORDS[role]} boot disk size (GB)", minimum=100)
        if not isinstance(self.python_module, str) or not _MODULE.fullmatch(self.python_module):
            raise invalid_value("--python-module", self.python_module, "a dotted module name such as trainer.task")
        for arg in self.args:
            if not isinstance(arg, str):
                raise invalid_value("trainer args", arg, "strings")

    def _check_job(self) -> None:
        if self.job_name is not None and not (isinstance(self.job_name, str) and 0 < len(self.job_name) <= MAX_NAME):
            raise invalid_value("--job-name", self.job_name, f"1 to {MAX_NAME} characters")
        if self.job_dir is not None:
            self._check_cloud_path("--job-dir", self.job_dir)
        if len(self.package_uris) > MAX_PACKAGE_URIS:
            raise invalid_value("packageUris", f"{len(self.package_uris)} URIs", f"at most {MAX_PACKAGE_URIS}",
                                hint="bundle the packages into fewer sdists")
        for uri in self.package_uris:
            self._check_cloud_path("packageUris", uri)
        if len(self.labels) >= limits.MAX_LABELS:  # mlsubmit adds its request-id label to every job it creates
            raise invalid_value("--label", f"{len(self.labels)} labels", f"at most {limits.MAX_LABELS - 1} (a job "
                                f"takes {limits.MAX_LABELS}; mlsubmit adds its request-id label)")
        for key, value in self.labels:
            if not _LABEL_KEY.fullmatch(str(key)):
                raise invalid_value("--label", f"{key}={value}", "a key of lowercase letters, digits, _ or -, "
                                    "starting with a letter, at most 63 characters")
            if not _LABEL_VALUE.fullmatch(str(value)):
                raise invalid_value("--label", f"{key}={value}", "a value of lowercase letters, digits, _ or -, "
                                    "at most 63 characters")
        if self.max_runtime_seconds is not None:
            whole_number(self.max_runtime_seconds, "--max-runtime", minimum=1)
        if not isinstance(self.capacity, Capacity):
            raise invalid_value("capacity", self.capacity, "a mlsubmit.jobspec.scheduling.Capacity")
        self.capacity.check(self)
        if len(self.env) > limits.MAX_ENV:
            raise invalid_value("--env", f"{len(self.env)} variables", f"at most {limits.MAX_ENV} (the API's limit)",
                                hint="pass settings to the trainer in one file or argument instead")
        for key, value in self.env:
            if not isinstance(key, str) or not _ENV_NAME.fullmatch(key) or not isinstance(value, str):
                raise invalid_value("--env", f"{key}={value}", "NAME=VALUE with a NAME of letters, digits and _ "
                                    "not starting with a digit", hint="e.g. --env LOG_LEVEL=debug")

    def _check_cloud_path(self, field: str, path: str) -> None:
        if not isinstance(path, str) or not path:
            raise invalid_value(field, path, "a path")
        if self.target == "cloud" and not re.fullmatch(r"gs://[a-z0-9][a-z0-9._-]{1,221}[a-z0-9](/.*)?", path):
            raise invalid_value(field, path, "gs://BUCKET/PATH with a valid bucket name (cloud jobs use Cloud Storage)",
                                hint="use a gs:// path, or run locally")

    # -- what later work reads ----------------------------------------------------------------------------
    @property
    def pools(self) -> dict[str, Pool]:
        """The pools that exist, in role order (chief, worker, ps, evaluator); tiers expanded from the table."""
        if self.tier != "CUSTOM":
            return {role: Pool(role, machine, count, accelerator, accelerator_count)
                    for role, (count, machine, accelerator, accelerator_count)
                    in machines.TIERS[self.tier].pools.items()}
        return {role: getattr(self, role) for role in machines.ROLES if getattr(self, role) is not None}

    def pool(self, role: str) -> Pool | None:
        return self.pools.get(role)

    @staticmethod
    def chief_name(api: str) -> str:
        """The chief's task name in TF_CONFIG: `master` for legacy AI Platform, `chief` for Vertex AI and local."""
        return "master" if api == "legacy" else "chief"

    @property
    def timeout(self) -> str | None:
        """max runtime as a google-duration ("7200s"), or None for the service default."""
        return None if self.max_runtime_seconds is None else f"{self.max_runtime_seconds}s"

    @property
    def deadline_seconds(self) -> int | None:
        """The time limit in seconds (Kubernetes `activeDeadlineSeconds`), set by --max-runtime or --max-cost."""
        return self.max_runtime_seconds

    @property
    def spot_node_selector(self) -> dict[str, str]:
        """The node selector of a spot job's pods on GKE ({} for on-demand jobs)."""
        from mlsubmit.jobspec.cost import GKE_SPOT_NODE_SELECTOR

        return dict(GKE_SPOT_NODE_SELECTOR) if self.spot else {}

    @property
    def labels_dict(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def replace(self, **changes: Any) -> "JobSpec":
        """A copy with `changes` applied, validated again."""
        return dataclasses.replace(self, **changes)
