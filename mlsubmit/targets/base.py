"""The interface every place a cloud job can run implements, and the common shape of a job and a log line.

A `JobStatus` is the same for Vertex AI and legacy AI Platform: the state normalised to one vocabulary
(QUEUED, PREPARING, RUNNING, SUCCEEDED, FAILED, CANCELLING, CANCELLED, and Vertex AI's PAUSED, EXPIRED,
UPDATING, PARTIALLY_SUCCEEDED), times, the error, where the artifacts are, the cluster and program, and the
API's own resource. Logs come from Cloud Logging for both (resource type `ml_job`), so `Target.logs` is
shared: gcloud's filter, oldest first, every page.
"""

from __future__ import annotations

import abc
import re
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from mlsubmit.targets.calls import Attempts, Conflict, NotFound, Op, Transient, call, send
from mlsubmit.errors import MlsubmitError, OperationFailed, UsageError, invalid_value

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED"})
STATES = ("QUEUED", "PREPARING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING", "CANCELLED", "PAUSED", "EXPIRED",
          "UPDATING", "PARTIALLY_SUCCEEDED")
REQUEST_LABEL = "mlsubmit_request_id"  # set on every job mlsubmit creates: finds it again after a lost answer
REUSE_WINDOW = 24 * 3600  # seconds during which a re-run of the same submission finds the job instead of a new one
LOG_PAGE = 1000
_FRIENDLY_TASK = re.compile(r"(chief|master|worker|ps|evaluator)-(\d+)")


@dataclass(frozen=True)
class PoolSummary:
    role: str  # chief, worker, ps, evaluator
    replicas: int
    machine: str
    accelerator: str | None = None
    accelerator_count: int = 0


@dataclass(frozen=True)
class JobStatus:
    """One job as either API reports it, in common terms."""

    api: str
    name: str  # the resource name
    job_id: str
    display_name: str
    state: str  # normalised (see STATES)
    api_state: str  # as the API said it
    project: str
    region: str
    create_time: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    error: str | None = None
    artifacts: str | None = None  # job dir / base output directory
    labels: dict[str, str] = field(default_factory=dict)
    tier: str | None = None
    pools: tuple[PoolSummary, ...] = ()
    program: dict[str, Any] = field(default_factory=dict)  # module, args, packages, image or runtime
    consumed: dict[str, Any] = field(default_factory=dict)  # what the API reports (e.g. consumedMLUnits)
    resource: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    @property
    def succeeded(self) -> bool:
        return self.state == "SUCCEEDED"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LogEntry:
    insert_id: str
    timestamp: str
    task: str  # the API's task name (workerpool0-0, master-replica-0, service)
    severity: str
    text: str
    trial: str = ""  # the legacy tuning trial that wrote it ("" for other lines)

    @property
    def source(self) -> str:
        """Who wrote it, as shown: the task, under its trial for a legacy tuning trial's line (trial-3/master-replica-0,
        as a Vertex AI study's trials are shown)."""
        return f"trial-{self.trial}/{self.task}" if self.trial else self.task


def check_state(state: str) -> str:
    """A --state value in the common vocabulary (case-insensitive; Vertex AI's JOB_STATE_ prefix and PENDING
    accepted)."""
    text = str(state).strip().upper().removeprefix("JOB_STATE_")
    text = "PREPARING" if text == "PENDING" else text
    if text not in STATES:
        raise invalid_value("--state", state, "one of " + ", ".join(STATES))
    return text


