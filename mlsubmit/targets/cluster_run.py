"""`mlsubmit train --target spark://|dask://|ray://`: the job spec run on the user's own cluster.

1. bad input stops here, nothing built or started: the target's scheme and extra (`engine_for`), the cluster
   answers within 10 s, the job fits its free slots;
2. the trainer's sdist (and mlsubmit-runtime's when it uses it, then --extra-packages) is built here and shipped
   inside each replica's launcher spec, so no shared disk is needed;
3. the engine places one task per replica and each runs the launcher, which reports to this process (`Control`);
   every line is passed on tagged with its replica and recorded (mlsubmit.targets.cluster_record);
4. the chief's exit ends the job: when it succeeds the others are told (`chief_done`) and get their grace; the
   first replica that fails fails the job with its last lines; Ctrl-C, SIGTERM (`jobs cancel`) and --timeout stop
   every replica (engine cancel, and the launchers lose their connection).
"""

from __future__ import annotations

import base64
import collections
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlsubmit.chatter import is_chatter
from mlsubmit.errors import UsageError
from mlsubmit.targets.cluster_base import Control, Engine, local_ip_towards, missing_engine
from mlsubmit.targets.cluster_record import Record, check_job_id, now, recorded, root

_TAIL = 400
NODE_PYTHON_VARIABLE = "MLSUBMIT_NODE_PYTHON"  # like PYSPARK_PYTHON: the Python the replicas run with on the nodes


@dataclass(frozen=True)
class ClusterOutcome:
    job_id: str
    state: str  # SUCCEEDED, FAILED, CANCELLED
    seconds: float
    exit_codes: dict[str, int | None]
    failed: str | None = None
    reason: str = ""
    tail: str = ""

    @property
    def exit_code(self) -> int:
        return {"SUCCEEDED": 0, "FAILED": 1, "CANCELLED": 130}[self.state]


class _Stop(Exception):
    pass


def build_packages(package_path: str, setup_py: str | None, say: Callable[[str], None],
                   requirements: tuple[str, ...] = (), extras: tuple = ()) -> tuple[list[dict[str, str]], str]:
    """The job's packages as the launcher spec carries them ({"name", "data"}), in install order, and the
    trainer's distribution name."""
    from mlsubmit import packaging
    from mlsubmit.packaging.runtime_dist import build_runtime, needs_runtime

    local_extras = [extra.path for extra in extras if extra.path is not None]
    plan = packaging.plan_sdist(package_path, setup_py, requirements)
    say(f"package {plan.filename}: {plan.build}")
    for item in plan.excluded_secrets:
        say(f"warning: {item.warning()}")
    with tempfile.TemporaryDirectory(prefix="mlsubmit-sdist-") as dist:
        sdist = packaging.write_sdist(plan, dist)
        runtime = [build_runtime(dist).path] if needs_runtime(plan) else []
        paths = [*runtime, *local_extras, sdist.path]
        shipped = [{"name": path.name, "data": base64.b64encode(path.read_bytes()).decode()} for path in paths]
    return shipped, plan.metadata.name


def replica_specs(spec: Any, *, api: str, job_id: str, job_dir: str | None, packages: list, control: Control,
                  extra_env: dict[str, str] | None = None, node_python: str | None = None) -> list[dict[str, Any]]:
    """One launcher spec per replica, in pool order (addresses are the engine's to fill in). `node_python`: the
    interpreter the launcher runs with on the nodes (MLSUBMIT_NODE_PYTHON), else the engine worker's own."""
    roles = [[role, pool.replica_count] for role, pool in spec.pools.items()]
    base = {"job_id": job_id, "api": api, "tier": spec.tier, "roles": roles, "module": spec.python_module,
            "args": list(spec.args), "job_dir": job_dir, "packages": packages, "env": {**spec.env_dict,
            **(extra_env or {})}, "control": control.address, "token": control.token}
    if node_python:
        base["node_python"] = node_python
    return [{**base, "role": role, "index": i} for role, count in roles for i in range(count)]


