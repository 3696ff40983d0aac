"""The emulator put together: store, executor, fault injection, the three APIs and the admin endpoints.

Admin endpoints (emulator-only, never faulted):
    GET    /emulator/v1/health                   {"status": "ok", endpoints, job counts by state}
    GET    /emulator/v1/processes?job=NAME|ID    the replicas' pids and whether each is alive
    GET|POST|DELETE /emulator/v1/faults          see `faults`
    POST   /emulator/v1/preempt?job=NAME|ID      preempt a running spot job now: its replicas start again
    GET|POST|DELETE /emulator/v1/capacity        quota and stockouts by region/accelerator: see `capacity`

Example:
    >>> emulator = Emulator(port=0, gcs_endpoint="http://127.0.0.1:4443").start()
    >>> emulator.endpoint
    'http://127.0.0.1:41234'
    >>> emulator.stop()
"""

from __future__ import annotations

import collections
import os
from pathlib import Path
from typing import Any

from mlsubmit.emulator import hp_tuning, legacy, legacy_tuning, logging_api, vertex
from mlsubmit.emulator.capacity import Capacity
from mlsubmit.emulator.errors import field_error, not_found
from mlsubmit.emulator.executor import Executor
from mlsubmit.emulator.faults import Faults
from mlsubmit.emulator.server import EmulatorServer, Request, Router
from mlsubmit.emulator.store import Store


class Emulator:
    """The training-service emulator on 127.0.0.1:`port` (0: a free port)."""

    def __init__(self, *, port: int = 0, data_dir: str | os.PathLike | None = None, gcs_endpoint: str | None = None,
                 max_running: int = 2, preempt_spot_after: float | None = None, preempt_spot_times: int = 2,
                 capacity: Capacity | None = None):
        self.data_dir = Path(data_dir).resolve() if data_dir is not None else None
        self.gcs_endpoint = gcs_endpoint
        self.store = Store(self.data_dir)
        self.faults = Faults()
        self.capacity = capacity or Capacity()
        self.executor = Executor(self.store, gcs_endpoint=gcs_endpoint, max_running=max_running,
                                 work_dir=self.data_dir / "work" if self.data_dir else None,
                                 preempt_spot_after=preempt_spot_after, preempt_spot_times=preempt_spot_times,
                                 capacity=self.capacity)
        router = Router()
        vertex.register(router, self)
        legacy.register(router, self)
        self.hp_tuning = hp_tuning.register(router, self)
        self.legacy_tuning = legacy_tuning.LegacyTuning(self)  # legacy jobs with trainingInput.hyperparameters
        logging_api.register(router, self)
        self._register_admin(router)
        try:
            self.server = EmulatorServer(port, router, self.faults)
        except BaseException:  # e.g. the port is taken: leave nothing behind (work folders, the store)
            self.hp_tuning.stop()
            self.legacy_tuning.stop()
            self.executor.stop()
            self.store.close()
            raise

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    def start(self) -> "Emulator":
        """Serve from a background thread."""
        self.executor.start()
        self.server.start()
        return self

    def serve_forever(self) -> None:
        """Serve on this thread until `stop()` (from another thread) or KeyboardInterrupt."""
        self.executor.start()
        self.server.serve_forever()

    def stop(self) -> None:
        """Stop serving, stop every replica (running jobs end FAILED, saying why) and close the store."""
        self.server.shutdown()
        self.server.server_close()
        self.hp_tuning.stop()
        self.legacy_tuning.stop()
        self.executor.stop()
        self.store.close()

    # -- admin ------------------------------------------------------------------------------------------------
    def _register_admin(self, router: Router) -> None:
        router.add("GET", r"/emulator/v1/health", self._health)
        router.add("GET", r"/emulator/v1/processes", self._processes)
        router.add("GET", r"/emulator/v1/faults", lambda request: (200, self.faults.describe()))
        router.add("POST", r"/emulator/v1/faults", self._arm)
        router.add("DELETE", r"/emulator/v1/faults", lambda request: (200, self.faults.clear()))
        router.add("POST", r"/emulator/v1/preempt", self._preempt)
        router.add("GET", r"/emulator/v1/capacity", lambda request: (200, self.capacity.describe()))
        router.add("POST", r"/emulator/v1/capacity", lambda request: (200, self.capacity.add(request.body)))
        router.add("DELETE", r"/emulator/v1/capacity", lambda request: (200, self.capacity.clear()))

    def _health(self, request: Request) -> tuple[int, dict]:
        states = collections.Counter(job.state for job in self.store.jobs())
        return 200, {"status": "ok", "endpoint": self.endpoint, "gcsEndpoint": self.gcs_endpoint,
                     "dataDir": str(self.data_dir) if self.data_dir else None,
                     "maxRunning": self.executor.max_running, "jobs": dict(states),
                     "recovered": [job.name for job in self.store.recovered]}

    def _preempt(self, request: Request) -> tuple[int, dict]:
        """POST /emulator/v1/preempt?job=NAME|ID: preempt a running spot job's replicas now; it starts again."""
        job = self._job_of(request)
        if not self.executor.preempt(job.name):
            raise field_error("job", f"job {job.job_id} is not a running spot job (scheduling.strategy SPOT); it is "
                                     f"{job.state}")
        return 200, {"job": job.name, "preempted": True}

    def _job_of(self, request: Request) -> Any:
        wanted = request.query.get("job", "")
        if not wanted:
            raise field_error("job", "give the job's resource name or id: ?job=NAME|ID")
        job = next((j for j in self.store.jobs() if wanted in (j.name, j.job_id)), None)
        if job is None:
            raise not_found(f"No job {wanted!r}.")
        return job

    def _processes(self, request: Request) -> tuple[int, dict]:
        job = self._job_of(request)
        return 200, {"job": job.name, "state": job.state, "processes": self.executor.processes(job.name)}

    def _arm(self, request: Request) -> tuple[int, Any]:
        return 200, self.faults.arm(request.body)
