"""Real Spark, Dask and Ray clusters on 127.0.0.1 for the engine tests, started as users start them and stopped by
process group id (each is started in a session of its own: its daemons, executors and workers are in it)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlsubmit.local import children

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class StockPython:
    """A Python as python.org or pyenv builds it (not a venv; its own pip and setuptools, no wheel): a stock node."""
    path: str
    version: str  # "3.11"
    prefix: str
    setuptools: str | None

    def facts(self) -> dict:
        return {"python": self.version, "base": self.prefix, "setuptools": self.setuptools, "wheel": False}


def pyenv_pythons(version: str) -> list[Path]:
    """pyenv's interpreters of `version` ("3.11"), newest first."""
    versions = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = [folder / "bin" / f"python{version}" for folder in versions.glob(f"{version}.*")]
    return sorted((python for python in found if python.exists()), reverse=True)


def stock_python(version: str) -> StockPython | None:
    """pyenv's Python `version` ("3.11", 3.8 or later) when this machine has it stock, else None."""
    probe = ("import importlib.metadata as m, importlib.util as u, json, sys\n"
             "try:\n    s = m.version('setuptools')\nexcept m.PackageNotFoundError:\n    s = None\n"
             "print(json.dumps([sys.prefix == sys.base_prefix and u.find_spec('wheel') is None, sys.prefix, s]))")
    for python in pyenv_pythons(version):
        done = subprocess.run([str(python), "-I", "-c", probe], capture_output=True, text=True, timeout=60)
        if done.returncode == 0:
            import json

            stock, prefix, setuptools = json.loads(done.stdout)
            if stock:
                return StockPython(str(python), version, prefix, setuptools)
    return None


def free_port(avoid: range = range(0)) -> int:
    """A port free now on 127.0.0.1, outside `avoid` (ports another component of the same cluster will take)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in avoid:
            return port


@dataclass
class Cluster:
    target: str  # what `train --target` is given
    processes: list[subprocess.Popen] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # what `mlsubmit train` needs beside it (PYSPARK_PYTHON)
    scratch: list[Path] = field(default_factory=list)  # removed once the processes are gone
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGKILL)  # in turn, each given 10 s to end them
    log: Path | None = None  # where its daemons write

    def stop(self) -> None:
        for sig in self.signals:
            for process in self.processes:
                children.kill_group(process, sig)
            deadline = time.monotonic() + 10
            while any(p.poll() is None for p in self.processes) and time.monotonic() < deadline:
                time.sleep(0.1)
        for path in self.scratch:
            shutil.rmtree(path, ignore_errors=True)


def node_home(tmp_path_factory) -> Path:
    """The $MLSUBMIT_HOME of every engine test cluster's nodes in this run: the clusters all run on this one machine,
    so their replicas' launchers share one venv cache (kept by the packages' sha256 and the node's Python, built
    under a lock), as the nodes of one machine would: a package another engine's job installed is found installed.
    Under xdist the workers' base temporary folders share a parent, and so do their clusters."""
    base = tmp_path_factory.getbasetemp()
    if base.name.startswith("popen-gw"):
        base = base.parent
    home = base / "engine-nodes"
    home.mkdir(exist_ok=True)
    return home


