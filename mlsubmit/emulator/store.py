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
import logging
import os
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlsubmit.emulator import times

log = logging.getLogger("mlsubmit.emulator")
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
    trial_id: str = ""  # a legacy tuning job's trial that wrote it (Cloud Logging's ml.googleapis.com/trial_id)


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


def _job_from(data: Any) -> Job:
    """A Job from its file's JSON; ValueError/TypeError for anything this version would not have written."""
    job = Job(**data)
    text_fields = (job.name, job.api, job.job_id, job.project, job.create_time, job.update_time)
    if not all(isinstance(value, str) for value in text_fields) or not isinstance(job.body, dict) \
            or not isinstance(job.seq, int) or job.state not in TERMINAL + ACTIVE \
            or job.api not in ("vertex", "legacy") or not job.name.startswith(f"projects/{job.project}/") \
            or not isinstance(job.processes, list):
        raise ValueError("not a job this emulator wrote")
    for stamp in (job.create_time, job.update_time, job.start_time, job.end_time):
        if stamp is not None:
            times.parse_time(stamp)  # ValueError: a record without its times (or with others') is damaged
    return job


def _line_from(data: Any) -> LogLine:
    line = LogLine(**data)
    if not all(isinstance(getattr(line, f.name), str) for f in dataclasses.fields(LogLine)):
        raise ValueError("not a log line this emulator wrote")
    return line


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
        self.damaged: list[str] = []  # "<file>: <why>" for each job or log file a restart could not read
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
            self._save(job)  # first: a job that cannot be written is not created at all
            self._jobs[job.name] = job
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
            self._jobs[name] = job  # the state changes even if the disk refuses (the job is known already)
            try:
                self._save(job)
            except OSError as err:
                log.error("cannot save %s: %s", name, err)
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
            trial = (job.body.get("labels") or {}).get("hp_tuning_trial", "") if job.api == "legacy" else ""
            line = LogLine(insert_id=f"{len(self._lines) + 1:012d}", timestamp=times.now(), job_id=job.job_id,
                           project=job.project, task=task, severity=severity, text=text, trial_id=trial)
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
                job = _job_from(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError) as err:
                self._damaged(path, err)
                continue
            self._jobs[job.name] = job
            self._seq = max(self._seq, job.seq)
            times.advance_past(job.update_time)
        lines = []
        for path in sorted((self.data_dir / "logs").glob("*.jsonl")):
            try:
                raws = path.read_bytes().decode("utf-8", errors="replace").splitlines()
            except OSError as err:
                self._damaged(path, err)
                continue
            bad = 0
            for number, raw in enumerate(raws, 1):
                try:
                    lines.append(_line_from(json.loads(raw)))
                except (ValueError, TypeError):
                    bad += number < len(raws)  # only the last line may be torn by a crash: not damage
            if bad:
                self._damaged(path, ValueError(f"{bad} unreadable line{'s' if bad > 1 else ''} skipped"))
        self._lines = sorted(lines, key=lambda line: line.insert_id)
        if self._lines:
            times.advance_past(self._lines[-1].timestamp)
        for job in list(self._jobs.values()):
            if job.state in ACTIVE:
                self.recovered.append(self._interrupted(job))

    def _damaged(self, path: Path, err: Exception) -> None:
        reason = f"{type(err).__name__}: {err}" if not isinstance(err, ValueError) else str(err)
        self.damaged.append(f"{path}: {reason.splitlines()[0][:200]}")

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
