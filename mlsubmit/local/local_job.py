"""A JobSpec run on this machine the way the cloud runs it: one `python -m <module>` process per replica.

`plan()` is pure: it turns the spec into one ReplicaPlan per replica with the variables the service would set —
TF_CONFIG (the cluster on 127.0.0.1 ports; the chief named `chief`, or `master` as legacy AI Platform named it,
with the job's counts under `job` as AI Platform did), and for Vertex AI also CLUSTER_SPEC (worker pools 0-3) and,
given a base output directory, AIP_MODEL_DIR / AIP_CHECKPOINT_DIR / AIP_TENSORBOARD_LOG_DIR below it — plus
CLOUD_ML_JOB_ID. The arguments are the user's, unchanged, as the services pass them: legacy AI Platform adds
`--job-dir DIR` when the job has one; Vertex AI adds nothing. A pool with more GPUs than this machine has is
planned with `emulate_devices` (mlsubmit_runtime.EMULATE_DEVICES_VARIABLE in the environment, never an argument).

`reserve_ports()` and `gpus_on_this_machine()` look at the machine; `mlsubmit.local.local_run` puts it all together.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mlsubmit.jobspec import machines
from mlsubmit.launcher.replica import service_env  # the one place that knows what the services set
from mlsubmit.errors import UsageError, invalid_value
from mlsubmit.jobspec.spec import JobSpec

APIS = ("vertex", "legacy")
MAX_REPLICAS = 32  # each TensorFlow process holds ~0.5 GB before it trains


@dataclass(frozen=True)
class ReplicaPlan:
    name: str  # chief-0, worker-1, ps-0, evaluator-0
    role: str
    index: int
    address: str  # 127.0.0.1:PORT
    args: tuple[str, ...]  # the module's arguments
    env: Mapping[str, str]  # only the variables the service sets
    emulate_devices: int = 0  # >0: the pool's GPUs are missing here; offer this many emulated devices


@dataclass(frozen=True)
class LocalJob:
    job_id: str
    job_dir: str | None  # Vertex AI: the base output directory; legacy: the jobDir (None: the job has none)
    module: str
    api: str
    replicas: tuple[ReplicaPlan, ...]
    emulated_devices: int  # 0: no replica emulates devices
    gpus_here: int
    tier: str = "CUSTOM"  # the scale tier (legacy AI Platform's TF_CONFIG names it)
    args: tuple[str, ...] = ()  # the user's arguments as given (a replica's `args` are what the service passes)

    @property
    def counts(self) -> list[tuple[str, int]]:
        """[(role, replica count)] in pool order, as the launcher's spec takes them."""
        return list(self.shape.items())

    @property
    def shape(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for replica in self.replicas:
            counts[replica.role] = counts.get(replica.role, 0) + 1
        return counts


def roles(spec: JobSpec) -> list[tuple[str, int]]:
    """(role, index) of every replica, chief first, in Vertex AI pool order."""
    return [(role, i) for role, pool in spec.pools.items() for i in range(pool.replica_count)]


def check_runnable(spec: JobSpec) -> None:
    """Shapes this machine (or any strategy) cannot serve: one line, before anything starts."""
    pools = spec.pools
    if "ps" in pools and "worker" not in pools:
        raise UsageError(f"invalid cluster: {pools['ps'].replica_count} parameter server(s) but no workers; "
                         "parameter-server training needs at least one worker", hint="add --workers N, or drop --ps")
    for role, pool in pools.items():
        accelerator = pool.accelerator
        if accelerator and machines.ACCELERATORS[accelerator[0]].kind == "tpu":
            raise UsageError(f"invalid cluster for --local: the {role} runs on a Cloud TPU ({pool.machine_type}), "
                             "which this machine cannot stand in for", hint="drop the TPU worker to run locally")
    count = len(roles(spec))
    if count > MAX_REPLICAS:
        raise invalid_value("replica count", count, f"at most {MAX_REPLICAS} on one machine (each TensorFlow "
                            "process needs about 0.5 GB)", hint="use --tier CUSTOM with fewer --workers/--ps")


def _gpus_of(pool) -> int:
    accelerator = pool.accelerator
    return accelerator[1] if accelerator and machines.ACCELERATORS[accelerator[0]].kind == "gpu" else 0


def plan(spec: JobSpec, *, api: str, job_id: str, job_dir: str | None, ports: Sequence[int],
         gpus_here: int) -> LocalJob:
    """Every replica's arguments and service variables (pure). `ports`: one per replica, in `roles()` order;
    `job_dir`: Vertex AI's base output directory, or legacy AI Platform's jobDir (None or "": none)."""
    if api not in APIS:
        raise invalid_value("--api", api, " or ".join(APIS))
    tasks = roles(spec)
    if len(ports) != len(tasks):
        raise ValueError(f"{len(tasks)} replicas need {len(tasks)} ports; received {len(ports)}")
    addresses = [f"127.0.0.1:{port}" for port in ports]
    counts = [(role, pool.replica_count) for role, pool in spec.pools.items()]
    emulated = max((_gpus_of(p) for p in spec.pools.values() if _gpus_of(p) > gpus_here), default=0)
    replicas = []
    for (role, index), address in zip(tasks, addresses):
        env, args = service_env(api=api, job_id=job_id, tier=spec.tier, roles=counts, addresses=addresses,
                                role=role, index=index, job_dir=job_dir, args=spec.args)
        gpus = _gpus_of(spec.pools[role])
        replicas.append(ReplicaPlan(f"{role}-{index}", role, index, address, tuple(args), env,
                                    gpus if gpus > gpus_here else 0))
    return LocalJob(job_id, job_dir or None, spec.python_module, api, tuple(replicas), emulated, gpus_here,
                    spec.tier, tuple(spec.args))


def reserve_ports(count: int, start_port: int | None = None) -> list[int]:
    """`count` ports of 127.0.0.1 that can be bound: free ones chosen by the system, or start_port, start_port+1, …

    Raises:
        UsageError: a port from start_port on is taken or not allowed.
    """
    sockets = []
    try:
        for offset in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            port = 0 if start_port is None else start_port + offset
            try:
                sock.bind(("127.0.0.1", port))
            except OSError as exc:
                raise invalid_value("--start-port", start_port, f"{count} consecutive ports of 127.0.0.1 that can "
                                    f"be bound; port {port} cannot ({exc.strerror or exc})",
                                    hint="pick another --start-port, or leave it out to use free ports") from None
            except OverflowError:
                raise invalid_value("--start-port", start_port, f"a port such that {count} ports up to 65535 "
                                    "fit") from None
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def gpus_on_this_machine() -> int:
    """NVIDIA GPUs `nvidia-smi -L` lists (0 without the tool), without importing TensorFlow."""
    tool = shutil.which("nvidia-smi")
    if not tool:
        return 0
    try:
        listed = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = sum(line.startswith("GPU ") for line in listed.splitlines())
    return min(count, len([d for d in visible.split(",") if d.strip()])) if visible is not None else count
