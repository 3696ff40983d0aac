"""The one table of facts about where a job can run: tiers, machine types, accelerators, counts, regions.

Validation (`mlsubmit.jobspec.spec`), request bodies (`mlsubmit.jobspec.requests`), help text and CLI choices are all derived
from these tables; nothing else lists a machine type or an accelerator. Every accelerator of the aiplatform v1
discovery document's `MachineSpec.acceleratorType` enum (revision 20261106) is either in ACCELERATORS or in REFUSED
with the reason. Sources:

- ../shared/REFERENCE.md: n1 GPU counts, tiers, legacy machine types, TPU rules.
- Vertex AI "Configure compute resources for serverless training" (docs.cloud.google.com/gemini-enterprise-agent-
  platform/machine-learning/training/configure-compute, formerly cloud.google.com/vertex-ai/docs/training/configure-
  compute): the GPU types of custom training and the machine x GPU count table (a3-ultragpu-8g: 8 NVIDIA_H200_141GB,
  a4-highgpu-8g: 8 NVIDIA_B200, a4x-highgpu-4g: 4 NVIDIA_GB200, "requires obtaining capacity using shared
  reservations", g4-standard-48/96/192/384: 1/2/4/8 NVIDIA_RTX_PRO_6000); its TPU section: v2/v3 on `cloud-tpu`,
  TPU v5e as `machineType: ct5lp-hightpu-1t|4t|8t` plus `tpuTopology` (no acceleratorType), `replicaCount: 1`, one
  worker pool, and the v5e vCPUs (24, 112, 224); TPU v4 is not among its TPUs.
- Compute Engine "Accelerator-optimized machine family" (docs.cloud.google.com/compute/docs/accelerator-optimized-
  machines): vCPUs of a3-ultragpu-8g (224), a4-highgpu-8g (224), a4x-highgpu-4g (140, Arm Grace CPUs) and g4 (48 to
  384); A3 Ultra, A4 and G4 boot from Hyperdisk only (no Persistent Disk).
- Regions: a snapshot of Vertex AI custom-training availability that may lag Google's. The Vertex AI "Locations"
  page's accelerator table was not found for the rows added in 2026 (H200, B200, RTX PRO 6000, TPU v5e): each has
  the one region a source ties it to (see ACCELERATORS), a conservative choice.

Pure data plus small lookups; importing this module costs nothing measurable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlsubmit.errors import did_you_mean, invalid_value
from mlsubmit.images.catalog import LEGACY_DEFAULT_RUNTIME

ROLES = ("chief", "worker", "ps", "evaluator")  # Vertex worker-pool order: pool 0, 1, 2, 3


@dataclass(frozen=True)
class Accelerator:
    """One accelerator type: its API name, whether each API accepts it, and the regions that offer it.

    A TPU's count is the chips (v5e) or cores (v2/v3) of its slice, as Vertex AI counts them.
    """

    name: str
    kind: str  # "gpu" or "tpu"
    legacy: bool  # in ml.v1's AcceleratorConfig.type enum
    vertex: bool  # offered for Vertex AI custom training today (K80 reached end of support)
    regions: tuple[str, ...]


@dataclass(frozen=True)
class MachineType:
    """A machine type and the accelerators it can carry: {accelerator name: allowed counts}."""

    name: str
    family: str  # n1, a2, a3, a4, g2, g4, tpu or legacy
    vcpus: int = 0
    accelerators: dict[str, tuple[int, ...]] = field(default_factory=dict)
    fixed: bool = False  # the accelerators come with the machine (a2/a3/a4/g2/g4 names, TPU VMs, legacy GPU types)
    legacy_name: str | None = None  # its spelling in ml.v1 when it differs (cloud_tpu)
    equivalent: str | None = None  # legacy types: the Compute Engine machine they correspond to
    tpu_topology: str | None = None  # TPU VM types (ct5lp-*): the slice Vertex AI gets as machineSpec.tpuTopology

    @property
    def is_legacy(self) -> bool:
        return self.family == "legacy"

    @property
    def implicit(self) -> tuple[str, int] | None:
        """(type, count) of the accelerators a fixed machine comes with, else None."""
        if not self.fixed:
            return None
        (name, counts), = self.accelerators.items()
        return name, counts[0]


K80, P4, P100, V100, T4 = ("NVIDIA_TESLA_K80", "NVIDIA_TESLA_P4", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_V100",
                           "NVIDIA_TESLA_T4")
A100, A100_80, H100, H100_MEGA, L4 = ("NVIDIA_TESLA_A100", "NVIDIA_A100_80GB", "NVIDIA_H100_80GB",
                                      "NVIDIA_H100_MEGA_80GB", "NVIDIA_L4")
H200, B200, GB200, RTX_PRO_6000 = "NVIDIA_H200_141GB", "NVIDIA_B200", "NVIDIA_GB200", "NVIDIA_RTX_PRO_6000"
TPU_V2, TPU_V3, TPU_V4_POD, TPU_V5_LITEPOD = "TPU_V2", "TPU_V3", "TPU_V4_POD", "TPU_V5_LITEPOD"

_US_C1, _US_E1, _US_E4, _US_W1, _US_W4 = "us-central1", "us-east1", "us-east4", "us-west1", "us-west4"
_EU_W1, _EU_W4 = "europe-west1", "europe-west4"
_AS_E1, _AS_NE1, _AS_SE1 = "asia-east1", "asia-northeast1", "asia-southeast1"

ACCELERATORS: dict[str, Accelerator] = {a.name: a for a in (
    Accelerator(K80, "gpu", True, False, (_US_C1, _US_E1, _US_W1, _EU_W1, _AS_E1)),
    Accelerator(P4, "gpu", True, True, (_US_C1, _US_E4, _EU_W4, _AS_SE1)),
    Accelerator(P100, "gpu", True, True, (_US_C1, _US_E1, _US_W1, _EU_W1, _EU_W4, _AS_E1)),
    Accelerator(V100, "gpu", True, True, (_US_C1, _US_E1, _US_W1, _EU_W4, _AS_E1)),
    Accelerator(T4, "gpu", True, True, (_US_C1, _US_E1, _US_E4, _US_W1, _US_W4, _EU_W1, _EU_W4, _AS_E1,
                                        _AS_NE1, _AS_SE1)),
    Accelerator(A100, "gpu", True, True, (_US_C1, _EU_W4, _AS_NE1, _AS_SE1)),
    Accelerator(A100_80, "gpu", False, True, (_US_C1, _US_E4, _EU_W4)),
    Accelerator(L4, "gpu", False, True, (_US_C1, _US_E1, _US_E4, _US_W1, _US_W4, _EU_W1, _EU_W4, _AS_E1,
                                         _AS_NE1, _AS_SE1)),
    Accelerator(H100, "gpu", False, True, (_US_C1, _US_E4, _US_W1, _US_W4, _EU_W4, _AS_SE1)),
    Accelerator(H100_MEGA, "gpu", False, True, (_US_C1, _US_E4, _EU_W4)),
    # Added 2026 (configure-compute). Their Vertex AI regions were not found: us-central1 only, Vertex AI's default,
    # where Compute Engine has them (us-central1-b in public `gcloud compute accelerator-types list` output for H200
    # and B200, in a public g4-standard-384 run record for RTX PRO 6000). configure-compute recommends shared
    # reservations or Spot VMs for H200 and B200 capacity.
    Accelerator(H200, "gpu", False, True, (_US_C1,)),
    Accelerator(B200, "gpu", False, True, (_US_C1,)),
    Accelerator(RTX_PRO_6000, "gpu", False, True, (_US_C1,)),
    Accelerator(TPU_V2, "tpu", True, True, (_US_C1, _EU_W4, _AS_E1)),
    Accelerator(TPU_V3, "tpu", True, True, (_US_C1, _EU_W4)),
    # TPU v5e: us-west1 only, where configure-compute's TPU VM example runs (location='us-west1') and Cloud TPU
    # "TPU regions and zones" lists v5e (us-west1-c); its other v5e zones (us-central1-a, us-south1-a, us-west4-a)
    # are not confirmed for Vertex AI training.
    Accelerator(TPU_V5_LITEPOD, "tpu", False, True, (_US_W1,)),
)}
# Enum values mlsubmit refuses: {accelerator: (why, what to use instead)}.
REFUSED: dict[str, tuple[str, str]] = {
    GB200: ("Vertex AI runs it only on capacity from a shared reservation, and its a4x-highgpu-4g host has Arm "
            "(Grace) CPUs that need images built for Arm, which mlsubmit's image choice does not check",
            f"use --gpu-type {B200} --gpus 8 (a4-highgpu-8g), or --gpu-type {H200} --gpus 8 (a3-ultragpu-8g)"),
    TPU_V4_POD: ("Vertex AI custom training offers no TPU v4 (its TPUs are v2/v3 on cloud-tpu, v5e, v6e and 7x), and "
                 "legacy AI Platform, which offered it, shut down on 2025-01-31",
                 "use TPU v5e: --worker-machine-type ct5lp-hightpu-4t --workers 1 --region us-west1"),
}
REFUSED_MACHINES = {"a4x-highgpu-4g": GB200}  # the machine types that carry a refused accelerator
REGIONS: tuple[str, ...] = tuple(sorted({r for a in ACCELERATORS.values() for r in a.regions}))
GPU_TYPES = tuple(n for n, a in ACCELERATORS.items() if a.kind == "gpu")
TPU_TYPES = tuple(n for n, a in ACCELERATORS.items() if a.kind == "tpu")

DEFAULT_REGION = _US_C1
DEFAULT_GPU_TYPE = T4  # offered on both APIs and in every region above; K80 is end-of-support on Vertex AI
DEFAULT_CPU_MACHINE = "n1-standard-4"  # the legacy `standard` machine's equivalent
# `--tier CUSTOM --gpus N` without a machine type: the Compute Engine equivalents of the legacy GPU machines
# (standard_gpu: n1-standard-8 + 1, complex_model_m_gpu: n1-standard-16 + 4, complex_model_l_gpu:
# n1-standard-32 + 8), i.e. at least 4 vCPUs per GPU to keep the input pipeline ahead of the GPUs.
DEFAULT_GPU_MACHINE = {1: "n1-standard-8", 2: "n1-standard-8", 4: "n1-standard-16", 8: "n1-standard-32"}
DEFAULT_RUNTIME_VERSION = LEGACY_DEFAULT_RUNTIME  # the last runtime version legacy AI Platform Training offered
TPU_MACHINE = "cloud-tpu"
TPU_CORES = 8

# n1 machines and the GPUs they carry (REFERENCE.md: tensorflow/cloud's table of the using-gpus page).
_K80_V100_ALL = {K80: (1, 2, 4, 8), V100: (1, 2, 4, 8), P4: (1, 2, 4), P100: (1, 2, 4), T4: (1, 2, 4)}
_N1_GROUPS = (
    (("n1-standard-4", "n1-standard-8", "n1-highmem-2", "n1-highmem-4", "n1-highmem-8"), _K80_V100_ALL),
    (("n1-standard-16", "n1-highmem-16", "n1-highcpu-16"),
     {K80: (2, 4, 8), V100: (2, 4, 8), P4: (1, 2, 4), P100: (1, 2, 4), T4: (1, 2, 4)}),
    (("n1-standard-32", "n1-highmem-32", "n1-highcpu-32"),
     {K80: (4, 8), V100: (4, 8), P4: (2, 4), P100: (2, 4), T4: (2, 4)}),
    (("n1-highcpu-64",), {K80: (8,), V100: (8,), P4: (4,), P100: (4,), T4: (4,)}),
    (("n1-standard-64", "n1-standard-96", "n1-highmem-64", "n1-highmem-96", "n1-highcpu-96"),
     {V100: (8,), P4: (4,), T4: (4,)}),
)
# Machines whose name fixes their GPUs: name -> (vCPUs, accelerator, count).
_FIXED = {
    "a2-highgpu-1g": (12, A100, 1), "a2-highgpu-2g": (24, A100, 2), "a2-highgpu-4g": (48, A100, 4),
    "a2-highgpu-8g": (96, A100, 8), "a2-megagpu-16g": (96, A100, 16),
    "a2-ultragpu-1g": (12, A100_80, 1), "a2-ultragpu-2g": (24, A100_80, 2), "a2-ultragpu-4g": (48, A100_80, 4),
    "a2-ultragpu-8g": (96, A100_80, 8),
    "a3-highgpu-8g": (208, H100, 8), "a3-megagpu-8g": (208, H100_MEGA, 8),
    "g2-standard-4": (4, L4, 1), "g2-standard-8": (8, L4, 1), "g2-standard-12": (12, L4, 1),
    "g2-standard-16": (16, L4, 1), "g2-standard-24": (24, L4, 2), "g2-standard-32": (32, L4, 1),
    "g2-standard-48": (48, L4, 4), "g2-standard-96": (96, L4, 8),
    "a3-ultragpu-8g": (224, H200, 8), "a4-highgpu-8g": (224, B200, 8),
    "g4-standard-48": (48, RTX_PRO_6000, 1), "g4-standard-96": (96, RTX_PRO_6000, 2),
    "g4-standard-192": (192, RTX_PRO_6000, 4), "g4-standard-384": (384, RTX_PRO_6000, 8),
}
# TPU v5e VM types: name -> (vCPUs, TPU chips, tpuTopology). Only the single-host slices: configure-compute also
# lists ct5lp-hightpu-4t slices of 2x4 to 16x16 on 2 to 64 VMs, which mlsubmit does not offer (its cost estimate
# and cluster description count one VM per replica, and such a slice is several VMs in one replica).
_TPU_VMS = {"ct5lp-hightpu-1t": (24, 1, "1x1"), "ct5lp-hightpu-4t": (112, 4, "2x2"),
            "ct5lp-hightpu-8t": (224, 8, "2x4")}
# Legacy machine types: name -> (Compute Engine equivalent, implicit GPU type, count).
_LEGACY = {
    "standard": ("n1-standard-4", None, 0), "large_model": ("n1-highmem-8", None, 0),
    # complex_model_s was an n1-highcpu-8, which neither service offers as a machine type: its nearest is used.
    "complex_model_s": ("n1-standard-8", None, 0), "complex_model_m": ("n1-highcpu-16", None, 0),
    "complex_model_l": ("n1-highcpu-32", None, 0),
    "standard_gpu": ("n1-standard-8", K80, 1), "complex_model_m_gpu": ("n1-standard-16", K80, 4),
    "complex_model_l_gpu": ("n1-standard-32", K80, 8),
    "standard_p100": ("n1-standard-8", P100, 1), "complex_model_m_p100": ("n1-standard-16", P100, 4),
    "standard_v100": ("n1-standard-8", V100, 1), "large_model_v100": ("n1-highmem-8", V100, 1),
    "complex_model_m_v100": ("n1-standard-16", V100, 4), "complex_model_l_v100": ("n1-standard-32", V100, 8),
}


def _build_machines() -> dict[str, MachineType]:
    machines: dict[str, MachineType] = {}
    for names, accelerators in _N1_GROUPS:
        for name in names:
            machines[name] = MachineType(name, "n1", int(name.rsplit("-", 1)[1]), dict(accelerators))
    for name, (vcpus, accelerator, count) in _FIXED.items():
        machines[name] = MachineType(name, name[:2], vcpus, {accelerator: (count,)}, fixed=True)
    machines[TPU_MACHINE] = MachineType(TPU_MACHINE, "tpu", 0, {TPU_V2: (TPU_CORES,), TPU_V3: (TPU_CORES,)},
                                        legacy_name="cloud_tpu")
    for name, (vcpus, chips, topology) in _TPU_VMS.items():
        machines[name] = MachineType(name, "tpu", vcpus, {TPU_V5_LITEPOD: (chips,)}, fixed=True, tpu_topology=topology)
    for name, (equivalent, accelerator, count) in _LEGACY.items():
        accelerators = {accelerator: (count,)} if accelerator else {}
        machines[name] = MachineType(name, "legacy", 0, accelerators, fixed=bool(accelerator),
                                     equivalent=equivalent)
    return machines


MACHINES: dict[str, MachineType] = _build_machines()
_ALIASES = {m.legacy_name: m.name for m in MACHINES.values() if m.legacy_name}


def canonical_name(name: str) -> str:
    """A machine type's name in the table (cloud_tpu is cloud-tpu); unknown names come back unchanged."""
    return _ALIASES.get(name, name)