def _env(home: Path) -> dict[str, str]:
    # the clusters' replicas keep their venv cache in the nodes' home (node_home), not the user's
    return {**os.environ, "MLSUBMIT_HOME": str(home), "PYTHONUNBUFFERED": "1"}


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    return children.popen(argv, stdout=log.open("ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)


def _wait(check, what: str, cluster: Cluster, log: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        if any(p.poll() is not None for p in cluster.processes):
            break
        time.sleep(0.5)
    cluster.stop()
    raise RuntimeError(f"{what} did not start: {log.read_text(errors='replace')[-3000:]}")


def dask_cluster(tmp: Path, nodes: Path, workers: int = 3) -> Cluster:
    """A scheduler and `workers` workers of one thread each, each its own process without a nanny (`dask worker
    --no-nanny`: each replica's launcher is a child process of its task all the same) and without the statistical
    profiler that feeds the dashboard they do not have: the idle cluster costs half the CPU (measured: 1.5 CPU-s in
    20 s, against 2.9 with a nanny per worker and the profiler)."""
    port, env, log = free_port(), _env(nodes), tmp / "dask.log"
    env["DASK_TEMPORARY_DIRECTORY"] = str(tmp / "dask-work")  # the scheduler's scratch space: not in $TMPDIR
    env["DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED"] = "False"
    cluster = Cluster(f"dask://127.0.0.1:{port}")
    cluster.processes.append(_start([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                     "--no-dashboard"], log, env))
    for _ in range(workers):
        cluster.processes.append(_start([str(BIN / "dask"), "worker", f"tcp://127.0.0.1:{port}", "--nthreads", "1",
                                         "--no-nanny", "--host", "127.0.0.1", "--no-dashboard", "--local-directory",
                                         str(tmp / "dask-work")], log, env))
    _wait(lambda: log.read_text(errors="replace").count("Registered to:") >= workers, "the Dask cluster", cluster,
          log)
    return cluster


def ray_cluster(tmp: Path, nodes: Path, cpus: int = 3) -> Cluster:
    low = 20000 + (os.getpid() % 400) * 100
    # Ray refuses to start when another of its ports falls in the workers' range: the GCS and client ports, and its
    # dashboard agent's, a fixed 52365 unless given (a full run's pid put the range over it)
    workers = range(low, low + 100)
    gcs, client, agent, log = free_port(workers), free_port(workers), free_port(workers), tmp / "ray.log"
    env = {**_env(nodes), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
    # no log monitor: it forwards the workers' output to drivers, and mlsubmit's driver takes none (log_to_driver=False;
    # the replicas' lines come through the job's control connection)
    # Ray's session sockets must fit AF_UNIX's 107 bytes: a short directory, not the test's deep tmp path
    temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    # `ray start --block` and its gcs_server outlive SIGTERM to their group by more than 30 s (measured): the 10 s
    # of grace would be spent on every module's teardown, so the group gets SIGKILL at once, which ends them all
    cluster = Cluster(f"ray://127.0.0.1:{client}", scratch=[temp], signals=(signal.SIGKILL,))
    cluster.processes.append(_start([str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
                                     f"--port={gcs}", f"--ray-client-server-port={client}",
                                     f"--dashboard-agent-listen-port={agent}",
                                     f"--min-worker-port={workers[0]}", f"--max-worker-port={workers[-1]}",
                                     f"--num-cpus={cpus}", f"--temp-dir={temp}", "--include-dashboard=false",
                                     "--include-log-monitor=false", "--disable-usage-stats"], log, env))
    _wait(lambda: "will now block forever" in log.read_text(errors="replace"), "the Ray head", cluster, log)
    return cluster


# Every JVM of the test cluster (master, workers, each application's executors, which inherit the workers'
# environment) and each job's driver (`mlsubmit train`'s environment) JIT-compiles with C1 only and one GC thread:
# short-lived JVMs on a 2-core machine then start on half the CPU (measured: a master 5.3 -> 2.5 CPU-s), and nothing
# they do depends on it. Nor does it depend on verifying the bytecode of Spark's own jars as each JVM loads them
# (a master 2.9 -> 2.3 CPU-s).
SMALL_JVM = {"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+UnlockDiagnosticVMOptions "
                                  "-XX:-BytecodeVerificationRemote"}


def spark_cluster(tmp: Path, nodes: Path, workers: int = 2, cores: int = 2) -> Cluster:
    """A master and `workers` workers of `cores` cores. The master consolidates an application on as few workers as
    its cores fit (spark.deploy.spreadOut=false, as an administrator may set it): a job of 2 replicas (the
    application asks for 2 cores) runs in one executor, one of 3 in two."""
    import pyspark

    home = Path(pyspark.__file__).parent
    port, log = free_port(), tmp / "spark.log"
    env = {**_env(nodes), "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(tmp / "spark-logs"), "SPARK_WORKER_DIR": str(tmp / "spark-work"),
           "PYSPARK_PYTHON": sys.executable, **SMALL_JVM}
    cluster = Cluster(f"spark://127.0.0.1:{port}", env={"SPARK_LOCAL_IP": "127.0.0.1",
                                                        "PYSPARK_PYTHON": sys.executable, **SMALL_JVM}, log=log)
    spark_class = str(home / "bin" / "spark-class")
    cluster.processes.append(_start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                     "--port", str(port), "--webui-port", str(free_port())], log,
                                    {**env, "SPARK_MASTER_OPTS": "-Dspark.deploy.spreadOut=false"}))
    _wait(lambda: "New state: ALIVE" in log.read_text(errors="replace"), "the Spark master", cluster, log)
    for _ in range(workers):
        cluster.processes.append(_start([spark_class, "org.apache.spark.deploy.worker.Worker", "--host",
                                         "127.0.0.1", "--cores", str(cores), "--memory", "1g", "--webui-port",
                                         str(free_port()), f"spark://127.0.0.1:{port}"], log, env))
    _wait(lambda: log.read_text(errors="replace").count("Successfully registered with master") >= workers,
          "the Spark workers", cluster, log)
    return cluster
