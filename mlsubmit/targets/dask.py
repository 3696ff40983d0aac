"""`--target dask://HOST:PORT`: each replica one task pinned to its own Dask worker (`workers=[address]`,
`allow_other_workers=False`), the launcher running in a child process of the task so the worker keeps answering
the scheduler's heartbeats. The addresses are the workers' hosts with a port each task's worker found free."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

from mlsubmit.errors import UsageError
from mlsubmit.targets.cluster_base import CONNECT_SECONDS, Engine, NotTheEngine, read_exactly

_MAX_HANDSHAKE = 65_536  # bytes: a scheduler's handshake is about 60


def check_handshake(sock: socket.socket, deadline: float) -> None:
    """The handshake a Dask scheduler sends as soon as it accepts a connection (distributed's TCP comm): the
    frames' total length (8 bytes, little-endian), the number of frames, each frame's length, then a msgpack map
    with `compression`, `python` and `pickle-protocol`. Read with bounded lengths (a Dask client itself would
    trust the first 8 bytes and allocate them, or wait for the handshake without end)."""
    head = read_exactly(sock, 8, deadline)
    (size,) = struct.unpack("<Q", head)
    if not 16 <= size <= _MAX_HANDSHAKE:
        raise NotTheEngine(f"it answered {head!r}, not the start of a Dask handshake")
    body = read_exactly(sock, size, deadline)
    (count,) = struct.unpack_from("<Q", body)
    lengths = struct.unpack_from(f"<{count}Q", body, 8) if 1 <= count <= 16 and 8 + 8 * count <= size else ()
    if not lengths or 8 + 8 * count + sum(lengths) != size:
        raise NotTheEngine(f"it answered {size} bytes that are not Dask's frames")
    try:
        import msgpack

        message = msgpack.loads(body[8 + 8 * count:8 + 8 * count + lengths[0]], raw=False)
    except Exception:  # noqa: BLE001 - whatever msgpack makes of bytes that are not its own
        message = None
    if not isinstance(message, dict) or "pickle-protocol" not in message:
        raise NotTheEngine("its first message is not a Dask handshake")


class DaskEngine(Engine):
    scheme = "dask"
    module = "distributed"
    serves = "a Dask scheduler (port 8786 by default)"

    def greet(self, sock: socket.socket, deadline: float) -> None:
        check_handshake(sock, deadline)

    def __init__(self, address: str):
        super().__init__(address)
        self.client: Any = None
        self.futures: list[Any] = []
        self.cancelled = False

    def connect(self) -> None:
        from distributed import Client

        try:
            self.client = Client(f"tcp://{self.address}", timeout=CONNECT_SECONDS, set_as_default=False)
        except OSError as err:
            raise UsageError(f"cannot connect to the Dask scheduler at {self.where()}: {err}") from None

    def _free_workers(self) -> list[tuple[str, str]]:
        """(worker address, host) of the workers running nothing now, in a stable order."""
        workers = self.client.scheduler_info(n_workers=-1)["workers"]
        busy = {w for w, keys in self.client.processing().items() if keys}
        return sorted((address, info["host"]) for address, info in workers.items() if address not in busy)

    def free_slots(self, need: int = 1) -> int:
        return len(self._free_workers())

    def run(self, job_id: str, specs: Sequence[dict[str, Any]]) -> list[int]:
        from mlsubmit.launcher import shipped

        launcher = shipped()
        placed = self._free_workers()[:len(specs)]
        if len(placed) < len(specs):
            raise UsageError(f"the job needs {len(specs)} free Dask workers; {len(placed)} are free now")
        ports = self.client.gather([self.client.submit(launcher.free_port, workers=[w], allow_other_workers=False,
                                                       pure=False) for w, _ in placed])
        addresses = [f"{host}:{port}" for (_, host), port in zip(placed, ports)]
        self.futures = [
            self.client.submit(launcher.run_in_subprocess, {**spec, "addresses": addresses}, workers=[worker],
                               allow_other_workers=False, pure=False, key=f"{job_id}-{spec['role']}-{spec['index']}")
            for spec, (worker, _) in zip(specs, placed)]
        while not self.cancelled and not all(future.done() for future in self.futures):
            time.sleep(0.2)
        if self.cancelled:
            return []
        return [future.result() for future in self.futures]

    def cancel(self) -> None:
        self.cancelled = True
        if self.client is not None and self.futures:
            try:
                self.client.cancel(self.futures, force=True)
            except Exception:  # noqa: BLE001 - the scheduler may be gone already; the launchers stop on their own
                pass

    def close(self) -> None:
        if self.client is not None:
            deadline = time.monotonic() + 5
            while self.futures and time.monotonic() < deadline and any(f.status == "pending" for f in self.futures):
                time.sleep(0.1)
            self.client.close(timeout=5)
            self.client = None


ENGINE = DaskEngine
