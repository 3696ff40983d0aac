"""The emulated cluster's kubelet: the pods of a batch/v1 Job (mlsubmit.emulator.kube_jobs) run as local processes.

A pod (`<job>-<i>-<suffix>`, hostname `<job>-<i>`, `subdomain` from its template) runs its container's command here:
`python3` is this Python (the "image"; $MLSUBMIT_EMULATOR_IMAGE_PYTHON names another interpreter, say a stock Python
without setuptools or wheel, whose pip the launcher then installs the job's packages with), a configMap volume is a
directory holding the ConfigMap's data,
$JOB_COMPLETION_INDEX is set. THE ONE DIFFERENCE from a cluster: there is no DNS for `<host>.<subdomain>`, so a
launcher spec file (a `.json` argument under a configMap mount) whose `address_pattern` names such hosts is rewritten
into `addresses` of 127.0.0.1 with a port this emulator gives each host (the same host always gets the same port).
Processes die with the emulator (mlsubmit.local.children).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

IMAGE_PYTHON_VARIABLE = "MLSUBMIT_EMULATOR_IMAGE_PYTHON"
PORTS: dict[str, int] = {}
_PORTS_LOCK = threading.Lock()


def port_of(host: str) -> int:
    with _PORTS_LOCK:
        if host not in PORTS:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                PORTS[host] = probe.getsockname()[1]
        return PORTS[host]


def resolve_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The launcher spec with `address_pattern` replaced by 127.0.0.1 addresses (see the module docstring)."""
    pattern = spec.get("address_pattern")
    if not pattern or spec.get("addresses"):
        return spec
    tasks = [(role, i) for role, count in spec["roles"] for i in range(int(count))]
    addresses = []
    for rank, (role, index) in enumerate(tasks):
        host = pattern.format(job=spec["job_id"], role=role, index=index, rank=rank).rpartition(":")[0]
        addresses.append(f"127.0.0.1:{port_of(host)}")
    return {k: v for k, v in {**spec, "addresses": addresses}.items() if k != "address_pattern"}


class Pod:
    """One pod: its object (kept in the store) and its process."""

    def __init__(self, obj: dict[str, Any], workdir: Path):
        self.obj, self.workdir = obj, workdir
        self.log = bytearray()
        self.done = threading.Event()
        self.process: Any = None
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        if self.process is not None and self.process.poll() is None:
            from mlsubmit.local.children import kill_group

            kill_group(self.process, signal.SIGTERM)


def _argv(container: dict[str, Any], mounts: dict[str, Path]) -> list[str]:
    argv = [*container.get("command", []), *container.get("args", [])]
    out = []
    for arg in argv:
        for mount, folder in mounts.items():
            if arg == mount or arg.startswith(mount.rstrip("/") + "/"):
                local = folder / arg[len(mount):].lstrip("/")
                if local.suffix == ".json" and local.is_file():
                    try:
                        resolved = resolve_spec(json.loads(local.read_text()))
                        local = local.with_name(f".resolved-{secrets.token_hex(4)}-{local.name}")
                        local.write_text(json.dumps(resolved))
                    except (ValueError, KeyError, AttributeError):
                        pass
                arg = str(local)
        out.append(arg)
    if out and out[0] in ("python3", "python"):
        out[0] = os.environ.get(IMAGE_PYTHON_VARIABLE) or sys.executable
    return out


def start_pod(pod: Pod, config_maps: Callable[[str], dict[str, str] | None], env: dict[str, str],
              on_exit: Callable[[Pod, int], None]) -> None:
    """Run the pod's (single) container in a thread that waits for it; `on_exit(pod, code)` when it ends."""
    spec = pod.obj["spec"]
    container = spec["containers"][0]
    mounts: dict[str, Path] = {}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    missing = None
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        if "configMap" in volume:
            data = config_maps(volume["configMap"]["name"])
            if data is None:
                missing = volume["configMap"]["name"]
                continue
            folder = pod.workdir / mount["name"]
            folder.mkdir(parents=True, exist_ok=True)
            for key, value in data.items():
                (folder / key).write_text(value)
            mounts[mount["mountPath"]] = folder
    if missing:
        pod.log += f'MountVolume.SetUp failed: configmap "{missing}" not found\n'.encode()
        return on_exit(pod, 1)
    variables = {**os.environ, **env, **{e["name"]: e.get("value", "") for e in container.get("env", [])}}
    variables["HOSTNAME"] = spec.get("hostname", pod.obj["metadata"]["name"])
    variables.pop("MLSUBMIT_REPLICA_SPEC", None)

    def run() -> None:
        from mlsubmit.local import children

        code = 1
        try:
            pod.process = children.popen(_argv(container, mounts), env=variables, cwd=str(pod.workdir),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for line in iter(pod.process.stdout.readline, b""):
                pod.log += line
            code = pod.process.wait()
        except OSError as err:
            pod.log += f"failed to start the container: {err}\n".encode()
        finally:
            on_exit(pod, code)

    threading.Thread(target=run, daemon=True, name=f"pod-{pod.obj['metadata']['name']}").start()


def new_workdir(root: Path, name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