@dataclass(frozen=True)
class Tier:
    """A scale tier and the worker pools it stands for: {role: (replicas, machine, accelerator, count)}."""

    name: str
    summary: str
    pools: dict[str, tuple[int, str, str | None, int]]


# The legacy service described its tiers but never published their machines; mlsubmit maps each tier to the
# Compute Engine equivalent of the legacy `standard` machine, with the replica counts the old docs gave.
TIERS: dict[str, Tier] = {t.name: t for t in (
    Tier("BASIC", "one machine (n1-standard-4)", {"chief": (1, "n1-standard-4", None, 0)}),
    Tier("STANDARD_1", "chief + 4 workers + 3 parameter servers (n1-standard-4)",
         {"chief": (1, "n1-standard-4", None, 0), "worker": (4, "n1-standard-4", None, 0),
          "ps": (3, "n1-standard-4", None, 0)}),
    Tier("PREMIUM_1", "chief + 19 workers + 11 parameter servers (n1-standard-4)",
         {"chief": (1, "n1-standard-4", None, 0), "worker": (19, "n1-standard-4", None, 0),
          "ps": (11, "n1-standard-4", None, 0)}),
    Tier("BASIC_GPU", "one machine with one GPU (n1-standard-8 + 1 NVIDIA_TESLA_K80; T4 on Vertex AI)",
         {"chief": (1, "n1-standard-8", K80, 1)}),
    Tier("BASIC_TPU", "a chief VM and one Cloud TPU (TPU_V2 x 8)",
         {"chief": (1, "n1-standard-4", None, 0), "worker": (1, TPU_MACHINE, TPU_V2, TPU_CORES)}),
    Tier("CUSTOM", "your own cluster: --machine-type, --gpus, --workers, --ps, --evaluators", {}),
)}


