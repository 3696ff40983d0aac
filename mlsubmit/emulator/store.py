"""Jobs and their log lines, in memory and (with a data dir) on disk so they survive a restart.

Layout under the data dir: `jobs/<quoted resource name>.json`, one file per job, rewritten atomically
(temporary file + fsync + rename) on every change; `logs/<quoted resource name>.jsonl`, one log entry per
line, appended and flushed as lines arrive (a torn last line after a crash is skipped when loading).

A restart never loses a job: one that was QUEUED, PREPARING or RUNNING when the emulator stopped is marked
FAILED with the reason (CANCELLING becomes CANCELLED), because its processes did not survive.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlsubmit.emulator import times

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
ACTIVE = ("QUEUED", "PREPARING", "RUNNING", "CANCELLING")


@dataclass
class Job:
    """One accepted job, whichever API created it. `state` uses the legacy names (QUEUED … CANCELLED);
    each API module renders it in its own vocabulary."""

    name: str  # projects/P/locations/L/customJobs/ID or projects/P/jobs/ID
    api: str  # "vertex" or "legacy"
    job_id: str
    project: str
    body: dict[str, Any]  # the accepted request, input fields only
    seq: int = 0
    state: str = "QUEUED"
    create_time: str = ""
    update_time: str = ""
    start_time: str | None = None
    end_time: str | None = None
    error: str | None = None
    error_status: str | None = None  # google.rpc code name of the error (FAILED: INVALID_ARGUMENT … CANCELLED)
    processes: list[dict[str, Any]] = field(default_factory=list)  # {"task", "pid", "started"} per replica

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL


@dataclass(frozen=True)
class LogLine:
    """One line a replica (or the service) wrote: the raw material of a Cloud Logging entry."""

    insert_id: str
    timestamp: str
    job_id: str
    project: str
    task: str  # the API's task name: workerpool0-0 / master-replica-0; "service" for the service's own lines
    severity: str
    text: str


def _file_name(name: str, suffix: str) -> str:
    return urllib.parse.quote(name, safe="") + suffix


def _atomic_write(path: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Store:
    """Thread-safe job and log store. Reads hand out copies, so callers never see a job change under them."""

    def __init__(self, data_dir: str | os.PathLike | None = None):
        self._lock = threading.RLock()
        self._jobs: dict[str, Job] = {}
        self._lines: list[LogLine] = []
        self._seq = 0
        self._log_files: dict[str, Any] = {}
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.recovered: list[Job] = []  # jobs a restart found unfinished (now FAILED / CANCELLED)
        if self.data_dir is not None:
            (self.data_dir / "jobs").mkdir(parents=True, exist_ok=True)
            (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
            self._load()

    # -- jobs -----------------------------------------------------------------------------------------------
    def add(self, job: Job) -> Job | None:
        """Store a new job (seq and times set here); None if a job of that name exists (or existed)."""
        with self._lock:
            if job.name in self._jobs:
                return None
            self._seq += 1
            stamp = times.now()
            job = dataclasses.replace(job, seq=self._seq, create_time=stamp, update_time=stamp)
            self._jobs[job.name] = job
            self._save(job)
            return dataclasses.replace(job)

    def get(self, name: str) -> Job | None:
        with self._lock:
            job = self._jobs.get(name)
            return dataclasses.replace(job) if job else None

    def jobs(self) -> list[Job]:
        """Every job, newest first."""
        with self._lock:
            return sorted((dataclasses.replace(j) for j in self._jobs.values()), key=lambda j: -j.seq)

    def update(self, name: str, **changes: Any) -> Job:
        with self._lock:
            job = dataclasses.replace(self._jobs[name], **changes, update_time=times.now())
            self._jobs[name] = job
            self._save(job)
            return dataclasses.replace(job)

    def delete(self, name: str) -> None:
        with self._lock:
            self._jobs.pop(name, None)
            if self.data_dir is not None:
                (self.data_dir / "jobs" / _file_name(name, ".json")).unlink(missing_ok=True)

    def _save(self, job: Job) -> None:
        if self.data_dir is not None:
            _atomic_write(self.data_dir / "jobs" / _file_name(job.name, ".json"), dataclasses.asdict(job))

    # -- logs -----------------------------------------------------------------------------------------------
    def append_log(self, job: Job, task: str, text: str, severity: str = "INFO") -> LogLine:
        with self._lock:
            line = LogLine(insert_id=f"{len(self._lines) + 1:012d}", timestamp=times.now(), job_id=job.job_id,
                           project=job.project, task=task, severity=severity, text=text)
            self._lines.append(line)
            if self.data_dir is not None:
                handle = self._log_files.get(job.name)
                if handle is None:
                    handle = open(self.data_dir / "logs" / _file_name(job.name, ".jsonl"), "a", encoding="utf-8")
                    self._log_files[job.name] = handle
                handle.write(json.dumps(dataclasses.asdict(line)) + "\n")
                handle.flush()
            return line

    def log_lines(self) -> list[LogLine]:
        """Every line, oldest first (insert ids and timestamps both increase)."""
        with self._lock:
            return list(self._lines)

    def close(self) -> None:
        with self._lock:
            for handle in self._log_files.values():
                handle.close()
            self._log_files.clear()

    # -- restart --------------------------------------------------------------------------------------------
    def _load(self) -> None:
        for path in sorted((self.data_dir / "jobs").glob("*.json")):
            try:
                job = Job(**json.loads(path.read_text(encoding="utf-8")))
            except (ValueError, TypeError):
                continue  # not a job file this version wrote
            self._jobs[job.name] = job
            self._seq = max(self._seq, job.seq)
            times.advance_past(job.update_time)
        lines = []
        for path in (self.data_dir / "logs").glob("*.jsonl"):
            for raw in path.read_text(encoding="utf-8").splitlines():
                try:
                    lines.append(LogLine(**json.loads(raw)))
                except (ValueError, TypeError):
                    continue  # a line torn by a crash
        self._lines = sorted(lines, key=lambda line: line.insert_id)
        if self._lines:
            times.advance_past(self._lines[-1].timestamp)
        for job in list(self._jobs.values()):
            if job.state in ACTIVE:
                self.recovered.append(self._interrupted(job))

    def _interrupted(self, job: Job) -> Job:
        stamp = times.now()
        if job.state == "CANCELLING":
            changes = dict(state="CANCELLED", error="Job was cancelled by the user (finished while the emulator "
                                                    "restarted).", error_status="CANCELLED")
        else:
            changes = dict(state="FAILED", error_status="ABORTED",
                           error=f"The training-service emulator stopped while this job was {job.state}; its "
                                 f"replicas did not survive and jobs are not resumed after a restart. Submit the "
                                 f"job again.")
        was = job
        job = dataclasses.replace(job, **changes, end_time=stamp, update_time=stamp)
        self._jobs[job.name] = job
        self._save(job)
        return was
