"""The local record of jobs this machine ran on a Spark, Dask or Ray cluster: $MLSUBMIT_HOME/cluster-jobs/<job id>/
with `job.json` (target, state, times, replicas, error, the pid of the `mlsubmit train` that follows it) and
`logs.jsonl` (every replica line, as it arrived). `mlsubmit jobs list|describe|logs|wait|cancel --api cluster`
(or any of them given the id of a job found here) read it through `ClusterJobs`, which answers like a Target.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mlsubmit.errors import UsageError, invalid_value
from mlsubmit.targets.base import JobStatus, LogEntry, PoolSummary, check_state

API = "cluster"
MAX_JOB_ID = 200  # characters: a --job-name (at most 128) with a tuning trial's `-trial-N`, well inside a file name
_JOB_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_JOB_ID - 1}}}")


def check_job_id(job: object, field: str = "cluster job name") -> str:
    """`job` as it names its record's directory: a letter or digit, then letters, digits, '_', '-' or '.'.
    Anything else (a '/', '..', a newline, a space) is refused in one line, never cut or escaped into a path."""
    if isinstance(job, str) and _JOB_ID.fullmatch(job):
        return job
    fixed = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(job)).strip("._-")[:128] or "job1"
    raise invalid_value(field, job, f"a cluster job name: a letter or digit, then letters, digits, '_', '-' or '.', "
                        f"at most {MAX_JOB_ID} characters (it names the job's record, {root()}/<name>/)",
                        hint=f"use {field if field.startswith('--') else 'the name'} {fixed}")


def root() -> Path:
    from mlsubmit.local.venvs import mlsubmit_home

    return mlsubmit_home() / "cluster-jobs"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Record:
    """One job's directory; every write replaces job.json whole (written aside, renamed)."""

    def __init__(self, job_id: str):
        self.job_id = check_job_id(job_id)
        self.dir = root() / job_id
        self._log = None
        self._count = 0

    @classmethod
    def create(cls, job_id: str, **fields: Any) -> "Record":
        record = cls(job_id)
        record.dir.mkdir(parents=True, exist_ok=False)
        record.write({"job_id": job_id, "state": "PREPARING", "create_time": now(), "pid": os.getpid(), **fields})
        return record

    def read(self) -> dict[str, Any]:
        try:
            return json.loads((self.dir / "job.json").read_text())
        except (OSError, ValueError):
            raise UsageError(f"no cluster job {self.job_id!r} recorded in {root()}",
                             hint="see `mlsubmit jobs list --api cluster`") from None

    def write(self, data: dict[str, Any]) -> None:
        aside = self.dir / f".job.json.{os.getpid()}"
        aside.write_text(json.dumps(data, indent=1))
        os.replace(aside, self.dir / "job.json")

    def update(self, **fields: Any) -> dict[str, Any]:
        data = {**self.read(), **fields}
        self.write(data)
        return data

    def log(self, task: str, text: str) -> None:
        if self._log is None:
            self._log = open(self.dir / "logs.jsonl", "a", encoding="utf-8", buffering=1)
        self._count += 1
        self._log.write(json.dumps({"id": f"{self._count:09d}", "t": now(), "task": task, "text": text}) + "\n")

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def entries(self) -> list[LogEntry]:
        path = self.dir / "logs.jsonl"
        found = []
        if path.exists():
            for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    item = json.loads(raw)
                except ValueError:
                    continue  # a line being written
                found.append(LogEntry(item["id"], item["t"], item["task"], "DEFAULT", item["text"]))
        return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def status_of(data: dict[str, Any]) -> JobStatus:
    state = data.get("state", "PREPARING")
    error = data.get("error")
    if state not in ("SUCCEEDED", "FAILED", "CANCELLED") and not _alive(int(data.get("pid", 0) or 0)):
        state, error = "FAILED", "the mlsubmit process that ran this job ended without saying how the job ended"
    pools = tuple(PoolSummary(role, count, data.get("target", "")) for role, count in data.get("roles", ()))
    return JobStatus(API, data["job_id"], data["job_id"], data["job_id"], state, state, "", data.get("target", ""),
                     data.get("create_time"), data.get("start_time"), data.get("end_time"), error,
                     data.get("job_dir"), {}, "CUSTOM", pools,
                     {"module": data.get("module"), "args": data.get("args", []), "target": data.get("target")},
                     {}, data)


class ClusterJobs:
    """The recorded cluster jobs with a Target's reading side: get, list, cancel, logs."""

    api = API
    noun = "cluster job"

    def resolve(self, job: str) -> str:
        return check_job_id(job, "JOB")

    def get(self, job: str) -> JobStatus:
        return status_of(Record(self.resolve(job)).read())

    def list(self, state: str | None = None, limit: int = 20, *, filter: str | None = None) -> list[JobStatus]:
        wanted = check_state(state) if state else None
        found = []
        for path in root().glob("*/job.json") if root().exists() else ():
            try:
                found.append(status_of(json.loads(path.read_text())))
            except (OSError, ValueError, KeyError):
                continue
        found = [s for s in found if wanted is None or s.state == wanted]
        return sorted(found, key=lambda s: s.create_time or "", reverse=True)[:limit]

    def cancel(self, job: str) -> JobStatus:
        """Ask the `mlsubmit train` that runs the job to stop it (SIGTERM): it stops every replica on the cluster
        and records CANCELLED. Returns the job once it has (within 30 s)."""
        status = self.get(job)
        if status.done:
            raise UsageError(f"the cluster job {status.job_id} already ended ({status.state}); nothing to cancel")
        Record(status.job_id).update(state="CANCELLING")
        os.kill(int(status.resource["pid"]), signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (status := self.get(job)).done:
            time.sleep(0.2)
        return status

    def logs(self, status: JobStatus, *, since: str | None = None, task: str | None = None) -> list[LogEntry]:
        entries = Record(status.job_id).entries()
        return [e for e in entries if (since is None or e.timestamp >= since) and (task is None or e.task == task)]

    def task_name(self, task: str) -> str:
        return task

    def console_url(self, status: JobStatus) -> None:
        return None


def recorded(job: str) -> bool:
    """Whether a cluster job named `job` was run from this machine (False for a name no record can have)."""
    return isinstance(job, str) and _JOB_ID.fullmatch(job) is not None and (root() / job / "job.json").exists()