def machine(name: str, field_name: str) -> MachineType:
    """The machine type called `name` (cloud_tpu is accepted for cloud-tpu); UsageError if unknown or refused."""
    found = MACHINES.get(_ALIASES.get(name, name))
    if found is None and name in REFUSED_MACHINES:
        carried = REFUSED_MACHINES[name]
        why, instead = REFUSED[carried]
        raise invalid_value(field_name, name, f"a machine type mlsubmit runs; {name} carries {carried}: {why}",
                            hint=instead)
    if found is None:
        raise invalid_value(field_name, name, "a machine type from `mlsubmit config --help` (n1-*, a2-*, "
                            "a3-*, a4-*, g2-*, g4-*, cloud-tpu, ct5lp-* or a legacy type such as complex_model_m_gpu)",
                            hint=_TPU_HINT if "tpu" in str(name).lower() else did_you_mean(name, MACHINES))
    return found


_TPU_HINT = ("a TPU runs on one cloud-tpu worker: --worker-machine-type cloud-tpu --workers 1 (or --tier BASIC_TPU); "
             "TPU v5e on one ct5lp-hightpu-1t, -4t or -8t worker")


def accelerator(name: str, field_name: str) -> Accelerator:
    """The accelerator type called `name`; UsageError naming the choices if unknown, or why if refused."""
    found = ACCELERATORS.get(name)
    if found is None and name in REFUSED:
        why, instead = REFUSED[name]
        raise invalid_value(field_name, name, f"an accelerator mlsubmit runs; {why}", hint=instead)
    if found is None:
        raise invalid_value(field_name, name, "one of " + ", ".join(ACCELERATORS),
                            hint=did_you_mean(name.upper(), ACCELERATORS))
    return found