def run_on_cluster(engine: Engine, spec: Any, *, api: str, package_path: str, setup_py: str | None,
                   say: Callable[[str], None], requirements: tuple[str, ...] = (), extras: tuple = (),
                   timeout: float | None = None, job_id: str | None = None,
                   extra_env: dict[str, str] | None = None, packages: tuple[list, str] | None = None,
                   on_driver: Callable[[Any], None] | None = None) -> ClusterOutcome:
    """Run `spec` on the engine's cluster to its end (see the module docstring). `packages`: what
    `build_packages` returned already (a study's trials build once); `on_driver`: called with the job's driver
    before it starts, so that another thread can `cancel()` it."""
    from mlsubmit.jobspec.job_names import generate_job_name
    from mlsubmit.local import local_job

    local_job.check_runnable(spec)
    if api == "legacy":
        from mlsubmit.jobspec.requests import reject_env_for_legacy

        reject_env_for_legacy(spec)
    need = len(local_job.roles(spec))
    taken = job_id or spec.job_name
    if taken:
        check_job_id(taken, "--job-name")
    if taken and recorded(taken):
        raise UsageError(f"a cluster job named {taken!r} was already run from this machine "
                         f"({root() / taken})", hint="pick another --job-name")
    engine.reachable()
    try:
        try:
            engine.connect()
        except ImportError as err:  # found by engine_for, but it does not import
            raise missing_engine(engine, f"which does not import ({err})") from None
        free = engine.free_slots(need)
        if need > free:
            raise UsageError(f"the job needs {need} replica slots on {engine.where()}, which has {free} free",
                             hint="use fewer --workers/--ps/evaluators, or add workers to the cluster")
        packages, name = packages or build_packages(package_path, setup_py, say, requirements, extras)
        job_id = job_id or spec.job_name or generate_job_name(name)
        job_dir = spec.job_dir or None
        if job_dir and "://" not in job_dir:
            job_dir = os.path.abspath(job_dir)
        control = Control(local_ip_towards(engine.host))
        try:
            specs = replica_specs(spec, api=api, job_id=job_id, job_dir=job_dir, packages=packages,
                                  control=control, extra_env=extra_env,
                                  node_python=os.environ.get(NODE_PYTHON_VARIABLE) or None)
            names = [f"{s['role']}-{s['index']}" for s in specs]
            record = Record.create(job_id, target=engine.where(), api=api, module=spec.python_module,
                                   args=list(spec.args), job_dir=job_dir,
                                   roles=[[r, c] for r, c in specs[0]["roles"]], replicas=names)
            say(f"job {job_id} on {engine.where()}: {', '.join(names)} (TF_CONFIG names the chief "
                f"{'master' if api == 'legacy' else 'chief'!r}); recorded in {record.dir}")
            driver = _Driver(engine, control, record, names, say, timeout)
            if on_driver is not None:
                on_driver(driver)
            return driver.run(specs)
        finally:
            control.close()
    finally:
        engine.close()


STOP_GRACE = 15.0  # a launcher stops its module within 10 s: SIGTERM, 5 s, SIGKILL, then 5 s for its last lines