class Target(abc.ABC):
    """submit, get, list, cancel and logs of cloud jobs on one API, for one project and region.

    The API modules supply the names (`collection`, `permissions`, …), `status_of` (their JSON → JobStatus),
    `state_filter`, `task_name`, `console_url` and how a lost create is found again (`created_meanwhile`,
    `already_exists`); submitting, reading, listing, cancelling and logs are shared.
    """

    api = ""
    noun = "job"  # "Vertex AI custom job", "AI Platform job"
    collection = ""  # the list answer's key: customJobs / jobs
    permissions = ""  # IAM permission prefix: aiplatform.customJobs / ml.jobs
    role = ""  # a role that grants them
    service_name = ""  # the API to enable

    def __init__(self, clients: Any, *, project: str, region: str, retry: Any):
        self.clients, self.project, self.region, self.retry = clients, project, region, retry

    # -- what each API implements -----------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def parent(self) -> str:
        """The collection's parent: projects/P/locations/R or projects/P."""

    @abc.abstractmethod
    def jobs(self) -> Any:
        """The googleapiclient collection of jobs."""

    @abc.abstractmethod
    def status_of(self, resource: dict[str, Any]) -> JobStatus:
        """The API's job JSON in common terms (pure)."""

    @abc.abstractmethod
    def state_filter(self, state: str) -> str:
        """The list filter selecting `state` (common vocabulary)."""

    @abc.abstractmethod
    def created_meanwhile(self, request_id: str) -> JobStatus | None:
        """Before a create is sent again: the job an earlier attempt made, if the API can tell (else None)."""

    @abc.abstractmethod
    def already_exists(self, body: dict[str, Any], request_id: str) -> JobStatus:
        """A create answered 409: the job if it is ours (an earlier attempt's), else UsageError."""

    @abc.abstractmethod
    def task_name(self, task: str) -> str:
        """The API's task name for `chief-0`, `worker-1`, … (an API task name is returned as it is)."""

    @abc.abstractmethod
    def console_url(self, status: JobStatus) -> str | None:
        """Where to see the job in the Google Cloud console (None for an emulator)."""

    def resolve(self, job: str) -> str:
        """The resource name of `job` (an id or a resource name)."""
        job = job.strip()
        if job.startswith("projects/"):
            if f"/{self.collection}/" not in job:  # a resource of another kind: this service has no such job
                raise self.unknown(job)
            return job
        return f"{self.parent}/{self.collection}/{job}"

    # -- shared -----------------------------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return self.clients.endpoint or "Google Cloud"

    def op(self, verb: str, resource: str | None = None) -> Op:
        what = {"create": f"create the {self.noun}", "get": f"read the {self.noun}",
                "list": f"list {self.noun}s", "cancel": f"cancel the {self.noun}"}[verb]
        return Op(what, resource or self.parent, f"{self.permissions}.{verb}", self.role, self.service_name)

    def _call(self, factory: Any, op: Op) -> dict[str, Any]:
        try:
            return call(factory, op, self.retry, endpoint=self.endpoint)
        except (NotFound, Conflict) as err:
            raise UsageError(f"cannot {op.what}: {err} (on {op.resource})") from None

    def submit(self, body: dict[str, Any], request_id: str) -> JobStatus:
        """Create the job of `body` exactly once, even when answers are lost and the request is retried: every
        attempt carries the same request id (label REQUEST_LABEL), and each API says how it finds the job an
        attempt whose answer was lost made (`created_meanwhile`, `already_exists`). When the retries run out the
        job may exist all the same: the error says how to check, and that running the same submission again is
        safe (it finds the job: `earlier`)."""
        body = {**body, "labels": {**(body.get("labels") or {}), REQUEST_LABEL: request_id}}
        op = self.op("create")
        attempts = Attempts(op, self.retry, endpoint=self.endpoint)
        reached = False  # whether any attempt may have reached the service (and made the job)
        try:
            while True:
                try:
                    return self.status_of(send(self.jobs().create(parent=self.parent, body=body), op))
                except Transient as err:
                    reached = reached or err.reached
                    attempts.wait(err)
                    made = self.created_meanwhile(request_id)
                    if made is not None:
                        return made
                except Conflict:
                    return self.already_exists(body, request_id)
        except MlsubmitError as err:
            if reached and getattr(err, "retries_ran_out", False):  # the create, or its look-up, gave up
                raise self._maybe_created(err, request_id) from None
            raise

    def earlier(self, request_id: str, *, now: float | None = None) -> JobStatus | None:
        """The job an earlier run of the same submission made (its label REQUEST_LABEL is `request_id`) if it was
        created within REUSE_WINDOW; else None (a submission repeated days later is a new job)."""
        found = self.find_request(request_id)
        if found is None or not within_window(found.create_time, now if now is not None else time.time()):
            return None
        return found

    def check_command(self, request_id: str) -> str:
        """The `mlsubmit jobs list` command that shows the job created with `request_id`, if there is one."""
        where = f" --project {self.project}" + (f" --region {self.region}" if self.api == "vertex" else "")
        endpoint = f" --endpoint {self.clients.endpoint}" if self.clients.endpoint else ""
        return f"mlsubmit jobs list --api {self.api}{where}{endpoint} --request-id {request_id}"

    def _maybe_created(self, gave_up: MlsubmitError, request_id: str) -> MlsubmitError:
        """The create's final error: it may have made the job all the same, and that is checkable."""
        return OperationFailed(f"{gave_up.message}; the {self.noun} may have been created all the same",
                               hint=f"to check: `{self.check_command(request_id)}`; running the same command again "
                                    "is safe: it finds that job instead of creating a second one")

    def get(self, job: str) -> JobStatus:
        """The job named by `job`. UsageError if there is none."""
        name = self.resolve(job)
        try:
            return self.status_of(call(lambda: self.jobs().get(name=name), self.op("get", name), self.retry,
                                       endpoint=self.endpoint))
        except NotFound:
            raise self.unknown(job) from None

    def unknown(self, job: str) -> UsageError:
        other = "legacy" if self.api == "vertex" else "vertex"
        return UsageError(f"no {self.noun} {job!r} in {self.parent}",
                          hint=f"see `mlsubmit jobs list --api {self.api}`; for a job on the other API add "
                               f"--api {other}")

    def list(self, state: str | None = None, limit: int = 20, *, filter: str | None = None) -> list[JobStatus]:
        """Newest first, at most `limit`, only `state` (common vocabulary) and `filter` if given."""
        terms = [t for t in (self.state_filter(check_state(state)) if state else None, filter) if t]
        query: dict[str, Any] = {"parent": self.parent, "pageSize": min(limit, 100)}
        if terms:
            query["filter"] = " AND ".join(terms)
        found: list[JobStatus] = []
        while len(found) < limit:
            page = self._call(lambda: self.jobs().list(**query), self.op("list"))
            found += [self.status_of(resource) for resource in page.get(self.collection, ())]
            if not page.get("nextPageToken"):
                break
            query["pageToken"] = page["nextPageToken"]
        return found[:limit]

    def find_request(self, request_id: str) -> JobStatus | None:
        """The job created with this request id (label REQUEST_LABEL), if one exists."""
        found = self.list(limit=1, filter=f'labels.{REQUEST_LABEL}="{request_id}"')
        return found[0] if found else None

    def cancel(self, job: str) -> JobStatus:
        """Ask the service to cancel the job; returns it as it is right after. UsageError if it already ended."""
        status = self.get(job)
        if status.done:
            raise UsageError(f"the {self.noun} {status.job_id} already ended ({status.state}); nothing to cancel")
        self._call(lambda: self.jobs().cancel(name=status.name, body={}), self.op("cancel", status.name))
        return self.get(status.name)

    def log_filter(self, status: JobStatus, *, since: str | None = None, task: str | None = None) -> str:
        """gcloud's filter for a training job's entries, from `since` (a timestamp, inclusive) on."""
        parts = [f'resource.type="ml_job" AND resource.labels.job_id="{status.job_id}"']
        if task:
            parts.append(f'resource.labels.task_name="{self.task_name(task)}"')
        if since:
            parts.append(f'timestamp>="{since}"')
        return " AND ".join(parts)

    def logs(self, status: JobStatus, *, since: str | None = None, task: str | None = None) -> list[LogEntry]:
        """The job's log entries, oldest first, every page (from `since` on, of `task` only if given)."""
        entries = self.clients.service("logging").entries()
        body: dict[str, Any] = {"resourceNames": [f"projects/{self.project}"], "orderBy": "timestamp asc",
                                "filter": self.log_filter(status, since=since, task=task), "pageSize": LOG_PAGE}
        op = Op("read the job's logs", f"projects/{self.project}", "logging.logEntries.list", "roles/logging.viewer",
                "logging.googleapis.com")
        found: list[LogEntry] = []
        while True:
            page = self._call(lambda: entries.list(body=dict(body)), op)
            found += [_entry(raw) for raw in page.get("entries", ())]
            if not page.get("nextPageToken"):
                return found
            body["pageToken"] = page["nextPageToken"]