def allowed_counts(machine_type: MachineType, accelerator_type: str) -> tuple[int, ...]:
    return machine_type.accelerators.get(accelerator_type, ())


def carriers(accelerator_type: str, count: int) -> list[str]:
    """Compute Engine machines that can carry `count` accelerators of this type (for hints)."""
    return [m.name for m in MACHINES.values()
            if not m.is_legacy and count in m.accelerators.get(accelerator_type, ())]


def default_gpu_machine(accelerator_type: str, count: int) -> str | None:
    """The machine `--gpus N` gets without `--machine-type`: n1 by count, else the one fixed to that pair."""
    if accelerator_type in MACHINES["n1-standard-4"].accelerators:  # a GPU n1 machines carry
        chosen = DEFAULT_GPU_MACHINE.get(count)
        return chosen if chosen and count in allowed_counts(MACHINES[chosen], accelerator_type) else None
    fitting = carriers(accelerator_type, count)
    return fitting[0] if fitting else None


def possible_counts(accelerator_type: str) -> list[int]:
    """Every count of this accelerator that some machine type carries."""
    return sorted({c for m in MACHINES.values() if not m.is_legacy for c in m.accelerators.get(accelerator_type, ())})


def vertex_accelerator(machine_type: MachineType, accelerator_type: str, count: int) -> str:
    """The accelerator Vertex AI gets for one Vertex AI no longer offers (K80): T4, else V100, on that machine."""
    if ACCELERATORS[accelerator_type].vertex:
        return accelerator_type
    for substitute in (T4, V100):
        if count in allowed_counts(machine_type, substitute):
            return substitute
    return accelerator_type