class _Driver:
    def __init__(self, engine: Engine, control: Control, record: Record, names: list[str],
                 say: Callable[[str], None], timeout: float | None):
        self.engine, self.control, self.record, self.names, self.say = engine, control, record, names, say
        self.timeout = timeout
        width = max(len(n) for n in names) + 2
        self.prefix = {n: f"[{n}]".ljust(width) for n in names}
        self.tails = {n: collections.deque(maxlen=_TAIL) for n in names}
        self.codes: dict[str, int | None] = {n: None for n in names}
        self.engine_error: list[BaseException] = []
        self.engine_done = threading.Event()
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        """Stop the job from another thread: run() returns CANCELLED."""
        self.cancelled.set()

    def _engine(self, specs: list[dict[str, Any]]) -> None:
        try:
            self.engine.run(self.record.job_id, specs)
        except BaseException as err:  # noqa: BLE001 - reported as the job's failure
            self.engine_error.append(err)
        finally:
            self.engine_done.set()

    def run(self, specs: list[dict[str, Any]]) -> ClusterOutcome:
        started = time.monotonic()
        previous = signal.signal(signal.SIGTERM, self._sigterm) \
            if threading.current_thread() is threading.main_thread() else None
        state, failed, reason = "CANCELLED", None, "stopped by the user"
        self.record.update(state="RUNNING", start_time=now())
        thread = threading.Thread(target=self._engine, args=(specs,), daemon=True)
        thread.start()
        try:
            state, failed, reason = self._watch(started)
        except (KeyboardInterrupt, _Stop):
            state, failed, reason = "CANCELLED", None, "stopped by the user"
        finally:
            if state != "SUCCEEDED":
                self._stop_all()
            thread.join(timeout=30)
            self._drain()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
            tail = "\n".join(list(self.tails[failed])[-40:]) if failed else ""
            error = None if state == "SUCCEEDED" else f"{reason}\n{tail}".strip()
            self.record.update(state=state, end_time=now(), error=error, exit_codes=self.codes)
            self.record.close()
        return ClusterOutcome(self.record.job_id, state, time.monotonic() - started, dict(self.codes), failed,
                              reason, tail)

    def _sigterm(self, signum, frame):
        raise _Stop()

    def _stop_all(self) -> None:
        """Ask every launcher to stop its replica and wait (at most STOP_GRACE s) for those that answer to end: each
        removes its working folder as it ends. Only then does the engine cancel what is left; a launcher that the
        engine kills (Ray kills its actors) cannot, and left its folder on the node."""
        reached = self.control.connected()
        self.control.send(self.names, {"stop": True})
        deadline = time.monotonic() + STOP_GRACE
        while any(self.codes[name] is None for name in reached) and time.monotonic() < deadline:
            self._drain(0.1)
        self.engine.cancel()
        self.control.close()

    def _event(self, kind: str, name: str, value: Any) -> None:
        if kind == "line":
            if is_chatter(value):  # TensorFlow's C++ start-up lines, dropped as `train --local` drops them
                return
            self.tails[name].append(value)
            self.record.log(name, value)
            self.say(f"{self.prefix[name]} {value}")
        elif kind == "exit":
            self.codes[name] = value
        elif kind == "lost" and self.codes[name] is None:
            self.codes[name] = -1

    def _drain(self, wait: float = 0.0) -> None:
        import queue

        try:
            self._event(*self.control.events.get(timeout=wait))
            while True:
                self._event(*self.control.events.get_nowait())
        except queue.Empty:
            return

    def _watch(self, started: float) -> tuple[str, str | None, str]:
        chief_done = False
        while True:
            self._drain(0.1)
            if self.cancelled.is_set():
                return "CANCELLED", None, "cancelled"
            if self.timeout is not None and time.monotonic() - started > self.timeout:
                return "FAILED", None, (f"the job ran past its --max-runtime of {self.timeout:g} s and every replica "
                                        "was stopped")
            for name, code in self.codes.items():
                if code not in (None, 0) and not (chief_done and name != "chief-0" and code == 143):
                    said = "lost its launcher (its task or node went away)" if code == -1 else \
                        "could not install the packages" if code == 3 else f"exited with code {code}"
                    return "FAILED", name, f"{name} {said}"
            if not chief_done and self.codes["chief-0"] == 0:
                chief_done = True
                self.control.send([n for n in self.names if n != "chief-0"], {"chief_done": True})
            if all(code is not None for code in self.codes.values()):
                return "SUCCEEDED", None, "the chief finished"
            if self.engine_done.is_set():
                self._drain(1.0)
                if all(code is not None for code in self.codes.values()):
                    continue
                error = self.engine_error[0] if self.engine_error else None
                missing = [n for n, c in self.codes.items() if c is None]
                return "FAILED", None, (f"{self.engine.scheme} ended the job's tasks before "
                                        f"{', '.join(missing)} reported: {error or 'no error given'}")
