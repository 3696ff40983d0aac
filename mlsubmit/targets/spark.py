"""`--target spark://HOST:PORT` (a standalone master, or any master URL Spark takes): the replicas are the tasks of
one barrier stage (`rdd.barrier().mapPartitions`), so Spark starts them all at once or not at all, one per
executor core. Each task finds a free port on its executor's host, `BarrierTaskContext.allGather` hands every task
the addresses in partition order (= the replicas' order), and each runs the launcher in a child process.
The application asks for exactly the cores its replicas take (`spark.cores.max`, one per replica): a standalone
master otherwise gives an application every free core of the cluster, and the others sharing it none.
Cancelling cancels the job group (its tasks are interrupted, their Python workers killed)."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

from mlsubmit.errors import UsageError
from mlsubmit.targets.cluster_base import Engine, NotTheEngine, read_exactly

_PROBE_STREAM = b"files/mlsubmit-probe"  # a file no master serves: it answers "Stream '…' was not found."
_STREAM_REQUEST, _STREAM_RESPONSE, _STREAM_FAILURE = 6, 7, 8  # org.apache.spark.network.protocol.Message.Type


def check_transport(sock: socket.socket, deadline: float) -> None:
    """Spark's RPC transport (Netty; what a standalone master listens with): a frame is its length (8 bytes,
    big-endian, counting itself), a message type (1 byte) and the message. A StreamRequest for a file the master
    does not serve is answered at once with a StreamFailure, and starts nothing there."""
    message = bytes([_STREAM_REQUEST]) + struct.pack(">i", len(_PROBE_STREAM)) + _PROBE_STREAM
    sock.sendall(struct.pack(">q", 8 + len(message)) + message)
    head = read_exactly(sock, 9, deadline)
    (length,) = struct.unpack(">q", head[:8])
    if head[8] not in (_STREAM_RESPONSE, _STREAM_FAILURE) or not 9 <= length <= 1 << 20:
        raise NotTheEngine(f"it answered {head!r}, not a frame of Spark's RPC transport")

_EXECUTOR_WAIT = 60.0  # seconds for the standalone master to give this application its executors


def application_conf(address: str, replicas: int, local_ip: str | None) -> list[tuple[str, str]]:
    """The Spark application's configuration for a job of `replicas` replicas on the master at `address`: one task
    slot per replica (`spark.cores.max`), no web UI, no retried task or stage (a barrier stage is all or nothing)."""
    conf = [("spark.master", f"spark://{address}"), ("spark.app.name", "mlsubmit"), ("spark.ui.enabled", "false"),
            ("spark.cores.max", str(replicas)), ("spark.task.maxFailures", "1"),
            ("spark.stage.maxConsecutiveAttempts", "1"), ("spark.python.worker.reuse", "false")]
    if local_ip:
        conf.append(("spark.driver.host", local_ip))
    return conf


def _barrier_task(specs: list, launcher: Any):
    """The stage's function, built here so that PySpark ships it by value (the cluster needs no mlsubmit)."""

    def task(_partition):
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        rank = context.partitionId()
        host = context.getTaskInfos()[rank].address.rpartition(":")[0]
        addresses = context.allGather(f"{host}:{launcher.free_port()}")
        yield launcher.run_in_subprocess({**specs[rank], "addresses": list(addresses)})

    return task


def _driver_log() -> str:
    from mlsubmit.local.venvs import mlsubmit_home

    path = mlsubmit_home() / "cluster-jobs" / f".spark-driver-{os.getpid()}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return str(path)


@contextlib.contextmanager
def _jvm_output_to(path: str):
    """File descriptors 1 and 2 point at `path` while the block starts the JVM (which keeps them)."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


class SparkEngine(Engine):
    scheme = "spark"
    module = "pyspark"
    serves = "a Spark standalone master (port 7077 by default)"

    def __init__(self, address: str):
        super().__init__(address)
        self.context: Any = None
        self.job_id = ""
        self.log = ""  # the driver's log, made by connect() and removed when the application ends

    def greet(self, sock: socket.socket, deadline: float) -> None:
        check_transport(sock, deadline)

    def connect(self) -> None:
        """Imports PySpark; the application itself starts in `free_slots`, once the job's replica count (the cores
        it asks for) is known."""
        import pyspark  # noqa: F401 - an ImportError here is the missing extra

    def _start(self, replicas: int) -> None:
        from pyspark import SparkConf, SparkContext

        self.log = _driver_log()
        conf = SparkConf().setAll(application_conf(self.address, replicas, os.environ.get("SPARK_LOCAL_IP")))
        try:
            with _jvm_output_to(self.log):  # the JVM's start-up lines and later logs: a file, not the terminal
                self.context = SparkContext(conf=conf)
        except Exception as err:  # noqa: BLE001 - py4j and Spark raise their own types
            raise UsageError(f"cannot start a Spark application on {self.where()}: {str(err).splitlines()[0]}") \
                from None
        self.context.setLogLevel("ERROR")

    def _slots(self) -> int:
        sc = self.context._jsc.sc()
        if sc.getExecutorMemoryStatus().size() <= 1:  # the driver only: no executor yet
            return 0
        try:  # the slots a barrier stage may use
            profiles = self.context._jvm.org.apache.spark.resource.ResourceProfile
            profile = profiles.getOrCreateDefaultProfile(sc.getConf())
            return int(sc.maxNumConcurrentTasks(profile))
        except Exception:  # noqa: BLE001 - an internal API: fall back to the cores Spark reports
            return int(self.context.defaultParallelism)

    def free_slots(self, need: int = 1) -> int:
        """Task slots of the executors the master gave this application, which asks for `need` cores (started here
        on the first call), waiting up to _EXECUTOR_WAIT seconds for them to register until there are `need`."""
        if self.context is None:
            self._start(need)
        deadline = time.monotonic() + _EXECUTOR_WAIT
        slots = self._slots()
        while slots < need and time.monotonic() < deadline:
            time.sleep(0.5)
            slots = self._slots()
        return slots

    def run(self, job_id: str, specs: Sequence[dict[str, Any]]) -> list[int]:
        from mlsubmit.launcher import shipped

        self.job_id = job_id
        self.context.setJobGroup(job_id, f"mlsubmit job {job_id}", interruptOnCancel=True)
        stage = self.context.parallelize(range(len(specs)), len(specs)).barrier()
        return stage.mapPartitions(_barrier_task(list(specs), shipped())).collect()

    def cancel(self) -> None:
        if self.context is not None and self.job_id:
            try:
                self.context.cancelJobGroup(self.job_id)
            except Exception:  # noqa: BLE001 - the application may be stopping
                pass

    def close(self) -> None:
        if self.context is not None:
            try:
                self.context.stop()
            except Exception:  # noqa: BLE001
                pass
            self.context = None
        if self.log and os.path.exists(self.log):
            os.unlink(self.log)


ENGINE = SparkEngine