def within_window(create_time: str | None, now: float) -> bool:
    """Whether a job created at `create_time` (RFC 3339) is at most REUSE_WINDOW old at `now` (unknown: yes)."""
    try:
        whole_seconds = re.sub(r"\.\d+", "", str(create_time)).replace("Z", "+00:00").replace("z", "+00:00")
        created = datetime.fromisoformat(whole_seconds).timestamp()
    except ValueError:
        return True
    return now - created <= REUSE_WINDOW


def _entry(raw: dict[str, Any]) -> LogEntry:
    resource_labels = (raw.get("resource") or {}).get("labels") or {}
    task = resource_labels.get("task_name") or (raw.get("labels") or {}).get("ml.googleapis.com/task_name") \
        or "service"
    payload = raw.get("textPayload")
    if payload is None:
        json_payload = raw.get("jsonPayload") or {}
        payload = json_payload.get("message") or json_payload.get("msg") or (str(json_payload) if json_payload else "")
    trial = str((raw.get("labels") or {}).get("ml.googleapis.com/trial_id") or "")
    return LogEntry(str(raw.get("insertId", "")), str(raw.get("timestamp", "")), task,
                    str(raw.get("severity", "DEFAULT")), str(payload).rstrip("\n"), trial)


def friendly_task(task: str) -> tuple[str, int] | None:
    """("chief" | "worker" | "ps" | "evaluator", index) of `chief-0` / `master-0` / …, else None."""
    match = _FRIENDLY_TASK.fullmatch(task.strip())
    if not match:
        return None
    role = "chief" if match.group(1) == "master" else match.group(1)
    return role, int(match.group(2))
