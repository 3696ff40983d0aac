"""Start a cluster of `python -m trainer.task` processes on free 127.0.0.1 ports, one TF_CONFIG each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.gcs_emulator import free_port
from tests.support.trainer_run import ROOT


@dataclass
class Replica:
    name: str
    process: subprocess.Popen
    log: Path

    @property
    def output(self) -> str:
        return self.log.read_text()


def start_cluster(shape: dict[str, int], args: list[str], logs: Path, *, chief_key: str = "chief",
                  evaluators: int = 0) -> list[Replica]:
    """One process per task of `shape` ({"chief": 1, "worker": 2, "ps": 1}) plus `evaluators`."""
    cluster = {role: [f"127.0.0.1:{free_port()}" for _ in range(count)] for role, count in shape.items()}
    cluster = {(chief_key if role == "chief" else role): addresses for role, addresses in cluster.items()}
    if evaluators:
        cluster["evaluator"] = [f"127.0.0.1:{free_port()}" for _ in range(evaluators)]
    logs.mkdir(parents=True, exist_ok=True)
    replicas = []
    for role, addresses in cluster.items():
        for index in range(len(addresses)):
            tf_config = {"cluster": cluster, "task": {"type": role, "index": index}}
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_CONFIG": json.dumps(tf_config)}
            log = logs / f"{role}-{index}.log"
            with open(log, "w") as out:
                process = subprocess.Popen([sys.executable, "-m", "trainer.task", *args], cwd=ROOT, env=env,
                                           stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            replicas.append(Replica(f"{role}-{index}", process, log))
    return replicas


def wait_all(replicas: list[Replica], timeout: float) -> dict[str, int]:
    """Exit codes by replica name; any process still running at the deadline is killed (code None)."""
    deadline = time.monotonic() + timeout
    codes = {}
    try:
        for replica in replicas:
            try:
                codes[replica.name] = replica.process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                codes[replica.name] = None
    finally:
        for replica in replicas:
            if replica.process.poll() is None:
                os.killpg(replica.process.pid, signal.SIGKILL)
                replica.process.wait()
    return codes