def _short_names(names: tuple[str, ...]) -> str:
    """("n1-standard-4", "n1-standard-8", "n1-highmem-2") -> "n1-standard-4/8, n1-highmem-2"."""
    groups: dict[str, list[str]] = {}
    for name in names:
        prefix, _, size = name.rpartition("-")
        groups.setdefault(prefix, []).append(size)
    return ", ".join(f"{prefix}-{'/'.join(sizes)}" for prefix, sizes in groups.items())


def describe_table() -> str:
    """The machine/accelerator table as text, for `mlsubmit config --help` and the README."""
    lines = ["Tiers (on Vertex AI):"] + [f"  {t.name}: {t.summary}" for t in TIERS.values()]
    lines.append("GPUs per n1 machine type (count choices):")
    for names, accelerators in _N1_GROUPS:
        counts = "; ".join(f"{a.split('_')[-1]} {','.join(map(str, c))}" for a, c in accelerators.items())
        lines.append(f"  {_short_names(names)}: {counts}")
    lines.append("  a2/a3/a4/g2/g4 machines come with their GPUs (a2-highgpu-4g: 4 A100, a3-ultragpu-8g: 8 H200_141GB,")
    lines.append("  a4-highgpu-8g: 8 B200, g2-standard-8: 1 L4, g4-standard-96: 2 RTX_PRO_6000)")
    lines.append("TPUs (the one worker: --worker-machine-type M --workers 1; Vertex AI runs it as pool 0):")
    lines.append(f"  {TPU_MACHINE}: TPU_V2 or TPU_V3 x {TPU_CORES}")
    slices = "; ".join(f"{m.name}: {m.implicit[1]} ({m.tpu_topology})" for m in MACHINES.values() if m.tpu_topology)
    lines.append(f"  TPU v5e chips (tpuTopology): {slices}")
    refused = [name + "".join(f" ({m})" for m, carried in REFUSED_MACHINES.items() if carried == name)
               for name in REFUSED]
    lines.append(f"Not run by mlsubmit (the error says why): {', '.join(refused)}")
    lines.append("Legacy machine types (GPUs built in; never with --gpus, never mixed with the above):")
    line = " "
    for name, (equivalent, gpu, count) in _LEGACY.items():
        item = f" {name} ({equivalent}{f' + {count} {gpu.rsplit(chr(95), 1)[-1]}' if gpu else ''}),"
        if len(line) + len(item) > 100:
            lines.append(line)
            line = " "
        line += item
    lines.append(line.rstrip(","))
    return "\n".join(lines)
