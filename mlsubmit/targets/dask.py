"""`--target dask://HOST:PORT`: each replica one task pinned to its own Dask worker (`workers=[address]`,
`allow_other_workers=False`), the launcher running in a child process of the task so the worker keeps answering
the scheduler's heartbeats. The addresses are the workers' hosts with a port each task's worker found free."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from mlsubmit.errors import UsageError
from mlsubmit.targets.cluster_base import CONNECT_SECONDS, Engine


class DaskEngine(Engine):
    scheme = "dask"
    module = "distributed"

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
